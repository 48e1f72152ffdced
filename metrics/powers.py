"""Typing of ``a ** b`` (``metrics.infer``).

- A plain number exponent (``x ** 2``, ``ratio ** 0.5``): the unit is raised to it, so a fractional
  power needs a dimensionless base, and ``|b| <= 16``.
- A per-sample exponent (a dimensionless field or signal read in the window, or any dimensionless
  expression of them: ``2 ** rapl.energy_units``, ``0.5 ** (rapl.energy_units - 1)``): allowed only when
  the base is dimensionless too, since a quantity in J raised to a power that changes per window would
  change its unit per window. Both sides are converted to plain ratios (``50 %`` is 0.5) and neither
  may add up across chips (``2 ** (sum over chips of a field)`` has no meaning): the result is a
  dimensionless value of chip degree 0.

Every refusal names the sub-expression (file:line:col) and what to write instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pint

from perfonto.dsl import ast
from perfonto.ontology.units import fmt_unit

from . import ir

if TYPE_CHECKING:
    from .infer import Typer
    from .infer_typed import _T

__all__ = ["type_power"]


def type_power(typer: "Typer", e: ast.Binary, a: "_T", b: "_T", axes: ir.Axes) -> "_T":
    """``a ** b`` typed: the IR ``Op("pow", (a, b))`` with its unit (module docstring).

    Raises ``infer_typed.Fail``: ``type`` (exponent out of range, an exponent that adds up across chips),
    ``unit-mismatch`` (a fractional power of a quantity, a dimensioned exponent, a dimensioned base
    under a per-sample exponent)."""
    from .infer_typed import _T

    if isinstance(e.right, ast.Number) and e.right.unit is None:
        p = e.right.value
        if abs(p) > 16:
            raise typer.fail("type", f"exponent {p:g} is out of range (|exponent| <= 16)", e.right.span)
        if p != int(p) and not a.qty.dimensionless:
            raise typer.fail("unit-mismatch", f"a fractional power of a quantity with unit {fmt_unit(a.qty)}", e.span)
        # pint annotates PlainUnit.__pow__ as returning a PlainUnit; it returns self.__class__, the registry's Unit
        power = cast(pint.Unit, a.qty**p)
        return _T(ir.Op("pow", (a.node, ir.Const(p)), axes, int(a.node.degree * p)), power, a.literal)
    one = typer.reg.dimensionless
    what = _text(e.right)
    fb = typer.factor(
        b.qty, one, e.right.span, f"the exponent `{what}` must be dimensionless (a count of bits, a field)"
    )
    if not a.qty.dimensionless:
        raise typer.fail(
            "unit-mismatch",
            f"a quantity in {fmt_unit(a.qty)} raised to the per-sample exponent `{what}`: its unit would change "
            "from window to window",
            e.span,
            hint="only a dimensionless base takes a field or signal as exponent; write the unit outside, "
            "e.g. `1 J * 0.5 ** rapl.energy_units`",
        )
    fa = typer.factor(a.qty, one, e.left.span, "the base of a per-sample power")
    for t, sub, side in ((a, e.left, "base"), (b, e.right, "exponent")):
        if t.node.degree != 0 and not t.literal:
            raise typer.fail(
                "chip-degree",
                f"the {side} `{_text(sub)}` of a per-sample power adds up across chips",
                sub.span,
                hint="a per-sample exponent is a field or gauge read on each chip (degree 0), never a counter total",
            )
    base = a.node if fa == 1.0 else typer._mul_const(a.node, fa)
    exponent = b.node if fb == 1.0 else typer._mul_const(b.node, fb)
    return _T(ir.Op("pow", (base, exponent), axes, 0), one)


def _text(e: ast.Expr) -> str:
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Number):
        return f"{e.value:g}"
    return "…"
