"""Function calls in the metric language, typed for ``metrics.infer``: roll-ups over a value's instance
axes (``sum avg min max`` of one argument), reductions of a record population (``p50 p90 p99 mean
count``), element-wise ``min max`` (two or more arguments), ``clamp(x, lo, hi)`` and ``abs``;
``default(x, d)`` is typed by ``metrics.optional``.

An unknown function, a wrong number of arguments, a roll-up of a value without instance axes, a
reduction of a value that is not per record and arguments of unlike units or chip degrees are each an
``infer_typed.Fail`` pointing at the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import did_you_mean

from . import ir
from .infer_scope import check_scope
from .infer_typed import POP, _T
from .optional import type_default

if TYPE_CHECKING:
    from .infer import Typer

__all__ = ["FUNCTIONS", "ROLLUPS", "type_call"]

ROLLUPS = {"sum", "avg", "min", "max"}
POPULATION_REDUCTIONS = {"p50", "p90", "p99", "mean", "count"}  # over a record population only; nulls ignored
FUNCTIONS = ROLLUPS | POPULATION_REDUCTIONS | {"clamp", "abs", "default"}


def type_call(typer: "Typer", e: ast.Call) -> _T:
    """Type the call ``e`` (module docstring). The operands of a call meet under ``infer_scope.check_scope``,
    except the one argument of a roll-up, which keeps the chip-wide totals and roll-ups ``_rollup`` gives it."""
    operands: list = []
    out = _call_typed(typer, e, operands)
    if e.func in ROLLUPS and len(e.args) == 1:
        return out
    return check_scope(typer, out, operands, e.span)


def _call_typed(typer: "Typer", e: ast.Call, operands: list) -> _T:
    """The call typed by its function; its typed arguments are appended to ``operands``."""
    f = e.func
    if f not in FUNCTIONS:
        raise typer.fail(
            "unknown-function",
            f"unknown function `{f}`",
            e.span,
            hint=did_you_mean(f, FUNCTIONS) or f"functions: {', '.join(sorted(FUNCTIONS))}",
        )
    if f == "default":
        return type_default(typer, e, operands)
    args = [typer.expr(a) for a in e.args]
    operands += args
    for t, sub in zip(args, e.args):
        typer._need_number(t, sub.span, f"`{f}`")
    if f in POPULATION_REDUCTIONS:
        return _population_reduction(typer, e, args)
    if f in ROLLUPS and len(args) == 1:
        return _rollup(typer, e, args[0])
    if f in ("sum", "avg"):
        raise typer.fail(
            "arity",
            f"`{f}` takes one argument: it rolls up a block's instances",
            e.span,
            hint=f"`{f}(a) + {f}(b)` for two signals; element-wise functions are min, max, clamp, abs",
        )
    if f == "abs":
        if len(args) != 1:
            raise typer.fail("arity", "`abs` takes one argument", e.span)
        (t,) = args
        return _T(ir.Op("abs", (t.node,), t.node.axes, t.node.degree), t.unit)
    return _elementwise(typer, e, args)


def _population_reduction(typer: "Typer", e: ast.Call, args: list) -> _T:
    """``p50``, ``mean``, ``count``, ...: one per-record value reduced over its records."""
    f = e.func
    if len(args) != 1 or not any(a.startswith(POP) for a, _ in args[0].node.axes):
        raise typer.fail(
            "rollup",
            f"`{f}` takes one per-record value (a metric over request or token_gap records)",
            e.span,
            hint="e.g. `p50(ttft)` where ttft is computed from `request.*` fields",
        )
    (t,) = args
    return _T(ir.Rollup(f, t.node, (), t.node.degree), t.unit if f != "count" else typer.reg.dimensionless)


def _rollup(typer: "Typer", e: ast.Call, t: _T) -> _T:
    """``sum``, ``avg``, ``min``, ``max`` of one argument: a roll-up over the value's instance axes
    (a per-instance constant rolls up to value x count, or the value itself)."""
    f = e.func
    if not t.node.axes:
        raise typer.fail(
            "rollup",
            f"`{f}({_short(e.args[0])})` has nothing to roll up: the value has no instance axes",
            e.span,
            hint="rollups apply to signals of blocks with instances (hbm stacks, c2c links, mxu cores)",
        )
    if _constant_only(t.node):  # a per-instance constant: sum is value x count, avg/min/max the value
        n_inst = 1
        for _, size in t.node.axes:
            n_inst *= size
        count = ir.Const(float(n_inst) if f == "sum" else 1.0, origin="count")
        node = ir.Op("mul", (t.node, count), (), t.node.degree)
        total = frozenset(a for a, _ in t.node.axes) if f == "sum" else frozenset()
        out = _T(node, t.unit, total=total, sparsity=t.sparsity)
        out.rolls = t.rolls | {(a, n, "sum" if f == "sum" else "mean", True) for a, n in t.node.axes}
        return out
    out = _T(ir.Rollup(f, t.node, (), t.node.degree), t.unit, sparsity=t.sparsity)
    out.rolls = t.rolls | {(a, n, "sum" if f == "sum" else "mean", False) for a, n in t.node.axes}
    return out


def _elementwise(typer: "Typer", e: ast.Call, args: list) -> _T:
    """``min``, ``max`` (two or more arguments) and ``clamp`` (x, lo, hi), element by element, in
    the first argument's unit."""
    f = e.func
    want = 3 if f == "clamp" else None
    if (want and len(args) != want) or (not want and len(args) < 2):
        raise typer.fail(
            "arity",
            f"`{f}` takes "
            f"{'three arguments (x, lo, hi)' if want else 'one argument (rollup) or two or more (element-wise)'}",
            e.span,
        )
    first = args[0]
    out = [first] + [
        typer._same_unit(first, t, sub, f"the arguments of `{f}` have unlike units")[1]
        for t, sub in zip(args[1:], e.args[1:])
    ]
    degrees = {t.node.degree for t in out if not t.literal}
    if len(degrees) > 1:
        raise typer.fail(
            "chip-degree",
            f"`{f}` combines a quantity that adds up across chips with one that does not",
            e.span,
            hint="make all arguments per-chip amounts, or all ratios",
        )
    deg = degrees.pop() if degrees else 0
    axes: ir.Axes = ()
    for t in out:
        axes = typer._join(axes, t.node.axes, e.span)
    nodes = [typer._adapt(t, deg) for t in out]
    if f == "clamp":
        return _T(ir.Op("clamp", tuple(nodes), axes, deg), first.unit)
    while len(nodes) > 1:  # a balanced tree of pairs: log2(n) deep, so max of 100,000 arguments never recurses deep
        pairs = [ir.Op(f, (a, b), axes, deg) for a, b in zip(nodes[0::2], nodes[1::2])]
        nodes = pairs + nodes[len(pairs) * 2 :]
    return _T(nodes[0], first.unit)


def _constant_only(node: ir.Node) -> bool:
    if isinstance(node, ir.Const):
        return True
    if isinstance(node, (ir.Op, ir.Rollup)):
        return all(_constant_only(c) for c in ir.children(node))
    return False


def _short(e: ast.Expr) -> str:
    return e.name if isinstance(e, ast.Name) else "…"
