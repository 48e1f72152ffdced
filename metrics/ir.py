"""Typed intermediate form of a compiled metric expression.

The compiler turns each AST expression into these nodes, with every unit conversion made explicit
(a ``Const`` factor multiplied in), every name resolved, and each node annotated with:

- ``axes``: instance axes the value varies over (``(("hbm.stack", 6),)``), besides windows and chips;
- ``degree``: how the value scales with the number of chips when evaluated at server level
  (1 for a per-chip amount that adds up across chips — counters, per-chip peaks; 0 for a quantity
  that does not — ratios, the interval, a gauge averaged across chips).

Both the reference interpreter (``metrics.interpreter``) and the code generators read this form;
neither looks at units again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from perfonto.dsl import trees

from .ops import ARITY, Op as _Op

Axes = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Const:
    """A number already in the unit the compiler decided for it. At server level it is multiplied by
    ``chips ** chip_power``: 1 for a per-chip spec constant (peak FLOP/s of one chip), 1 for a literal
    added to a per-chip amount, 0 otherwise.

    ``origin`` says where the number came from, for targets that write the formula in other units
    than the compiler's (the perf-JSON exporter writes base units): ``literal`` (a number of the
    formula, ``label`` its unit text or ""), ``spec`` (a spec constant, ``label`` its name; ``value``
    in its declared unit), ``convert`` (a unit conversion factor the compiler multiplied in), ``chip``
    (a server-level chip factor, 1 in a window), ``count`` (an instance count of a rollup), or "" (any
    other number). Neither takes part in equality or hashing: two Consts of one value are the same
    operand to every evaluator."""

    value: float
    chip_power: int = 0
    axes: Axes = ()
    degree: int = 0
    origin: str = field(default="", compare=False)
    label: str = field(default="", compare=False)


@dataclass(frozen=True)
class Input:
    """A signal's prepared window value (counter delta × scale, or gauge mean), in the signal's unit."""

    signal: str
    axes: Axes = ()
    degree: int = 1


@dataclass(frozen=True)
class Interval:
    """The window's duration in seconds, from the counter timestamps."""

    axes: Axes = ()
    degree: int = 0


@dataclass(frozen=True)
class MetricRef:
    """Another metric's value, in that metric's declared unit."""

    metric: str
    axes: Axes = ()
    degree: int = 0


@dataclass(frozen=True)
class Op:
    """Element-wise operation. ``op``: add sub mul div pow neg abs min max clamp lt le gt ge eq ne
    and or not where (where = (cond, then, otherwise)). Division by zero gives null."""

    op: str
    args: tuple["Node", ...]
    axes: Axes = ()
    degree: int = 0

    def __post_init__(self) -> None:  # only the operations every backend implements (``metrics.ops``)
        try:
            op = _Op(self.op)
        except ValueError:
            raise ValueError(
                f"unknown IR operation {self.op!r}; the operations are {', '.join(o.value for o in _Op)}"
            ) from None
        if len(self.args) != ARITY[op]:
            raise ValueError(f"IR operation {self.op!r} takes {ARITY[op]} argument(s), got {len(self.args)}")


@dataclass(frozen=True)
class Rollup:
    """``func`` (sum avg min max) over all instance axes of ``arg``; the result has no instance axes."""

    func: str
    arg: "Node"
    axes: Axes = ()
    degree: int = 0


Node = Const | Input | Interval | MetricRef | Op | Rollup

BOOL_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not"}


# Each node type -> the fields holding its sub-expressions, in order (a leaf has none): the one place
# that knows the tree's shape. ``children`` and ``walk`` read it (through ``dsl.trees``);
# ``tests/test_walk.py`` checks that it names every Node field of every node type.
CHILD_FIELDS: dict[type, tuple[str, ...]] = {
    Const: (),
    Input: (),
    Interval: (),
    MetricRef: (),
    Op: ("args",),
    Rollup: ("arg",),
}


# Each node type -> the name of the method that handles it in an emitter (``handlers``).
HANDLER_NAMES: dict[type, str] = {
    Const: "const",
    Input: "input",
    Interval: "interval",
    MetricRef: "metric_ref",
    Rollup: "rollup",
    Op: "op",
}


def handlers(emitter: object) -> dict[type, Callable]:
    """Node type -> ``emitter``'s bound method for it (``const``, ``input``, ``interval``, ``metric_ref``,
    ``rollup``, ``op``): the dispatch table of a backend that emits one node type per method."""
    return {t: getattr(emitter, name) for t, name in HANDLER_NAMES.items()}


def children(node: Node) -> tuple[Node, ...]:
    """The direct operands of ``node`` in order (``()`` for a leaf)."""
    return trees.children(node, CHILD_FIELDS)


def walk(node: Node) -> Iterator[Node]:
    """Yield ``node`` and all the nodes under it, parents first, operands in order (iterative)."""
    return trees.walk(node, CHILD_FIELDS)


def signals_of(node: Node) -> set[str]:
    """Signals read directly by this expression (not through other metrics)."""
    return {n.signal for n in walk(node) if isinstance(n, Input)}
