"""Across-chips rules of the typer (``metrics.infer``): which metrics are clock rates (the mean over
chips at server level, never their sum), which are shares (a percent: device-seconds over device-seconds,
``is_share``) and which divide a per-chip time by a leader-counted count
(``group_rule``: at server level the groups' times, ``metrics.levels.group_times``).

Each function takes the ``Typer`` whose metric is being typed (its generation, registry, compiled
metrics and the leader flags of the metrics typed so far).
"""

from __future__ import annotations

from typing import Iterator

import pint

from perfonto.dsl import ast
from perfonto.ontology import kinds


def is_frequency(reg: pint.UnitRegistry, u: pint.Unit) -> bool:
    """Cycles of one clock domain per second, or a plain frequency (Hz)."""
    dims = dict(reg.Quantity(1, u).dimensionality)
    if dims == {"[time]": -1}:
        return True
    cyc = [k for k in dims if k.endswith("_cycle]")]
    return len(cyc) == 1 and dims == {cyc[0]: 1, "[time]": -1}


def is_share(reg: pint.UnitRegistry, u: pint.Unit) -> bool:
    """A percent: a share of something (of the time, of a capacity), never a total that adds across chips.

    A per-chip share whose formula sums across chips — a time each chip measures over the window's
    wall-clock time, ``busy_s / interval`` — would read C × its mean at server level (three chips half
    busy: 150 %). The typer divides such a metric by the chip count, so that it is device-seconds over
    device-seconds at every level (``Σ busy / (C × interval)``); a plain ratio (``[1]``, e.g. perf's
    "CPUs utilized") stays a total, as perf prints it."""
    return str(u) == "percent"


def is_time(reg: pint.UnitRegistry, u: pint.Unit) -> bool:
    """Seconds, or cycles of one clock domain: a time measured on each chip."""
    dims = dict(reg.Quantity(1, u).dimensionality)
    return dims == {"[time]": 1} or (
        len(dims) == 1 and next(iter(dims)).endswith("_cycle]") and next(iter(dims.values())) == 1
    )


def _names_read(gen, e: ast.Expr) -> Iterator[str]:
    """The names ``e`` reads, in walk order, an alias as the name it stands for."""
    return (gen.aliases.get(n.name, n.name) for n in ast.walk(e) if isinstance(n, ast.Name))


def reads_leader(typer, e: ast.Expr) -> bool:
    """Does ``e`` read a leader-counted signal (``counted_by: leader``), directly or through a metric?"""
    gen = typer.gen
    for name in _names_read(gen, e):
        s = gen.signals.get(name)
        if (s is not None and s.counted_by == "leader") or typer.leader_of.get(name, False):
            return True
    return False


def reads_chip_time(typer, e: ast.Expr) -> bool:
    """Does ``e`` read a counter that every chip counts (not only constants and leader counts)?"""
    gen = typer.gen
    for name in _names_read(gen, e):
        s = gen.signals.get(name)
        if s is not None and kinds.of(s).window == "increase" and s.counted_by == "chip":
            return True
        m = typer.compiled.get(name)
        if m is not None and any(gen.signals[x].counted_by == "chip" for x in m.signal_deps):
            return True
    return False


def group_check(typer, e: ast.Binary, a, b) -> None:
    """Mark the metric being typed ``group_rule`` when ``e`` (a ``*`` or ``/``, operands typed ``a``
    and ``b``) combines a time that every chip measures with a leader-counted count."""
    for t, te, other in ((a, e.left, e.right), (b, e.right, e.left)):
        if (
            t.node.degree >= 1
            and not t.literal
            and is_time(typer.reg, t.unit)
            and reads_chip_time(typer, te)
            and not reads_leader(typer, te)
            and reads_leader(typer, other)
        ):
            typer.group_rule = True


def chip_extreme(graph, name: str) -> str | None:
    """``max`` or ``min`` when a metric's value over several chips (a server, a rack, a pod) is an extreme
    of its chips' values rather than a ratio of totals: a declared ``rollup max|min``, or a metric that
    reads no other metric and whose every signal is a gauge combined across chips by ``max``
    (``across_chips: max``: the hottest chip's temperature) or a packed field (fields combine by max:
    ``ontology.kinds.FIELD``); else None. A formula that decreases with
    such a gauge (``100 - power.temperature``) would be the min over chips: the shipped catalog has none.
    For reports, so that such a column is not read as a ratio of totals."""
    m = graph.metrics.get(name)
    if m is None:
        return None
    if m.rollup in ("max", "min"):
        return m.rollup
    if m.metric_deps:  # built on other metrics: what it does with the gauge is not known here
        return None
    gen = graph.generation
    reads = [s for s in m.signal_deps if s in gen.signals] + field_deps(graph, name)  # fields combine by max
    rules = {kinds.across_rule(gen, s) for s in reads}
    levels = all(s in gen.fields or gen.signals[s].kind == "gauge" for s in reads)
    if reads and levels and len(rules) == 1 and next(iter(rules)) in ("max", "min"):
        return next(iter(rules))
    return None


def chip_mean(graph, name: str) -> bool:
    """Whether a metric's value over several chips is the *mean* of its chips' values: it reads no other
    metric and every signal it reads is a gauge combined across chips by ``avg`` (the batch in flight, the
    KV-cache tokens held). A fleet row of such a level is a per-chip (per-server, in lock step) figure beside
    rates that are the fleet's sums — 1,230 requests in flight beside 210 requests/s — and the reports say
    so, as they mark an extreme (``chip_extreme``)."""
    m = graph.metrics.get(name)
    if m is None or m.rollup or m.metric_deps:
        return False
    gen = graph.generation
    reads = [s for s in m.signal_deps if s in gen.signals]
    return bool(reads) and all(gen.signals[s].kind == "gauge" and kinds.across_rule(gen, s) == "avg" for s in reads)


def field_deps(graph, name: str) -> list[str]:
    """The packed fields metric ``name`` reads directly (``kvc.ctrl.mode``), sorted: a compiled metric's
    ``signal_deps`` hold signals only."""
    g = graph.graph
    return sorted(p for p in g.predecessors(name) if p in graph.generation.fields) if name in g else []
