"""Operator precedence for the formula printers, one table per language printed, all here.

``Prec`` is the metric language's (``dsl/metrics.lark``), read by the printers that write it:
``dsl.printer.to_text`` (the syntax tree) and ``interop.translate.Printer`` (the importers' neutral tree).
``PerfPrec`` is perf's expression language (``tools/perf/util/expr.y``), read by
``interop.perf_export``. A printer gives every sub-expression its level and the level its position needs,
and brackets it when the first is below the second (:func:`bracket`); a left-associative operator needs
one level more on its right (``a - (b - c)``).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Prec", "BINARY", "CMP_OPS", "PerfPrec", "PERF_BINARY", "bracket"]


class Prec(IntEnum):
    """Binding strength in the metric language, loosest first (the grammar's rule order)."""

    IF = 1  # then if cond else otherwise
    OR = 2
    AND = 3
    NOT = 4  # not x
    CMP = 5  # < <= > >= == != (both operands are sums)
    SUM = 6  # + -
    TERM = 7  # * /
    NEG = 8  # -x
    POW = 9  # a ** b (the base is an atom, the exponent a factor)
    ATOM = 10  # a number, a name, a call, a bracketed expression


CMP_OPS = frozenset({"<", "<=", ">", ">=", "==", "!="})

# A binary operator of the metric language -> its level.
BINARY: dict[str, Prec] = {
    "or": Prec.OR,
    "and": Prec.AND,
    **{op: Prec.CMP for op in sorted(CMP_OPS)},
    "+": Prec.SUM,
    "-": Prec.SUM,
    "*": Prec.TERM,
    "/": Prec.TERM,
    "**": Prec.POW,
}


class PerfPrec(IntEnum):
    """Binding strength in perf's expression language, loosest first (expr.y's ``%left`` order)."""

    ANY = 0  # a function argument: any expression
    OR = 1  # |
    XOR = 2  # ^
    AND = 3  # &
    CMP = 4  # < >
    SUM = 5  # + -
    TERM = 6  # * /
    NEG = 7  # -x
    ATOM = 8  # a number, an event, a metric, a call, a bracketed expression


# A binary operator of perf's language -> its level.
PERF_BINARY: dict[str, PerfPrec] = {
    "|": PerfPrec.OR,
    "^": PerfPrec.XOR,
    "&": PerfPrec.AND,
    "<": PerfPrec.CMP,
    ">": PerfPrec.CMP,
    "+": PerfPrec.SUM,
    "-": PerfPrec.SUM,
    "*": PerfPrec.TERM,
    "/": PerfPrec.TERM,
}


def bracket(text: str, level: int, need: int) -> str:
    """``text`` (an expression of precedence ``level``) as written where ``need`` is required: bracketed
    when it binds more loosely."""
    return f"({text})" if level < need else text
