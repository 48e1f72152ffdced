"""Checks on imported formulas (on the neutral tree, before printing), each a ``Finding``:

- ``self-cancelling``: a term added and subtracted in the same sum, or a factor in both the
  numerator and the denominator of the same product (``(4 * a) / (4 * b)``): the formula is not
  what it seems, or carries dead weight;
- ``zero-divisor``: a division by an expression of constants only that is zero with the assumed
  constants (error), or that depends on a machine constant or a difference of constants and so can
  be zero on some machine (warning), e.g. perf's ``#slots - 5``;
- ``undefined-event``: an event the file references but does not define;
- ``nan-condition``: a condition that divides by a counter: where the divisor is zero perf takes the
  *then* branch (``fpclassify(NaN) != FP_ZERO``, expr.y) while perfonto's result is null.
The unit checks that need the declared unit (``percent-vs-fraction``, ``unit-scale``) run in
``perfonto.importers.build``.
"""

from __future__ import annotations

from . import ir
from .catalog import Finding, SourceCatalog, SourceMetric


def _show_num(n: ir.Num) -> str:
    v = n.value
    return (str(int(v)) if float(v).is_integer() else repr(v)) + (f" {n.unit}" if n.unit else "")


# Each node type -> its short infix text (``show``), its operands shown in turn.
_SHOW = {
    ir.Num: _show_num,
    ir.Event: lambda n: n.key,
    ir.Const: lambda n: n.key,
    ir.Ref: lambda n: n.key,
    ir.Interval: lambda n: "interval",
    ir.Bin: lambda n: f"({show(n.left)} {n.op} {show(n.right)})",
    ir.Neg: lambda n: f"-{show(n.operand)}",
    ir.Not: lambda n: f"not {show(n.operand)}",
    ir.Truth: lambda n: show(n.operand),
    ir.BoolNum: lambda n: show(n.cond),
    ir.If: lambda n: f"({show(n.then)} if {show(n.cond)} else {show(n.other)})",
    ir.Call: lambda n: f"{n.fn}({', '.join(show(a) for a in n.args)})",
    ir.Rollup: lambda n: f"{n.fn}({show(n.arg)})",
    ir.SafeDiv: lambda n: f"d_ratio({show(n.num)}, {show(n.den)})",
}


def show(n: ir.Node) -> str:
    """Short infix text of a sub-expression for messages (source names)."""
    text = _SHOW.get(type(n))
    return text(n) if text is not None else "?"


def _parts(n: ir.Node, ops: tuple[str, str]) -> list[tuple[ir.Node, int]]:
    """``n`` flattened over ``ops`` (``("+", "-")``: its terms, a negation flipping the sign;
    ``("*", "/")``: its factors): each operand with +1, or -1 where it is subtracted or divided by."""
    out: list[tuple[ir.Node, int]] = []
    todo = [(n, 1)]
    while todo:
        x, sign = todo.pop()
        if isinstance(x, ir.Bin) and x.op in ops:
            todo += [(x.right, sign if x.op == ops[0] else -sign), (x.left, sign)]
        elif ops[0] == "+" and isinstance(x, ir.Neg):
            todo.append((x.operand, -sign))
        else:
            out.append((x, sign))
    return out


def _constant_only(n: ir.Node) -> bool:
    return not any(isinstance(x, (ir.Event, ir.Ref, ir.Interval)) for x in ir.walk(n))


def _value(n: ir.Node, consts: dict[str, float]) -> float | None:
    """Value of a constant-only expression (None when it cannot be computed)."""
    try:
        if isinstance(n, ir.Num):
            return n.value
        if isinstance(n, ir.Const):
            return consts[n.key]
        if isinstance(n, ir.Neg):
            return -_value(n.operand, consts)
        if isinstance(n, ir.Bin) and n.op in "+-*/":
            a, b = _value(n.left, consts), _value(n.right, consts)
            return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else float("nan")}[n.op]
    except (TypeError, KeyError):
        return None
    return None


def lint_metric(m: SourceMetric, cat: SourceCatalog) -> list[Finding]:
    """All findings of one metric (the metric must have an expression)."""
    if m.expr is None:
        return []
    found: dict[tuple, Finding] = {}

    def add(code, msg, severity="warning", what=None):
        found.setdefault((code, what or msg), Finding(code, m.key, msg, severity))

    consts = {k: c.value for k, c in cat.constants.items()}
    for n in ir.walk(m.expr):
        _check_terms(n, add)
        _check_factors(n, add)
        _check_divisor(n, add, cat, consts)
        _check_condition(n, add)
    return list(found.values())


def _check_terms(n: ir.Node, add) -> None:
    """A sum where a term is both added and subtracted: it cancels."""
    if not (isinstance(n, ir.Bin) and n.op in ("+", "-")):
        return
    terms = _parts(n, ("+", "-"))
    for t, s in terms:
        if s > 0 and not isinstance(t, ir.Num) and (t, -1) in terms:
            add("self-cancelling", f"`{show(t)}` is both added and subtracted in `{show(n)}`: it cancels", what=t)


def _check_factors(n: ir.Node, add) -> None:
    """A product where a factor is in both the numerator and the denominator: it cancels."""
    if not (isinstance(n, ir.Bin) and n.op in ("*", "/")):
        return
    facs = _parts(n, ("*", "/"))
    for f, p in facs:
        if p > 0 and (f, -1) in facs and not (isinstance(f, ir.Num) and f.value == 1):
            sev = "info" if isinstance(f, ir.Num) else "warning"
            add(
                "self-cancelling",
                f"`{show(f)}` is in both the numerator and the denominator of `{show(n)}`: it cancels",
                sev,
                what=f,
            )


def _check_divisor(n: ir.Node, add, cat: SourceCatalog, consts: dict) -> None:
    """A division by constants only: an error when they make it zero, a warning when they may be zero
    on some machine (an assumed constant that may be zero, or a difference of constants)."""
    den = n.right if isinstance(n, ir.Bin) and n.op == "/" else n.den if isinstance(n, ir.SafeDiv) else None
    if den is None or not _constant_only(den):
        return
    v = _value(den, consts)
    outcome = "0 (the source's rule)" if isinstance(n, ir.SafeDiv) else "null"
    risky = sorted(c for c in ir.leaves(den, ir.Const) if c in cat.constants and cat.constants[c].may_be_zero)
    if v == 0:
        add(
            "zero-divisor",
            f"`{show(den)}` is zero with the assumed constants: `{show(n)}` is always {outcome}",
            "error",
        )
    elif risky or any(isinstance(x, ir.Bin) and x.op == "-" for x in ir.walk(den)):
        what = ", ".join(f"`{c}` (assumed {consts[c]:g})" for c in risky) or "a difference of constants"
        add(
            "zero-divisor",
            f"divides by `{show(den)}`, which can be zero on some machine ({what}): the metric is then {outcome}",
        )


def _check_condition(n: ir.Node, add) -> None:
    """A condition that divides by a counter: perf and perfonto disagree where the counter is zero."""
    if isinstance(n, ir.Truth) and any(
        isinstance(x, ir.Bin) and x.op == "/" and not _constant_only(x.right) for x in ir.walk(n.operand)
    ):
        add(
            "nan-condition",
            f"condition `{show(n.operand)}` divides by a counter: where that is zero perf takes the "
            f"then-branch (NaN is not zero), perfonto gives null",
            "info",
        )


def lint_catalog(cat: SourceCatalog) -> list[Finding]:
    """Findings of every metric, plus one ``undefined-event`` finding per referenced undefined event."""
    out: list[Finding] = []
    users: dict[str, list[str]] = {}
    for m in cat.metrics.values():
        out += lint_metric(m, cat)
        if m.expr is not None:
            for key in ir.leaves(m.expr, ir.Event):
                ev = cat.events.get(key)
                if ev is not None and not ev.defined:
                    users.setdefault(key, []).append(m.key)
    if users:
        listed = ", ".join(f"`{k}`" for k in sorted(users))
        out.append(
            Finding(
                "undefined-event", "", f"{len(users)} event(s) referenced but not defined in the file: {listed}", "info"
            )
        )
    return out
