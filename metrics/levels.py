"""Evaluate metrics at the run and server levels, and say why window values are null.

A run-level or server-level value is computed from summed base quantities (``metrics.windows``),
over the windows where every signal the metric reads (directly or through other metrics) is valid:
a reset on chip 3 removes that window from chip 3's run-level totals *and* its interval, instead of
silently undercounting. The server level uses the windows valid on every chip. Metrics that read
the same set of affected signals share one evaluation, so a clean run costs one call per level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import networkx as nx
import numpy as np

from perfonto.ontology import kinds

from .bridge import atomic, server_bad, spans, totals
from .graph import MetricGraph
from .windows import REASONS, VALID, Windows, run_level, server_level

EvalFn = Callable[[dict, np.ndarray, float], dict]


@dataclass
class Levels:
    """``per_chip[m]``: (C, …); ``server[m]``: (…); ``coverage[m]``: fraction of run time included at
    server level (1.0 when no window was dropped)."""

    per_chip: dict[str, np.ndarray]
    server: dict[str, np.ndarray]
    coverage: dict[str, float]
    quiet: "LeaderCounts | None" = None  # chips on which a leader-counted amount never advanced (``leader_counts``)


def signal_deps(graph: MetricGraph) -> dict[str, set[str]]:
    """Every metric's signals and packed fields, read directly or through other metrics."""
    out: dict[str, set[str]] = {}
    inputs = set(graph.generation.signals) | set(graph.generation.fields)
    for name in graph.metrics:
        out[name] = {n for n in nx.ancestors(graph.graph, name) if n in inputs}
    return out


def _invalid(w: Windows, signals, reads=None) -> np.ndarray:
    """(W, C) True where any of ``signals`` is null in the window (any instance) — after the bridged missing
    samples of ``w.bridged`` are made valid; a bridged run of any of ``reads`` (default ``signals``) that a
    null window cuts is left out whole (``metrics.bridge.atomic``)."""
    tv = totals(w)
    bad = np.zeros(w.interval.shape, dtype=bool)
    for s in signals:
        r = tv.null.get(s)
        if r is not None and r.any():
            bad |= (r != VALID).reshape(r.shape[0], r.shape[1], -1).any(axis=2)
    return atomic(bad, spans(w, signals if reads is None else reads))


def evaluate_levels(graph: MetricGraph, w: Windows, evaluate: EvalFn, window_values: dict | None = None) -> Levels:
    """Run- and server-level values of every metric with ``evaluate(inputs, interval, chips)``.

    The run totals read the windows of a missing sample that the running totals around it bridge
    (``w.bridged``, ``metrics.bridge.totals``): they lose no counts; the windows stay null.

    A metric that declares ``rollup max`` (or ``min``) cannot be re-derived from sums (the hottest
    window is not the temperature of the summed run): its run value is the extreme of its window
    values (``window_values``, evaluated here when not given), its server value the extreme over chips.
    """
    gen = graph.generation
    deps = signal_deps(graph)
    window_level, w = w, totals(w)  # a missing sample bridged by the running totals around it counts (metrics.bridge)
    dirty = {s for s, r in w.null.items() if r.any()}
    groups: dict[tuple, list[str]] = {}
    for name in graph.metrics:
        groups.setdefault(tuple(sorted(deps[name] & dirty)), []).append(name)
    per_chip: dict[str, np.ndarray] = {}
    server: dict[str, np.ndarray] = {}
    coverage: dict[str, float] = {}
    total_time = float(w.interval.sum(axis=0).mean()) if w.interval.size else 0.0
    for key, names in groups.items():
        reads = set().union(*[deps[n] for n in names])
        bad = _invalid(window_level, key, reads)
        run = run_level(w, gen, ~bad if key else None)
        out = evaluate(run.values, run.interval, run.chips)
        common = ~server_bad(bad, spans(window_level, reads)) if key else None
        run_all = run_level(w, gen, common)
        srv = server_level(run_all, gen)
        out_srv = evaluate(srv.values, srv.interval, srv.chips)
        if any(graph.metrics[n].group_rule for n in names):
            out_grp = evaluate(group_times(srv, gen, run_all), srv.interval, srv.chips)
            out_srv = {n: (out_grp[n] if graph.metrics[n].group_rule else v) for n, v in out_srv.items()}
        kept = float(srv.interval[0, 0]) if srv.interval.size else 0.0
        empty_chip = run.interval[0] <= 0  # no valid window on that chip: nothing to report, not 0
        for n in names:
            v = np.array(out[n][0], dtype=np.float64)
            v[empty_chip] = np.nan
            per_chip[n] = v
            server[n] = (
                np.full_like(np.asarray(out_srv[n][0, 0], dtype=np.float64), np.nan) if kept <= 0 else out_srv[n][0, 0]
            )
            coverage[n] = kept / total_time if total_time > 0 else 0.0
    declared = [n for n, m in graph.metrics.items() if m.rollup]
    if declared:
        if window_values is None:
            window_values = evaluate(window_level.values, window_level.interval, window_level.chips)
        for n in declared:
            fn = np.nanmax if graph.metrics[n].rollup == "max" else np.nanmin
            v = window_values[n]
            with np.errstate(all="ignore"):
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # all-null columns give null
                    per_chip[n] = fn(v, axis=0)
                    server[n] = fn(per_chip[n], axis=0)
            coverage[n] = 1.0
    whole = run_level(w, gen)  # every window: whether a chip counts tokens at all, not this class's valid ones
    return Levels(per_chip, server, coverage, leader_counts(graph, {n: v[0] for n, v in whole.values.items()}, deps))


@dataclass(frozen=True)
class LeaderCounts:
    """The metrics that read an amount only a group's leader chip counts (``kinds.leader_counted``: tokens,
    steps, requests) and the chip columns on which no such amount advanced over the run (``leader_counts``)."""

    metrics: tuple[str, ...]
    quiet: tuple[int, ...]


def leader_counts(graph: MetricGraph, chip_signals: dict, deps: dict | None = None) -> LeaderCounts | None:
    """Which per-chip values of leader-counted metrics read 0 because the chip counts none of those amounts:
    a chip that is not its group's leader (its group's tokens are counted once, by the leader) — or a leader
    that did nothing; the capture cannot tell which, so the values stay (an idle group's 0 is true) and the
    report says so (``analysis.evaluate.leader_note``). ``chip_signals``: per-chip run-level signal values
    (C, …) over every window (``run_level`` unmasked: a null window elsewhere must not hide a leader's
    count). None where no leader-counted amount is read, or where every chip (or none) advanced."""
    gen = graph.generation
    lead = leaders(gen, {n: v for n, v in chip_signals.items() if kinds.leader_counted(gen, n)})
    if lead is None or lead.all() or not lead.any():
        return None
    deps = signal_deps(graph) if deps is None else deps
    names = tuple(sorted(n for n in graph.metrics if any(kinds.leader_counted(gen, s) for s in deps.get(n, ()))))
    return LeaderCounts(names, tuple(int(i) for i in np.flatnonzero(~lead))) if names else None


def leaders(gen, values: dict[str, np.ndarray]) -> np.ndarray | None:
    """(C,) bool: the chips on which a leader-counted counter (``counted_by: leader``) advanced,
    from per-chip values (C, …) summed over a run — one leader per group. None when ``values`` holds
    no leader-counted counter (then every chip is its own group)."""
    lead = None
    for name, v in values.items():
        if not kinds.leader_counted(gen, name):
            continue
        v = np.asarray(v, dtype=np.float64)
        adv = np.nan_to_num(v.reshape(v.shape[0], -1), nan=0.0).sum(axis=1) > 0
        lead = adv if lead is None else lead | adv
    return lead


def leader_chips(gen, run: Windows) -> int:
    """How many groups a run has: the chips on which a leader-counted counter advanced over the run
    (``leaders``). At least 1; the number of chips when the dump holds no leader-counted counter."""
    C = run.interval.shape[1]
    per_chip = {
        n: np.asarray(v).reshape(v.shape[0], C, -1).sum(axis=0)
        for n, v in run.values.items()
        if kinds.leader_counted(gen, n)
    }
    lead = leaders(gen, per_chip)
    return C if lead is None else max(int(lead.sum()), 1)


def group_scale(gen, values: dict[str, np.ndarray], groups: np.ndarray, n_groups: int) -> np.ndarray:
    """(G,) groups / chips of each rollup node, from per-chip run values (C, …) and each chip's node
    index ``groups`` (C,): the factor ``group_inputs`` applies. 1 where no leader-counted counter is
    in ``values`` (every chip is its own group)."""
    n = np.bincount(groups, minlength=n_groups).astype(np.float64)
    lead = leaders(gen, values)
    if lead is None:
        return np.ones(n_groups)
    k = np.bincount(groups, weights=lead.astype(np.float64), minlength=n_groups)
    return np.maximum(k, 1.0) / np.maximum(n, 1.0)


def group_inputs(gen, values: dict[str, np.ndarray], scale) -> dict:
    """Inputs for ``group_rule`` metrics: every time that each chip measures (a counter in seconds or
    in cycles, counted by every chip), summed over chips, becomes the groups' time — scaled by groups
    / chips (``scale``: a number, or (G,) per node row of ``values`` (G, …)), since the chips of a group
    run in lockstep and a group's time is its chips' mean. Other inputs are unchanged."""
    out = dict(values)
    sc = np.asarray(scale, dtype=np.float64)
    for name, v in values.items():
        if is_chip_time(gen, name):
            out[name] = v * (sc.reshape((-1,) + (1,) * (np.ndim(v) - 1)) if sc.ndim else sc)
    return out


def is_chip_time(gen, name: str) -> bool:
    """Is ``name`` a time that each chip measures: a counter in seconds or in cycles of one clock
    domain, counted by every chip (``counted_by: chip``)?"""
    sig = gen.signals.get(name)
    if sig is None or kinds.of(sig).window != "increase" or sig.counted_by != "chip":
        return False
    reg = gen.registry
    dims = dict(reg.Quantity(1, sig.unit).dimensionality)
    return dims == dict(reg.Quantity(1, reg.second).dimensionality) or (
        len(dims) == 1 and next(iter(dims)).endswith("_cycle]") and next(iter(dims.values())) == 1
    )


def group_times(srv: Windows, gen, run: Windows) -> dict:
    """Server inputs for ``group_rule`` metrics (``group_inputs`` with the run's groups / chips)."""
    C = run.interval.shape[1]
    return group_inputs(gen, srv.values, leader_chips(gen, run) / C if C else 1.0)


def null_reasons(graph: MetricGraph, w: Windows, values: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """For each metric with null windows: {reason: number of (window, chip) values}. A null whose
    inputs are all valid comes from the formula itself (division by zero, an undefined power)."""
    deps = signal_deps(graph)
    out: dict[str, dict[str, int]] = {}
    for name, v in values.items():
        nullmask = np.isnan(v).reshape(v.shape[0], v.shape[1], -1).any(axis=2)
        if not nullmask.any():
            continue
        counts: dict[str, int] = {}
        remaining = nullmask.copy()
        for code, label in REASONS.items():
            hit = np.zeros_like(remaining)
            for s in deps.get(name, ()):
                r = w.null.get(s)
                if r is not None:
                    hit |= (r == code).reshape(r.shape[0], r.shape[1], -1).any(axis=2)
            hit &= remaining
            if hit.any():
                counts[label] = int(hit.sum())
                remaining &= ~hit
        if remaining.any():
            counts["undefined (division by zero)"] = int(remaining.sum())
        out[name] = counts
    return out
