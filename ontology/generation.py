"""The resolved generation that later stages read: flat, every name full, every unit parsed.

``GenerationFile`` (``ontology.model``) is the YAML as written; ``Generation`` is what the metric
compiler, the codegen and the emulator use. Resolution checks what the written model cannot check
alone: a block's clock domain exists, units parse, counters have a width and gauges do not, a
signal's cycle unit belongs to its block's clock domain.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pint

from .diagnostics import Diagnostic, Span, did_you_mean
from .model import GenerationFile, Scope, SignalKind
from .units import UnitError, conversion_factor, cycle_unit, parse_unit, registry_for
from .yaml_source import YamlSource


@dataclass(frozen=True)
class ResolvedSignal:
    """One signal of a resolved generation.

    ``axes`` are the block's instance axes as ``((name, size), ...)``; the signal's prepared values
    have shape ``(windows, chips, *sizes)``.
    """

    name: str  # full name, "hbm.read_bytes"
    block: str
    kind: SignalKind
    unit: pint.Unit
    unit_text: str
    description: str
    width: int | None
    scale: float
    axes: tuple[tuple[str, int], ...]
    clock: str
    across_chips: str  # "sum" for counters; the gauge's rule otherwise
    span: Span

    @property
    def instances(self) -> int:
        n = 1
        for _, size in self.axes:
            n *= size
        return n


@dataclass(frozen=True)
class ResolvedConstant:
    """A spec constant, referenced in metrics as ``spec.<name>`` (``name`` here includes ``spec.``)."""

    name: str
    value: float
    unit: pint.Unit
    unit_text: str
    provenance: str
    source: str
    description: str
    scope: Scope
    span: Span


@dataclass(frozen=True)
class Generation:
    """A resolved generation: blocks, flat signal table, spec constants, and its unit registry."""

    name: str
    description: str
    registry: pint.UnitRegistry
    blocks: dict[str, dict]  # name -> {"clock", "axes", "description"}
    signals: dict[str, ResolvedSignal]
    spec: dict[str, ResolvedConstant]
    source_file: str
    content_hash: str
    clock_domains: dict[str, ResolvedConstant] = field(default_factory=dict)

    def signal(self, name: str) -> ResolvedSignal:
        return self.signals[name]


def resolve(gf: GenerationFile, src: YamlSource) -> tuple[Generation | None, list[Diagnostic]]:
    """Resolve a validated ``GenerationFile``; returns the generation (None on errors) and diagnostics."""
    diags: list[Diagnostic] = []
    domains = tuple(sorted(gf.clock_domains))
    reg = registry_for(domains)

    def unit(text: str, loc: tuple, what: str) -> pint.Unit | None:
        try:
            return parse_unit(reg, text)
        except UnitError as exc:
            diags.append(Diagnostic("error", "unknown-unit", f"{what}: {exc}", src.span(loc),
                                    hint="use a unit of ontology/units.txt (B, GB/s, FLOP, token, W, J, %, <domain>_cycle, ...)"))
            return None

    spec: dict[str, ResolvedConstant] = {}
    clocks: dict[str, ResolvedConstant] = {}
    for dname, dom in gf.clock_domains.items():
        loc = ("clock_domains", dname, "frequency")
        u = unit(dom.frequency.unit, loc + ("unit",), f"clock domain `{dname}`")
        if u is None:
            continue
        try:
            hz = dom.frequency.value * conversion_factor(reg, u, reg.hertz)
        except UnitError as exc:
            diags.append(Diagnostic("error", "unit-mismatch", f"clock domain `{dname}` frequency: {exc}", src.span(loc + ("unit",)),
                                    hint="give the frequency in Hz, MHz or GHz"))
            continue
        cu = reg.parse_units(f"{cycle_unit(dname)}/s")
        c = ResolvedConstant(f"spec.clock.{dname}", hz, cu, f"{cycle_unit(dname)}/s", dom.frequency.provenance.value,
                             dom.frequency.source, dom.description or f"{dname} clock frequency", Scope.chip, src.span(loc))
        clocks[dname] = c
        spec[c.name] = c
    for cname, const in gf.spec.items():
        loc = ("spec", cname)
        full = f"spec.{cname}"
        if full in spec:
            diags.append(Diagnostic("error", "duplicate-name", f"spec constant `{full}` is also defined by a clock domain",
                                    src.span(loc + ("<key>",)), hint="clock frequencies are spec.clock.<domain>; rename this constant"))
            continue
        u = unit(const.unit, loc + ("unit",), f"spec constant `{full}`")
        if u is None:
            continue
        spec[full] = ResolvedConstant(full, const.value, u, const.unit, const.provenance.value, const.source,
                                      const.description, const.scope, src.span(loc))

    blocks: dict[str, dict] = {}
    signals: dict[str, ResolvedSignal] = {}
    for bname, block in gf.blocks.items():
        bloc = ("blocks", bname)
        if block.clock not in gf.clock_domains:
            diags.append(Diagnostic("error", "unknown-clock", f"block `{bname}` uses clock domain `{block.clock}`, which is not declared",
                                    src.span(bloc + ("clock",)), hint=did_you_mean(block.clock, gf.clock_domains) or "declare it under clock_domains"))
        axes = tuple(block.instances.items())
        blocks[bname] = {"clock": block.clock, "axes": axes, "description": block.description}
        for sname, sig in block.signals.items():
            sloc = bloc + ("signals", sname)
            full = f"{bname}.{sname}"
            u = unit(sig.unit, sloc + ("unit",), f"signal `{full}`")
            if sig.kind is SignalKind.counter and sig.width is None:
                diags.append(Diagnostic("error", "counter-width", f"counter `{full}` has no `width`", src.span(sloc),
                                        hint="give the register width in bits (e.g. width: 32); it decides where the counter wraps"))
            if sig.kind is SignalKind.gauge and sig.width is not None:
                diags.append(Diagnostic("error", "gauge-width", f"gauge `{full}` has a `width`; gauges are levels and never wrap",
                                        src.span(sloc + ("width",)), hint="remove `width`, or make the signal a counter"))
            if sig.kind is SignalKind.counter and sig.across_chips is not None:
                diags.append(Diagnostic("error", "counter-across-chips", f"counter `{full}` has `across_chips`; counters always sum across chips",
                                        src.span(sloc + ("across_chips",)), hint="remove `across_chips`"))
            if u is None:
                continue
            for dim in reg.Quantity(1, u).dimensionality:
                dname = dim.strip("[]")
                if dname.endswith("_cycle") and dname != cycle_unit(block.clock):
                    diags.append(Diagnostic("error", "clock-domain-mismatch",
                                            f"signal `{full}` counts `{dname}` but block `{bname}` runs on clock `{block.clock}`",
                                            src.span(sloc + ("unit",)), hint=f"use `{cycle_unit(block.clock)}`, or move the signal to a block on that clock"))
            across = "sum" if sig.kind is SignalKind.counter else (sig.across_chips.value if sig.across_chips else "avg")
            signals[full] = ResolvedSignal(full, bname, sig.kind, u, sig.unit, sig.description, sig.width, sig.scale,
                                           axes, block.clock, across, src.span(sloc))
    if any(d.severity == "error" for d in diags):
        return None, diags
    digest = hashlib.sha256((src.text or "").encode()).hexdigest()[:16]
    gen = Generation(gf.generation, gf.description, reg, blocks, signals, spec, src.path, digest, clocks)
    return gen, diags
