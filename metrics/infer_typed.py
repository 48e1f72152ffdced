"""The typer's values (``metrics.infer``): ``_T``, a typed sub-expression (its IR node, unit and the
facts the scope rules need), ``Fail``, the error that carries a typing diagnostic, ``POP``, the axis-name
prefix of record populations, and ``_scale_literal``, which gives a literal its partner's chip degree.

Shared by the typer and the modules that type parts of an expression for it (``infer_calls``,
``infer_scope``, ``powers``, ``optional``).
"""

from __future__ import annotations

import dataclasses

import pint

from perfonto.ontology.diagnostics import Diagnostic

from . import ir

POP = "population."  # axis-name prefix of record populations


class Fail(Exception):
    """A typing error: carries the ``Diagnostic`` that points at the offending sub-expression."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _T:
    """A typed sub-expression: IR node, its unit (None for booleans), and whether it is a bare literal."""

    __slots__ = ("node", "unit", "literal", "inst", "total", "sparsity", "rolls")

    def __init__(
        self,
        node: ir.Node,
        unit: pint.Unit | None,
        literal: bool = False,
        inst: bool = False,
        total: frozenset = frozenset(),
        sparsity: frozenset = frozenset(),
    ):
        self.node, self.unit, self.literal = node, unit, literal
        self.sparsity = sparsity  # {"dense"} / {"sparse"} for FLOP quantities that declare it
        self.inst = inst  # derived from a per-instance spec constant, not rolled up
        self.total = total  # instance axes this value is a chip-wide capacity over (chip-scope constants)
        # (axis, size, "sum" | "mean", from a spec constant?) of each roll-up inside the value (``_check_rolls``)
        self.rolls: frozenset = frozenset()

    @property
    def is_bool(self) -> bool:
        return self.unit is None

    @property
    def qty(self) -> pint.Unit:
        """The unit of a quantity: for operands already checked not to be conditions (``_need_number``)."""
        assert self.unit is not None, "a quantity, not a condition"
        return self.unit


def _scale_literal(node: ir.Node, degree: int) -> ir.Node:
    """Give a literal sub-expression chip degree ``degree``: multiply it by chips**degree at server level."""
    if isinstance(node, ir.Const) and node.chip_power == 0:
        return dataclasses.replace(node, chip_power=degree, degree=degree)
    return ir.Op("mul", (node, ir.Const(1.0, chip_power=degree, degree=degree, origin="chip")), node.axes, degree)
