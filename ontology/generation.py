"""The resolved generation that later stages read: flat, every name full, every unit parsed.

``GenerationFile`` (``ontology.model``) is the YAML as written; ``Generation`` is what the metric
compiler, the codegen and the emulator use. Resolution checks what the written model cannot check
alone: a block's clock domain exists, units parse, counters have a width and gauges do not, a
signal's cycle unit belongs to its block's clock domain.
"""

from __future__ import annotations

import dataclasses
import types
import hashlib
from typing import Any, NamedTuple

import pint

from .binding import resolve_binding
from .counter_slots import resolve_counter_slots
from .diagnostics import Diagnostic, Span, did_you_mean  # noqa: F401  (Span: re-exported)
from .counters import _check_indicator_kinds, _check_scale_field, _flat_slots, _modulus, _slots
from . import kinds, sensors
from .model import GenerationFile, ResetIndicatorKind
from .signal_rules import check_signal
from .report_decl import resolve_report
from .spec_constants import resolve_constants
from .resolved import (
    Generation,
    ResolvedBinding,  # noqa: F401  (re-exported)
    ResolvedConstant,  # noqa: F401  (re-exported)
    ResolvedField,
    ResolvedRecordField,
    ResolvedSignal,
    Scope,  # noqa: F401  (re-exported)
)
from .units import UnitError, cycle_unit, parse_quantity, parse_unit, registry_for
from .yaml_source import YamlSource


RESERVED = {"spec", "interval", "clock"}  # names the metric language gives a meaning of its own
MAX_INSTANCES = 1_000_000  # registers of one signal per chip (instance axes x histogram buckets)


def resolve(gf: GenerationFile, src: YamlSource, lineage=None) -> tuple[Generation | None, list[Diagnostic]]:
    """Resolve a validated (and merged, see ``ontology.extends``) ``GenerationFile``.

    Returns the generation (None when there are errors) and the diagnostics.
    """
    from .extends import Lineage

    lineage = lineage or Lineage(chain=[gf.generation])
    diags: list[Diagnostic] = []
    reg = registry_for(tuple(sorted(gf.clock_domains)))
    ctx = _Ctx(gf, src, reg, lineage, diags)
    spec, clocks = resolve_constants(gf, src, reg, diags, ctx.unit, lineage.parent_spec)
    _check_reserved_blocks(ctx)
    blocks, signals, fields = _resolve_blocks(ctx)
    _check_signal_references(ctx, signals, fields)
    sensors.check_cross_check(ctx.reg, signals, ctx.src, ctx.diags)
    _check_indicator_kinds(gf, signals, src, diags)
    record_fields, records = _resolve_records(ctx)
    _check_record_derivations(ctx, records, record_fields)
    for f in fields:
        if f in signals:
            diags.append(
                Diagnostic("error", "duplicate-name", f"packed field `{f}` has the name of a signal", fields[f].span)
            )
    if any(d.severity == "error" for d in diags):
        return None, diags
    digest = hashlib.sha256((src.text or "").encode()).hexdigest()[:16]
    gen = Generation(
        gf.generation,
        gf.description,
        reg,
        blocks,
        signals,
        spec,
        src.path,
        digest,
        clocks,
        fields,
        tuple(lineage.chain),
        dict(lineage.aliases),
        dict(lineage.removed),
        record_fields,
        records,
        report=resolve_report(gf, src),
        inherited_spec=frozenset(f"spec.{k}" for k in lineage.parent_spec),
    )
    return gen, diags


@dataclasses.dataclass
class _Ctx:
    """What every resolution step reads: the file as written, its source (for locations), the unit
    registry of its clock domains, the lineage of the chain, and the diagnostics list it appends to."""

    gf: GenerationFile
    src: YamlSource
    reg: pint.UnitRegistry
    lineage: Any
    diags: list[Diagnostic]

    def error(self, code: str, message: str, loc: tuple, hint: str = "") -> None:
        """Report an error `code` at `loc` (a path into the file)."""
        self.diags.append(Diagnostic("error", code, message, self.src.span(loc), hint=hint))

    def unit(self, text: str, loc: tuple, what: str) -> pint.Unit | None:
        """The unit `text` parsed, or None after reporting an unknown-unit error at `loc`."""
        try:
            return parse_unit(self.reg, text)
        except UnitError as exc:
            self.error(
                "unknown-unit",
                f"{what}: {exc}",
                loc,
                hint="use a unit of ontology/units.txt (B, GB/s, FLOP, token, W, J, %, <domain>_cycle, ...)",
            )
            return None


class _Layout(NamedTuple):
    """Where a block's signals live: its name and location, its resolved axes (present slots), its
    full axes as declared, its present slots per axis (None: all) and its number of instances."""

    name: str
    block: Any
    loc: tuple
    axes: tuple
    full_axes: tuple
    present: Any
    n_inst: int


def _check_reserved_blocks(ctx: _Ctx) -> None:
    """No block takes a name the metric language gives a meaning of its own."""
    for bname in ctx.gf.blocks:
        if bname in RESERVED:
            ctx.error(
                "reserved-name",
                f"block `{bname}` uses a reserved name",
                ("blocks", bname, "<key>"),
                hint=f"{', '.join(sorted(RESERVED))} are reserved by the metric language",
            )


def _resolve_blocks(ctx: _Ctx) -> tuple[dict[str, dict], dict[str, ResolvedSignal], dict[str, ResolvedField]]:
    """Every block's layout, and the signals and packed fields of its registers, in file order."""
    blocks: dict[str, dict] = {}
    signals: dict[str, ResolvedSignal] = {}
    fields: dict[str, ResolvedField] = {}
    for bname, block in ctx.gf.blocks.items():
        layout = _block_layout(ctx, bname, block)
        if layout is None:
            continue
        blocks[bname] = {"clock": block.clock, "axes": layout.axes, "description": block.description}
        from_data = tuple(a for a, size in block.instances.items() if size == "from_data")
        if from_data:
            blocks[bname]["from_data"] = from_data  # sized 1 until a capture fixes them (ontology.derive)
        if layout.present is not None:
            blocks[bname]["slots"] = layout.present
            blocks[bname]["full_axes"] = layout.full_axes
        # issue 29 (perfonto plan): inherited slot names follow every rename and removal down the chain
        moved = types.SimpleNamespace(
            renamed={**dict(ctx.lineage.aliases), **dict(ctx.gf.renamed or {})},
            removed=set(ctx.lineage.removed) | set(ctx.gf.removed or ()),
        )
        counter_slots = resolve_counter_slots(bname, block, ctx.src, ctx.diags, moved)
        if counter_slots is not None:
            blocks[bname]["counter_slots"] = counter_slots
        for sname, sig in block.signals.items():
            _resolve_signal(ctx, layout, sname, sig, signals, fields)
    return blocks, signals, fields


def _block_layout(ctx: _Ctx, bname: str, block) -> _Layout | None:
    """The block's clock checked and its instance layout, or None when it has too many instances."""
    bloc = ("blocks", bname)
    if block.clock not in ctx.gf.clock_domains:
        ctx.error(
            "unknown-clock",
            f"block `{bname}` uses clock domain `{block.clock}`, which is not declared",
            bloc + ("clock",),
            hint=did_you_mean(block.clock, ctx.gf.clock_domains) or "declare it under clock_domains",
        )
    from_data = tuple(a for a, size in block.instances.items() if size == "from_data")
    if from_data:
        block = _placeholder_sizes(ctx, bname, block, from_data)
    full_axes = tuple(block.instances.items())
    n_inst = 1
    for _, size in full_axes:
        n_inst *= size
    if n_inst > MAX_INSTANCES:
        ctx.error(
            "instances",
            f"block `{bname}` has {n_inst:,} instances "
            f"({' x '.join(str(s) for _, s in full_axes)}); at most {MAX_INSTANCES:,} per chip",
            bloc + ("instances",),
            hint="a block's instance axes name real units (cores, stacks, links)",
        )
        return None
    axes, present = _slots(bname, block, bloc, ctx.src, ctx.diags)
    return _Layout(bname, block, bloc, axes, full_axes, present, n_inst)


def _placeholder_sizes(ctx: _Ctx, bname: str, block, from_data: tuple[str, ...]):
    """``block`` with its ``from_data`` axes sized 1, the placeholder until a capture gives their size
    (``ontology.derive.with_instances``); ``slots`` on such an axis is an error (it has no fixed slots)."""
    for axis in from_data:
        if axis in block.slots:
            ctx.error(
                "slots",
                f"block `{bname}`: `slots` names axis `{axis}`, whose size comes from the data (`from_data`)",
                ("blocks", bname, "slots", axis),
                hint="a `from_data` axis holds the instances a capture has; give the axis a size to declare slots",
            )
    sizes = {a: (1 if size == "from_data" else size) for a, size in block.instances.items()}
    slots = {a: v for a, v in block.slots.items() if a not in from_data}
    return block.model_copy(update={"instances": sizes, "slots": slots})


def _resolve_signal(ctx: _Ctx, layout: _Layout, sname: str, sig, signals: dict, fields: dict) -> None:
    """Resolve one signal of a block into `signals` (and its packed fields into `fields`)."""
    sloc = layout.loc + ("signals", sname)
    full = f"{layout.name}.{sname}"
    kind = kinds.of(sig.kind)
    u = _signal_unit(ctx, full, sig, kind, sloc)
    check_signal(full, sig, sloc, ctx.src, ctx.diags)
    sizes = _signal_sizes(ctx, layout, full, sig, kind, sloc)
    if sizes is None:
        return
    slot_idx, n_full = _flat_slots(
        layout.full_axes, layout.present, len(sig.buckets) + 1 if "buckets" in kind.options else 1
    )
    max_rate = _max_rate(ctx, full, sig, u, sloc)
    if "fields" in kind.options:
        _resolve_fields(ctx, layout, full, sig, sloc, fields)
    if u is None:
        return
    _check_cycle_domain(ctx, layout, full, u, sloc)
    reg, gf, lineage = ctx.reg, ctx.gf, ctx.lineage
    across = kind.across if kind.across != "declared" else (sig.across_chips.value if sig.across_chips else "avg")
    signals[full] = ResolvedSignal(
        full,
        layout.name,
        sig.kind,
        u,
        sig.unit,
        sig.description,
        sig.width,
        sig.scale,
        sizes,
        layout.block.clock,
        across,
        ctx.src.span(sloc),
        wrap_width=sig.effective_width or sig.width,
        sentinel=tuple(sig.sentinel),
        reset_indicator=sig.reset_indicator,
        max_rate=max_rate,
        buckets=tuple(sig.buckets),
        since=sig.since or lineage.since.get(full, gf.generation),
        stability=sig.stability.value,
        renamed_to=sig.renamed_to,
        broken=gf.generation in sig.broken_on,
        precision=sig.precision,
        sparsity=sig.sparsity.value if sig.sparsity else None,
        counted_by=sig.counted_by,
        id=lineage.ids.get(full, sig.id if sig.id is not None else -1),
        modulus=_modulus(sig, u, reg, sloc, ctx.src, ctx.diags),
        reset_kind="decrease" if sig.reset_indicator_kind is ResetIndicatorKind.uptime else "change",
        scale_field=(sig.scale_field.field, float(sig.scale_field.base)) if sig.scale_field else None,
        slots=slot_idx,
        full_instances=n_full,
        sources=tuple(sorted(sig.sources.items())),
        averaging_window=sensors.averaging_window(ctx.reg, full, sig, sloc, ctx.src, ctx.diags),
        cross_check=sensors.cross_check_of(sig),
    )
    if sig.width == "unknown":
        signals[full] = dataclasses.replace(signals[full], width=64, wrap_width=None)
    if sig.emulator is not None:
        bound = resolve_binding(full, sig.kind, sig.emulator, sizes, signals[full].width, sloc, ctx.src, ctx.diags)
        signals[full] = dataclasses.replace(signals[full], emulator=bound)


def _signal_unit(ctx: _Ctx, full: str, sig, kind, sloc: tuple) -> pint.Unit | None:
    """The signal's unit (a packed register without one is dimensionless), or None after an error."""
    if "fields" in kind.options:  # a packed register: its fields carry the units
        return ctx.reg.dimensionless if not sig.unit else ctx.unit(sig.unit, sloc + ("unit",), f"signal `{full}`")
    if not sig.unit:
        ctx.error(
            "missing-unit",
            f"signal `{full}` has no `unit`",
            sloc,
            hint="every counter, gauge and histogram has a unit (B, FLOP, token, event, core_cycle, W, ...)",
        )
        return None
    return ctx.unit(sig.unit, sloc + ("unit",), f"signal `{full}`")


def _signal_sizes(ctx: _Ctx, layout: _Layout, full: str, sig, kind, sloc: tuple) -> tuple | None:
    """The signal's axes (a histogram adds a bucket axis), or None when it has too many registers."""
    if "buckets" not in kind.options:
        return layout.axes
    n_inst, n_buckets = layout.n_inst, len(sig.buckets) + 1
    if n_inst * n_buckets > MAX_INSTANCES:
        ctx.error(
            "instances",
            f"signal `{full}` has {n_inst * n_buckets:,} registers "
            f"per chip ({n_inst:,} instances x {n_buckets} buckets); at most {MAX_INSTANCES:,}",
            sloc + ("buckets",),
            hint="use fewer buckets",
        )
        return None
    return layout.axes + (("bucket", n_buckets),)


def _max_rate(ctx: _Ctx, full: str, sig, u, sloc: tuple):
    """The signal's `max_rate` as a positive quantity in unit/s (None when absent or wrong, with an error)."""
    if sig.max_rate is None or u is None:
        return None
    try:
        max_rate = parse_quantity(ctx.reg, sig.max_rate, u / ctx.reg.second)
        if max_rate <= 0:
            raise UnitError("not positive")
        return max_rate
    except UnitError:
        ctx.error(
            "unit-mismatch",
            f"signal `{full}`: max_rate `{sig.max_rate}` is not a positive rate in {sig.unit}/s",
            sloc + ("max_rate",),
            hint=f"write e.g. `max_rate: 2 T{sig.unit}/s`",
        )
        return None


def _resolve_fields(ctx: _Ctx, layout: _Layout, full: str, sig, sloc: tuple, fields: dict) -> None:
    """The packed register's fields, each with its unit parsed, into `fields` (those with a bad unit left out)."""
    for fname, f in sig.fields.items():
        floc = sloc + ("fields", fname)
        fu = ctx.unit(f.unit, floc + ("unit",), f"field `{full}.{fname}`")
        if fu is not None:
            fields[f"{full}.{fname}"] = ResolvedField(
                f"{full}.{fname}",
                full,
                f.bits[0],
                f.bits[1],
                fu,
                f.unit,
                f.scale,
                f.description,
                layout.axes,
                layout.name,
                ctx.src.span(floc),
            )


def _check_cycle_domain(ctx: _Ctx, layout: _Layout, full: str, u, sloc: tuple) -> None:
    """A signal that counts cycles counts those of its block's clock domain."""
    clock = layout.block.clock
    for dim in ctx.reg.Quantity(1, u).dimensionality:
        dname = dim.strip("[]")
        if dname.endswith("_cycle") and dname != cycle_unit(clock):
            ctx.error(
                "clock-domain-mismatch",
                f"signal `{full}` counts `{dname}` but block `{layout.name}` runs on clock `{clock}`",
                sloc + ("unit",),
                hint=f"use `{cycle_unit(clock)}`, or move the signal to a block on that clock",
            )


def _check_signal_references(ctx: _Ctx, signals: dict[str, ResolvedSignal], fields: dict) -> None:
    """A signal's reset indicator, unit field and replacement name what this generation declares."""
    src, diags = ctx.src, ctx.diags
    for full, s_ in signals.items():
        sloc = ("blocks", s_.block, "signals", full.split(".", 1)[1])
        reset = s_.reset_indicator, sloc + ("reset_indicator",)
        _check_names_a_signal(ctx, full, "reset indicator", *reset, signals, "name a signal of this generation")
        if s_.scale_field is not None:
            _check_scale_field(full, s_, fields, sloc + ("scale_field", "field"), src, diags)
        renamed = s_.renamed_to, sloc + ("renamed_to",)
        _check_names_a_signal(ctx, full, "renamed_to", *renamed, signals, "name the signal that replaces it")


def _check_names_a_signal(
    ctx: _Ctx, full: str, what: str, target: str | None, loc: tuple, signals: dict, hint: str
) -> None:
    """Signal `full`'s attribute `what` (at `loc`), when given, names a signal of this generation."""
    if target is not None and target not in signals:
        ctx.error(
            "unknown-name",
            f"signal `{full}`: {what} `{target}` is not a signal",
            loc,
            hint=did_you_mean(target, signals) or hint,
        )


def _resolve_records(ctx: _Ctx) -> tuple[dict[str, ResolvedRecordField], dict[str, dict]]:
    """The record types (each named apart from the blocks) and their fields with units parsed."""
    record_fields: dict[str, ResolvedRecordField] = {}
    records: dict[str, dict] = {}
    for rname, rt in ctx.gf.records.items():
        rloc = ("records", rname)
        if rname in ctx.gf.blocks or rname in RESERVED:
            ctx.error(
                "duplicate-name",
                f"record type `{rname}` has the name of a block",
                rloc + ("<key>",),
                hint="record fields and signals share the `<name>.<field>` namespace",
            )
            continue
        records[rname] = {
            "description": rt.description,
            "derived_from": rt.derived.consecutive_gaps_of if rt.derived else None,
        }
        for fname, f in rt.fields.items():
            u = ctx.unit(f.unit, rloc + ("fields", fname, "unit"), f"record field `{rname}.{fname}`")
            if u is not None:
                record_fields[f"{rname}.{fname}"] = ResolvedRecordField(
                    f"{rname}.{fname}",
                    rname,
                    fname,
                    u,
                    f.unit,
                    f.description,
                    f.times,
                    ctx.src.span(rloc + ("fields", fname)),
                    f.measure,
                )
    return record_fields, records


def _check_record_derivations(ctx: _Ctx, records: dict[str, dict], record_fields: dict) -> None:
    """A derived record type derives from a `times` field of a record."""
    for rname, info in records.items():
        src_field = info["derived_from"]
        if src_field is not None and (src_field not in record_fields or not record_fields[src_field].times):
            ctx.error(
                "unknown-name",
                f"record type `{rname}` derives from `{src_field}`, which is not a `times` field",
                ("records", rname, "derived"),
                hint="name a record field declared with `times: true`",
            )
