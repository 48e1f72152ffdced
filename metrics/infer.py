"""Unit, axis and chip-degree inference: AST expression → typed IR (``metrics.ir``).

Rules (each enforced with a diagnostic that points at the offending sub-expression):
- units (pint, perfonto's registry): ``+ - min max clamp``, comparisons and the branches of ``if`` need
  the same dimension; the right operand is converted to the left's unit by an explicit factor. A
  declared unit the expression cannot be converted to is an error; the conversion is a factor.
- axes: an operation between values over different instance axes is an error unless one side has
  none (a chip-level value broadcasts over a block's instances). ``sum/avg/min/max(x)`` roll up all of
  x's instance axes.
- scope of spec constants: a per-instance constant (``scope: instance``) carries its block's axes and
  may not meet a chip-wide amount (a counter or chip-level total) until rolled up —
  ``sum(spec.die.peak_bw)`` is the chip's total; a chip-scope constant of a block with instances is a
  chip-wide capacity and may not meet a per-instance value of that block — so dividing a chip-wide
  measurement by a per-die peak, or a per-stack measurement by a chip-wide peak, is a compile error.
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
"""

from __future__ import annotations

import dataclasses

import pint

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic, Span, did_you_mean
from perfonto.ontology.resolved import Generation
from perfonto.ontology import kinds
from perfonto.ontology.resolved import Scope
from perfonto.ontology.units import UnitError, conversion_factor, dimensionality, fmt_unit, is_rate, parse_unit

from .rollup_rules import ROLL_HINT, after_division, level_rate_error, roll_set, roll_warning

from . import ir
from .across_chips import group_check, is_frequency, is_share, reads_leader
from .optional import type_default
from .powers import type_power

ROLLUPS = {"sum", "avg", "min", "max"}
POPULATION_REDUCTIONS = {"p50", "p90", "p99", "mean", "count"}  # over a record population only; nulls ignored
FUNCTIONS = ROLLUPS | POPULATION_REDUCTIONS | {"clamp", "abs", "default"}
POP = "population."  # axis-name prefix of record populations
CMP = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
# rule of ``_check_meetings`` -> the error's (code, message, hint)
_MEETINGS = {
    "population": (
        "population",
        "a per-record value meets a per-window quantity",
        "record fields (request.*, token_gap.*) combine with each other and with constants; "
        "reduce them first (p50, p99, mean, count)",
    ),
    "instance": (
        "scope",
        "a per-instance spec constant meets a chip-wide amount",
        ROLL_HINT + ", or compare the constant with a per-instance measurement",
    ),
}


class Fail(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _T:
    """A typed sub-expression: IR node, its unit (None for booleans), and whether it is a bare literal."""

    __slots__ = ("node", "unit", "literal", "inst", "total", "sparsity", "rolls")

    def __init__(
        self,
        node: ir.Node,
        unit: pint.Unit | None,
        literal: bool = False,
        inst: bool = False,
        total: frozenset = frozenset(),
        sparsity: frozenset = frozenset(),
    ):
        self.node, self.unit, self.literal = node, unit, literal
        self.sparsity = sparsity  # {"dense"} / {"sparse"} for FLOP quantities that declare it
        self.inst = inst  # derived from a per-instance spec constant, not rolled up
        self.total = total  # instance axes this value is a chip-wide capacity over (chip-scope constants)
        # (axis, size, "sum" | "mean", from a spec constant?) of each roll-up inside the value (``_check_rolls``)
        self.rolls: frozenset = frozenset()

    @property
    def is_bool(self) -> bool:
        return self.unit is None

    @property
    def qty(self) -> pint.Unit:
        """The unit of a quantity: for operands already checked not to be conditions (``_need_number``)."""
        assert self.unit is not None, "a quantity, not a condition"
        return self.unit


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
        """Type one metric. Chip-scope spec constants are per-chip amounts (scaled with the number of
        chips at server level) unless that would make the metric scale as chips^k with k not 0 or 1;
        then the fewest constants that must be read per chip (a clock used to convert cycles to time,
        say) are taken as chip-independent."""
        chip_consts = sorted(
            {
                n.name
                for n in ast.walk(d.expr)
                if isinstance(n, ast.Name) and n.name in self.gen.spec and self.gen.spec[n.name].scope is Scope.chip
            }
        )
        first: Fail | None = None
        import itertools

        for k in range(len(chip_consts) + 1):
            for subset in itertools.combinations(chip_consts, k):
                self.intensive = set(subset)
                trace: list | None = None if self.trace is None else []
                saved, self.trace = self.trace, trace
                try:
                    out = self._metric(d, compiled)
                    if saved is not None and trace is not None:  # both lists, or both None
                        saved.extend(trace)
                    self.trace = saved
                    return out
                except Fail as f:
                    self.trace = saved
                    if f.diagnostic.code != "chip-degree":
                        raise
                    first = first or f
        assert first is not None, "every subset failed, the first (the empty subset) included"
        raise first

    def _metric(self, d: ast.MetricDecl, compiled: dict):
        self.compiled = compiled
        self.warnings = []
        self.metric_name = d.name
        self.group_rule = any(
            getattr(compiled.get(n.name), "group_rule", False) for n in ast.walk(d.expr) if isinstance(n, ast.Name)
        )
        declared = self.unit(d.unit, d.unit_span)
        t = self.expr(d.expr)
        self.leader_of[d.name] = reads_leader(self, d.expr)
        if not t.is_bool:
            self._gauge_rate_check(d, t, declared)
            self.sparsity_of[d.name] = t.sparsity
            self.rolls_of[d.name] = (t.rolls, t.total)
        if t.is_bool:
            raise self.fail(
                "bool-metric",
                f"metric `{d.name}` is a condition, not a quantity",
                d.expr.span,
                hint="use it inside `a if cond else b`",
            )
        f = self.factor(
            t.qty,
            declared,
            d.unit_span,
            f"metric `{d.name}` is declared in [{d.unit}] but its formula gives {fmt_unit(t.qty)}",
        )
        node = t.node if f == 1.0 else self._mul_const(t.node, f)
        if node.degree == 1 and (is_frequency(self.reg, declared) or is_share(self.reg, declared)):
            # a clock rate or a share (a percent): the mean over chips, never their sum — a chip time over the
            # window's wall-clock time is device-seconds over device-seconds at every level
            node = ir.Op("div", (node, ir.Const(1.0, chip_power=1, degree=1, origin="chip")), node.axes, 0)
        if node.degree not in (0, 1):
            raise self.fail(
                "chip-degree",
                f"metric `{d.name}` scales as chips^{node.degree} at server level",
                d.expr.span,
                hint="a metric is either a per-chip amount that adds across chips (bytes/s) or a ratio of such amounts",
            )
        bounds = None
        if d.bounds:
            bounds = (self._bound(d.bounds[0], declared), self._bound(d.bounds[1], declared))
            if bounds[0] > bounds[1]:
                raise self.fail(
                    "bounds-order",
                    f"bounds of `{d.name}` are reversed ({d.bounds[0].value} > {d.bounds[1].value})",
                    d.bounds[0].span,
                    hint="write `bounds LOW .. HIGH`",
                )
        threshold = None
        if d.threshold:
            threshold = (d.threshold.op, self._bound(d.threshold.value, declared), d.threshold.message)
        return node, declared, bounds, threshold

    def _gauge_rate_check(self, d: ast.MetricDecl, t: _T, declared: pint.Unit) -> None:
        """A gauge holding a rate is averaged over the window, never accumulated: a metric that declares
        the rate's amount (B for a B/s gauge) is told so by name."""
        e_dim = dimensionality(self.reg, t.qty)
        want = dimensionality(self.reg, declared)
        if e_dim == want:
            return
        sec = dimensionality(self.reg, self.reg.second)
        for node in ast.walk(d.expr):
            if isinstance(node, ast.Name) and node.name in self.gen.signals:
                s = self.gen.signals[node.name]
                if kinds.of(s).window == "mean" and is_rate(self.reg, s.unit) and e_dim * sec == want:
                    raise self.fail(
                        "unit-mismatch",
                        f"`{node.name}` is a gauge holding a rate ({s.unit_text}): it is averaged over the "
                        f"window, not accumulated, so `{d.name}` cannot be an amount in [{d.unit}]",
                        node.span,
                        hint="declare a rate, or multiply by `interval` if the time integral is really meant",
                    )

    def _bound(self, b: ast.Bound, declared: pint.Unit) -> float:
        if b.unit is None:
            return b.value
        return b.value * self.factor(self.unit(b.unit, b.span), declared, b.span, "bound")

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
        return self._scope(out, operands, e.span)

    def _scope(self, out: _T, operands: list, span: Span) -> _T:
        """Scope rules between spec constants and measurements (see the module docstring): each rule is
        about two different operands, checked in one pass over them (``max`` may have 100,000)."""
        self._check_meetings(operands, span)
        self._check_totals(operands, span)
        sp = [t.sparsity for t in operands if t.sparsity]
        if len(sp) >= 2 and len(frozenset().union(*sp)) > 1:
            raise self.fail(
                "sparsity",
                "dense FLOPs meet a sparse peak (or the reverse)",
                span,
                hint="compare dense work with the dense peak; vendors' sparse peaks are twice the dense figure",
            )
        out.sparsity = frozenset().union(*sp) if sp else frozenset()
        out.inst = any(t.inst for t in operands) and bool(out.node.axes)
        if not (isinstance(out.node, ir.Op) and out.node.op == "div"):  # a division set its own (after_division)
            out.total = frozenset().union(*(t.total for t in operands)) if operands else frozenset()
            out.rolls = frozenset().union(*(t.rolls for t in operands)) if operands else frozenset()
        return out

    def _check_division(self, op: str, a: _T, b: _T, span: Span) -> None:
        """``metrics.rollup_rules`` on ``a op b``: a level over the window's duration is an error; a mean over
        an instance axis against a chip-wide total over it is a warning (``self.warnings``)."""
        err = level_rate_error(op, a.node, b.node, self.gen, self.compiled, span)
        if err is not None:
            raise Fail(err)
        if op == "/":
            w = roll_warning(roll_set(a.rolls, a.total, self.gen), roll_set(b.rolls, b.total, self.gen), span)
            if w is not None:
                self.warnings.append(w)

    def _check_meetings(self, operands: list, span: Span) -> None:
        """Kinds of operand that never meet (``_MEETINGS``): a per-record value and a quantity read from
        windows; a per-instance spec constant and a chip-wide amount."""
        per_record = [any(x.startswith(POP) for x, _ in t.node.axes) for t in operands]
        meets = {
            "population": any(per_record)
            and any(not p and _reads_windows(t.node, self.compiled) for p, t in zip(per_record, operands)),
            "instance": any(a.inst for a in operands)
            and any(not b.node.axes and not b.literal and b.node.degree >= 1 and not b.inst for b in operands),
        }
        for rule, met in meets.items():
            if met:
                code, message, hint = _MEETINGS[rule]
                raise self.fail(code, message, span, hint=hint)

    def _check_totals(self, operands: list, span: Span) -> None:
        """A chip-wide total over an axis never meets another operand's per-instance value over that axis."""
        totals: dict[str, int] = {}  # axis -> how many operands are chip-wide totals over it
        for a in operands:
            for ax in a.total:
                totals[ax] = totals.get(ax, 0) + 1
        if not totals:
            return
        for b in operands:
            clash = {ax for ax, _ in b.node.axes if totals.get(ax, 0) - (ax in b.total) > 0}  # another operand's total
            if clash and not b.literal:
                raise self.fail(
                    "scope",
                    f"a chip-wide spec constant meets a per-instance value (over {', '.join(sorted(clash))})",
                    span,
                    hint="roll the measurement up with sum() first, or use a per-instance constant (scope: instance)",
                )

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
            self._check_division(e.op, a, b, e.span)
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
        return self._scope(self._ifelse_typed(e, operands), operands, e.span)

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
        operands: list = []
        out = self._call_typed(e, operands)
        if e.func in ROLLUPS and len(e.args) == 1:
            return out
        return self._scope(out, operands, e.span)

    def _call_typed(self, e: ast.Call, operands: list) -> _T:
        f = e.func
        if f not in FUNCTIONS:
            raise self.fail(
                "unknown-function",
                f"unknown function `{f}`",
                e.span,
                hint=did_you_mean(f, FUNCTIONS) or f"functions: {', '.join(sorted(FUNCTIONS))}",
            )
        if f == "default":
            return type_default(self, e, operands)
        args = [self.expr(a) for a in e.args]
        operands += args
        for t, sub in zip(args, e.args):
            self._need_number(t, sub.span, f"`{f}`")
        if f in POPULATION_REDUCTIONS:
            return self._population_reduction(e, args)
        if f in ROLLUPS and len(args) == 1:
            return self._rollup(e, args[0])
        if f in ("sum", "avg"):
            raise self.fail(
                "arity",
                f"`{f}` takes one argument: it rolls up a block's instances",
                e.span,
                hint=f"`{f}(a) + {f}(b)` for two signals; element-wise functions are min, max, clamp, abs",
            )
        if f == "abs":
            if len(args) != 1:
                raise self.fail("arity", "`abs` takes one argument", e.span)
            (t,) = args
            return _T(ir.Op("abs", (t.node,), t.node.axes, t.node.degree), t.unit)
        return self._elementwise(e, args)

    def _population_reduction(self, e: ast.Call, args: list) -> _T:
        """``p50``, ``mean``, ``count``, ...: one per-record value reduced over its records."""
        f = e.func
        if len(args) != 1 or not any(a.startswith(POP) for a, _ in args[0].node.axes):
            raise self.fail(
                "rollup",
                f"`{f}` takes one per-record value (a metric over request or token_gap records)",
                e.span,
                hint="e.g. `p50(ttft)` where ttft is computed from `request.*` fields",
            )
        (t,) = args
        return _T(ir.Rollup(f, t.node, (), t.node.degree), t.unit if f != "count" else self.reg.dimensionless)

    def _rollup(self, e: ast.Call, t: _T) -> _T:
        """``sum``, ``avg``, ``min``, ``max`` of one argument: a roll-up over the value's instance axes
        (a per-instance constant rolls up to value x count, or the value itself)."""
        f = e.func
        if not t.node.axes:
            raise self.fail(
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

    def _elementwise(self, e: ast.Call, args: list) -> _T:
        """``min``, ``max`` (two or more arguments) and ``clamp`` (x, lo, hi), element by element, in
        the first argument's unit."""
        f = e.func
        want = 3 if f == "clamp" else None
        if (want and len(args) != want) or (not want and len(args) < 2):
            raise self.fail(
                "arity",
                f"`{f}` takes "
                f"{'three arguments (x, lo, hi)' if want else 'one argument (rollup) or two or more (element-wise)'}",
                e.span,
            )
        first = args[0]
        out = [first] + [
            self._same_unit(first, t, sub, f"the arguments of `{f}` have unlike units")[1]
            for t, sub in zip(args[1:], e.args[1:])
        ]
        degrees = {t.node.degree for t in out if not t.literal}
        if len(degrees) > 1:
            raise self.fail(
                "chip-degree",
                f"`{f}` combines a quantity that adds up across chips with one that does not",
                e.span,
                hint="make all arguments per-chip amounts, or all ratios",
            )
        deg = degrees.pop() if degrees else 0
        axes: ir.Axes = ()
        for t in out:
            axes = self._join(axes, t.node.axes, e.span)
        nodes = [self._adapt(t, deg) for t in out]
        if f == "clamp":
            return _T(ir.Op("clamp", tuple(nodes), axes, deg), first.unit)
        while len(nodes) > 1:  # a balanced tree of pairs: log2(n) deep, so max of 100,000 arguments never recurses deep
            pairs = [ir.Op(f, (a, b), axes, deg) for a, b in zip(nodes[0::2], nodes[1::2])]
            nodes = pairs + nodes[len(pairs) * 2 :]
        return _T(nodes[0], first.unit)

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


def _scale_literal(node: ir.Node, degree: int) -> ir.Node:
    """Give a literal sub-expression chip degree ``degree``: multiply it by chips**degree at server level."""
    if isinstance(node, ir.Const) and node.chip_power == 0:
        return dataclasses.replace(node, chip_power=degree, degree=degree)
    return ir.Op("mul", (node, ir.Const(1.0, chip_power=degree, degree=degree, origin="chip")), node.axes, degree)


def _reads_windows(node: ir.Node, compiled: dict) -> bool:
    """True when the value comes from counter windows (signals, interval, window metrics)."""
    if isinstance(node, ir.Interval):
        return True
    if isinstance(node, ir.Input):
        return not any(a.startswith(POP) for a, _ in node.axes)
    if isinstance(node, ir.MetricRef):
        m = compiled.get(node.metric)
        return m is not None and getattr(m, "population", None) is None and not getattr(m, "from_records", False)
    return any(_reads_windows(c, compiled) for c in ir.children(node))


def _constant_only(node: ir.Node) -> bool:
    if isinstance(node, ir.Const):
        return True
    if isinstance(node, (ir.Op, ir.Rollup)):
        return all(_constant_only(c) for c in ir.children(node))
    return False


def _fmt_axes(axes: ir.Axes) -> str:
    return ", ".join(f"{a}[{n}]" for a, n in axes)


def _dim(reg, u) -> str:
    d = str(reg.Quantity(1, u).dimensionality)
    return "dimensionless" if d == "dimensionless" else d


def _short(e: ast.Expr) -> str:
    return e.name if isinstance(e, ast.Name) else "…"
