"""Unit, axis and chip-degree inference: AST expression → typed IR (``metrics.ir``).

Rules (each enforced with a diagnostic that points at the offending sub-expression):
- units (pint, perfonto's registry): ``+ - min max clamp``, comparisons and the branches of ``if`` need
  the same dimension; the right operand is converted to the left's unit by an explicit factor. A
  declared unit the expression cannot be converted to is an error; the conversion is a factor.
- axes: an operation between values over different instance axes is an error unless one side has
  none (a chip-level value broadcasts over a block's instances). ``sum/avg/min/max(x)`` roll up all of
  x's instance axes.
- scope of spec constants: a per-instance constant may not meet a chip-wide amount until rolled up,
  nor a chip-wide capacity a per-instance value of its block (``metrics.infer_scope``, with the other
  rules between the operands of one operation).
- chip degree: counters and per-chip spec constants have degree 1 (they add up across chips), the
  interval and ratios degree 0; ``*`` adds degrees, ``/`` subtracts; adding unlike degrees is an error
  (a literal adapts to its partner). A metric's degree must be 0 (evaluated as a ratio of server
  totals) or 1 (a server total).
- across chips: a frequency or clock rate (a metric in cycles per second or in Hz) does not add up
  across chips — two chips at 2 GHz are a server at 2 GHz, not 4 — so a frequency of degree 1 is
  divided by the number of chips (the server value is the mean over chips). A time measured on every
  chip (cycles, seconds) divided by (or multiplied with) a count that only the leader chip of a group
  counts (``counted_by: leader``: steps, tokens) is a per-group ratio: the metric is marked
  ``group_rule`` and at server level its times are the groups' times — the mean over each group's
  chips, which run in lockstep — so a step latency reads the same on a group of 8 chips as on one
  (``metrics.levels``).

This module types the names and operators of an expression (``Typer``); a metric declaration is typed
in ``metrics.infer_metric``, function calls in ``metrics.infer_calls`` (``default`` in
``metrics.optional``), ``**`` in ``metrics.powers``, the rules between the operands of one operation
in ``metrics.infer_scope``; the typed values and the error they raise (``_T``, ``Fail``) are in
``metrics.infer_typed``.
"""

from __future__ import annotations

import pint

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.resolved import Generation
from perfonto.ontology import kinds
from perfonto.ontology.resolved import Scope
from perfonto.ontology.units import UnitError, conversion_factor, fmt_unit, parse_unit

from .rollup_rules import after_division

from . import ir
from .across_chips import group_check
from .infer_calls import type_call
from .infer_metric import type_metric
from .infer_scope import check_division, check_scope
from .infer_typed import POP, Fail, _T, _scale_literal
from .powers import type_power

CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}


class Typer:
    """Types the metrics of one generation; ``metric()`` is called in topological order."""

    def __init__(self, gen: Generation):
        self.gen = gen
        self.reg = gen.registry
        self.compiled: dict = {}
        self.metric_name = ""
        self.trace: list | None = None  # (ast node, unit or None) in evaluation order, for `explain`
        self.intensive: set[str] = set()  # chip-scope constants read per chip in this metric
        self.sparsity_of: dict[str, frozenset] = {}  # metric -> sparsity of its FLOPs
        self.leader_of: dict[str, bool] = {}  # metric -> reads a leader-counted signal
        self.group_rule = False  # the metric being typed divides a per-chip time by a leader count
        self.warnings: list[Diagnostic] = []  # the last metric typed (``rollup_rules.roll_warning``)
        self.rolls_of: dict[str, tuple[frozenset, frozenset]] = {}  # metric -> its value's (rolls, total)

    def fail(self, code: str, msg: str, span: Span, hint: str = "") -> Fail:
        return Fail(Diagnostic("error", code, msg, span, hint=hint))

    def unit(self, text: str | None, span: Span) -> pint.Unit:
        if text is None:
            return self.reg.dimensionless
        try:
            return parse_unit(self.reg, text)
        except UnitError as exc:
            raise self.fail(
                "unknown-unit",
                str(exc),
                span,
                hint="units: B, KiB, GB/s, FLOP, TFLOP/s, token, request, J, W, s, ms, %, ratio, <domain>_cycle",
            ) from None

    def factor(self, src: pint.Unit, dst: pint.Unit, span: Span, what: str) -> float:
        try:
            return conversion_factor(self.reg, src, dst)
        except UnitError as exc:
            if "offset unit" in str(exc):
                raise self.fail(
                    "unit-mismatch", f"{what}: {exc}", span, hint="declare the metric in the signal's own unit"
                ) from None
            raise self.fail(
                "unit-mismatch",
                f"{what}: {fmt_unit(src)} ({_dim(self.reg, src)}) is not convertible to "
                f"{fmt_unit(dst)} ({_dim(self.reg, dst)})",
                span,
                hint="both sides must measure the same kind of quantity; check the formula or the declared unit",
            ) from None

    # -- metric --------------------------------------------------------------------------------
    def metric(self, d: ast.MetricDecl, compiled: dict):
        """Type the metric ``d`` (``metrics.infer_metric.type_metric``): its IR node, declared unit, bounds
        and threshold; ``compiled`` holds the metrics typed before it."""
        return type_metric(self, d, compiled)

    @staticmethod
    def _mul_const(node: ir.Node, f: float) -> ir.Node:
        return ir.Op("mul", (node, ir.Const(f, origin="convert")), node.axes, node.degree)

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e: ast.Expr) -> _T:
        meth = getattr(self, "_" + type(e).__name__.lower())
        t = meth(e)
        if self.trace is not None:
            self.trace.append((e, t.unit, t.node.axes, t.node.degree))
        return t

    def _number(self, e: ast.Number) -> _T:
        return _T(ir.Const(e.value, origin="literal", label=e.unit or ""), self.unit(e.unit, e.span), literal=True)

    def _name(self, e: ast.Name) -> _T:
        n = self.gen.aliases.get(e.name, e.name)
        if n in self.gen.fields:
            f = self.gen.fields[n]
            axes = tuple((f"{f.block}.{a}", size) for a, size in f.axes)
            return _T(ir.Input(n, axes, 0), f.unit)
        if n in self.gen.record_fields:
            rf = self.gen.record_fields[n]
            if rf.times:
                raise self.fail(
                    "type",
                    f"`{n}` is a list of instants per record, not a value",
                    e.span,
                    hint="use a derived population, e.g. `token_gap.duration`",
                )
            return _T(ir.Input(n, ((POP + rf.record, 0),), 0), rf.unit)
        if n == "interval":
            return _T(ir.Interval(), self.reg.second)
        if n in self.gen.signals:
            s = self.gen.signals[n]
            axes = tuple((f"{s.block}.{a}", size) for a, size in s.axes)
            degree = kinds.chip_degree(s)
            return _T(
                ir.Input(n, axes, degree), s.unit, sparsity=frozenset({s.sparsity}) if s.sparsity else frozenset()
            )
        if n in self.gen.spec:
            c = self.gen.spec[n]
            power = 0 if (c.scope is Scope.system or n in self.intensive) else 1
            block = self.gen.blocks.get(n.split(".")[1]) if n.count(".") >= 2 else None
            block_axes = tuple((f"{n.split('.')[1]}.{a}", size) for a, size in block["axes"]) if block else ()
            sp = frozenset({c.sparsity}) if c.sparsity else frozenset()
            if c.scope is Scope.instance:
                return _T(
                    ir.Const(c.value, power, block_axes, power, origin="spec", label=n), c.unit, inst=True, sparsity=sp
                )
            total = frozenset(a for a, _ in block_axes) if c.scope is Scope.chip else frozenset()
            return _T(ir.Const(c.value, power, (), power, "spec", n), c.unit, total=total, sparsity=sp)
        if n in self.compiled:
            m = self.compiled[n]
            rolls, total = self.rolls_of.get(n, (frozenset(), frozenset()))
            out = _T(
                ir.MetricRef(n, m.axes, m.degree), m.unit, total=total, sparsity=frozenset(self.sparsity_of.get(n, ()))
            )
            out.rolls = rolls  # a metric named in another carries its roll-ups (``rollup_rules``)
            return out
        raise self.fail("unknown-name", f"unknown name `{n}`", e.span)  # resolved earlier; kept for safety

    def _unary(self, e: ast.Unary) -> _T:
        t = self.expr(e.operand)
        if e.op == "not":
            if not t.is_bool:
                raise self.fail("type", "`not` needs a condition", e.span)
            return _T(ir.Op("not", (t.node,), t.node.axes, 0), None)
        self._need_number(t, e.operand.span, "`-`")
        out = _T(ir.Op("neg", (t.node,), t.node.axes, t.node.degree), t.unit, t.literal, t.inst, t.total, t.sparsity)
        out.rolls = t.rolls
        return out

    def _binary(self, e: ast.Binary) -> _T:
        operands: list[_T] = []
        out = self._binary_typed(e, operands)
        return check_scope(self, out, operands, e.span)

    def _binary_typed(self, e: ast.Binary, operands: list) -> _T:
        if e.op in ("and", "or"):
            a, b = self.expr(e.left), self.expr(e.right)
            for t, sub in ((a, e.left), (b, e.right)):
                if not t.is_bool:
                    raise self.fail("type", f"`{e.op}` needs conditions on both sides", sub.span)
            return _T(ir.Op(e.op, (a.node, b.node), self._axes(a, b, e.span), 0), None)
        a, b = self.expr(e.left), self.expr(e.right)
        operands += [a, b]
        self._need_number(a, e.left.span, f"`{e.op}`")
        self._need_number(b, e.right.span, f"`{e.op}`")
        axes = self._axes(a, b, e.span)
        if e.op in ("+", "-") or e.op in CMP:
            a, b = self._same_unit(a, b, e, f"`{e.op}` of unlike quantities")
            deg = self._same_degree(a, b, e.span, e.op)
            if e.op in CMP:
                return _T(ir.Op(CMP[e.op], (a.node, b.node), axes, 0), None)
            op = "add" if e.op == "+" else "sub"
            return _T(ir.Op(op, (a.node, b.node), axes, deg), a.unit, a.literal and b.literal)
        if e.op in ("*", "/"):
            group_check(self, e, a, b)
        if e.op in ("*", "/"):
            check_division(self, e.op, a, b, e.span)
        if e.op == "*":
            return _T(
                ir.Op("mul", (a.node, b.node), axes, a.node.degree + b.node.degree),
                a.qty * b.qty,
                a.literal and b.literal,
            )
        if e.op == "/":
            out = _T(
                ir.Op("div", (a.node, b.node), axes, a.node.degree - b.node.degree),
                a.qty / b.qty,
                a.literal and b.literal,
            )
            out.rolls, out.total = after_division(a.rolls, a.total, b.rolls, b.total)
            return out
        if e.op == "**":
            return type_power(self, e, a, b, axes)
        raise self.fail("syntax", f"unknown operator {e.op}", e.span)  # pragma: no cover

    def _ifelse(self, e: ast.IfElse) -> _T:
        operands: list = []
        return check_scope(self, self._ifelse_typed(e, operands), operands, e.span)

    def _ifelse_typed(self, e: ast.IfElse, operands: list) -> _T:
        c = self.expr(e.cond)
        if not c.is_bool:
            raise self.fail(
                "type", "the condition of `if` must be a comparison", e.cond.span, hint="e.g. `a if x > 0 else b`"
            )
        a, b = self.expr(e.then), self.expr(e.otherwise)
        operands += [a, b]
        self._need_number(a, e.then.span, "`if`")
        self._need_number(b, e.otherwise.span, "`else`")
        a, b = self._same_unit(a, b, e, "the branches of `if` have unlike units")
        deg = self._same_degree(a, b, e.span, "if/else")
        axes = self._join(self._join(c.node.axes, a.node.axes, e.span), b.node.axes, e.span)
        return _T(ir.Op("where", (c.node, a.node, b.node), axes, deg), a.unit)

    def _call(self, e: ast.Call) -> _T:
        return type_call(self, e)

    # -- helpers -------------------------------------------------------------------------------
    def _need_number(self, t: _T, span: Span, what: str) -> None:
        if t.is_bool:
            raise self.fail("type", f"{what} needs a quantity, not a condition", span)

    def _same_unit(self, a: _T, b: _T, e, what: str) -> tuple[_T, _T]:
        f = self.factor(b.qty, a.qty, e.span, what)
        if f == 1.0:
            return a, b
        return a, _T(self._mul_const(b.node, f), a.unit, b.literal, b.inst, b.total, b.sparsity)

    def _adapt(self, t: _T, degree: int) -> ir.Node:
        """A literal operand takes its partner's chip degree (``x + 64 B`` adds 64 B per chip)."""
        if t.literal and t.node.degree != degree:
            return _scale_literal(t.node, degree)
        return t.node

    def _same_degree(self, a: _T, b: _T, span: Span, op: str) -> int:
        da, db = a.node.degree, b.node.degree
        if da == db:
            return da
        if b.literal:
            b.node = _scale_literal(b.node, da)
            return da
        if a.literal:
            a.node = _scale_literal(a.node, db)
            return db
        raise self.fail(
            "chip-degree",
            f"`{op}` combines a quantity that adds up across chips with one that does not",
            span,
            hint="e.g. bytes + bytes/s, or a counter + a ratio; make both sides per-chip amounts or both ratios",
        )

    def _axes(self, a: _T, b: _T, span: Span) -> ir.Axes:
        return self._join(a.node.axes, b.node.axes, span)

    def _join(self, x: ir.Axes, y: ir.Axes, span: Span) -> ir.Axes:
        if x == y or not y:
            return x
        if not x:
            return y
        raise self.fail(
            "axes-mismatch",
            f"operands vary over different instance axes: {_fmt_axes(x)} and {_fmt_axes(y)}",
            span,
            hint="roll one side up with sum(), avg(), min() or max() first",
        )


def _fmt_axes(axes: ir.Axes) -> str:
    return ", ".join(f"{a}[{n}]" for a, n in axes)


def _dim(reg, u) -> str:
    d = str(reg.Quantity(1, u).dimensionality)
    return "dimensionless" if d == "dimensionless" else d
