"""Reference interpreter: evaluates a compiled ``MetricGraph`` over prepared ``Windows`` by walking
the typed IR. It is the semantics that generated evaluators must reproduce (differential tests).

Null rules: a null value is NaN inside arrays and leaves the API as null. Division by zero gives null
(never inf or NaN from the division itself); null passes unchanged through arithmetic, conversions and
rollups; a comparison with a null operand is null, and so is an ``if`` with a null condition.
"""

from __future__ import annotations

import numpy as np

from . import ir
from .compiler import MetricGraph
from .windows import Windows


def evaluate(graph: MetricGraph, w: Windows, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Evaluate metrics (default: all) over ``w``.

    Returns ``{metric: float64 array of shape (W, C, *axis sizes)}`` in each metric's declared unit,
    NaN meaning null.
    """
    want = set(names) if names is not None else None
    out: dict[str, np.ndarray] = {}
    base = w.interval.shape
    for name, m in graph.metrics.items():
        if want is not None and name not in want and not _needed(graph, name, want):
            continue
        with np.errstate(all="ignore"):
            v = _eval(m.ir, w, out)
            v = _lift(np.asarray(v, dtype=np.float64), _axes_of(m.ir), m.axes, base)
            v = np.where(np.isinf(v), np.nan, v)
        shape = base + tuple(s for _, s in m.axes)
        out[name] = np.broadcast_to(v, shape).copy()
    if want is not None:
        out = {k: v for k, v in out.items() if k in want}
    return out


def _needed(graph: MetricGraph, name: str, want: set[str]) -> bool:
    import networkx as nx

    return any(t in want for t in nx.descendants(graph.graph, name))


def _axes_of(n: ir.Node) -> ir.Axes:
    return n.axes


def _lift(v, src_axes: ir.Axes, dst_axes: ir.Axes, base: tuple) -> np.ndarray:
    """Give a value with no instance axes trailing unit dimensions so it broadcasts over ``dst_axes``."""
    v = np.asarray(v, dtype=np.float64)
    if src_axes == dst_axes or not dst_axes:
        return v
    if v.ndim == 0:
        return v
    return v.reshape(v.shape + (1,) * len(dst_axes))


def _eval(n: ir.Node, w: Windows, done: dict[str, np.ndarray]):
    if isinstance(n, ir.Const):
        return n.value * (w.chips**n.chip_power)
    if isinstance(n, ir.Input):
        return w.values[n.signal]
    if isinstance(n, ir.Interval):
        return w.interval
    if isinstance(n, ir.MetricRef):
        return done[n.metric]
    if isinstance(n, ir.Rollup):
        v = np.asarray(_eval(n.arg, w, done), dtype=np.float64)
        axes = tuple(range(v.ndim - len(n.arg.axes), v.ndim))
        if n.func in ("p50", "p90", "p99", "mean", "count"):  # over a record population, nulls ignored
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an empty population gives null
                if n.func == "count":
                    return np.sum(~np.isnan(v), axis=axes).astype(np.float64)
                if n.func == "mean":
                    return np.nanmean(v, axis=axes)
                return np.nanpercentile(v, float(n.func[1:]), axis=axes, method="linear")
        fn = {"sum": np.sum, "avg": np.mean, "min": np.min, "max": np.max}[n.func]
        return fn(v, axis=axes)
    assert isinstance(n, ir.Op)
    args = [_lift(_eval(a, w, done), a.axes, n.axes, ()) for a in n.args]
    op = n.op
    if op == "add":
        return args[0] + args[1]
    if op == "sub":
        return args[0] - args[1]
    if op == "mul":
        return args[0] * args[1]
    if op == "div":
        a, b = np.broadcast_arrays(np.asarray(args[0], dtype=np.float64), np.asarray(args[1], dtype=np.float64))
        out = np.full(a.shape, np.nan)
        np.divide(a, b, out=out, where=(b != 0))
        return out
    if op == "pow":
        return np.power(np.asarray(args[0], dtype=np.float64), args[1])
    if op == "neg":
        return -np.asarray(args[0], dtype=np.float64)
    if op == "abs":
        return np.abs(args[0])
    if op == "min":
        return np.minimum(args[0], args[1])
    if op == "max":
        return np.maximum(args[0], args[1])
    if op == "clamp":
        return np.minimum(np.maximum(args[0], args[1]), args[2])
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        a, b = np.asarray(args[0], dtype=np.float64), np.asarray(args[1], dtype=np.float64)
        res = {
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
            "eq": np.equal,
            "ne": np.not_equal,
        }[op](a, b).astype(np.float64)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, res)
    if op == "and":
        a, b = np.asarray(args[0], dtype=np.float64), np.asarray(args[1], dtype=np.float64)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, ((a != 0) & (b != 0)).astype(np.float64))
    if op == "or":
        a, b = np.asarray(args[0], dtype=np.float64), np.asarray(args[1], dtype=np.float64)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, ((a != 0) | (b != 0)).astype(np.float64))
    if op == "not":
        a = np.asarray(args[0], dtype=np.float64)
        return np.where(np.isnan(a), np.nan, (a == 0).astype(np.float64))
    if op == "where":
        c = np.asarray(args[0], dtype=np.float64)
        return np.where(np.isnan(c), np.nan, np.where(c != 0, args[1], args[2]))
    raise ValueError(f"unknown IR op {op!r}")  # pragma: no cover - the compiler emits only the ops above
