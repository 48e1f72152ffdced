"""The printers' one precedence table (``dsl.precedence``, issue 32) follows the grammar it prints for:
the metric language's levels are the rules of ``dsl/metrics.lark`` in order, and every operator the parser
builds has a level."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_text
from perfonto.dsl.precedence import BINARY, CMP_OPS, PERF_BINARY, PerfPrec, Prec, bracket

GRAMMAR = Path(ast.__file__).with_name("metrics.lark")
# the grammar's expression rules, loosest first -> their level
RULES = {
    "ifelse": Prec.IF,
    "or_expr": Prec.OR,
    "and_expr": Prec.AND,
    "not_expr": Prec.NOT,
    "comparison": Prec.CMP,
    "sum": Prec.SUM,
    "term": Prec.TERM,
    "factor": Prec.NEG,
    "power": Prec.POW,
    "atom": Prec.ATOM,
}


def test_the_levels_are_the_grammars_rules_in_order():
    text = GRAMMAR.read_text(encoding="utf-8")
    rules = re.findall(r"^\?(\w+):", text[text.index("?expr:") :], flags=re.M)[1:]
    assert rules == list(RULES), "dsl/metrics.lark's expression rules changed: update dsl.precedence.Prec"
    assert [RULES[r] for r in rules] == sorted(Prec)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!=", "and", "or"])
def test_every_binary_operator_the_parser_builds_has_a_level(op):
    (d,), diags = parse_text(f"metric m [1] = a {op} b\n")
    assert not diags and isinstance(d.expr, ast.Binary) and d.expr.op == op
    assert op in BINARY
    assert (BINARY[op] == Prec.CMP) == (op in CMP_OPS)


def test_perfs_levels():
    assert set(PERF_BINARY) == {"|", "^", "&", "<", ">", "+", "-", "*", "/"}
    assert PerfPrec.ANY < min(PERF_BINARY.values()) and max(PERF_BINARY.values()) < PerfPrec.NEG < PerfPrec.ATOM


def test_bracket_only_what_binds_more_loosely():
    assert bracket("a + b", Prec.SUM, Prec.TERM) == "(a + b)"
    assert bracket("a * b", Prec.TERM, Prec.SUM) == "a * b"
    assert bracket("a * b", Prec.TERM, Prec.TERM) == "a * b"
