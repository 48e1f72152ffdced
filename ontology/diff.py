"""Compatibility diff between two resolved generations (signals only), with Weaver-style policies.

A change is an *error* when a stable signal changes unit or kind, changes how its values combine across
chips (``across_chips``, ``counted_by``: every metric reading it changes its server-level value under the
same name), goes back from stable to experimental, or disappears without having gone through deprecation
(``stability: deprecated`` in the old generation, or a rename that keeps an alias); everything else
(``sentinel``, ``max_rate``, ``reset_indicator``, a deprecation, the description, …) is reported for
information, each change with what it does (``EFFECT``). Source of the policy idea: OpenTelemetry Weaver's
registry compatibility checks against the previous release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import kinds
from .generation import Generation, ResolvedSignal
from .resolved import ResolvedConstant
from .units import UnitError, conversion_factor, parse_unit


@dataclass
class SignalDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[dict] = field(default_factory=list)  # {"from", "to"}
    changed: list[dict] = field(default_factory=list)  # {"signal", "field", "old", "new"}
    errors: list[str] = field(default_factory=list)
    spec: list[dict] = field(default_factory=list)  # {"constant", "old", "new"} (value with unit, provenance)


def _props(s: ResolvedSignal) -> dict:
    """The properties a diff compares, as JSON values (``max_rate`` with its unit, ``sentinel`` a list)."""
    return {
        "kind": s.kind,
        "unit": s.unit_text,
        "width": s.width,
        "wrap_width": s.wrap_width if s.wrap_width != s.width else None,
        "scale": s.scale,
        "scope": ", ".join(f"{a}: {n}" for a, n in s.axes) or "chip",
        "across_chips": s.across_chips,
        "counted_by": s.counted_by if kinds.of(s).counts else None,
        "sentinel": list(s.sentinel),
        "max_rate": None if s.max_rate is None else f"{s.max_rate:.6g} {s.unit_text or '1'}/s",
        "reset_indicator": s.reset_indicator,
        "stability": s.stability,
        "description": " ".join(s.description.split()),
    }


#: What a change of each property does to the values read through the signal (shown beside the change).
EFFECT = {
    "across_chips": "server-level values of the metrics reading it change",
    "counted_by": "server-level values of the metrics reading it change",
    "sentinel": "which raw values the reader nulls as no value changes",
    "max_rate": "which windows count as ambiguous (window rule 4b) and the read-interval cap change",
    "reset_indicator": "which windows count as spanning a reset (null) changes",
    "stability": "no value changes; deprecation is the step before removal",
    "description": "documentation only",
}

#: Fields whose change on a stable signal changes server-level values under the same name: a policy error.
SERVER_LEVEL = ("across_chips", "counted_by")


def diff_signals(old: Generation, new: Generation) -> SignalDiff:
    """Signals added, removed, renamed (through ``new``'s aliases) and changed between generations."""
    d = SignalDiff()
    renamed_from = {
        o: n for o, n in new.aliases.items() if o in old.signals and n in new.signals and n not in old.signals
    }
    for o, n in sorted(renamed_from.items()):
        d.renamed.append({"from": o, "to": n})
    new_names = set(new.signals) - set(renamed_from.values())
    d.added = sorted(new_names - set(old.signals))
    d.removed = sorted(set(old.signals) - set(new.signals) - set(renamed_from))
    pairs = [(s, s) for s in sorted(set(old.signals) & set(new.signals))] + sorted(renamed_from.items())
    for o, n in pairs:
        _compare_props(d, old, new, o, n)
    _compare_spec(d, old, new)
    for o, n in pairs:  # the C header ABI: a signal keeps its id (ontology.model.Signal.id)
        io, inew = old.signals[o].id, new.signals[n].id
        if io >= 0 and inew >= 0 and io != inew:
            d.changed.append({"signal": n, "field": "id", "old": io, "new": inew})
            d.errors.append(
                f"signal `{n}` changes its C header id from {io} to {inew}: code built against `{old.name}`'s "
                f"header would read another register; keep `id: {io}` (add new signals with ids of their own)"
            )
    for r in d.removed:
        if old.signals[r].stability == "stable":
            d.errors.append(
                f"stable signal `{r}` disappears without deprecation; mark it `stability: deprecated` "
                "in the previous generation first, or rename it (the old name stays as an alias)"
            )
    return d


def _compare_props(d: SignalDiff, old: Generation, new: Generation, o: str, n: str) -> None:
    """The properties that differ between old signal `o` and new signal `n`, each with its ``effect`` (where
    ``EFFECT`` gives one) and ``policy`` (``error`` or ``information``); a stable signal that changes unit,
    kind, across-chip rule or ``counted_by``, or goes back to experimental, is an error."""
    po, pn = _props(old.signals[o]), _props(new.signals[n])
    stable = old.signals[o].stability == "stable"
    for key in po:
        if po[key] == pn[key] or (key in SERVER_LEVEL and po["kind"] != pn["kind"]):
            continue  # a kind change is its own error (a counter's rule follows from its kind)
        error = _policy_error(old, n, key, po, pn) if stable else None
        entry = {"signal": n, "field": key, "old": po[key], "new": pn[key]}
        if key in EFFECT:
            entry["effect"] = EFFECT[key]
        entry["policy"] = "information" if error is None else "error"
        d.changed.append(entry)
        if error is not None:
            d.errors.append(error)


def _policy_error(old: Generation, n: str, key: str, po: dict, pn: dict) -> str | None:
    """The policy error of stable signal ``n`` changing ``key`` from ``po[key]`` to ``pn[key]``, or None
    when the change is allowed (a wider register, more instances, a sentinel, a deprecation, …)."""
    if key == "unit" and old.registry.parse_units(po["unit"] or "1") != old.registry.parse_units(pn["unit"] or "1"):
        return (
            f"stable signal `{n}` changes unit from {po['unit']} to {pn['unit']}; "
            "deprecate it and add a new signal instead"
        )
    if key == "kind":
        return f"stable signal `{n}` changes kind from {po['kind']} to {pn['kind']}; deprecate it and add a new signal"
    if key in SERVER_LEVEL:
        return (
            f"stable signal `{n}` changes {key} from {po[key]} to {pn[key]}: every metric reading it changes its "
            "server-level value under the same name; deprecate it and add a new signal instead"
        )
    if key == "stability" and pn[key] == "experimental":
        return f"stable signal `{n}` goes back to experimental; keep it stable, or deprecate it and add a new signal"
    return None


def _compare_spec(d: SignalDiff, old: Generation, new: Generation) -> None:
    """The spec constants whose value or provenance differ (added and dropped ones included), each shown as
    written. Values are compared in one unit: 7.2 TB/s overridden as 7200 GB/s is no change."""
    for name in sorted(set(old.spec) | set(new.spec)):
        o, n = old.spec.get(name), new.spec.get(name)
        if o is None or n is None or not _same_figure(o, n, new.registry):
            d.spec.append({"constant": name, "old": _written(o), "new": _written(n)})


#: Two values of a constant this close, once in one unit, are one figure: a unit's conversion factor
#: rounds (7.2 TB/s is 7200.000000000001 GB/s), a real change is far larger.
SAME_FIGURE_REL = 1e-12


def _same_figure(o: ResolvedConstant, n: ResolvedConstant, reg) -> bool:
    """Whether ``o`` and ``n`` hold the same value, converted to ``n``'s unit in ``reg`` (the new
    generation's registry), with the same provenance."""
    if o.provenance != n.provenance:
        return False
    try:
        factor = conversion_factor(reg, parse_unit(reg, o.unit_text), n.unit)
    except UnitError:  # another dimension, or a unit only the old generation has (a dropped clock's cycles)
        return False
    return math.isclose(o.value * factor, n.value, rel_tol=SAME_FIGURE_REL)


def _written(c: ResolvedConstant | None) -> str | None:
    """A constant as the diff shows it: its value in its unit and its provenance; a clock frequency
    (``spec.clock.<domain>``, held in cycles per second) in GHz, or MHz below 1 GHz. Enough digits that two
    different values never print alike (``%g`` printed 1.5 GHz and 1.5000005 GHz both as 1.5e+09)."""
    if c is None:
        return None
    value, unit = c.value, c.unit_text
    if c.name.startswith("spec.clock."):
        value, unit = (value / 1e9, "GHz") if value >= 1e9 else (value / 1e6, "MHz")
    return f"{value:.15g} {unit} ({c.provenance})"
