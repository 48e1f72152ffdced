"""Reference interpreter: evaluates a compiled ``MetricGraph`` over prepared ``Windows`` by walking
the typed IR. It is the semantics that generated evaluators must reproduce (differential tests).

Null rules: a null value is NaN inside arrays and leaves the API as null. Division by zero gives null
(never inf or NaN from the division itself); null passes unchanged through arithmetic, conversions and
rollups; a comparison with a null operand is null, and so is an ``if`` with a null condition.
``default(x, d)`` is d everywhere when x reads a signal the windows do not hold (an optional input
absent from the capture), else x — a null window of a captured x stays null (a reset or a sentinel is
not a zero).
"""

from __future__ import annotations

import operator
from typing import Callable

import numpy as np

from . import ir
from .graph import MetricGraph
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
        return _rollup(n, w, done)
    assert isinstance(n, ir.Op)
    if n.op == "default" and not ir.signals_of(n.args[0]) <= set(w.values):  # an optional input not captured
        return _eval(n.args[1], w, done)
    args = [_lift(_eval(a, w, done), a.axes, n.axes, ()) for a in n.args]
    op = _OPS.get(n.op)
    if op is None:  # an operation added to metrics.ops.Op without its reference rule here
        raise ValueError(f"the reference interpreter has no rule for IR op {n.op!r}")
    return op(args)


def _rollup(n: ir.Rollup, w: Windows, done: dict[str, np.ndarray]):
    """A roll-up over the argument's trailing axes: sum/avg/min/max over instances, or a reduction over
    a record population (p50, p90, p99, mean, count) that ignores nulls."""
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
    reductions: dict[str, Callable[..., np.ndarray]] = {"sum": np.sum, "avg": np.mean, "min": np.min, "max": np.max}
    return reductions[n.func](v, axis=axes)


def _floats(args: list) -> tuple:
    """The operands as float64 arrays."""
    return tuple(np.asarray(x, dtype=np.float64) for x in args)


def _div(args: list):
    """a / b, null where b is 0."""
    a, b = np.broadcast_arrays(*_floats(args[:2]))
    out = np.full(a.shape, np.nan)
    np.divide(a, b, out=out, where=(b != 0))
    return out


def _comparison(fn):
    """A comparison giving 1.0 / 0.0, null where either side is null."""

    def compare(args: list):
        a, b = _floats(args[:2])
        return np.where(np.isnan(a) | np.isnan(b), np.nan, fn(a, b).astype(np.float64))

    return compare


def _logic(fn):
    """`and` / `or` (&, | of the truth arrays) over conditions (non-zero is true), null where either side is null."""

    def combine(args: list):
        a, b = _floats(args[:2])
        return np.where(np.isnan(a) | np.isnan(b), np.nan, fn(a != 0, b != 0).astype(np.float64))

    return combine


def _not(args: list):
    """1.0 where the condition is 0, 0.0 elsewhere, null where it is null."""
    a = np.asarray(args[0], dtype=np.float64)
    return np.where(np.isnan(a), np.nan, (a == 0).astype(np.float64))


def _where(args: list):
    """The then-branch where the condition is non-zero, else the other; null where the condition is null."""
    c = np.asarray(args[0], dtype=np.float64)
    return np.where(np.isnan(c), np.nan, np.where(c != 0, args[1], args[2]))


# IR op -> how it evaluates its (lifted) operands; the ops the compiler emits (metrics/ir.py)
_OPS = {
    "add": lambda x: x[0] + x[1],
    "sub": lambda x: x[0] - x[1],
    "mul": lambda x: x[0] * x[1],
    "div": _div,
    "pow": lambda x: np.power(np.asarray(x[0], dtype=np.float64), x[1]),
    "neg": lambda x: -np.asarray(x[0], dtype=np.float64),
    "abs": lambda x: np.abs(x[0]),
    "min": lambda x: np.minimum(x[0], x[1]),
    "max": lambda x: np.maximum(x[0], x[1]),
    "clamp": lambda x: np.minimum(np.maximum(x[0], x[1]), x[2]),
    "lt": _comparison(np.less),
    "le": _comparison(np.less_equal),
    "gt": _comparison(np.greater),
    "ge": _comparison(np.greater_equal),
    "eq": _comparison(np.equal),
    "ne": _comparison(np.not_equal),
    "and": _logic(operator.and_),
    "or": _logic(operator.or_),
    "not": _not,
    "where": _where,
    "default": lambda x: np.asarray(x[0], dtype=np.float64),  # x captured: x, nulls included
}
