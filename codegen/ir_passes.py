"""Passes over the typed IR (``metrics.ir``) that every code generator shares.

- ``fold``: constant folding, with NumPy's float64 rules; a chain of multiplications and divisions by
  constants becomes one factor (unit conversions: the compiler makes each an explicit ``× factor``);
  ``avg(x)`` becomes ``sum(x) / n``, which is how NumPy computes a mean, so it shares ``sum(x)``.
- ``nonfinite_sensitive``: where an inf and a null (NaN) could lead to different metric values; a
  division elsewhere needs no zero test, a metric read elsewhere needs no finishing first.
- ``is_array``: whether a value varies by window.
The semantics they preserve are those of the reference interpreter (``metrics/interpreter.py``).
"""

from __future__ import annotations

import functools

import numpy as np

from perfonto.metrics import ir


def _fold_op(op: str, v: list[float]) -> float:
    with np.errstate(all="ignore"):
        a = np.float64(v[0])
        r = {
            "add": lambda: a + v[1],
            "sub": lambda: a - v[1],
            "mul": lambda: a * v[1],
            "div": lambda: a / v[1],
            "neg": lambda: -a,
            "pow": lambda: np.power(a, v[1]),
        }[op]()
    return float(r)


def fold(n: ir.Node) -> ir.Node:
    """Constant folding: Ops whose arguments are all chip-independent constants become one Const
    (evaluated with NumPy's float64 rules, so ``(-8) ** 0.5`` is NaN as at run time), ``x * 1`` is x,
    and a chain of multiplications and divisions by constants (``x * 1000 / 1e6 * 0.001``) becomes one
    multiplication when the product neither overflows nor underflows (a few ulps from the unfolded
    chain, within the differential tests' tolerance). ``avg(x)`` becomes ``sum(x) / n`` (how NumPy
    computes a mean, to the bit), so that it shares ``sum(x)`` with other metrics."""
    if isinstance(n, ir.Rollup):
        arg = fold(n.arg)
        if n.func == "avg":  # np.mean is the sum divided by the count: share the sum with sum()
            size = 1
            for _, s in n.arg.axes:
                size *= s
            return ir.Op("div", (ir.Rollup("sum", arg, n.axes, n.degree), ir.Const(float(size))), n.axes, n.degree)
        return ir.Rollup(n.func, arg, n.axes, n.degree)
    if not isinstance(n, ir.Op):
        return n
    args = tuple(fold(a) for a in n.args)
    if all(isinstance(a, ir.Const) and a.chip_power == 0 for a in args) and n.op in (
        "add",
        "sub",
        "mul",
        "div",
        "neg",
        "pow",
    ):
        v = [a.value for a in args]
        if n.op == "div" and v[1] == 0:
            return ir.Op(n.op, args, n.axes, n.degree)
        return ir.Const(_fold_op(n.op, v), 0, n.axes, n.degree)
    if n.op in ("mul", "div"):
        base, factor, count = _factor_chain(ir.Op(n.op, args, n.axes, n.degree))
        if factor == 1.0 and count >= 1:
            return base
        if (
            count >= 2 and 1e-300 < abs(factor) < 1e300
        ):  # never fold into inf or 0: (0 * 1e300) * 1e300 is 0, 0 * inf null
            return ir.Op("mul", (base, ir.Const(factor)), n.axes, n.degree)
    return ir.Op(n.op, args, n.axes, n.degree)


def _plain_const(n: ir.Node) -> bool:
    """A chip-independent constant without instance axes, of a size that cannot make the chain it is
    folded out of overflow where the unfolded one would not (values are far below 1e270)."""
    return isinstance(n, ir.Const) and n.chip_power == 0 and not n.axes and 1e-30 <= abs(n.value) <= 1e30


def _factor_chain(n: ir.Node) -> tuple[ir.Node, float, int]:
    """``n`` as ``base × factor``, following multiplications and divisions by chip-independent
    constants (the unit conversions the compiler inserts and the literals of formulas); ``count`` is
    how many constants the chain held."""
    if isinstance(n, ir.Op) and n.op == "mul" and _plain_const(n.args[1]):
        base, f, k = _factor_chain(n.args[0])
        return base, f * n.args[1].value, k + 1
    if isinstance(n, ir.Op) and n.op == "mul" and _plain_const(n.args[0]):
        base, f, k = _factor_chain(n.args[1])
        return base, n.args[0].value * f, k + 1
    if isinstance(n, ir.Op) and n.op == "div" and _plain_const(n.args[1]) and n.args[1].value != 0:
        base, f, k = _factor_chain(n.args[0])
        return base, f / n.args[1].value, k + 1
    return n, 1.0, 0


@functools.lru_cache(maxsize=65536)
def is_array(n: ir.Node) -> bool:
    """Whether the node's value varies by window (reads an input, the interval or a metric)."""
    if isinstance(n, (ir.Input, ir.Interval, ir.MetricRef)):
        return True
    return any(is_array(c) for c in ir.children(n))


_KEEPS_NONFINITE = {"add", "sub", "mul", "neg", "abs"}


def nonfinite_sensitive(roots: list[ir.Node]) -> set[ir.Node]:
    """Nodes whose non-finite value (inf or NaN) could turn finite on its way to a metric's value.

    A null is NaN and a metric's inf is finished into null, so a node that reaches every root only
    through operations that keep a non-finite operand non-finite (``+ - * neg abs``, the numerator of
    ``/``, ``sum``, a positive constant power, the branches of ``if``) may be inf where the reference
    interpreter has NaN without changing any metric: such a division needs no zero test (x / 0 is
    ±inf or NaN) and such a metric reference needs no finishing before use. Every other position
    (comparisons, ``min``/``max``/``clamp``, denominators, conditions, other powers) is sensitive.
    """
    out: set[ir.Node] = set()
    seen: set[tuple[int, bool]] = set()

    def walk(n: ir.Node, safe: bool) -> None:
        key = (id(n), safe)
        if key in seen:
            return
        seen.add(key)
        if not safe:
            out.add(n)
        if isinstance(n, ir.Rollup):
            walk(n.arg, safe and n.func == "sum")
        elif isinstance(n, ir.Op):
            if n.op in _KEEPS_NONFINITE:
                for a in n.args:
                    walk(a, safe)
            elif n.op == "div":
                walk(n.args[0], safe)
                walk(n.args[1], False)
            elif n.op == "pow":
                p = n.args[1]
                walk(n.args[0], safe and isinstance(p, ir.Const) and p.chip_power == 0 and p.value > 0)
                walk(p, False)
            elif n.op == "where":
                walk(n.args[0], False)
                walk(n.args[1], safe)
                walk(n.args[2], safe)
            else:
                for a in n.args:
                    walk(a, False)

    for r in roots:
        walk(r, True)
    return out
