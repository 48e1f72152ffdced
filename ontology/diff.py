"""Compatibility diff between two resolved generations (signals only), with Weaver-style policies.

A change is an *error* when a stable signal changes unit, or disappears without having gone through
deprecation (``stability: deprecated`` in the old generation, or a rename that keeps an alias);
everything else is reported for information. Source of the policy idea: OpenTelemetry Weaver's
registry compatibility checks against the previous release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .generation import Generation, ResolvedSignal


@dataclass
class SignalDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    renamed: list[dict] = field(default_factory=list)  # {"from", "to"}
    changed: list[dict] = field(default_factory=list)  # {"signal", "field", "old", "new"}
    errors: list[str] = field(default_factory=list)
    spec: list[dict] = field(default_factory=list)  # {"constant", "old", "new"} (value with unit, provenance)


def _props(s: ResolvedSignal) -> dict:
    return {
        "kind": s.kind,
        "unit": s.unit_text,
        "width": s.width,
        "wrap_width": s.wrap_width if s.wrap_width != s.width else None,
        "scale": s.scale,
        "scope": ", ".join(f"{a}: {n}" for a, n in s.axes) or "chip",
    }


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
    """The properties that differ between old signal `o` and new signal `n`; a stable signal that
    changes unit or kind is an error."""
    po, pn = _props(old.signals[o]), _props(new.signals[n])
    for key in po:
        if po[key] == pn[key]:
            continue
        d.changed.append({"signal": n, "field": key, "old": po[key], "new": pn[key]})
        stable = old.signals[o].stability == "stable"
        if (
            key == "unit"
            and stable
            and old.registry.parse_units(po["unit"] or "1") != old.registry.parse_units(pn["unit"] or "1")
        ):
            d.errors.append(
                f"stable signal `{n}` changes unit from {po['unit']} to {pn['unit']}; "
                "deprecate it and add a new signal instead"
            )
        if key == "kind" and stable:
            d.errors.append(
                f"stable signal `{n}` changes kind from {po['kind']} to {pn['kind']}; deprecate it and add a new signal"
            )


def _compare_spec(d: SignalDiff, old: Generation, new: Generation) -> None:
    """The spec constants whose value, unit or provenance differ (added and dropped ones included)."""
    for name in sorted(set(old.spec) | set(new.spec)):
        o, n = old.spec.get(name), new.spec.get(name)
        fo = f"{o.value:g} {o.unit_text} ({o.provenance})" if o else None
        fn = f"{n.value:g} {n.unit_text} ({n.provenance})" if n else None
        if fo != fn:
            d.spec.append({"constant": name, "old": fo, "new": fn})
