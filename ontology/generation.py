"""The resolved generation that later stages read: flat, every name full, every unit parsed.

``GenerationFile`` (``ontology.model``) is the YAML as written; ``Generation`` is what the metric
compiler, the codegen and the emulator use. Resolution checks what the written model cannot check
alone: a block's clock domain exists, units parse, counters have a width and gauges do not, a
signal's cycle unit belongs to its block's clock domain.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pint

from .binding import resolve_binding
from .diagnostics import Diagnostic, Span, did_you_mean  # noqa: F401  (Span: re-exported)
from .counters import _check_indicator_kinds, _check_scale_field, _flat_slots, _modulus, _slots
from . import kinds
from .model import GenerationFile, ResetIndicatorKind
from .resolved import (
    Generation,
    ResolvedBinding,
    ResolvedConstant,
    ResolvedField,
    ResolvedRecordField,
    ResolvedSignal,
    Scope,
)  # noqa: F401  (re-exported)
from .units import UnitError, conversion_factor, cycle_unit, parse_quantity, parse_unit, registry_for
from .yaml_source import YamlSource


RESERVED = {"spec", "interval", "clock"}
MAX_INSTANCES = 1_000_000  # registers of one signal per chip (instance axes x histogram buckets)  # names the metric language gives a meaning of its own


def resolve(gf: GenerationFile, src: YamlSource, lineage=None) -> tuple[Generation | None, list[Diagnostic]]:
    """Resolve a validated (and merged, see ``ontology.extends``) ``GenerationFile``.

    Returns the generation (None when there are errors) and the diagnostics.
    """
    from .extends import Lineage

    lineage = lineage or Lineage(chain=[gf.generation])
    diags: list[Diagnostic] = []
    domains = tuple(sorted(gf.clock_domains))
    reg = registry_for(domains)

    def unit(text: str, loc: tuple, what: str) -> pint.Unit | None:
        try:
            return parse_unit(reg, text)
        except UnitError as exc:
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-unit",
                    f"{what}: {exc}",
                    src.span(loc),
                    hint="use a unit of ontology/units.txt (B, GB/s, FLOP, token, W, J, %, <domain>_cycle, ...)",
                )
            )
            return None

    spec: dict[str, ResolvedConstant] = {}
    clocks: dict[str, ResolvedConstant] = {}
    for dname, dom in gf.clock_domains.items():
        loc = ("clock_domains", dname, "frequency")
        u = unit(dom.frequency.unit, loc + ("unit",), f"clock domain `{dname}`")
        if u is None:
            continue
        if not (dom.frequency.value > 0):
            diags.append(
                Diagnostic(
                    "error",
                    "spec-value",
                    f"clock domain `{dname}` frequency must be positive, got {dom.frequency.value}",
                    src.span(loc + ("value",)),
                    hint="give the clock frequency, e.g. `value: 1.5, unit: GHz`",
                )
            )
            continue
        try:
            hz = dom.frequency.value * conversion_factor(reg, u, reg.hertz)
        except UnitError as exc:
            diags.append(
                Diagnostic(
                    "error",
                    "unit-mismatch",
                    f"clock domain `{dname}` frequency: {exc}",
                    src.span(loc + ("unit",)),
                    hint="give the frequency in Hz, MHz or GHz",
                )
            )
            continue
        cu = reg.parse_units(f"{cycle_unit(dname)}/s")
        c = ResolvedConstant(
            f"spec.clock.{dname}",
            hz,
            cu,
            f"{cycle_unit(dname)}/s",
            dom.frequency.provenance.value,
            dom.frequency.source,
            dom.description or f"{dname} clock frequency",
            Scope.chip,
            src.span(loc),
        )
        clocks[dname] = c
        spec[c.name] = c
    for cname, const in gf.spec.items():
        loc = ("spec", cname)
        full = f"spec.{cname}"
        if full in spec:
            diags.append(
                Diagnostic(
                    "error",
                    "duplicate-name",
                    f"spec constant `{full}` is also defined by a clock domain",
                    src.span(loc + ("<key>",)),
                    hint="clock frequencies are spec.clock.<domain>; rename this constant",
                )
            )
            continue
        u = unit(const.unit, loc + ("unit",), f"spec constant `{full}`")
        if u is None:
            continue
        if not u.dimensionless and not (const.value > 0):
            diags.append(
                Diagnostic(
                    "error",
                    "spec-value",
                    f"spec constant `{full}` must be positive, got {const.value} {const.unit}",
                    src.span(loc + ("value",)),
                    hint="peaks, bandwidths, capacities and powers are positive figures",
                )
            )
            continue
        if const.scope is Scope.instance:
            blk = gf.blocks.get(cname.split(".")[0])
            if blk is None or not blk.instances:
                diags.append(
                    Diagnostic(
                        "error",
                        "scope",
                        f"spec constant `{full}` has scope `instance` but `{cname.split('.')[0]}` is not a block with instances",
                        src.span(loc + ("scope",)),
                        hint="name per-instance constants after their block, e.g. `hbm.stack_peak_bandwidth`",
                    )
                )
                continue
        spec[full] = ResolvedConstant(
            full,
            const.value,
            u,
            const.unit,
            const.provenance.value,
            const.source,
            const.description,
            const.scope,
            src.span(loc),
            const.precision,
            const.sparsity.value if const.sparsity else None,
        )

    blocks: dict[str, dict] = {}
    signals: dict[str, ResolvedSignal] = {}
    fields: dict[str, ResolvedField] = {}
    for bname in gf.blocks:
        if bname in RESERVED:
            diags.append(
                Diagnostic(
                    "error",
                    "reserved-name",
                    f"block `{bname}` uses a reserved name",
                    src.span(("blocks", bname, "<key>")),
                    hint=f"{', '.join(sorted(RESERVED))} are reserved by the metric language",
                )
            )
    for bname, block in gf.blocks.items():
        bloc = ("blocks", bname)
        if block.clock not in gf.clock_domains:
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-clock",
                    f"block `{bname}` uses clock domain `{block.clock}`, which is not declared",
                    src.span(bloc + ("clock",)),
                    hint=did_you_mean(block.clock, gf.clock_domains) or "declare it under clock_domains",
                )
            )
        full_axes = tuple(block.instances.items())
        n_inst = 1
        for _, size in full_axes:
            n_inst *= size
        if n_inst > MAX_INSTANCES:
            diags.append(
                Diagnostic(
                    "error",
                    "instances",
                    f"block `{bname}` has {n_inst:,} instances "
                    f"({' x '.join(str(s) for _, s in full_axes)}); at most {MAX_INSTANCES:,} per chip",
                    src.span(bloc + ("instances",)),
                    hint="a block's instance axes name real units (cores, stacks, links)",
                )
            )
            continue
        axes, present = _slots(bname, block, bloc, src, diags)
        blocks[bname] = {"clock": block.clock, "axes": axes, "description": block.description}
        if present is not None:
            blocks[bname]["slots"] = present
            blocks[bname]["full_axes"] = full_axes
        for sname, sig in block.signals.items():
            sloc = bloc + ("signals", sname)
            full = f"{bname}.{sname}"
            kind = kinds.of(sig.kind)
            if "fields" in kind.options:  # a packed register: its fields carry the units
                u = reg.dimensionless if not sig.unit else unit(sig.unit, sloc + ("unit",), f"signal `{full}`")
            elif not sig.unit:
                diags.append(
                    Diagnostic(
                        "error",
                        "missing-unit",
                        f"signal `{full}` has no `unit`",
                        src.span(sloc),
                        hint="every counter, gauge and histogram has a unit (B, FLOP, token, event, core_cycle, W, ...)",
                    )
                )
                u = None
            else:
                u = unit(sig.unit, sloc + ("unit",), f"signal `{full}`")
            _check_signal(full, sig, sloc, src, diags)
            sizes = axes
            if "buckets" in kind.options:
                sizes = axes + (("bucket", len(sig.buckets) + 1),)
                if n_inst * (len(sig.buckets) + 1) > MAX_INSTANCES:
                    diags.append(
                        Diagnostic(
                            "error",
                            "instances",
                            f"signal `{full}` has {n_inst * (len(sig.buckets) + 1):,} registers "
                            f"per chip ({n_inst:,} instances x {len(sig.buckets) + 1} buckets); at most {MAX_INSTANCES:,}",
                            src.span(sloc + ("buckets",)),
                            hint="use fewer buckets",
                        )
                    )
                    continue
            slot_idx, n_full = _flat_slots(full_axes, present, len(sig.buckets) + 1 if "buckets" in kind.options else 1)
            max_rate = None
            if sig.max_rate is not None and u is not None:
                try:
                    max_rate = parse_quantity(reg, sig.max_rate, u / reg.second)
                    if max_rate <= 0:
                        raise UnitError("not positive")
                except UnitError:
                    diags.append(
                        Diagnostic(
                            "error",
                            "unit-mismatch",
                            f"signal `{full}`: max_rate `{sig.max_rate}` is not a positive rate in {sig.unit}/s",
                            src.span(sloc + ("max_rate",)),
                            hint=f"write e.g. `max_rate: 2 T{sig.unit}/s`",
                        )
                    )
            if "fields" in kind.options:
                for fname, f in sig.fields.items():
                    floc = sloc + ("fields", fname)
                    fu = unit(f.unit, floc + ("unit",), f"field `{full}.{fname}`")
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
                            axes,
                            bname,
                            src.span(floc),
                        )
            if u is None:
                continue
            for dim in reg.Quantity(1, u).dimensionality:
                dname = dim.strip("[]")
                if dname.endswith("_cycle") and dname != cycle_unit(block.clock):
                    diags.append(
                        Diagnostic(
                            "error",
                            "clock-domain-mismatch",
                            f"signal `{full}` counts `{dname}` but block `{bname}` runs on clock `{block.clock}`",
                            src.span(sloc + ("unit",)),
                            hint=f"use `{cycle_unit(block.clock)}`, or move the signal to a block on that clock",
                        )
                    )
            across = (
                kind.across if kind.across != "declared" else (sig.across_chips.value if sig.across_chips else "avg")
            )
            signals[full] = ResolvedSignal(
                full,
                bname,
                sig.kind,
                u,
                sig.unit,
                sig.description,
                sig.width,
                sig.scale,
                sizes,
                block.clock,
                across,
                src.span(sloc),
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
                modulus=_modulus(sig, u, reg, sloc, src, diags),
                reset_kind="decrease" if sig.reset_indicator_kind is ResetIndicatorKind.uptime else "change",
                scale_field=(sig.scale_field.field, float(sig.scale_field.base)) if sig.scale_field else None,
                slots=slot_idx,
                full_instances=n_full,
                sources=tuple(sorted(sig.sources.items())),
            )
            if sig.width == "unknown":
                signals[full] = dataclasses.replace(signals[full], width=64, wrap_width=None)
            if sig.emulator is not None:
                bound = resolve_binding(full, sig.kind, sig.emulator, sizes, signals[full].width, sloc, src, diags)
                signals[full] = dataclasses.replace(signals[full], emulator=bound)
    for full, s_ in signals.items():
        sloc = ("blocks", s_.block, "signals", full.split(".", 1)[1])
        if s_.reset_indicator is not None and s_.reset_indicator not in signals:
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-name",
                    f"signal `{full}`: reset indicator `{s_.reset_indicator}` is not a signal",
                    src.span(sloc + ("reset_indicator",)),
                    hint=did_you_mean(s_.reset_indicator, signals) or "name a signal of this generation",
                )
            )
        if s_.scale_field is not None:
            _check_scale_field(full, s_, fields, sloc + ("scale_field", "field"), src, diags)
        if s_.renamed_to is not None and s_.renamed_to not in signals:
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-name",
                    f"signal `{full}`: renamed_to `{s_.renamed_to}` is not a signal",
                    src.span(sloc + ("renamed_to",)),
                    hint=did_you_mean(s_.renamed_to, signals) or "name the signal that replaces it",
                )
            )
    _check_indicator_kinds(gf, signals, src, diags)
    record_fields: dict[str, ResolvedRecordField] = {}
    records: dict[str, dict] = {}
    for rname, rt in gf.records.items():
        rloc = ("records", rname)
        if rname in gf.blocks or rname in RESERVED:
            diags.append(
                Diagnostic(
                    "error",
                    "duplicate-name",
                    f"record type `{rname}` has the name of a block",
                    src.span(rloc + ("<key>",)),
                    hint="record fields and signals share the `<name>.<field>` namespace",
                )
            )
            continue
        records[rname] = {
            "description": rt.description,
            "derived_from": rt.derived.consecutive_gaps_of if rt.derived else None,
        }
        for fname, f in rt.fields.items():
            u = unit(f.unit, rloc + ("fields", fname, "unit"), f"record field `{rname}.{fname}`")
            if u is not None:
                record_fields[f"{rname}.{fname}"] = ResolvedRecordField(
                    f"{rname}.{fname}",
                    rname,
                    fname,
                    u,
                    f.unit,
                    f.description,
                    f.times,
                    src.span(rloc + ("fields", fname)),
                    f.measure,
                )
    for rname, info in records.items():
        src_field = info["derived_from"]
        if src_field is not None and (src_field not in record_fields or not record_fields[src_field].times):
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-name",
                    f"record type `{rname}` derives from `{src_field}`, which is not a `times` field",
                    src.span(("records", rname, "derived")),
                    hint="name a record field declared with `times: true`",
                )
            )
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
    )
    return gen, diags


def _check_signal(full: str, sig, sloc: tuple, src: YamlSource, diags: list[Diagnostic]) -> None:
    """Rules that depend on the kind of signal (each a located error)."""

    def err(code, msg, key, hint=""):
        diags.append(
            Diagnostic("error", code, f"signal `{full}`: {msg}", src.span(sloc + ((key,) if key else ())), hint=hint)
        )

    k = kinds.of(sig.kind)  # what the kind allows: ontology/kinds.py
    if sig.width == "unknown" and "width_unknown" not in k.options:
        err("counter-width", "`width: unknown` is only for counters", "width")
    if k.width == "required" and sig.width is None:
        err(
            "counter-width",
            f"a {k.name} needs a `width`",
            None,
            "give the register width in bits (e.g. width: 32); it decides where the value wraps",
        )
    if k.width == "forbidden" and sig.width is not None:
        err(
            "gauge-width",
            f"a {k.name} has no `width`: it is a level and never wraps",
            "width",
            "remove `width`, or make the signal a counter",
        )
    if sig.counted_by == "leader" and not k.counts:
        err("counted-by", f"`counted_by: leader` is for counters; a {k.name} is read on every chip", "counted_by")
    if "across_chips" not in k.options and sig.across_chips is not None:
        err(
            "counter-across-chips",
            "`across_chips` is for gauges; counters always sum across chips",
            "across_chips",
            "remove `across_chips`",
        )
    if sig.effective_width is not None:
        if "effective_width" not in k.options:
            err("effective-width", "`effective_width` is for counters", "effective_width")
        elif isinstance(sig.width, int) and sig.effective_width > sig.width:
            err(
                "effective-width",
                f"effective_width {sig.effective_width} exceeds the register width {sig.width}",
                "effective_width",
                "the wrap width cannot exceed the stored width",
            )
    stored = sig.width if isinstance(sig.width, int) else 64
    if sig.effective_width is not None and sig.width == "unknown":
        err("effective-width", "`effective_width` needs a known `width`", "effective_width")
    for v in sig.sentinel:
        if v < 0 or v >= (1 << stored):
            err("sentinel", f"sentinel {v} does not fit in {stored} bits", "sentinel")
    if sig.max_rate is not None and "max_rate" not in k.options:
        err("max-rate", "`max_rate` is for counters", "max_rate")
    if "fields" in k.options:
        if not sig.fields:
            err(
                "packed-fields",
                "a packed register needs `fields`",
                None,
                "give each bit range: fields: {state: {bits: [0, 3], description: ...}}",
            )
        used: list[tuple[int, int, str]] = []
        for fname, f in sig.fields.items():
            lo, hi = f.bits
            if lo > hi or lo < 0 or (isinstance(sig.width, int) and hi >= sig.width):
                err("packed-fields", f"field `{fname}` bits [{lo}, {hi}] do not fit in {sig.width} bits", "fields")
            for a, b, other in used:
                if lo <= b and a <= hi:
                    err("packed-fields", f"fields `{other}` and `{fname}` overlap", "fields")
            used.append((lo, hi, fname))
    elif sig.fields:
        err("packed-fields", "`fields` are for packed registers", "fields")
    if "buckets" in k.options:
        if not sig.buckets or any(b >= c for b, c in zip(sig.buckets, sig.buckets[1:])):
            err(
                "histogram-buckets",
                "a histogram needs ascending `buckets`",
                "buckets",
                "e.g. buckets: [64, 256, 1024, 4096]",
            )
    elif sig.buckets:
        err("histogram-buckets", "`buckets` are for histograms", "buckets")
    if sig.stability.value == "deprecated" and not sig.renamed_to:
        pass  # deprecated without a replacement is allowed; metrics using it get a warning
    if sig.renamed_to and sig.stability.value != "deprecated":
        err("stability", "`renamed_to` is only for deprecated signals", "renamed_to", "set `stability: deprecated`")
