"""The metric language's syntax tree: small frozen dataclasses, each with its source span.

Every expression node carries ``span`` (file, 1-based line and column) so that the compiler can point
at the exact spot of a unit mismatch or an unknown name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from perfonto.ontology.diagnostics import Span

from . import trees


@dataclass(frozen=True)
class Number:
    """A literal, optionally with a unit: ``64 B``, ``1.5 GHz``, ``100 %``, ``2 [GB/s]``."""

    value: float
    unit: str | None
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Name:
    """A dotted name: a signal (``hbm.read_bytes``), a metric, a spec constant (``spec.hbm.capacity``)
    or ``interval``."""

    name: str
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Binary:
    """``op`` is one of + - * / ** < <= > >= == != and or."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span = field(compare=False)


@dataclass(frozen=True)
class Call:
    """``sum(x)``/``avg``/``min``/``max`` with one argument roll up a block's instances; ``min(a, b)``,
    ``max(a, b)``, ``clamp(x, lo, hi)``, ``abs(x)`` are element-wise; ``default(x, d)`` is x, or d where x is
    null or not captured (``metrics.optional``)."""

    func: str
    args: tuple["Expr", ...]
    span: Span = field(compare=False)


@dataclass(frozen=True)
class IfElse:
    """``then if cond else otherwise`` (Python order)."""

    then: "Expr"
    cond: "Expr"
    otherwise: "Expr"
    span: Span = field(compare=False)


Expr = Number | Name | Unary | Binary | Call | IfElse


# A literal in a ``bounds`` or ``threshold`` clause is a ``Number`` like any other; only its reading differs:
# a bare number there is in the metric's own unit (``metrics.infer_metric._bound``).
Bound = Number


@dataclass(frozen=True)
class Threshold:
    op: str
    value: Bound
    message: str
    span: Span = field(compare=False)
    when_parent: bool = False  # ``threshold > 10 % when parent:`` — crossed only where the parent's is too


@dataclass(frozen=True)
class MetricDecl:
    """One ``metric NAME [UNIT] = EXPR`` declaration with its clauses."""

    name: str
    unit: str
    expr: Expr
    formula: str
    span: Span = field(compare=False)
    unit_span: Span = field(compare=False)
    description: str = ""
    groups: tuple[str, ...] = ()
    bounds: tuple[Bound, Bound] | None = None
    threshold: Threshold | None = None
    parent: str | None = None
    parent_span: Span | None = field(default=None, compare=False)
    source: str = ""
    peak: str | None = None
    peak_span: Span | None = field(default=None, compare=False)
    rollup: str | None = None  # max / min: run and server values are the extreme window, not re-derived
    rollup_span: Span | None = field(default=None, compare=False)


# Each expression node type -> the fields holding its sub-expressions, in order (a leaf has none): the one place
# that knows the tree's shape. ``children`` and ``walk`` read it (through ``dsl.trees``);
# ``tests/test_walk.py`` checks that it names every Expr field of every node type.
CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    Number: (),
    Name: (),
    Unary: ("operand",),
    Binary: ("left", "right"),
    Call: ("args",),
    IfElse: ("then", "cond", "otherwise"),
}


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr`` in source order (``()`` for a leaf)."""
    return trees.children(expr, CHILD_FIELDS)


def walk(expr: Expr) -> Iterator[Expr]:
    """Yield ``expr`` and all its sub-expressions, parents first, in source order (iterative)."""
    return trees.walk(expr, CHILD_FIELDS)
