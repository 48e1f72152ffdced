"""Test-only reference evaluators of Intel perfmon formulas and Arm telemetry formulas.

Both are Python-like expressions (Intel: ``a if c else b``, ``min``/``max``; Arm: plain arithmetic), so
they are evaluated with Python's own parser (``ast``), a whitelist of node types and IEEE arithmetic:
division by zero gives NaN (neither source defines it; IEEE NaN is what perf gives for Intel's
formulas after conversion). A condition is true when non-zero (Python truthiness; NaN is true).
Intel thresholds are not evaluated here (their ``&`` does not have Python's precedence).
"""

from __future__ import annotations

import ast
import math

NAN = float("nan")


def evaluate(formula: str, env: dict[str, float]) -> float:
    """Value of ``formula`` with names bound by ``env``."""
    tree = ast.parse(formula.strip(), mode="eval")
    return _ev(tree.body, env)


def _ev(n, env) -> float:
    if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
        return float(n.value)
    if isinstance(n, ast.Name):
        return float(env[n.id])
    if isinstance(n, ast.Attribute):  # dotted names (none expected; kept strict)
        raise KeyError(ast.unparse(n))
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return -_ev(n.operand, env)
    if isinstance(n, ast.BinOp):
        a, b = _ev(n.left, env), _ev(n.right, env)
        if isinstance(n.op, ast.Add):
            return a + b
        if isinstance(n.op, ast.Sub):
            return a - b
        if isinstance(n.op, ast.Mult):
            return a * b
        if isinstance(n.op, ast.Div):
            return NAN if b == 0 else a / b
    if isinstance(n, ast.IfExp):
        c = _ev(n.test, env)
        return _ev(n.body, env) if (c != 0 or math.isnan(c)) else _ev(n.orelse, env)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and len(n.args) == 2:
        a, b = (_ev(x, env) for x in n.args)
        return min(a, b) if n.func.id == "min" else max(a, b)
    if isinstance(n, ast.Compare) and len(n.ops) == 1:
        a, b = _ev(n.left, env), _ev(n.comparators[0], env)
        op = type(n.ops[0])
        return float(
            {ast.Lt: a < b, ast.Gt: a > b, ast.LtE: a <= b, ast.GtE: a >= b, ast.Eq: a == b, ast.NotEq: a != b}[op]
        )
    raise ValueError(f"unsupported construct {ast.dump(n)}")
