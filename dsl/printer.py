"""Print an expression back as metric-language text, with only the brackets precedence needs."""

from __future__ import annotations

from . import ast

# binding strength, higher binds tighter (mirrors dsl/metrics.lark)
_PREC = {"if": 1, "or": 2, "and": 3, "not": 4, "cmp": 5, "+": 6, "-": 6, "*": 7, "/": 7, "neg": 8, "**": 9, "atom": 10}
_CMP = {"<", "<=", ">", ">=", "==", "!="}


def _prec(e: ast.Expr) -> int:
    if isinstance(e, ast.IfElse):
        return _PREC["if"]
    if isinstance(e, ast.Binary):
        return _PREC["cmp"] if e.op in _CMP else _PREC[e.op]
    if isinstance(e, ast.Unary):
        return _PREC["not"] if e.op == "not" else _PREC["neg"]
    return _PREC["atom"]


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
        t = to_text(x)
        px = _prec(x)
        if px < p or (px == p and right and not assoc):
            return f"({t})"
        return t

    if isinstance(e, ast.IfElse):

        def tight(x: ast.Expr) -> str:  # then and cond are or-expressions in the grammar
            return f"({to_text(x)})" if _prec(x) <= p else to_text(x)

        return f"{tight(e.then)} if {tight(e.cond)} else {to_text(e.otherwise)}"
    if isinstance(e, ast.Unary):
        return f"not {sub(e.operand)}" if e.op == "not" else f"-{sub(e.operand)}"
    if e.op == "**":
        left = (
            to_text(e.left) if _prec(e.left) == _PREC["atom"] else f"({to_text(e.left)})"
        )  # the grammar's base is an atom
        return f"{left} ** {sub(e.right)}"
    # the grammar is left-associative: a right operand of equal precedence keeps its brackets
    return f"{sub(e.left)} {e.op} {sub(e.right, right=True, assoc=False)}"
