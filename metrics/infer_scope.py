"""Scope rules of the typer (``metrics.infer``), checked where two or more operands meet (a binary
operation, ``if``/``else``, a function call):

- a per-record value (``request.*``, ``token_gap.*``) never meets a quantity read from counter windows
  until it is reduced (``p50``, ``mean``, ``count``, ...);
- a per-instance spec constant (``scope: instance``) carries its block's axes and may not meet a
  chip-wide amount (a counter or chip-level total) until rolled up — ``sum(spec.die.peak_bw)`` is the
  chip's total; a chip-scope constant of a block with instances is a chip-wide capacity and may not meet
  a per-instance value of that block — so dividing a chip-wide measurement by a per-die peak, or a
  per-stack measurement by a chip-wide peak, is a compile error;
- dense FLOPs never meet a sparse peak;
- ``a * b`` and ``a / b`` follow ``metrics.rollup_rules`` (``check_division``): a level over the
  window's duration is an error, a mean against a chip-wide total a warning.

Each refusal is an ``infer_typed.Fail`` pointing at the sub-expression.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfonto.ontology.diagnostics import Span

from . import ir
from .infer_typed import POP, Fail, _T
from .rollup_rules import ROLL_HINT, level_rate_error, roll_set, roll_warning

if TYPE_CHECKING:
    from .infer import Typer

__all__ = ["check_division", "check_scope"]

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


def check_scope(typer: "Typer", out: _T, operands: list, span: Span) -> _T:
    """Scope rules between spec constants and measurements (see the module docstring): each rule is
    about two different operands, checked in one pass over them (``max`` may have 100,000)."""
    _check_meetings(typer, operands, span)
    _check_totals(typer, operands, span)
    sp = [t.sparsity for t in operands if t.sparsity]
    if len(sp) >= 2 and len(frozenset().union(*sp)) > 1:
        raise typer.fail(
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


def check_division(typer: "Typer", op: str, a: _T, b: _T, span: Span) -> None:
    """``metrics.rollup_rules`` on ``a op b``: a level over the window's duration is an error; a mean over
    an instance axis against a chip-wide total over it is a warning (``typer.warnings``)."""
    err = level_rate_error(op, a.node, b.node, typer.gen, typer.compiled, span)
    if err is not None:
        raise Fail(err)
    if op == "/":
        w = roll_warning(roll_set(a.rolls, a.total, typer.gen), roll_set(b.rolls, b.total, typer.gen), span)
        if w is not None:
            typer.warnings.append(w)


def _check_meetings(typer: "Typer", operands: list, span: Span) -> None:
    """Kinds of operand that never meet (``_MEETINGS``): a per-record value and a quantity read from
    windows; a per-instance spec constant and a chip-wide amount."""
    per_record = [any(x.startswith(POP) for x, _ in t.node.axes) for t in operands]
    meets = {
        "population": any(per_record)
        and any(not p and _reads_windows(t.node, typer.compiled) for p, t in zip(per_record, operands)),
        "instance": any(a.inst for a in operands)
        and any(not b.node.axes and not b.literal and b.node.degree >= 1 and not b.inst for b in operands),
    }
    for rule, met in meets.items():
        if met:
            code, message, hint = _MEETINGS[rule]
            raise typer.fail(code, message, span, hint=hint)


def _check_totals(typer: "Typer", operands: list, span: Span) -> None:
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
            raise typer.fail(
                "scope",
                f"a chip-wide spec constant meets a per-instance value (over {', '.join(sorted(clash))})",
                span,
                hint="roll the measurement up with sum() first, or use a per-instance constant (scope: instance)",
            )


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
