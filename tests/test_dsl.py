"""The metric language: precedence, literals with units, clauses, and syntax errors with positions."""

import pytest

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_text


def one(expr: str) -> ast.Expr:
    decls, diags = parse_text(f"metric x [1] = {expr}", "t.metrics")
    assert not diags, [d.render() for d in diags]
    return decls[0].expr


def show(e) -> str:
    if isinstance(e, ast.Number):
        return f"{e.value:g}{e.unit or ''}"
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.Unary):
        return f"({e.op} {show(e.operand)})"
    if isinstance(e, ast.Binary):
        return f"({show(e.left)} {e.op} {show(e.right)})"
    if isinstance(e, ast.Call):
        return f"{e.func}(" + ", ".join(show(a) for a in e.args) + ")"
    if isinstance(e, ast.IfElse):
        return f"({show(e.then)} if {show(e.cond)} else {show(e.otherwise)})"
    raise AssertionError(e)


@pytest.mark.parametrize(
    "src, want",
    [
        ("1 + 2 * 3", "(1 + (2 * 3))"),
        ("1 - 2 - 3", "((1 - 2) - 3)"),
        ("8 / 4 / 2", "((8 / 4) / 2)"),
        ("(1 + 2) * 3", "((1 + 2) * 3)"),
        ("-a * b", "((- a) * b)"),
        ("a ** 2 * b", "((a ** 2) * b)"),
        ("64 B", "64B"),
        ("1.5 GHz", "1.5GHz"),
        ("100 %", "100%"),
        ("2 [GB/s]", "2GB/s"),
        ("1e9", "1e+09"),
        ("sum(hbm.read_bytes) / interval", "(sum(hbm.read_bytes) / interval)"),
        ("min(a, b)", "min(a, b)"),
        ("a if b > 2 else c", "(a if (b > 2) else c)"),
        ("a if b > 1 and not c < 2 or d == 3 else e", "(a if (((b > 1) and (not (c < 2))) or (d == 3)) else e)"),
        ("x if c else y if d else z", "(x if c else (y if d else z))"),
        ("spec.hbm.peak_bandwidth * interval", "(spec.hbm.peak_bandwidth * interval)"),
    ],
)
def test_precedence_and_literals(src, want):
    assert show(one(src)) == want


def test_clauses():
    src = """
    # a comment
    metric hbm.bandwidth_utilization [percent]
      = (sum(hbm.read_bytes) + sum(hbm.write_bytes)) / (spec.hbm.peak_bandwidth * interval)
      "HBM bandwidth over peak."
      groups memory, hbm
      bounds 0 % .. 100 %
      threshold > 80 %: "HBM bandwidth bound"
      parent topdown.memory_bound
      source "Roofline, CACM 2009"
    """
    (d,), diags = parse_text(src, "m.metrics")
    assert not diags
    assert d.name == "hbm.bandwidth_utilization" and d.unit == "percent"
    assert d.description == "HBM bandwidth over peak."
    assert d.groups == ("memory", "hbm")
    assert (d.bounds[0].value, d.bounds[0].unit, d.bounds[1].value) == (0, "%", 100)
    assert (d.threshold.op, d.threshold.value.value, d.threshold.message) == (">", 80, "HBM bandwidth bound")
    assert d.parent == "topdown.memory_bound" and d.source == "Roofline, CACM 2009"
    assert d.formula == "(sum(hbm.read_bytes) + sum(hbm.write_bytes)) / (spec.hbm.peak_bandwidth * interval)"
    assert (d.span.line, d.span.col) == (3, 12)


@pytest.mark.parametrize(
    "src, line, col, expect",
    [
        ("metric x [B] = 1 +", 1, 19, "end of file"),
        ("metric x [B] = a $ b", 1, 18, "unexpected character '$'"),
        ("metric x = 2", 1, 10, "unexpected `=`"),
        ("metric a [B] = 1\nmetric b [B] = sum(x,)", 2, 22, "unexpected `)`"),
        ("metric a [B] = 1\n  bounds 1 2", 2, 12, "unexpected `2`"),
    ],
)
def test_syntax_errors_name_line_and_column(src, line, col, expect):
    decls, diags = parse_text(src, "bad.metrics")
    assert len(diags) == 1
    d = diags[0]
    assert (d.span.file, d.span.line, d.span.col) == ("bad.metrics", line, col)
    assert expect in d.message
    rendered = d.render()
    assert rendered.startswith(f"bad.metrics:{line}:{col}: error[syntax]")
    caret_line = rendered.splitlines()[3]
    assert caret_line.index("^") - caret_line.index("|") - 2 == col - 1


def test_one_bad_declaration_keeps_the_others():
    src = "metric a [B] = 1\nmetric b [B] = * 2\nmetric c [B] = 3\nmetric d [B] = (4\n"
    decls, diags = parse_text(src, "f.metrics")
    assert [d.name for d in decls] == ["a", "c"]
    assert [(d.span.line, d.span.col) for d in diags] == [(2, 16), (4, 18)]


@pytest.mark.parametrize(
    "src, words",
    [
        ('metric a [1] = 1\n  "one"\n  "two"', "two `description` clauses"),
        ("metric a [1] = 1\n  bounds 0 .. 1\n  bounds 5 .. 6", "two `bounds` clauses"),
        ('metric a [1] = 1\n  "bad escape \\x4"', "invalid string"),
        ('metric a [1] = 1\n  source "\\ud800"', "invalid string"),
        ("metric a [1] = 1e999", "out of range"),
        ("metric a [1] = 2 * 1e-400", "number 1e-400 underflows to 0"),  # read as 0 in silence
        ("metric a [1] = 1\n  bounds 1e-400 .. 1", "underflows to 0"),
    ],
)
def test_bad_clauses_are_diagnostics(src, words):
    decls, diags = parse_text(src, "f.metrics")
    assert decls == [] and len(diags) == 1 and words in diags[0].message, [d.render() for d in diags]
    assert diags[0].span.line >= 1


def test_very_long_expression_is_a_diagnostic():
    decls, diags = parse_text("metric a [1] = " + "+".join(["1"] * 5000), "f.metrics")
    assert decls == [] and diags[0].code == "too-deep"


def test_compile_refuses_what_codegen_could_not_emit(sohu):
    from helpers import compile_src

    assert [d.code for d in compile_src(sohu, "metric a [B] = sum(hbm.read_bytes, hbm.write_bytes)").errors] == [
        "arity"
    ]
    assert [d.code for d in compile_src(sohu, "metric a [1] = 2 ** 400").errors] == ["type"]
    g = compile_src(
        sohu, "metric power.status.pstate [1] = 1\nmetric request.arrival_time [s] = 1 s\nmetric spec.x [1] = 1"
    )
    assert [d.code for d in g.errors] == ["duplicate-name"] * 3


def test_a_byte_that_is_not_utf8_is_named_with_its_line_and_column(tmp_path):
    from perfonto.dsl.parser import parse_file

    p = tmp_path / "c.metrics"
    p.write_bytes(b'metric a [1] = 1\n  "caf\xe9"\n')  # Latin-1 e-acute: it pointed at 1:1 with a byte offset
    decls, diags = parse_file(p)
    assert decls == [] and diags[0].code == "not-utf8" and (diags[0].span.line, diags[0].span.col) == (2, 7)
