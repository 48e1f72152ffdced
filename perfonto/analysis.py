"""What the metrics say: the top-down split, the dominant bottleneck, thresholds crossed, bounds broken.

Top-down level 1 is the set of metrics in group ``topdown`` whose unit is a share (percent or ratio)
and that have no parent; their children (``parent`` clauses) are the drill-down. The dominant
bottleneck is the level-1 node with the largest share of cycles (Yasin, ISPASS 2014).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from metrics.compiler import MetricGraph

from .evaluate import Evaluation


@dataclass
class BoundViolation:
    metric: str
    chip: int
    window: int
    value: float
    bounds: tuple[float, float]


@dataclass
class Analysis:
    topdown: dict[str, float]
    bottleneck: str | None
    bottleneck_label: str
    children: dict[str, float]
    thresholds: list[tuple[str, float, str]]
    violations: list[BoundViolation] = field(default_factory=list)
    violation_counts: dict[str, int] = field(default_factory=dict)
    null_windows: dict[str, dict[str, int]] = field(default_factory=dict)


def topdown_level1(graph: MetricGraph) -> list[str]:
    return [n for n, m in graph.metrics.items()
            if "topdown" in m.groups and m.parent is None and m.unit_text in ("percent", "%", "ratio", "1")]


def _crossed(op: str, value: float, limit: float) -> bool:
    return {"<": value < limit, "<=": value <= limit, ">": value > limit, ">=": value >= limit,
            "==": value == limit, "!=": value != limit}[op]


def analyse(graph: MetricGraph, ev: Evaluation, max_listed: int = 20) -> Analysis:
    level1 = topdown_level1(graph)
    td = {n: float(ev.server[n]) for n in level1 if np.ndim(ev.server[n]) == 0}
    finite = {k: v for k, v in td.items() if np.isfinite(v)}
    bottleneck = max(finite, key=finite.get) if finite else None
    label = ""
    children: dict[str, float] = {}
    if bottleneck:
        thr = graph.metrics[bottleneck].threshold
        label = thr[2] if thr else bottleneck
        children = {n: float(ev.server[n]) for n, m in graph.metrics.items()
                    if m.parent == bottleneck and np.ndim(ev.server[n]) == 0}
    crossed = []
    for name, m in graph.metrics.items():
        if m.threshold and np.ndim(ev.server[name]) == 0:
            v = float(ev.server[name])
            op, limit, msg = m.threshold
            if np.isfinite(v) and _crossed(op, v, limit):
                crossed.append((name, v, msg))
    violations: list[BoundViolation] = []
    counts: dict[str, int] = {}
    for name, m in graph.metrics.items():
        v = ev.window[name]
        if not m.bounds:
            continue
        lo, hi = m.bounds
        tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
        with np.errstate(invalid="ignore"):
            bad = (v < lo - tol) | (v > hi + tol)
        bad = bad.reshape(bad.shape[0], bad.shape[1], -1).any(axis=2)
        if bad.any():
            counts[name] = int(bad.sum())
            for wi, ci in zip(*np.nonzero(bad)):
                if len(violations) >= max_listed:
                    break
                val = v[wi, ci]
                violations.append(BoundViolation(name, int(ev.chips[ci]), int(wi), float(np.nanmax(val) if np.ndim(val) else val), m.bounds))
    return Analysis(td, bottleneck, label, children, crossed, violations, counts, ev.nulls)
