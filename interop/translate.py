"""Print a neutral expression (``perfonto.importers.ir``) in perfonto's metric language.

Two jobs beyond printing with the fewest brackets the grammar (``dsl/metrics.lark``; its precedence table is
``dsl.precedence.Prec``) needs:

- **units of literals.** Source languages have no units: ``a + 5`` adds five *of whatever a counts*.
  In perfonto a bare number is dimensionless, so a literal next to a quantity with a unit (in ``+``,
  ``-``, comparisons, ``min``/``max`` and the branches of ``if``) is written in that quantity's base
  unit (``5 [event]``). The unit of every sub-expression is inferred here on the tree, with the
  generation's pint registry.
- **explicit semantics.** ``SafeDiv(a, b)`` (perf ``d_ratio``, rocprofiler ``/``) is written
  ``a / b if b != 0 else 0`` with the zero in ``a/b``'s unit; ``Truth(x)`` is ``x != 0``; ``BoolNum(c)``
  is ``1 if c else 0``.

Names are looked up in maps built by ``perfonto.importers.build`` (already validated identifiers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pint

from perfonto.dsl.precedence import Prec, bracket

from . import ir
from .units import base_units, unit_text


@dataclass
class RefInfo:
    """What a metric reference prints as: its perfonto name, declared unit and compensation ``k``
    (the metric's value is the source's value × k in pint terms; a reference divides it back)."""

    name: str
    unit: pint.Unit
    k: float = 1.0


def number(v: float) -> str:
    """A literal the grammar's NUMBER accepts (no sign; callers add ``-``)."""
    v = abs(float(v))
    if not math.isfinite(v):
        raise ir.Unsupported(f"the literal {v} is not a finite number")
    if v.is_integer() and v < 1e15:
        return str(int(v))
    return repr(float(v))


class Printer:
    """Prints one catalog's expressions; ``events``/``consts`` map source keys to perfonto names."""

    def __init__(
        self,
        reg: pint.UnitRegistry,
        signal_units: dict[str, pint.Unit],
        events: dict[str, str],
        consts: dict[str, str],
        const_units: dict[str, pint.Unit],
        refs: dict[str, RefInfo],
    ):
        self.reg = reg
        self.signal_units = signal_units
        self.events = events
        self.consts = consts
        self.const_units = const_units
        self.refs = refs
        self._units: dict[ir.Node, pint.Unit | None] = {}

    # -- units -----------------------------------------------------------------------------------
    def unit(self, n: ir.Node) -> pint.Unit | None:
        """Unit of ``n`` (None for a condition)."""
        if n in self._units:
            return self._units[n]
        u = self._unit(n)
        self._units[n] = u
        return u

    def _unit(self, n: ir.Node):
        reg = self.reg
        if isinstance(n, ir.Num):
            return reg.parse_units(n.unit) if n.unit else reg.dimensionless
        if isinstance(n, ir.Event):
            return self.signal_units[self.events[n.key]]
        if isinstance(n, ir.Const):
            return self.const_units[self.consts[n.key]]
        if isinstance(n, ir.Ref):
            return self.refs[n.key].unit
        if isinstance(n, ir.Interval):
            return reg.second
        if ir.is_bool(n):
            return None
        if isinstance(n, ir.BoolNum):
            return reg.dimensionless
        if isinstance(n, ir.Bin):
            a, b = self.unit(n.left), self.unit(n.right)
            a = a if a is not None else reg.dimensionless
            b = b if b is not None else reg.dimensionless
            if n.op == "*":
                return a * b
            if n.op == "/":
                return a / b
            return b if _bare(n.left) else a
        if isinstance(n, ir.SafeDiv):
            return (self.unit(n.num) or reg.dimensionless) / (self.unit(n.den) or reg.dimensionless)
        if isinstance(n, (ir.Neg, ir.Rollup)):
            return self.unit(ir.children(n)[0])
        if isinstance(n, ir.If):
            return self.unit(n.other) if _bare(n.then) else self.unit(n.then)
        if isinstance(n, ir.Call):
            for a in n.args:
                if not _bare(a):
                    return self.unit(a)
            return self.unit(n.args[0])
        raise TypeError(n)  # pragma: no cover

    def _partner_unit(self, *nodes: ir.Node) -> pint.Unit | None:
        """The (base) unit a bare literal among ``nodes`` takes: that of the first non-literal."""
        for x in nodes:
            if not _bare(x):
                u = self.unit(x)
                if u is not None and not u.dimensionless:
                    return base_units(self.reg, u)
                return None
        return None

    # -- printing --------------------------------------------------------------------------------
    def text(self, n: ir.Node) -> str:
        return self._p(n, Prec.IF)

    def _p(self, n: ir.Node, need: int, lit_unit: pint.Unit | None = None) -> str:
        s, prec = self._node(n, lit_unit)
        return bracket(s, prec, need)

    def _zero(self, u: pint.Unit | None) -> str:
        return "0" if u is None or u.dimensionless else f"0 [{unit_text(base_units(self.reg, u))}]"

    def _node(self, n: ir.Node, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """The text of `n` and its precedence, by the printer of its node type (``_PRINTERS``)."""
        for cls in type(n).__mro__:
            printer = _PRINTERS.get(cls)
            if printer is not None:
                return printer(self, n, lit_unit)
        raise TypeError(n)  # pragma: no cover

    def _num(self, n: ir.Num, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """A number, with its unit or, when bare, its partner's unit."""
        u = n.unit or (unit_text(lit_unit) if lit_unit is not None else None)
        body = number(n.value) + (f" [{u}]" if u else "")
        return (f"-{body}", Prec.NEG) if n.value < 0 else (body, Prec.ATOM)

    def _ref(self, n: ir.Ref, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """Another imported metric by name, scaled back to the source's value when its unit was scaled."""
        r = self.refs[n.key]
        if r.k == 1.0:
            return r.name, Prec.ATOM
        inv = 1.0 / r.k
        if abs(inv - round(inv)) < 1e-9 * abs(inv):
            return f"{r.name} * {number(round(inv))}", Prec.TERM
        return f"{r.name} / {number(r.k)}", Prec.TERM

    def _neg(self, n: ir.Neg, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """A minus sign (spaced from an operand that starts with one)."""
        s = self._p(n.operand, Prec.NEG, lit_unit)
        return ("- " + s if s.startswith("-") else "-" + s), Prec.NEG

    def _if(self, n: ir.If, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """`then if cond else other`, bare numbers in a branch taking the other branch's unit."""
        lu = self._partner_unit(n.then, n.other)
        return (
            f"{self._p(n.then, Prec.OR, lu)} if {self._p(n.cond, Prec.OR)} else {self._p(n.other, Prec.IF, lu)}",
            Prec.IF,
        )

    def _call(self, n: ir.Call, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """A function call; bare numbers among min/max arguments take their partners' unit."""
        lu = self._partner_unit(*n.args) if n.fn in ("min", "max") else None
        return f"{n.fn}({', '.join(self._p(a, Prec.IF, lu) for a in n.args)})", Prec.ATOM

    def _safe_div(self, n: ir.SafeDiv, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """A division that gives 0 where the divisor is 0, written as an explicit `if ... else 0`."""
        q = ir.Bin("/", n.num, n.den)
        return (
            f"{self._p(q, Prec.OR)} if {self._p(n.den, Prec.SUM)} != {self._zero(self.unit(n.den))} "
            f"else {self._zero(self.unit(q))}",
            Prec.IF,
        )

    def _bin(self, n: ir.Bin, lit_unit: pint.Unit | None) -> tuple[str, int]:
        """A binary operator with the fewest brackets; bare numbers in sums and comparisons take the
        other side's unit."""
        op = n.op
        if op in ("and", "or"):
            prec = Prec.AND if op == "and" else Prec.OR
            return f"{self._p(n.left, prec)} {op} {self._p(n.right, prec + 1)}", prec
        lu = self._partner_unit(n.left, n.right) if op in ("+", "-") or op in ir.CMP_OPS else None
        if op in ir.CMP_OPS:
            return f"{self._p(n.left, Prec.SUM, lu)} {op} {self._p(n.right, Prec.SUM, lu)}", Prec.CMP
        if op in ("+", "-"):
            return f"{self._p(n.left, Prec.SUM, lu)} {op} {self._p(n.right, Prec.TERM, lu)}", Prec.SUM
        if op in ("*", "/"):
            return f"{self._p(n.left, Prec.TERM)} {op} {self._p(n.right, Prec.NEG)}", Prec.TERM
        raise TypeError(n)  # pragma: no cover


# Node type -> its printer (Printer._node): each returns the text and its precedence.
_PRINTERS = {
    ir.Num: Printer._num,
    ir.Event: lambda self, n, lu: (self.events[n.key], Prec.ATOM),
    ir.Const: lambda self, n, lu: (self.consts[n.key], Prec.ATOM),
    ir.Ref: Printer._ref,
    ir.Interval: lambda self, n, lu: ("interval", Prec.ATOM),
    ir.Neg: Printer._neg,
    ir.Not: lambda self, n, lu: ("not " + self._p(n.operand, Prec.NOT), Prec.NOT),
    ir.Truth: lambda self, n, lu: (f"{self._p(n.operand, Prec.SUM)} != {self._zero(self.unit(n.operand))}", Prec.CMP),
    ir.BoolNum: lambda self, n, lu: (f"1 if {self._p(n.cond, Prec.OR)} else 0", Prec.IF),
    ir.If: Printer._if,
    ir.Call: Printer._call,
    ir.Rollup: lambda self, n, lu: (f"{n.fn}({self._p(n.arg, Prec.IF)})", Prec.ATOM),
    ir.SafeDiv: Printer._safe_div,
    ir.Bin: Printer._bin,
}


def _bare(n: ir.Node) -> bool:
    """A literal without a unit (it adapts to its partner), also under a minus sign."""
    while isinstance(n, ir.Neg):
        n = n.operand
    return isinstance(n, ir.Num) and n.unit is None


def strip_factor(n: ir.Node, c: float) -> ir.Node | None:
    """``n`` with one literal factor ``c`` removed from its multiplicative spine, or None.

    ``100 * (a / b)`` → ``a / b`` for c = 100; ``a / b * 1000`` → ``a / b``; ``(1000 * a) / b`` →
    ``a / b``. Only factors of the numerator are removed (the value is divided by c exactly).
    """

    def same(x):
        return isinstance(x, ir.Num) and x.unit is None and x.value != 0 and abs(x.value - c) <= 1e-12 * abs(c)

    if isinstance(n, ir.Bin) and n.op == "*":
        if same(n.left):
            return n.right
        if same(n.right):
            return n.left
        left = strip_factor(n.left, c)
        if left is not None:
            return ir.Bin("*", left, n.right)
        right = strip_factor(n.right, c)
        if right is not None:
            return ir.Bin("*", n.left, right)
        return None
    if isinstance(n, ir.Bin) and n.op == "/":
        if same(n.left):
            return ir.Bin("/", ir.Num(1.0), n.right)
        left = strip_factor(n.left, c)
        return None if left is None else ir.Bin("/", left, n.right)
    if isinstance(n, ir.SafeDiv):  # (c·a) / b, or 0 when b is 0: a / b, or 0, times c
        if same(n.num):
            return ir.SafeDiv(ir.Num(1.0), n.den)
        num = strip_factor(n.num, c)
        return None if num is None else ir.SafeDiv(num, n.den)
    return None


def apply_scale(n: ir.Node, k: float) -> tuple[ir.Node, str]:
    """``n × k``, preferring to remove a literal ``1/k`` already in ``n`` (the source's own unit
    conversion, e.g. Intel's leading ``100 *`` for percent). Returns the node and how it was done."""
    if k == 1.0:
        return n, ""
    inv = 1.0 / k
    stripped = strip_factor(n, inv)
    if stripped is not None:
        return stripped, f"removed the factor {number(inv)} (the unit conversion is the declared unit's)"
    if abs(inv - round(inv)) < 1e-9 * abs(inv) and round(inv) != 0:
        return ir.Bin("/", n, ir.Num(float(round(inv)))), f"divided by {number(round(inv))} to keep the source's value"
    return ir.Bin("*", n, ir.Num(k)), f"multiplied by {number(k)} to keep the source's value"
