"""The element-wise operations of the typed IR (``metrics.ir.Op``), one enumeration that every expression
backend is written against: the reference interpreter (``metrics.interpreter``), the NumPy evaluator and the
fused kernel (``codegen.python_evaluator``, ``codegen.kernel``) and the SQL emitter (``codegen.sql``).

``Op`` members are strings (``Op.ADD == "add"``), so an IR node holds the plain name; ``ARITY`` gives each
operation's argument count (``min``/``max`` are binary in the IR: the compiler pairs their arguments).
``tests/test_ops.py`` checks that every backend evaluates every member and agrees with the interpreter.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Op", "ARITY", "ARITHMETIC", "COMPARISONS", "LOGIC"]


class Op(str, Enum):
    """An element-wise IR operation (division by zero gives null; comparisons and logic give 1/0, null in, null out)."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    NEG = "neg"
    ABS = "abs"
    MIN = "min"
    MAX = "max"
    CLAMP = "clamp"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"
    NOT = "not"
    WHERE = "where"
    DEFAULT = "default"  # default(x, d): d where the capture lacks x (a catalog rewrite), else x; metrics.optional

    def __str__(self) -> str:
        return self.value


ARITY = {Op.NEG: 1, Op.ABS: 1, Op.NOT: 1, Op.CLAMP: 3, Op.WHERE: 3}
ARITY = {op: ARITY.get(op, 2) for op in Op}
ARITHMETIC = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.NEG, Op.ABS, Op.MIN, Op.MAX, Op.CLAMP, Op.DEFAULT})
COMPARISONS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE})
LOGIC = frozenset({Op.AND, Op.OR, Op.NOT, Op.WHERE})
