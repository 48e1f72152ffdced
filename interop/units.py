"""Unit labels of the sources mapped to pint units of perfonto's registry.

Imported events are counters with unit ``event`` (the sources give event counts, not bytes or
cycles), so the mapping is chosen in that world:

| source label | pint unit | why |
|---|---|---|
| ``%``, ``percent``, ``percent of slots/cycles/operations`` | ``percent`` | |
| ``MPKI``, ``PKI`` (misses / items per kilo-instruction) | ``event/kevent`` | per 1000 counted instructions |
| ``per cycle``, ``per branch``, ``per cache access`` … (Arm) | ``event/event`` | a ratio of two counts |
| ``per instruction`` (Intel), ``conflicts/access`` | ``event/event`` | a ratio of two counts |
| ``cycles`` | ``event`` | cycles are counted like any event |
| ``core clocks``, ``core cycles`` | ``core_cycle`` | the imported clock domain's cycles |
| anything pint parses (``GB/s``, ``ns``, ``W``, ``Watts``; ``/sec`` read as ``/s``) | itself | |

A label that maps to nothing is reported ("unit … has no pint equivalent") and the metric is
imported without a unit. A label whose dimension event counts cannot give (bytes, joules, a clock's
cycles, a frequency from durations the source reads as plain numbers) is declared as the source
states it (``as_given``). Sources: perf's ``ScaleUnit`` (``<scale><unit>``, parsed like
``perf_pmu__convert_scale``: a leading C float, the rest is the unit), Intel's ``UnitOfMeasure``,
Arm's ``units``, rocprofiler's ``Unit: …`` in descriptions.
"""

from __future__ import annotations

import re

import pint

from perfonto.ontology.units import UnitError, conversion_factor, parse_unit

from .catalog import Finding

_SCALE = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_FIXED = {
    "%": "percent",
    "percent": "percent",
    "percentage": "percent",
    "mpki": "event/kevent",
    "pki": "event/kevent",
    "cycles": "event",
    "cycle": "event",
    "count": "event",
    "counts": "event",
    "events": "event",
}


def split_scale_unit(text: str) -> tuple[float, str]:
    """perf ``ScaleUnit`` → (scale, unit label): ``"100%"`` → (100.0, "%"), ``"1MPKI"`` → (1.0, "MPKI").

    A text without a leading number has scale 1 (as perf's metric.py writes ``1<unit>``).
    """
    m = _SCALE.match(text or "")
    if not m:
        return 1.0, (text or "").strip()
    return float(m.group(1)), m.group(2)


def map_label(reg: pint.UnitRegistry, label: str | None, clock: str | None = None) -> tuple[str | None, str]:
    """A source unit label → (pint unit text or None, note). ``None`` with a note when unmappable.
    ``clock``: the imported clock domain, whose ``<clock> clocks`` / ``<clock> cycles`` are ``<clock>_cycle``."""
    if label is None or not label.strip():
        return None, ""
    t = label.strip()
    low = t.lower()
    if low in _FIXED:
        return _FIXED[low], ""
    if low.startswith("percent"):
        return "percent", ""
    if clock and re.fullmatch(rf"{re.escape(clock.lower())}[ _-](clock|cycle)s?", low):
        return f"{clock}_cycle", ""
    if low.startswith("per ") or re.fullmatch(r"[a-z_ ]+/[a-z_ ]+", low) and not _parses(reg, t):
        return "event/event", f"`{t}` is a ratio of two counts"
    cand = re.sub(r"/sec\b", "/s", t)
    cand = re.sub(r"\s+per\s+sec(ond)?\b", "/s", cand)
    for c in (cand, cand.lower()):  # perf's `1Watts`: pint knows `watts`, not `Watts`
        if _parses(reg, c):
            return c, ""
    return None, f"unit `{t}` has no pint equivalent"


#: The dimensions an imported formula is made of: counters (``event``) and the window's duration.
_COUNTED = {"[event]", "[time]"}


def as_given(reg: pint.UnitRegistry, base: pint.Unit, target: pint.Unit) -> pint.Unit | None:
    """The unit ``target / base`` that declares a formula of unit ``base`` in the source's unit ``target``
    where event counts cannot give it, else None (the mismatch is kept and reported).

    That is the case when the formula is made of event counts and durations only, and the source's unit
    is a quantity that is no count of events: bytes (``MiB``, ``GB/s``), energy (``W``), work (``FLOP``), a
    clock's cycles, or time (``GHz``, ``s``, where the source reads durations as plain numbers). The
    value is the source's: ``formula × 1 [target/base]``. A dimensionless target (``%``, a ratio) or one
    counted in events (``cycles``) is no such case: the formula could give it, so a mismatch is real."""
    dims = dict(reg.Quantity(1.0, target).dimensionality)
    if not dims or "[event]" in dims:
        return None
    if not set(reg.Quantity(1.0, base).dimensionality) <= _COUNTED:
        return None
    return target / base


def _parses(reg, text: str) -> bool:
    try:
        parse_unit(reg, text)
        return True
    except UnitError:
        return False


def unit_text(u: pint.Unit) -> str:
    """A unit as text that ``ontology.units.parse_unit`` reads back (``event/second``, ``1``)."""
    s = str(u).replace(" ", "")
    return "1" if s in ("dimensionless", "") else s


def base_units(reg: pint.UnitRegistry, u: pint.Unit) -> pint.Unit:
    return reg.Quantity(1.0, u).to_base_units().units


PREFIXES = [
    ("p", 1e-12),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("Ki", 2.0**10),
    ("Mi", 2.0**20),
    ("Gi", 2.0**30),
]


def scaled_unit(reg, base, scale: float, key: str, findings: list[Finding]) -> tuple[str, float]:
    """Declared unit and factor for a displayed value ``formula × scale`` whose label could not be used:
    a plain number stays a number (× scale); else a prefix of the base unit that is the scale
    (``1e-9`` on ``event/second`` → ``Gevent/second``, exact in pint terms); else × scale, flagged."""
    text = unit_text(base)
    if base.dimensionless:
        return "1", scale
    for p, f in PREFIXES:
        cand = p + text
        try:
            if abs(conversion_factor(reg, base, parse_unit(reg, cand)) - scale) <= 1e-12 * scale:
                return cand, 1.0
        except UnitError:
            continue
    findings.append(
        Finding(
            "unit-scale",
            key,
            f"the source scales the value by {scale:g}, which no prefix of {text} "
            f"expresses: the value is kept as displayed, i.e. {scale:g} × the quantity in {text}",
        )
    )
    return text, scale
