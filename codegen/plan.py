"""What an evaluator must read, and how: the inputs of a compiled catalog and the window rule of each
register, in one place for every backend (Python, SQL).

``plan(graph)`` lists the signals and packed fields the metrics read (``inputs``) and the raw
registers behind them (``registers``: the inputs' signals, the packed registers of the fields, and the
reset indicators of the counters, transitively). ``layout(graph)`` places those registers in the flat
column layout of the generated Python evaluator (``codegen/runtime_stream.py``).
The rules themselves are those of ``metrics/windows.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph
from perfonto.ontology.generation import Generation, ResolvedSignal
from perfonto.ontology import kinds

U64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class Plan:
    """``inputs``: signal and field names in first-use order (metrics in topological order);
    ``registers``: signal names whose raw registers are needed, in generation order."""

    inputs: tuple[str, ...]
    registers: tuple[str, ...]


def plan(graph: MetricGraph) -> Plan:
    """The inputs the metrics read and the raw registers behind them (see the module docstring)."""
    gen = graph.generation
    inputs: list[str] = []
    seen: set[str] = set()
    for m in graph.metrics.values():
        found = [n.signal for n in ir.walk(m.ir) if isinstance(n, ir.Input)]  # in formula order
        for s in found:
            if s not in seen:
                seen.add(s)
                inputs.append(s)
    need = set()
    for s in inputs:
        need.add(gen.fields[s].register if s in gen.fields else s)
    todo = list(need)
    while todo:  # reset indicators and unit-field registers, transitively
        sig = gen.signals[todo.pop()]
        ind = sig.reset_indicator if kinds.of(sig).counts else None
        unit = gen.fields[sig.scale_field[0]].register if sig.scale_field is not None else None
        for extra in (ind, unit):
            if extra is not None and extra not in need:
                need.add(extra)
                todo.append(extra)
    return Plan(tuple(inputs), tuple(s for s in gen.signals if s in need))


def max_rate(gen: Generation, sig: ResolvedSignal) -> float | None:
    """The counter's maximum rate in its unit per second, as ``metrics.windows`` decides it (declared,
    or a cycle counter's clock plus ``CLOCK_HEADROOM``), or None."""
    from perfonto.ontology.rates import max_rate as rate

    return rate(gen, sig)


def register_class(sig: ResolvedSignal, gen: Generation | None = None) -> int:
    """Column class in the layout, from the signal's window rule (``ontology/kinds.py``): 0 counters
    with a known width and no max rate (half-range rule), 1 counters with a max rate (rule 4 with
    max_rate, and ambiguous wraps), 2 counters of unknown width, 3 histograms, 4 gauges, 5 packed.

    Raises:
        UnsupportedKind: a kind whose window rule the generated evaluator has no class for.
    """
    rule = kinds.of(sig).window
    if rule == "increase":
        if sig.wrap_width is None:
            return 2
        rate = max_rate(gen, sig) if gen is not None else sig.max_rate
        return 1 if rate is not None else 0
    cls = {"bucket_increase": 3, "mean": 4, "end": 5}.get(rule)
    if cls is None:
        raise kinds.UnsupportedKind("the generated evaluator (NumPy and numba kernel: codegen.plan)", sig.kind, rule)
    return cls


@dataclass
class Layout:
    """The flat register layout and its rule tables (see ``codegen/runtime_stream.py``): columns
    ``[0, k1)`` half-range counters, ``[k1, k2)`` max-rate counters, ``[k2, k3)`` counters of unknown
    width, ``[k3, k)`` histograms, ``[k, g)`` gauges, ``[g, n)`` packed registers."""

    inputs: tuple[str, ...]
    regs: list[tuple[str, int, int]] = field(default_factory=list)  # (signal, first column, stop)
    bounds: list[int] = field(default_factory=lambda: [0] * 6)  # k1, k2, k3, k, g, n
    mask: list[int] = field(default_factory=list)  # per counter/histogram column: 2^w - 1
    half: list[int] = field(default_factory=list)  # per half-range column: 2^(w-1)
    scale: list[float] = field(default_factory=list)  # per counter/histogram column
    rate: list[float] = field(default_factory=list)  # per max-rate column: max rate in unit/s
    wrap: list[float] = field(default_factory=list)  # per max-rate column: 2^w, the counter's range in raw units
    gscale: list[float] = field(default_factory=list)  # per gauge column: scale / 2
    hist: list[tuple[int, int, int]] = field(default_factory=list)  # (first, instances, buckets)
    reset: list[tuple[int, int, tuple[tuple[int, int], ...], bool]] = field(
        default_factory=list
    )  # indicator cols, reset cols, decrease-only (uptime)
    modc: list[tuple[int, int, int]] = field(
        default_factory=list
    )  # counters with a declared range: (first, stop, raw modulus M)
    uscale: list[tuple] = field(
        default_factory=list
    )  # unit fields: (first, stop, reg first, reg stop, lo, mask, field scale, base, rate, M)
    sent: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    field_src: list[int] = field(default_factory=list)  # per field column: its register column
    field_lo: list[int] = field(default_factory=list)
    field_mask: list[int] = field(default_factory=list)
    field_scale: list[float] = field(default_factory=list)
    field_sent: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    input_src: list[tuple[int, int, int, tuple[int, ...]]] = field(
        default_factory=list
    )  # (0 V / 1 F, first, stop, sizes)

    @property
    def n(self) -> int:
        return self.bounds[5]

    @property
    def nf(self) -> int:
        return len(self.field_src)


def _wrap_modulus(sig) -> int:
    """The value a register wraps at: its modulus, else 2^wrap_width, else 0 (it does not wrap)."""
    return sig.modulus if sig.modulus is not None else (1 << sig.wrap_width if sig.wrap_width is not None else 0)


def _place_register(lay: Layout, gen: Generation, sig, cls: int, a: int, n: int) -> None:
    """Columns ``a``..``n`` of register ``sig`` (class ``cls``): its mask and scale (classes 0-3), its
    modulus, the per-class constants (half range, max rate and wrap, histogram shape, gauge scale) and
    its sentinels."""
    M = _wrap_modulus(sig)
    if cls <= 3:
        lay.mask += [
            U64_MAX if sig.wrap_width is None or sig.modulus is not None else (1 << sig.wrap_width) - 1
        ] * sig.instances
        lay.scale += [float(sig.scale)] * sig.instances
    if sig.modulus is not None:
        lay.modc.append((a, n, int(sig.modulus)))
    if cls == 0:
        lay.half += [M // 2] * sig.instances
    elif cls == 1:
        lay.rate += [float(max_rate(gen, sig))] * sig.instances
        lay.wrap += [float(M)] * sig.instances
    elif cls == 3:
        nb = len(sig.buckets) + 1
        lay.hist.append((a, sig.instances // nb, nb))
    elif cls == 4:
        lay.gscale += [0.5 * sig.scale] * sig.instances
    if sig.sentinel:
        lay.sent.append((a, n, tuple(int(v) for v in sig.sentinel)))


def _unit_scale(gen: Generation, name: str, col: dict[str, tuple[int, int]]) -> tuple:
    """The unit-scale entry of a register whose unit a packed field scales: its columns, the field's
    register columns, bits and mask, the field's scale, the base, the max rate (0: none) and modulus."""
    sig = gen.signals[name]
    f = gen.fields[sig.scale_field[0]]
    ra, rb = col[f.register]
    rate = max_rate(gen, sig) if register_class(sig, gen) == 1 else None
    M = _wrap_modulus(sig)
    a, b = col[name]
    return (
        a,
        b,
        ra,
        rb,
        f.lo,
        (1 << (f.hi - f.lo + 1)) - 1,
        float(f.scale),
        float(sig.scale_field[1]),
        0.0 if rate is None else float(rate),
        float(M),
    )


def _resets_and_unit_scales(lay: Layout, gen: Generation, regs: list[str], col: dict[str, tuple[int, int]]) -> None:
    """The reset groups (the counters each reset indicator resets, by indicator and kind) and the
    unit-scale entries, in register order."""
    by_indicator: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    for name in regs:
        sig = gen.signals[name]
        if sig.reset_indicator is not None and register_class(sig, gen) <= 3 and sig.reset_indicator in col:
            by_indicator.setdefault((sig.reset_indicator, sig.reset_kind == "decrease"), []).append(col[name])
        if sig.scale_field is not None:
            lay.uscale.append(_unit_scale(gen, name, col))
    for (ind, dec), cols in by_indicator.items():
        lay.reset.append((col[ind][0], col[ind][1], tuple(cols), dec))


def _place_inputs(lay: Layout, gen: Generation, inputs, col: dict[str, tuple[int, int]]) -> None:
    """Where each input comes from: a register's columns, or a packed field extracted from its
    register's columns (bits, mask, scale, the register's sentinels)."""
    for name in inputs:
        if name in gen.fields:
            f = gen.fields[name]
            a, b = col[f.register]
            reg = gen.signals[f.register]
            first = lay.nf
            lay.field_src += list(range(a, b))
            lay.field_lo += [f.lo] * (b - a)
            lay.field_mask += [(1 << (f.hi - f.lo + 1)) - 1] * (b - a)
            lay.field_scale += [float(f.scale)] * (b - a)
            if reg.sentinel:
                lay.field_sent.append((first, lay.nf, tuple(int(v) for v in reg.sentinel)))
            lay.input_src.append((1, first, lay.nf, tuple(s for _, s in f.axes)))
        else:
            a, b = col[name]
            lay.input_src.append((0, a, b, tuple(s for _, s in gen.signals[name].axes)))


def layout(graph: MetricGraph) -> Layout:
    """The register layout of ``graph``'s plan: registers ordered by class (generation order within a
    class), each one's columns and constants, the reset groups, unit scales and the inputs' sources."""
    gen: Generation = graph.generation
    p = plan(graph)
    lay = Layout(p.inputs)
    regs = sorted(
        p.registers, key=lambda s: register_class(gen.signals[s], gen)
    )  # stable: generation order within a class
    col: dict[str, tuple[int, int]] = {}
    n = 0
    for name in regs:
        sig = gen.signals[name]
        a, n = n, n + sig.instances
        col[name] = (a, n)
        lay.regs.append((name, a, n))
        cls = register_class(sig, gen)
        for c in range(cls, 6):
            lay.bounds[c] = n
        _place_register(lay, gen, sig, cls, a, n)
    _resets_and_unit_scales(lay, gen, regs, col)
    _place_inputs(lay, gen, p.inputs, col)
    return lay
