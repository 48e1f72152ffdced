"""Typing of one metric declaration for ``metrics.infer`` (``Typer.metric``): the formula typed, then
converted to the declared unit by an explicit factor; a condition, a unit the formula cannot be
converted to (a gauge holding a rate declared as an amount named as such) and a chip degree other than
0 or 1 are errors; a clock rate or a share of degree 1 is made the mean over chips; bounds and the
threshold are converted to the declared unit.

Chip-scope spec constants are per-chip amounts unless that would make the metric scale as chips^k
with k not 0 or 1; then the fewest of them are read per chip (``type_metric``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import pint

from perfonto.dsl import ast
from perfonto.ontology import kinds
from perfonto.ontology.resolved import Scope
from perfonto.ontology.units import dimensionality, fmt_unit, is_rate

from . import ir
from .across_chips import is_frequency, is_share, reads_leader
from .infer_typed import Fail, _T

if TYPE_CHECKING:
    from .infer import Typer

__all__ = ["type_metric"]


def type_metric(typer: "Typer", d: ast.MetricDecl, compiled: dict):
    """Type one metric. Chip-scope spec constants are per-chip amounts (scaled with the number of
    chips at server level) unless that would make the metric scale as chips^k with k not 0 or 1;
    then the fewest constants that must be read per chip (a clock used to convert cycles to time,
    say) are taken as chip-independent."""
    chip_consts = sorted(
        {
            n.name
            for n in ast.walk(d.expr)
            if isinstance(n, ast.Name) and n.name in typer.gen.spec and typer.gen.spec[n.name].scope is Scope.chip
        }
    )
    first: Fail | None = None
    for k in range(len(chip_consts) + 1):
        for subset in itertools.combinations(chip_consts, k):
            typer.intensive = set(subset)
            trace: list | None = None if typer.trace is None else []
            saved, typer.trace = typer.trace, trace
            try:
                out = _metric(typer, d, compiled)
                if saved is not None and trace is not None:  # both lists, or both None
                    saved.extend(trace)
                typer.trace = saved
                return out
            except Fail as f:
                typer.trace = saved
                if f.diagnostic.code != "chip-degree":
                    raise
                first = first or f
    assert first is not None, "every subset failed, the first (the empty subset) included"
    raise first


def _metric(typer: "Typer", d: ast.MetricDecl, compiled: dict):
    """The metric typed with this choice of constants read per chip (``typer.intensive``): its IR node,
    declared unit, bounds and threshold (``type_metric``)."""
    typer.compiled = compiled
    typer.warnings = []
    typer.metric_name = d.name
    typer.group_rule = any(
        getattr(compiled.get(n.name), "group_rule", False) for n in ast.walk(d.expr) if isinstance(n, ast.Name)
    )
    declared = typer.unit(d.unit, d.unit_span)
    t = typer.expr(d.expr)
    typer.leader_of[d.name] = reads_leader(typer, d.expr)
    if not t.is_bool:
        _gauge_rate_check(typer, d, t, declared)
        typer.sparsity_of[d.name] = t.sparsity
        typer.rolls_of[d.name] = (t.rolls, t.total)
    if t.is_bool:
        raise typer.fail(
            "bool-metric",
            f"metric `{d.name}` is a condition, not a quantity",
            d.expr.span,
            hint="use it inside `a if cond else b`",
        )
    f = typer.factor(
        t.qty,
        declared,
        d.unit_span,
        f"metric `{d.name}` is declared in [{d.unit}] but its formula gives {fmt_unit(t.qty)}",
    )
    node = t.node if f == 1.0 else typer._mul_const(t.node, f)
    if node.degree == 1 and (is_frequency(typer.reg, declared) or is_share(typer.reg, declared)):
        # a clock rate or a share (a percent): the mean over chips, never their sum — a chip time over the
        # window's wall-clock time is device-seconds over device-seconds at every level
        node = ir.Op("div", (node, ir.Const(1.0, chip_power=1, degree=1, origin="chip")), node.axes, 0)
    if node.degree not in (0, 1):
        raise typer.fail(
            "chip-degree",
            f"metric `{d.name}` scales as chips^{node.degree} at server level",
            d.expr.span,
            hint="a metric is either a per-chip amount that adds across chips (bytes/s) or a ratio of such amounts",
        )
    bounds = None
    if d.bounds:
        bounds = (_bound(typer, d.bounds[0], declared), _bound(typer, d.bounds[1], declared))
        if bounds[0] > bounds[1]:
            raise typer.fail(
                "bounds-order",
                f"bounds of `{d.name}` are reversed ({d.bounds[0].value} > {d.bounds[1].value})",
                d.bounds[0].span,
                hint="write `bounds LOW .. HIGH`",
            )
    threshold = None
    if d.threshold:
        threshold = (d.threshold.op, _bound(typer, d.threshold.value, declared), d.threshold.message)
    return node, declared, bounds, threshold


def _gauge_rate_check(typer: "Typer", d: ast.MetricDecl, t: _T, declared: pint.Unit) -> None:
    """A gauge holding a rate is averaged over the window, never accumulated: a metric that declares
    the rate's amount (B for a B/s gauge) is told so by name."""
    e_dim = dimensionality(typer.reg, t.qty)
    want = dimensionality(typer.reg, declared)
    if e_dim == want:
        return
    sec = dimensionality(typer.reg, typer.reg.second)
    for node in ast.walk(d.expr):
        if isinstance(node, ast.Name) and node.name in typer.gen.signals:
            s = typer.gen.signals[node.name]
            if kinds.of(s).window == "mean" and is_rate(typer.reg, s.unit) and e_dim * sec == want:
                raise typer.fail(
                    "unit-mismatch",
                    f"`{node.name}` is a gauge holding a rate ({s.unit_text}): it is averaged over the "
                    f"window, not accumulated, so `{d.name}` cannot be an amount in [{d.unit}]",
                    node.span,
                    hint="declare a rate, or multiply by `interval` if the time integral is really meant",
                )


def _bound(typer: "Typer", b: ast.Bound, declared: pint.Unit) -> float:
    """A bound or threshold value in the declared unit (a bare number is in that unit already)."""
    if b.unit is None:
        return b.value
    return b.value * typer.factor(typer.unit(b.unit, b.span), declared, b.span, "bound")
