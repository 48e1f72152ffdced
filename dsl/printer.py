"""Print an expression back as metric-language text, with only the brackets precedence needs (the
metric language's table, ``dsl.precedence.Prec``)."""

from __future__ import annotations

from . import ast
from .precedence import BINARY, Prec, bracket


def _prec(e: ast.Expr) -> Prec:
    if isinstance(e, ast.IfElse):
        return Prec.IF
    if isinstance(e, ast.Binary):
        return BINARY[e.op]
    if isinstance(e, ast.Unary):
        return Prec.NOT if e.op == "not" else Prec.NEG
    return Prec.ATOM


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def to_text(e: ast.Expr) -> str:
    """``sum(hbm.read_bytes) / interval``; ``a - (b - c)`` keeps its brackets, ``(a * b) * c`` loses them.
    The text parses back to the same tree."""
    if isinstance(e, ast.Number):
        if e.unit is None:
            return _num(e.value)
        unit = e.unit if (e.unit == "%" or e.unit.replace("_", "").isalnum()) else f"[{e.unit}]"
        return f"{_num(e.value)} {unit}"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Call):
        return f"{e.func}(" + ", ".join(to_text(a) for a in e.args) + ")"
    p = _prec(e)

    def sub(x: ast.Expr, right: bool = False, assoc: bool = True) -> str:
        return bracket(to_text(x), _prec(x), p + 1 if right and not assoc else p)

    if isinstance(e, ast.IfElse):

        def tight(x: ast.Expr) -> str:  # then and cond are or-expressions in the grammar
            return bracket(to_text(x), _prec(x), p + 1)

        return f"{tight(e.then)} if {tight(e.cond)} else {to_text(e.otherwise)}"
    if isinstance(e, ast.Unary):
        return f"not {sub(e.operand)}" if e.op == "not" else f"-{sub(e.operand)}"
    if e.op == "**":
        left = bracket(to_text(e.left), _prec(e.left), Prec.ATOM)  # the grammar's base is an atom
        return f"{left} ** {sub(e.right)}"
    # the grammar is left-associative: a right operand of equal precedence keeps its brackets
    return f"{sub(e.left)} {e.op} {sub(e.right, right=True, assoc=False)}"
