"""One child-walking helper per expression-tree family (issue 32): ``children``/``walk`` of the syntax tree
(``dsl.ast``), the compiled IR (``metrics.ir``) and the importers' neutral tree (``interop.ir``) read each
family's ``CHILD_FIELDS`` table through ``dsl.trees``. Checked over every node class of each family's union:
a new node type without an entry in its table, or an entry that misses a sub-expression field, fails here."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_text
from perfonto.interop import ir as nir
from perfonto.metrics import ir
from perfonto.ontology.diagnostics import Span

SPAN = Span("<test>")

# family -> (module, union of its node types, the union's name in annotations, a leaf numbered i)
FAMILIES = {
    "dsl.ast": (ast, ast.Expr, "Expr", lambda i: ast.Number(float(i), None, SPAN)),
    "metrics.ir": (ir, ir.Node, "Node", lambda i: ir.Const(float(i))),
    "interop.ir": (nir, nir.Node, "Node", lambda i: nir.Num(float(i))),
}
# values for the fields that are not sub-expressions (an IR Op checks its name against its arity)
OTHER = {"span": SPAN, "op": "add", "func": "sum", "fn": "max", "unit": None, "axes": ()}


def _node_classes(family):
    return typing.get_args(FAMILIES[family][1])


def _child_fields(cls, union_name: str) -> tuple[str, ...]:
    """The fields whose annotation names the family's union (one sub-expression or a tuple of them)."""
    return tuple(f.name for f in dataclasses.fields(cls) if re.search(rf"\b{union_name}\b", str(f.type)))


def _example(family, cls):
    """An instance of ``cls`` whose sub-expressions are distinct numbered leaves (two in a tuple field),
    with the leaves in field order."""
    _, _, union_name, leaf = FAMILIES[family]
    kids, kw, i = [], {}, 0
    for f in dataclasses.fields(cls):
        if f.name in _child_fields(cls, union_name):
            n = 2 if str(f.type).startswith("tuple") else 1
            vals = tuple(leaf(i + k) for k in range(n))
            i += n
            kids.extend(vals)
            kw[f.name] = vals if n == 2 else vals[0]
        elif f.name in OTHER:
            kw[f.name] = OTHER[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = {"float": 1.0, "int": 0}.get(str(f.type), "x")
    return cls(**kw), kids


CASES = [(family, cls) for family in FAMILIES for cls in _node_classes(family)]


@pytest.mark.parametrize("family,cls", CASES, ids=[f"{f}.{c.__name__}" for f, c in CASES])
def test_the_table_names_every_sub_expression_field(family, cls):
    module, _, union_name, _ = FAMILIES[family]
    assert cls in module.CHILD_FIELDS, f"{family}.{cls.__name__} has no entry in {family}.CHILD_FIELDS"
    assert module.CHILD_FIELDS[cls] == _child_fields(cls, union_name)


@pytest.mark.parametrize("family,cls", CASES, ids=[f"{f}.{c.__name__}" for f, c in CASES])
def test_children_and_walk_visit_every_child(family, cls):
    module = FAMILIES[family][0]
    node, kids = _example(family, cls)
    assert module.children(node) == tuple(kids)
    assert list(module.walk(node)) == [node, *kids]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_table_lists_only_node_types(family):
    assert set(FAMILIES[family][0].CHILD_FIELDS) == set(_node_classes(family))


def test_walk_is_parents_first_in_source_order():
    (d,), diags = parse_text("metric m [1] = -(a + b * c) if d else max(e, f)\n")
    assert not diags
    names = [type(n).__name__ if not isinstance(n, ast.Name) else n.name for n in ast.walk(d.expr)]
    assert names == ["IfElse", "Unary", "Binary", "a", "Binary", "b", "c", "d", "Call", "e", "f"]


@pytest.mark.parametrize("family", FAMILIES)
def test_walk_does_not_recurse(family):
    """A chain deeper than Python's recursion limit is walked (the walk keeps its own stack)."""
    module, _, _, leaf = FAMILIES[family]
    one = next(c for c in _node_classes(family) if module.CHILD_FIELDS[c] and len(_example(family, c)[1]) == 1)
    node = leaf(0)
    for _ in range(5000):
        node = dataclasses.replace(_example(family, one)[0], **{module.CHILD_FIELDS[one][0]: node})
    assert sum(1 for _ in module.walk(node)) == 5001
