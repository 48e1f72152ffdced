"""A source-neutral expression tree that every importer translates its formulas into.

Each source language (perf's ``MetricExpr``, Intel's ``Formula``, Arm's ``formula``, rocprofiler's
``expression``) is parsed by its importer and its *semantics* are decided there: perf's ``d_ratio``
and rocprofiler's ``/`` become :class:`SafeDiv`, perf's ``a if c else b`` becomes :class:`If` with a
:class:`Truth` condition, a bare perf event on an instanced PMU becomes ``Rollup("sum", …)``.
What is left here has exactly perfonto's meaning, so :mod:`perfonto.importers.translate` can print it
in the metric language without further decisions.

Nodes are frozen dataclasses, so two structurally equal sub-expressions compare equal (the lint
for self-cancelling terms relies on it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from perfonto.dsl import trees
from perfonto.ontology.errors import PerfontoError


@dataclass(frozen=True)
class Num:
    """A literal; ``unit`` (a pint unit string) only for literals the importer gives a unit (``1 ms``)."""

    value: float
    unit: str | None = None


@dataclass(frozen=True)
class _Keyed:
    """A leaf named by its key in one of the ``SourceCatalog``'s tables. The kinds below add no field;
    each is a frozen dataclass itself (else its instances would take new attributes), and a dataclass
    compares the class too, so ``Event("x") != Const("x")``."""

    key: str


@dataclass(frozen=True)
class Event(_Keyed):
    """A base counter, by its key in ``SourceCatalog.events``."""


@dataclass(frozen=True)
class Const(_Keyed):
    """A machine constant (perf ``#slots``, Intel ``HYPERTHREADING_ON``, rocprof ``simd_count``), by its
    key in ``SourceCatalog.constants``; becomes ``spec.<name>``."""


@dataclass(frozen=True)
class Ref(_Keyed):
    """Another metric of the same source, by its key in ``SourceCatalog.metrics``."""


@dataclass(frozen=True)
class Interval:
    """The window's duration in seconds (perf ``duration_time``)."""


@dataclass(frozen=True)
class Bin:
    """``op``: ``+ - * /`` (``/`` by zero is null, as IEEE NaN in perf), comparisons
    ``< <= > >= == !=`` and ``and``/``or`` (boolean operands)."""

    op: str
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class _Unary:
    """A node of one sub-expression; the kinds below add no field (and compare their class too)."""

    operand: "Node"


@dataclass(frozen=True)
class Neg(_Unary):
    """``-operand``."""


@dataclass(frozen=True)
class Not(_Unary):
    """``not operand`` (a condition)."""


@dataclass(frozen=True)
class Truth(_Unary):
    """A number used as a condition: true when non-zero (perf's ``if``: ``fpclassify(c) != FP_ZERO``)."""


@dataclass(frozen=True)
class BoolNum:
    """A condition used as a number: 1 when true, 0 when false (perf's ``<``, ``>``, ``&``, ``|``)."""

    cond: "Node"


@dataclass(frozen=True)
class If:
    then: "Node"
    cond: "Node"
    other: "Node"


@dataclass(frozen=True)
class Call:
    """Element-wise ``min``/``max`` (two or more arguments) or ``abs``."""

    fn: str
    args: tuple["Node", ...]


@dataclass(frozen=True)
class Rollup:
    """``sum``/``avg``/``min``/``max`` over all instance axes of ``arg``."""

    fn: str
    arg: "Node"


@dataclass(frozen=True)
class SafeDiv:
    """``num / den``, but 0 (not null) when ``den`` is 0: perf's ``d_ratio`` (expr.y) and
    rocprofiler-sdk's ``/`` (evaluate_ast.cpp)."""

    num: "Node"
    den: "Node"


Node = Num | Event | Const | Ref | Interval | Bin | Neg | Not | Truth | BoolNum | If | Call | Rollup | SafeDiv

CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
BOOL_OPS = CMP_OPS + ("and", "or")


class Unsupported(PerfontoError, ValueError):
    """A construct of the source language that perfonto's language cannot express (the metric is
    rejected with this message as its reason)."""


def is_bool(n: Node) -> bool:
    """True for condition-valued nodes."""
    return isinstance(n, (Not, Truth)) or (isinstance(n, Bin) and n.op in BOOL_OPS)


# Each node type -> the fields holding its sub-expressions, in order (a leaf has none): the one place
# that knows the tree's shape. ``children`` and ``walk`` read it (through ``dsl.trees``);
# ``tests/test_walk.py`` checks that it names every Node field of every node type.
CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    Num: (),
    Event: (),
    Const: (),
    Ref: (),
    Interval: (),
    Bin: ("left", "right"),
    Neg: ("operand",),
    Not: ("operand",),
    Truth: ("operand",),
    BoolNum: ("cond",),
    If: ("then", "cond", "other"),
    Call: ("args",),
    Rollup: ("arg",),
    SafeDiv: ("num", "den"),
}


def children(n: Node) -> tuple[Node, ...]:
    """The direct sub-expressions of ``n`` in order (``()`` for a leaf)."""
    return trees.children(n, CHILD_FIELDS)


def walk(n: Node) -> Iterator[Node]:
    """``n`` and all its sub-expressions, parents first, in order (iterative)."""
    return trees.walk(n, CHILD_FIELDS)


def leaves(n: Node, kind) -> set:
    """Keys of the leaves of one kind (``Event``, ``Const`` or ``Ref``) under ``n``."""
    return {x.key for x in walk(n) if isinstance(x, kind)}


def as_truth(n: Node) -> Node:
    """``n`` as a condition: unchanged when already one, else ``n != 0``."""
    return n if is_bool(n) else Truth(n)


def as_number(n: Node) -> Node:
    """``n`` as a number: conditions become 1/0."""
    return BoolNum(n) if is_bool(n) else n
