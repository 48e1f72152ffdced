"""Read caps of the collection planner (``metrics.plan_groups``): how often a counter must be read so that
it never wraps more than once between two reads.

A counter's **read cap** is half the shortest time in which it can wrap, (R − 1) / (max_rate / scale) / 2 s,
with R = 2^effective width (or the raw modulus of a ``wrap_range``) and max_rate the declared one (or a
cycle counter's clock plus 1 %, ``ontology.rates.max_rate``). A counter of an amount with neither takes its
block's peak among the spec constants in its unit per second (``ontology.rates.peak_rate``), named in the
cap's ``peak`` and note — the highest one, the fastest the counter can go (``perfonto check``'s
``lint-wrap-period`` warns at the lowest, what even the smallest peak wraps). A
16-bit byte counter at a 200 GB/s block peak wraps every 21 µs: a plan that left it out headlined a
read interval of 1.07 s beside check's warning. What is still unknown (a count of events with no
``max_rate``, a width of ``unknown``) is left out of the read interval and listed (``uncapped``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfonto.ontology.rates import max_rate, peak_rate


@dataclass(frozen=True)
class ReadCap:
    """How often a counter must be read. ``cap_s``: (range − 1) / raw rate / 2 in seconds, None when it
    cannot be told (``note`` says why); ``range_raw``: raw counts before it wraps; ``max_rate``: in its
    unit per second; ``raw_rate``: max_rate / scale, raw counts per second; ``peak``: the block's spec
    constant the rate was taken from when the counter declares no ``max_rate`` (None: its own rate)."""

    signal: str
    range_raw: int | None
    max_rate: float | None
    unit: str
    raw_rate: float | None
    cap_s: float | None
    note: str = ""
    peak: str | None = None


def read_cap(gen, sig) -> ReadCap:
    """``sig``'s read cap (``ReadCap``): (R − 1) / (max_rate / scale) / 2 s, R = the raw modulus of a
    ``wrap_range`` or 2^(effective width), max_rate the counter's own or, lacking one, its block's peak
    (module docstring); source: a counter that grows at most r raw counts per second wraps no sooner than
    (R − 1) / r s after a read, and a read pair within half of that is unambiguous."""
    unit = sig.unit_text
    rate, peak, note = max_rate(gen, sig), None, ""
    rng = sig.modulus if sig.modulus else (2**sig.wrap_width if sig.wrap_width else None)
    if rng is None:
        return ReadCap(sig.name, None, rate, unit, None, None, "width unknown: a decrease is read as a reset")
    if sig.scale_field is not None:
        return ReadCap(sig.name, rng, rate, unit, None, None, f"unit set per sample by `{sig.scale_field[0]}`")
    if rate is None and (found := peak_rate(gen, sig, highest=True)) is not None:
        rate, peak = found  # the fastest the counter can go: a read interval must hold there
        note = f"no max_rate declared; at its block's highest peak `{peak}`"
    if rate is None or rate <= 0:
        return ReadCap(sig.name, rng, None, unit, None, None, "no max_rate declared")
    raw = rate / sig.scale
    cap = (rng - 1) / raw / 2
    if not math.isfinite(cap):  # a tiny max_rate: past any float, and JSON has no Infinity
        return ReadCap(sig.name, rng, rate, unit, raw, None, "never wraps at its max_rate (cap beyond 1e308 s)", peak)
    return ReadCap(sig.name, rng, rate, unit, raw, cap, note, peak)


def uncapped(caps: dict[str, ReadCap]) -> tuple[str, ...]:
    """The counters of ``caps`` whose wrap time is unknown (no rate, or no width): a read interval taken
    over ``caps`` leaves them out. One that never wraps at its known rate is not among them."""
    return tuple(sorted(n for n, c in caps.items() if c.cap_s is None and c.raw_rate is None))


__all__ = ["ReadCap", "read_cap", "uncapped"]
