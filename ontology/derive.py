"""Derived generations: a generation with some spec constants assumed differently, or without some
signals — what-if studies build these instead of patching a loaded generation.

``with_spec(gen, {"spec.hbm.peak_bandwidth": (8, "TB/s")})`` returns a new ``Generation`` whose
overridden constants carry provenance ``assumed`` and a source naming the value they replace; its
``content_hash`` covers the base's and the overrides, so a cache keyed by it never confuses the two.
``with_instances(gen, {"cpu": ("0", "1")})`` sizes the instance axes declared ``from_data`` by what a
capture holds (2 CPUs here), so that the catalog compiled against it rolls up over those instances.
``without_signals(gen, ["c2c.busy_cycles"])`` removes signals the way a child generation's
``remove:`` does (``removed`` names them), so that a metric reading one becomes unavailable when the
catalog is compiled against the result, with the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

from .diagnostics import did_you_mean
from .resolved import Generation
from .units import UnitError, conversion_factor, parse_unit
from .errors import PerfontoError


class DeriveError(PerfontoError, ValueError):
    """An override or removal the generation cannot take (unknown name, wrong unit, bad value)."""


def spec_quantity(gen: Generation, name: str, value: float, unit: str | None = None) -> float:
    """``value`` (in ``unit``, default the constant's own unit) converted to the unit ``gen`` declares
    spec constant ``name`` in.

    Raises:
        DeriveError: unknown constant (with a did-you-mean), a unit that does not convert, a value
            that is not finite and positive.
    """
    const = gen.spec.get(name)
    if const is None:
        hint = did_you_mean(name, gen.spec)
        raise DeriveError(
            f"`{gen.name}` has no spec constant `{name}`"
            + (f"; {hint}" if hint else f"; its constants: {', '.join(sorted(gen.spec))}")
        )
    v = float(value)
    if unit is not None and unit.strip():
        reg = gen.registry
        dst = reg.hertz if name.startswith("spec.clock.") else const.unit  # a clock in GHz: cycles per second
        try:
            v *= conversion_factor(reg, parse_unit(reg, unit), dst)
        except UnitError as exc:
            raise DeriveError(f"`{name}` is in {const.unit_text}; {unit!r} does not convert to it ({exc})") from None
    if not (math.isfinite(v) and v > 0):
        raise DeriveError(f"`{name}` must be a finite value > 0, got {value} {unit or const.unit_text}")
    return v


def with_spec(
    gen: Generation, overrides: dict[str, float | tuple[float, str]], why: str = "what-if override"
) -> Generation:
    """``gen`` with spec constants replaced: ``overrides`` maps a full name (``spec.hbm.peak_bandwidth``)
    to a value in the constant's unit or to ``(value, unit)``. Each replaced constant keeps its unit,
    scope and description and becomes ``assumed``, its source "``why``: was <old value>". Clock
    domains (``spec.clock.<domain>``) are replaced in ``clock_domains`` too. No override: ``gen`` itself.

    Raises:
        DeriveError: see ``spec_quantity``.
    """
    if not overrides:
        return gen
    spec = dict(gen.spec)
    clocks = dict(gen.clock_domains)
    canon = {}
    for name, v in sorted(overrides.items()):
        value, unit = v if isinstance(v, tuple) else (v, None)
        mag = spec_quantity(gen, name, value, unit)
        old = gen.spec[name]
        new = dataclasses.replace(
            old, value=mag, provenance="assumed", source=f"{why}: was {old.value:g} {old.unit_text} ({old.provenance})"
        )
        spec[name] = new
        if name.startswith("spec.clock.") and name.removeprefix("spec.clock.") in clocks:
            clocks[name.removeprefix("spec.clock.")] = new
        canon[name] = mag
    digest = hashlib.sha256(json.dumps([gen.content_hash, canon], sort_keys=True).encode()).hexdigest()[:16]
    what = ", ".join(f"{k} = {canon[k]:g} {gen.spec[k].unit_text}" for k in canon)
    return dataclasses.replace(
        gen,
        spec=spec,
        clock_domains=clocks,
        content_hash=digest,
        description=f"{gen.description} [{why}: {what}, assumed]",
    )


def without_signals(gen: Generation, names, why: str = "removed for a coverage study") -> Generation:
    """``gen`` without the signals ``names`` (full names), recorded in ``removed`` as a child
    generation's ``remove:`` would be, so that the compiler makes the metrics that read them
    unavailable ("signal `x` was removed in generation `<name> (<why>)`").

    Raises:
        DeriveError: a name that is not a signal of ``gen`` (with a did-you-mean).
    """
    names = list(dict.fromkeys(names))
    for n in names:
        if n not in gen.signals:
            hint = did_you_mean(n, gen.signals)
            raise DeriveError(f"`{gen.name}` has no signal `{n}`" + (f"; {hint}" if hint else ""))
    if not names:
        return gen
    gone = set(names)
    signals = {k: v for k, v in gen.signals.items() if k not in gone}
    removed = dict(gen.removed) | {n: f"{gen.name} ({why})" for n in names}
    fields = {k: f for k, f in gen.fields.items() if f.register not in gone}
    digest = hashlib.sha256(json.dumps([gen.content_hash, "without", sorted(gone)]).encode()).hexdigest()[:16]
    return dataclasses.replace(gen, signals=signals, removed=removed, fields=fields, content_hash=digest)


def from_data_axes(gen: Generation) -> dict[str, tuple[str, ...]]:
    """The instance axes of ``gen`` whose size comes from the data (``instances: {cpu: from_data}``) and
    that no capture has fixed yet: block → axis names (empty when there are none)."""
    return {b: tuple(info["from_data"]) for b, info in gen.blocks.items() if info.get("from_data")}


def instance_labels(gen: Generation) -> dict[str, tuple[str, ...]]:
    """The ``from_data`` axes a capture fixed (``with_instances``): axis → the instances' labels, in
    instance order (empty when none was fixed)."""
    out: dict[str, tuple[str, ...]] = {}
    for info in gen.blocks.values():
        out.update(info.get("labels", {}))
    return out


def with_instances(gen: Generation, labels: dict[str, tuple[str, ...] | list[str]]) -> Generation:
    """``gen`` with its ``from_data`` axes sized by a capture: ``labels`` maps an axis name to the
    labels of the instances the capture holds (``{"cpu": ("0", "1")}``: 2 instances), in the order the
    reader places them. Every block's axis of that name gets that size; its labels are kept in the
    block (``instance_labels``) and the ``content_hash`` covers them, so a catalog compiled against the
    result is cached apart from the placeholder's and from another capture's. No ``from_data`` axis:
    ``gen`` itself.

    Raises:
        DeriveError: an axis of ``gen`` left without labels, or given none, or a name that is not a
            ``from_data`` axis of ``gen``.
    """
    todo = from_data_axes(gen)
    if not todo:
        return gen
    wanted = {a for axes in todo.values() for a in axes}
    fixed = {a: tuple(str(x) for x in v) for a, v in labels.items()}
    for a in sorted(set(fixed) - wanted):
        raise DeriveError(f"`{gen.name}` has no instance axis `{a}` whose size comes from the data")
    for a in sorted(wanted):
        if not fixed.get(a):
            raise DeriveError(f"the instance axis `{a}` of `{gen.name}` needs at least one instance from the data")
    blocks = dict(gen.blocks)
    for b, axes in todo.items():
        info = {k: v for k, v in blocks[b].items() if k != "from_data"}
        info["axes"] = tuple((a, len(fixed[a]) if a in axes else n) for a, n in info["axes"])
        info["labels"] = {a: fixed[a] for a in axes}
        blocks[b] = info

    def sized(block: str, axes: tuple) -> tuple:
        return tuple((a, len(fixed[a]) if a in todo.get(block, ()) else n) for a, n in axes)

    signals = {
        k: dataclasses.replace(s, axes=sized(s.block, s.axes), slots=None, full_instances=0) if s.block in todo else s
        for k, s in gen.signals.items()
    }
    fields = {
        k: dataclasses.replace(f, axes=sized(f.block, f.axes)) if f.block in todo else f for k, f in gen.fields.items()
    }
    canon = {a: list(fixed[a]) for a in sorted(wanted)}
    digest = hashlib.sha256(json.dumps([gen.content_hash, "instances", canon]).encode()).hexdigest()[:16]
    return dataclasses.replace(gen, blocks=blocks, signals=signals, fields=fields, content_hash=digest)


def describe_instances(labels: dict[str, tuple[str, ...] | list[str]]) -> str:
    """One line per axis: ``cpu: 2 instances from the data (0, 1)`` (the first 16 labels)."""
    parts = []
    for a, v in labels.items():
        shown = ", ".join(str(x) for x in list(v)[:16]) + (", …" if len(v) > 16 else "")
        parts.append(f"{a}: {len(v)} instance{'s' if len(v) != 1 else ''} from the data ({shown})")
    return "; ".join(parts)


__all__ = [
    "DeriveError",
    "describe_instances",
    "from_data_axes",
    "instance_labels",
    "spec_quantity",
    "with_instances",
    "with_spec",
    "without_signals",
]
