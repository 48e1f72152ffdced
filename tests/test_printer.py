"""The printer gives back text that parses to the same tree (property test over random expressions)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_text
from perfonto.dsl.printer import to_text
from perfonto.ontology.diagnostics import Span

S = Span("t")
names = st.sampled_from(["a", "b.c", "interval", "spec.x.y"]).map(lambda n: ast.Name(n, S))
nums = st.builds(
    lambda v, u: ast.Number(float(v), u, S), st.integers(0, 1000), st.sampled_from([None, "B", "%", "GB/s"])
)
bools_ops = ["<", "<=", ">", ">=", "==", "!="]


def exprs():
    return st.recursive(
        st.one_of(names, nums),
        lambda inner: st.one_of(
            st.builds(
                lambda op, lhs, rhs: ast.Binary(op, lhs, rhs, S), st.sampled_from(["+", "-", "*", "/"]), inner, inner
            ),
            st.builds(lambda lhs: ast.Binary("**", lhs, ast.Number(2.0, None, S), S), inner),
            st.builds(lambda x: ast.Unary("-", x, S), inner),
            st.builds(lambda f, x: ast.Call(f, (x,), S), st.sampled_from(["sum", "avg"]), inner),
            st.builds(lambda x, y: ast.Call("min", (x, y), S), inner, inner),
            st.builds(
                lambda t, lhs, op, rhs, o: ast.IfElse(t, ast.Binary(op, lhs, rhs, S), o, S),
                inner,
                inner,
                st.sampled_from(bools_ops),
                inner,
                inner,
            ),
        ),
        max_leaves=12,
    )


@settings(max_examples=300, deadline=None)
@given(exprs())
def test_round_trip(e):
    text = to_text(e)
    decls, diags = parse_text(f"metric m [1] = {text}")
    assert not diags, text
    assert decls[0].expr == e, text
