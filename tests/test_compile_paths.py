"""Issue 19, compile: the faster paths keep their contracts.

- The parser builds the AST while lark reduces (no parse tree): every node's span still cuts its own
  source text out of the file (``text[span.start:span.end]`` parses back to the same node), and the
  line/column of each node is that of its first character.
- The metrics are typed in the order ``nx.lexicographical_topological_sort`` gives (Kahn's algorithm
  over the graph's own adjacency instead).
- Unit work is cached per registry: units of two generations' registries never meet in a cache.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_text
from perfonto.metrics.passes import _lexicographic_order

SRC = """\
metric a.b [GB/s] = (sum(hbm.read_bytes) + 2 [B]) / interval
  "x"
metric c [1] = -(x ** 2) if not (y > 1 %) and z <= 3 else max(p, (q))
  "y"
  bounds -1 .. 2 %
  threshold >= 3 B: "t"
metric d [1] = f(
    x,
    (y + 1)
  ) * 2
  "multi-line"
"""


def _nodes(e):
    stack = [e]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, ast.Binary):
            stack += [n.left, n.right]
        elif isinstance(n, ast.Unary):
            stack.append(n.operand)
        elif isinstance(n, ast.Call):
            stack += list(n.args)
        elif isinstance(n, ast.IfElse):
            stack += [n.then, n.cond, n.otherwise]


def test_every_span_cuts_out_its_own_node():
    decls, diags = parse_text(SRC, "f.metrics")
    assert not diags and len(decls) == 3
    lines = SRC.splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    for d in decls:
        for n in _nodes(d.expr):
            text = SRC[n.span.start : n.span.end]
            (again,), dg = parse_text(f"metric t [1] = {text}\n", "g.metrics")
            assert not dg and again.expr == n, (text, n)
            assert starts[n.span.line - 1] + n.span.col - 1 == n.span.start  # line/col of the first character
            assert (n.span.end_col == 0) == ("\n" in text)  # end column only for a single-line node
    assert decls[0].formula == "(sum(hbm.read_bytes) + 2 [B]) / interval"
    assert decls[2].formula == "f( x, (y + 1) ) * 2"
    assert decls[1].threshold.span.line == 6 and decls[1].bounds[0].value == -1.0


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.floats(0.02, 0.3), st.integers(0, 10_000), st.data())
def test_typing_order_is_networkx_lexicographic_order(n, p, seed, data):
    g0 = nx.gnp_random_graph(n, p, directed=True, seed=seed)
    g = nx.DiGraph([(f"m{u:03d}", f"m{v:03d}") for u, v in g0.edges() if u < v])  # a DAG
    g.add_nodes_from(f"m{i:03d}" for i in range(n))
    nodes = set(data.draw(st.sets(st.sampled_from(sorted(g.nodes)), min_size=1)))
    assert _lexicographic_order(g, nodes) == list(nx.lexicographical_topological_sort(g.subgraph(nodes)))


def test_unit_caches_are_per_registry(tmp_path):
    from perfonto.ontology.units import conversion_factor, fmt_unit, parse_unit, registry_for

    a, b = registry_for(("core",)), registry_for(("hbm",))
    for reg in (a, b, a):
        u = parse_unit(reg, "GB/s")
        assert fmt_unit(u) == "GB/s" and conversion_factor(reg, u, parse_unit(reg, "B/s")) == 1e9
    assert parse_unit(a, "core_cycle") is parse_unit(a, "core_cycle")  # parsed once
