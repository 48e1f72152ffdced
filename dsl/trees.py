"""Walking an expression tree whose shape is given by a table: node type → the fields that hold its
sub-expressions (a tuple field holds several). Each tree family owns its table next to its node types —
``dsl.ast`` (the syntax tree), ``metrics.ir`` (the compiled IR), ``interop.ir`` (the importers' neutral
tree) — and its ``children``/``walk`` call these two functions, so child iteration is written once.
``tests/test_walk.py`` checks every family's table against its node types' fields."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["children", "walk"]


def children(node: Any, fields: Mapping[type, tuple[str, ...]]) -> tuple[Any, ...]:
    """The direct sub-expressions of ``node``, in the order of its type's ``fields`` entry (``()`` for a
    leaf or a type the table does not list)."""
    out: list[Any] = []
    for f in fields.get(type(node), ()):
        v = getattr(node, f)
        out.extend(v if isinstance(v, tuple) else (v,))
    return tuple(out)


def walk(node: Any, fields: Mapping[type, tuple[str, ...]]) -> Iterator[Any]:
    """``node`` and every node under it, parents first, sub-expressions in order (iterative: a deep tree
    does not reach Python's recursion limit)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n, fields)))
