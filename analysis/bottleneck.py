"""What the metrics say: the top-down split, the dominant bottleneck, thresholds crossed, bounds broken.

Top-down level 1 is the set of metrics in group ``topdown`` whose unit is a share (percent or ratio)
and that have no parent; their children (``parent`` clauses) are the drill-down. The dominant
bottleneck is the level-1 node with the largest share of cycles (Yasin, ISPASS 2014) that is not useful work
(group ``useful``: TMA's Retiring, as the importers mark it).

A threshold is crossed when the metric crosses its own bound — and, for one declared ``threshold … when
parent:``, when each ancestor on its ``parent`` chain that declares a threshold crosses its own too: the
top-down method drills into a node only below a parent past its threshold (Intel's TMA metrics: "the
node's parent needs to pass the threshold"; perf's ``MetricThreshold`` repeats the parents' conditions),
which the importers write so. A threshold without ``when parent`` stands alone: the shipped library's
straggler wait (5 %) and utilisations (HBM bandwidth past 80 %) are findings whatever their parent's share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfonto.metrics.graph import MetricGraph

from .evaluate import Evaluation, chip_names


@dataclass
class BoundViolation:
    metric: str
    chip: int
    window: int
    value: float
    bounds: tuple[float, float]
    host: str | None = None  # the chip's host, when the capture names hosts


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
    tree_violations: list[str] = field(default_factory=list)
    drilldown: list[tuple[str, float]] = field(
        default_factory=list
    )  # path from level 1 to the deepest node above threshold


def topdown_level1(graph: MetricGraph) -> list[str]:
    return [
        n
        for n, m in graph.metrics.items()
        if "topdown" in m.groups and m.parent is None and m.unit_text in ("percent", "%", "ratio", "1")
    ]


def stall_shares(graph: MetricGraph, topdown: dict[str, float]) -> dict[str, float]:
    """The level-1 shares the dominant bottleneck is chosen among: the finite ones, less useful work — a node of
    group ``useful``, as an imported TMA tree marks Retiring (``interop.perf_topdown``): slots that retired work
    are not a stall, so a run retiring 60 % of its slots is bound by its largest stall."""
    return {k: v for k, v in topdown.items() if np.isfinite(v) and "useful" not in graph.metrics[k].groups}


def _crossed(op: str, value: float, limit: float) -> bool:
    return {
        "<": value < limit,
        "<=": value <= limit,
        ">": value > limit,
        ">=": value >= limit,
        "==": value == limit,
        "!=": value != limit,
    }[op]


def _past_where(graph: MetricGraph, name: str, values: dict, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(past, known) of ``name`` against its own threshold, per element of ``shape``: known where its value
    there is finite (a value of another shape, or none, is known nowhere)."""
    v, (op, limit, _) = values.get(name), graph.metrics[name].threshold
    if v is None or np.shape(v) != shape:
        return np.zeros(shape, bool), np.zeros(shape, bool)
    v = np.asarray(v, dtype=np.float64)
    known = np.isfinite(v)
    return known & _crossed(op, np.where(known, v, 0.0), limit), known


def parent_gate(
    graph: MetricGraph, name: str, values: dict, shape: tuple = (), among=True
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The gate of a ``threshold … when parent`` on ``name`` (module docstring), per element of ``shape``
    (``()`` for server-level scalars; ``(chips,)`` for per-chip values): (shut: some ancestor on the
    ``parent`` chain that declares a threshold is under it there, unknown: none is under it but one has no
    value there, the ancestors with no value where the gate is not shut, of the elements ``among`` — a
    mask, every element by default). One ancestor that is not evaluated (left out of ``--metrics``) ends
    the walk: what lies above it is not known either."""
    shut, unknown = np.zeros(shape, bool), np.zeros(shape, bool)
    missing: list[tuple[str, np.ndarray]] = []
    seen = {name}
    p = graph.metrics[name].parent
    while p is not None and p not in seen:
        if p not in graph.metrics:
            missing.append((p, np.ones(shape, bool)))
            break
        seen.add(p)
        if graph.metrics[p].threshold is not None:
            past, known = _past_where(graph, p, values, shape)
            shut |= known & ~past
            if not known.all():
                missing.append((p, ~known))
        p = graph.metrics[p].parent
    for _, where in missing:
        unknown |= where
    unknown &= ~shut
    return shut, unknown, [p for p, where in missing if (where & ~shut & among).any()]


def crossed_where(
    graph: MetricGraph, name: str, values: dict, shape: tuple = ()
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Whether ``name``'s threshold is crossed, per element of ``shape`` (``parent_gate``'s): (crossed: past
    its own bound, and for a ``when parent`` threshold under no ancestor past its own with every one known,
    unchecked: past its own bound and under no ancestor below its own, but with an ancestor's value unknown,
    the ancestors unknown there). The one rule of ``thresholds_crossed`` (server level) and the fleet's
    share of chips past a threshold (per chip)."""
    past, _ = _past_where(graph, name, values, shape)
    if not graph.metrics[name].threshold_when_parent:
        return past, np.zeros(shape, bool), []
    shut, unknown, names = parent_gate(graph, name, values, shape, among=past)
    return past & ~shut & ~unknown, past & unknown, names


def thresholds_crossed(graph: MetricGraph, values: dict) -> list[tuple[str, float, str]]:
    """(metric, value, message) of each metric past its threshold at the level of ``values`` (metric →
    value) — for a ``when parent`` threshold, where every ancestor on its ``parent`` chain that declares a
    threshold is past its own too (module docstring, ``crossed_where``): an imported fetch latency at 12 %
    > 10 % under a frontend bound of 14 % < 15 % is not crossed. An ancestor without a value cannot be
    checked: the metric is listed, and its message says so."""
    out = []
    for name, m in graph.metrics.items():
        if not m.threshold:
            continue
        crossed, unchecked, unknown = crossed_where(graph, name, values)
        if not (crossed or unchecked):
            continue
        msg = m.threshold[2]
        if unknown:
            msg += f" (the threshold of {', '.join(unknown)} above it is not checked: no value)"
        out.append((name, float(values[name]), msg))
    return out


def bottleneck_label(graph: MetricGraph, name: str, values: dict) -> str:
    """How the report names the dominant bottleneck ``name``: its threshold's message when it is past its
    threshold, the message marked as under it when it is not (an imported message such as
    ``Frontend_Bound(%) > 15`` would read as true at 14 %), else the metric's name."""
    thr = graph.metrics[name].threshold
    if thr is None:
        return name
    past, known = _past_where(graph, name, values, ())
    if bool(known) and not bool(past):  # under it, with a value (no value: the message as it is)
        unit = " %" if graph.metrics[name].unit_text in ("percent", "%") else ""
        return f"{thr[2]} (under its threshold {thr[0]} {thr[1]:g}{unit})"
    return thr[2]


def analyse(graph: MetricGraph, ev: Evaluation, max_listed: int = 20, checks=None) -> Analysis:
    """Top-down split, bottleneck, thresholds (server level) and the window checks (bounds, top-down
    sums) — over ``ev.window``, or taken from ``checks`` (``analysis.checks.WindowChecks``) when the
    windows were evaluated in pieces."""
    level1 = topdown_level1(graph)
    td = {n: float(ev.server[n]) for n in level1 if np.ndim(ev.server[n]) == 0}
    finite = stall_shares(graph, td)
    bottleneck = max(finite, key=finite.get) if finite else None
    label = ""
    children: dict[str, float] = {}
    if bottleneck:
        label = bottleneck_label(graph, bottleneck, ev.server)
        children = {
            n: float(ev.server[n])
            for n, m in graph.metrics.items()
            if m.parent == bottleneck and np.ndim(ev.server[n]) == 0
        }
    crossed = thresholds_crossed(graph, ev.server)
    violations: list[BoundViolation] = []
    counts: dict[str, int] = {}
    if checks is not None:
        path = drill_down(graph, ev.server)
        return Analysis(
            td,
            bottleneck,
            label,
            children,
            crossed,
            checks.violations(),
            dict(checks.counts),
            ev.nulls,
            checks.tree_messages(),
            path,
        )
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
                violations.append(
                    BoundViolation(
                        name,
                        int(ev.chips[ci]),
                        int(wi),
                        float(np.nanmax(val) if np.ndim(val) else val),
                        m.bounds,
                        None if getattr(ev, "hosts", None) is None else str(ev.hosts[ci]),
                    )
                )
    tree = check_tree(graph, ev)
    path = drill_down(graph, ev.server)
    return Analysis(td, bottleneck, label, children, crossed, violations, counts, ev.nulls, tree, path)


def tree_children(graph: MetricGraph) -> dict[str | None, list[str]]:
    """The top-down tree: metrics of group ``topdown`` by parent (None for level 1)."""
    out: dict[str | None, list[str]] = {}
    for n, m in graph.metrics.items():
        if "topdown" in m.groups and m.unit_text in ("percent", "%", "ratio", "1"):
            out.setdefault(m.parent, []).append(n)
    return out


def _as_fraction(graph: MetricGraph, name: str, v):
    return v / 100.0 if graph.metrics[name].unit_text in ("percent", "%") else v


def check_tree(graph: MetricGraph, ev: Evaluation, tol: float = 1e-6) -> list[str]:
    """Siblings must add up: level-1 shares to 1 in every window, and the children of a node to the
    node (Yasin's top-down hierarchy). Returns one message per rule broken, with its worst window."""
    msgs = []
    kids = tree_children(graph)
    for parent, names in kids.items():
        total = sum(_as_fraction(graph, n, ev.window[n]) for n in names)
        want = 1.0 if parent is None else _as_fraction(graph, parent, ev.window[parent])
        err = np.abs(total - want)
        bad = np.nan_to_num(err, nan=0.0) > tol
        if bad.any():
            w, c = np.unravel_index(np.argmax(np.nan_to_num(err, nan=0.0)), err.shape)
            what = "level-1 top-down shares" if parent is None else f"children of {parent}"
            msgs.append(
                f"{what} ({', '.join(names)}) do not add up in {int(bad.sum())} window(s); "
                f"worst: window {w}, chip {chip_names(ev)[c]}, off by {float(err[w, c]):.3g}"
            )
    return msgs


def drill_down(graph: MetricGraph, values: dict) -> list[tuple[str, float]]:
    """From level 1, follow the largest node above its threshold down the top-down tree; the path ends
    at the deepest node above its threshold (each with its share of time, as a fraction)."""
    kids = tree_children(graph)
    path: list[tuple[str, float]] = []
    level = kids.get(None, [])
    while level:
        above = []
        for n in level:
            v = float(values[n]) if np.ndim(values[n]) == 0 else float("nan")
            thr = graph.metrics[n].threshold
            if np.isfinite(v) and thr is not None and _crossed(thr[0], v, thr[1]):
                above.append((v, n))
        if not above:
            break
        v, n = max(above)
        path.append((n, _as_fraction(graph, n, v)))
        level = kids.get(n, [])
    return path
