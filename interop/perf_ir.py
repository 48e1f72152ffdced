"""A compiled metric's IR (``metrics.ir``) written as a Linux perf ``MetricExpr`` in base units.

The compiler's IR computes in the units it chose (a signal's value in its declared unit, a spec constant
in its own, a literal in its unit) with every unit conversion an explicit ``Const`` factor (origin
``convert``) and server-level chip factors (origin ``chip``) multiplied in. perf computes a metric in
plain numbers from raw event counts, so this writer puts every leaf in the registry's base units —
an event as its raw count times its scale in base units (``hbm.read_bytes * 64``), a literal converted
(``80 %`` → ``0.8``), a spec constant as the constant metric ``spec.<name>`` (its base-unit value, see
``perf_export``), ``interval`` as ``duration_time`` — after which every conversion factor is 1 and is
dropped, and a chip factor is 1 in a window. The result is in the base units of the metric's dimension;
``perf_export`` adds the ScaleUnit from there to the declared unit.

Operations (``tools/perf/util/expr.y``): ``+ - * /`` as such; ``x ** n`` (integer ``|n| ≤ 8``) as
repeated products; comparisons ``<``/``>`` as such and the others through ``1 - …`` and ``|``;
``and``/``or``/``not`` as ``&``/``|``/``1 - x``; ``where`` as ``(a if c else b)``; element-wise ``min``/``max``
nested two-argument forms, ``abs(x)`` as ``max(x, -(x))``, ``clamp`` as ``min(max(x, lo), hi)``;
``default(x, d)`` as ``x`` (the compiler already wrote ``d`` where the generation lacks ``x``; perf's NaN
for a missing count and perfonto's null are the same outcome). Rollups over instances: ``sum`` is the
expression itself (perf sums an uncore PMU's instances into one count), ``avg`` divides by
``source_count``, both only over linear expressions of signals. Anything else raises ``Unsupported``
with the reason.

A chip-scope spec constant that the compiler had to read per chip (``Const.chip_power`` 0 where its scope
says 1: ``infer.Typer.metric``) makes a formula that perf's constants, always per-chip amounts, cannot
state when the operands of a sum, difference, comparison or choice then disagree in how they scale with
chips; such a metric is refused (``check_chip_degrees``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pint

from perfonto.dsl.precedence import PERF_BINARY, PerfPrec, bracket
from perfonto.metrics import ir
from perfonto.ontology import kinds
from perfonto.ontology.resolved import Scope

__all__ = ["PerfIR", "Unsupported", "check_chip_degrees", "comparison", "number", "offset_unit"]

NEG, ATOM = PerfPrec.NEG, PerfPrec.ATOM
_SAME_DEGREE = {"add", "sub", "min", "max", "clamp", "lt", "le", "gt", "ge", "eq", "ne", "default"}
_CMP_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class Unsupported(Exception):
    """The metric has no perf form; the message says why."""


def number(v: float) -> str:
    """A number perf's lexer reads: ``[0-9.]+(e-?[0-9]+)?``, so no ``+`` in the exponent (the absolute
    value: a sign is written by the caller)."""
    if not math.isfinite(v):
        raise Unsupported(f"the value {v} is not finite")
    v = abs(float(v))
    if v.is_integer() and v < 1e15:
        return str(int(v))
    for digits in range(1, 18):  # the shortest %g form that reads back exactly
        s = f"{v:.{digits}g}"
        if float(s) == v:
            break
    return s.replace("e+", "e")


def signed(v: float) -> tuple[str, int]:
    """``v`` as perf text with its precedence (a negative number is a negation)."""
    return (number(v), ATOM) if v >= 0 else (f"-{number(v)}", NEG)


def offset_unit(reg: pint.UnitRegistry, u) -> bool:
    """An offset unit (degC): zero in it is not zero in base units."""
    return float(reg.Quantity(0.0, u).to_base_units().magnitude) != 0.0


def _unit_factor(n: ir.Node) -> bool:
    """A factor that is 1 in base units in a window: a unit conversion or a server-level chip factor."""
    return isinstance(n, ir.Const) and n.origin in ("convert", "chip")


def _natural_power(gen, c: ir.Const) -> int:
    """How a spec constant scales with chips by its scope alone (1: a chip-scope amount; 0 otherwise)."""
    return 1 if gen.spec[c.label].scope is Scope.chip else 0


def check_chip_degrees(gen, node: ir.Node) -> None:
    """Refuse (``Unsupported``) a formula whose chip-scope constants, read as perf reads them (per-chip
    amounts), give the operands of a sum, difference, comparison or choice different chip degrees.
    Only formulas where the compiler read such a constant per chip can fail."""
    if not any(
        isinstance(n, ir.Const) and n.origin == "spec" and n.chip_power != _natural_power(gen, n) for n in ir.walk(node)
    ):
        return
    _degree(gen, node)


def _degree(gen, n: ir.Node) -> int | None:
    """Chip degree of ``n`` with every spec constant at its natural power; None for a number of the
    formula (a literal, a count: it takes its partner's degree, as the compiler's literals do)."""
    if isinstance(n, ir.Const):
        return _natural_power(gen, n) if n.origin == "spec" else None
    if isinstance(n, (ir.Input, ir.Interval, ir.MetricRef)):
        return n.degree
    if isinstance(n, ir.Rollup):
        return _degree(gen, n.arg)
    ds = [_degree(gen, a) for a in n.args if not _unit_factor(a)]
    if n.op in _SAME_DEGREE or n.op == "where":
        return _same_degree(gen, n, ds[1:] if n.op == "where" else ds)
    return _product_degree(n.op, ds)


def _same_degree(gen, n: ir.Op, ds: list[int | None]) -> int | None:
    """Operands that must scale alike with chips (a sum, a difference, a comparison, a choice)."""
    known = {d for d in ds if d is not None}
    if len(known) > 1:
        spec = next(c.label for c in ir.walk(n) if isinstance(c, ir.Const) and c.origin == "spec")
        raise Unsupported(
            f"`{spec}` is read per chip here: with perf's constants (per-chip amounts) the formula's `{n.op}` "
            "combines a quantity that adds up across chips with one that does not"
        )
    if n.op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return 0
    return known.pop() if known else None


def _product_degree(op: str, ds: list[int | None]) -> int | None:
    """Products and quotients add and subtract degrees; a conversion or chip factor was left out."""
    if op in ("mul", "div") and len(ds) == 1:
        return ds[0]
    if op == "mul":
        known = [d for d in ds if d is not None]
        return sum(known) if known else None
    if op == "div":
        x, y = ds
        return None if x is None and y is None else (x or 0) - (y or 0)
    if op in ("neg", "abs"):
        return ds[0]
    if op in ("pow", "not", "and", "or"):
        return 0  # pow of a dimensionless base, logic: chip-independent
    raise ValueError(f"no perf-JSON chip degree for IR op {op!r}")  # an operation added to metrics.ops.Op only


class PerfIR:
    """IR → perf expression text with its precedence. ``events`` and ``specs`` collect the signals and
    spec constants the written expressions read (their definitions are exported beside them).

    Dispatch goes through the shared tables of every expression backend: ``handlers`` (node type → method,
    ``metrics.ir.handlers``) and ``ops`` (``metrics.ops.Op`` name → method); an operation missing from
    ``ops`` is refused by name (``tests/test_ops.py``)."""

    def __init__(self, graph):
        self.graph, self.gen = graph, graph.generation
        self.reg: pint.UnitRegistry = self.gen.registry
        self.events: set[str] = set()
        self.specs: set[str] = set()
        self.in_rollup = False  # inside sum/avg over instances, where a per-instance event may stand
        self.handlers = ir.handlers(self)
        self.ops: dict[str, Callable[[ir.Op], tuple[str, int]]] = {
            "add": self.binary("+", _zero, commutative=True),
            "sub": self.binary("-", _zero, commutative=False),
            "mul": self.binary("*", _unit_factor, commutative=True),
            "div": self.binary("/", _unit_factor, commutative=False),
            "pow": self.power,
            "neg": self.neg,
            "abs": self.call,
            "min": self.call,
            "max": self.call,
            "clamp": self.call,
            **{c: self.compare for c in ("lt", "le", "gt", "ge", "eq", "ne")},
            "and": self.logic,
            "or": self.logic,
            "not": self.not_,
            "where": self.where,
            "default": self.default,
        }

    def text(self, node: ir.Node) -> str:
        """The perf ``MetricExpr`` of ``node`` (see the module docstring); raises ``Unsupported``."""
        return self.expr(node)[0]

    def p(self, n: ir.Node, need: int) -> str:
        """``n``'s text, bracketed when it binds looser than ``need`` (a ``PerfPrec`` level)."""
        s, prec = self.expr(n)
        return bracket(s, prec, need)

    def expr(self, n: ir.Node) -> tuple[str, int]:
        """(text, precedence) of any IR node. Raises ``Unsupported``."""
        return self.handlers[type(n)](n)

    # -- leaves -------------------------------------------------------------------------------------
    def const(self, c: ir.Const) -> tuple[str, int]:
        """A number by its origin: a spec constant by name, a literal in base units, a unit conversion or
        chip factor as 1, any other number as it is."""
        if c.origin == "spec":
            self.specs.add(c.label)
            return c.label, ATOM
        if _unit_factor(c):
            return "1", ATOM
        if c.origin == "literal" and c.label:
            try:
                q = self.reg.Quantity(c.value, self.reg.parse_units(c.label))
                return signed(float(q.to_base_units().magnitude))
            except Exception as exc:
                raise Unsupported(f"literal `{c.value:g} {c.label}`: {exc}") from None
        return signed(c.value)

    def input(self, n: ir.Input) -> tuple[str, int]:
        """A signal as perf reads it: its raw count times its scale in base units."""
        name = n.signal
        if name not in self.gen.signals:
            raise Unsupported(f"`{name}` is not a counter, constant or window metric perf can read")
        s = self.gen.signals[name]
        if s.axes and not self.in_rollup:
            raise Unsupported(f"`{name}` per instance: perf aggregates PMU instances; roll it up with sum() or avg()")
        if kinds.of(s).window not in ("increase", "mean"):
            raise Unsupported(f"`{name}` is a {s.kind} register; perf events are counts")
        if offset_unit(self.reg, s.unit):
            raise Unsupported(f"`{name}` is in an offset unit ({s.unit_text})")
        k = float(self.reg.Quantity(s.scale, s.unit).to_base_units().magnitude)  # one raw count in base units
        self.events.add(name)
        return (name if k == 1.0 else f"({name} * {number(k)})"), ATOM

    def interval(self, n: ir.Interval) -> tuple[str, int]:
        return "duration_time", ATOM

    def metric_ref(self, n: ir.MetricRef) -> tuple[str, int]:
        return n.metric, ATOM

    def rollup(self, r: ir.Rollup) -> tuple[str, int]:
        """``sum``/``avg`` over instances of a linear expression of signals; ``min``/``max`` refused."""
        if r.func in ("min", "max"):
            raise Unsupported(f"`{r.func}()` over instances: perf aggregates PMU instances by summing them")
        sigs = [n.signal for n in ir.walk(r.arg) if isinstance(n, ir.Input) and n.signal in self.gen.signals]
        if not _linear(r.arg) or not sigs:
            raise Unsupported(f"`{r.func}()` of a non-linear expression: perf can only sum instance counts")
        outer, self.in_rollup = self.in_rollup, True
        try:
            if r.func == "sum":
                return self.expr(r.arg)
            return f"{self.p(r.arg, PerfPrec.TERM)} / source_count({sigs[0]})", PerfPrec.TERM
        finally:
            self.in_rollup = outer

    # -- operations (``metrics.ops.Op``) --------------------------------------------------------------
    def op(self, n: ir.Op) -> tuple[str, int]:
        if n.op not in self.ops:  # an operation added to metrics.ops.Op only
            raise ValueError(f"no perf-JSON handler for IR op {n.op!r}")
        return self.ops[n.op](n)

    def infix(self, sym: str, a: ir.Node, b: ir.Node) -> tuple[str, int]:
        """``a sym b`` for a left-associative binary operator of perf's (``PERF_BINARY``)."""
        prec = PERF_BINARY[sym]
        return f"{self.p(a, prec)} {sym} {self.p(b, prec + 1)}", prec

    def binary(self, sym: str, neutral: Callable[[ir.Node], bool], commutative: bool):
        """``a sym b`` (``+ - * /``), an operand that changes nothing dropped: a zero added or subtracted (an
        absent optional input's zero default), a conversion or chip factor multiplied or divided by (1 in
        base units); on the left only where the operator is commutative."""

        def emit(n: ir.Op) -> tuple[str, int]:
            a, b = n.args
            if neutral(b):
                return self.expr(a)
            if commutative and neutral(a):
                return self.expr(b)
            return self.infix(sym, a, b)

        return emit

    def power(self, n: ir.Op) -> tuple[str, int]:
        """``base ** n`` for an integer ``|n| <= 8`` as repeated products (perf has no power)."""
        base, exp = n.args
        if not (isinstance(exp, ir.Const) and float(exp.value).is_integer() and abs(exp.value) <= 8):
            raise Unsupported("a power with a non-integer exponent has no perf form")
        k = int(exp.value)
        if k == 0:
            return "1", ATOM
        b = self.p(base, ATOM)
        prod = " * ".join([b] * abs(k))
        return (prod, PerfPrec.TERM) if k > 0 else (f"1 / ({prod})", PerfPrec.TERM)

    def neg(self, n: ir.Op) -> tuple[str, int]:
        return "-" + self.p(n.args[0], NEG), NEG

    def not_(self, n: ir.Op) -> tuple[str, int]:
        return f"1 - {self.p(n.args[0], PerfPrec.TERM)}", PerfPrec.SUM

    def where(self, n: ir.Op) -> tuple[str, int]:
        c, t, o = (self.p(x, PerfPrec.OR) for x in n.args)
        return f"({t} if {c} else {o})", ATOM

    def logic(self, n: ir.Op) -> tuple[str, int]:
        return self.infix("&" if n.op == "and" else "|", *n.args)

    def default(self, n: ir.Op) -> tuple[str, int]:
        """``x``: the compiler wrote d where x is absent; perf's NaN is perfonto's null."""
        return self.expr(n.args[0])

    def call(self, n: ir.Op) -> tuple[str, int]:
        """Element-wise functions: perf's two-argument ``min``/``max``, and ``abs``/``clamp`` through them."""
        args = [self.p(x, PerfPrec.ANY) for x in n.args]
        if n.op == "abs":
            return f"max({args[0]}, -({args[0]}))", ATOM
        if n.op == "clamp":
            return f"min(max({args[0]}, {args[1]}), {args[2]})", ATOM
        return f"{n.op}({args[0]}, {args[1]})", ATOM

    def compare(self, n: ir.Op) -> tuple[str, int]:
        x, y = (self.p(a, PerfPrec.SUM) for a in n.args)
        return comparison(x, n.op, y)


def comparison(x: str, op: str, y: str) -> tuple[str, int]:
    """``x op y`` in perf's language (``op``: an IR comparison ``lt`` … ``ne`` or its symbol ``<`` … ``!=``),
    with its precedence: ``<``/``>`` as such, the others through ``1 - …`` and ``|`` (perf's give 1/0)."""
    op = _CMP_SYMBOL.get(op, op)
    if op in ("<", ">"):
        return f"{x} {op} {y}", PerfPrec.CMP
    if op == "<=":
        return f"1 - ({x} > {y})", PerfPrec.SUM
    if op == ">=":
        return f"1 - ({x} < {y})", PerfPrec.SUM
    if op == "==":
        return f"1 - ({x} < {y} | {x} > {y})", PerfPrec.SUM
    if op == "!=":
        return f"{x} < {y} | {x} > {y}", PerfPrec.OR
    raise ValueError(f"no perf form for the comparison {op!r}")


def _zero(n: ir.Node) -> bool:
    """A number 0 of the formula (not a spec constant): nothing to add."""
    return isinstance(n, ir.Const) and n.origin != "spec" and n.value == 0.0


def _linear(n: ir.Node) -> bool:
    """Sums and differences of signals and constant multiples of them: a sum over instances distributes."""
    if isinstance(n, ir.Input) or _zero(n):
        return True
    if isinstance(n, ir.Op) and n.op == "default":
        return _linear(n.args[0])
    if isinstance(n, ir.Op) and n.op in ("add", "sub"):
        return _linear(n.args[0]) and _linear(n.args[1])
    if isinstance(n, ir.Op) and n.op == "mul":
        x, y = n.args
        return (isinstance(x, ir.Const) and _linear(y)) or (isinstance(y, ir.Const) and _linear(x))
    if isinstance(n, ir.Op) and n.op == "div":
        return isinstance(n.args[1], ir.Const) and _linear(n.args[0])
    if isinstance(n, ir.Op) and n.op == "neg":
        return _linear(n.args[0])
    return False
