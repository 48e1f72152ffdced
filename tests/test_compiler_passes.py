"""Fixture pairs per compiler pass: ``tests/fixtures/compiler/<pass>/<case>.metrics`` is compiled for
sohu (the shipped generations as the others) up to that pass, and what the stage knows is compared
with ``<case>.expected``. Refresh the expected files with ``PERFONTO_UPDATE_GOLDEN=1`` (never silently)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfonto.metrics import ir
from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import PASSES, parse, run_passes
from perfonto.metrics.stages import Declared, Graphed, Parsed, Resolved, Typed

HERE = Path(__file__).parent / "fixtures" / "compiler"
CASES = sorted((p.parent.name, p) for p in HERE.glob("*/*.metrics"))


#: how the expected files spell each kind of IR node
_IR_TEXT = {
    ir.Const: lambda n: f"{n.value:.6g}" + ("·chips" if n.chip_power else ""),
    ir.Input: lambda n: n.signal,
    ir.Interval: lambda n: "interval",
    ir.MetricRef: lambda n: f"@{n.metric}",
    ir.Rollup: lambda n: f"{n.func}({ir_text(n.arg)})",
    ir.Op: lambda n: f"{n.op}({', '.join(ir_text(a) for a in n.args)})",
}


def ir_text(n: ir.Node) -> str:
    return _IR_TEXT[type(n)](n)


def summary(stage, pass_name: str) -> str:
    out = []
    for d in stage.diagnostics:
        out.append(
            f"{d.span.line}:{d.span.col} {d.severity}[{d.code}] {d.message}" + (f" — {d.hint}" if d.hint else "")
        )
    if isinstance(stage, Declared) and pass_name == "declare":
        out.append(f"declared: {', '.join(stage.by_name)}")
    if isinstance(stage, Declared):
        out.append(f"left out: {', '.join(sorted(stage.bad)) or '-'}")
    if isinstance(stage, Resolved) and pass_name == "resolve":
        for name in stage.by_name:
            out.append(f"{name} reads: {', '.join(sorted(stage.graph.predecessors(name))) or '-'}")
    if isinstance(stage, Resolved) and pass_name in ("resolve", "availability"):
        for name, why in sorted(stage.unavailable.items()):
            out.append(f"unavailable {name}: {why}")
    if isinstance(stage, Typed):
        out.append(f"not typed: {', '.join(sorted(set(stage.by_name) - set(stage.compiled))) or '-'}")
        for name, m in stage.compiled.items():
            out.append(
                f"{name} [{m.unit_text}] axes={list(m.axes)} degree={m.degree} = {ir_text(m.ir)}"
                + (" (group times at server level)" if m.group_rule else "")
            )
    if pass_name == "classify":
        out.append(f"window metrics: {', '.join(stage.metrics) or '-'}")
        recs = [f"{n} ({m.population or 'run'})" for n, m in stage.record_metrics.items()]
        out.append(f"record metrics: {', '.join(recs) or '-'}")
    return "\n".join(out).replace(f"{HERE}/", "") + "\n"  # messages name files relative to the fixtures


@pytest.fixture(scope="module")
def others(sohu):
    return shipped_others(sohu)


def test_every_pass_has_fixtures():
    assert {name for name, _ in PASSES} == {p for p, _ in CASES} and len(CASES) >= 2 * len(PASSES)


@pytest.mark.parametrize("pass_name,path", CASES, ids=[f"{a}/{b.stem}" for a, b in CASES])
def test_pass_fixture(pass_name, path, sohu, others):
    parsed = parse(sohu, [path], others=others)
    assert isinstance(parsed, Parsed)
    stage = run_passes(parsed, until=pass_name)
    got = summary(stage, pass_name)
    expected = path.with_suffix(".expected")
    if os.environ.get("PERFONTO_UPDATE_GOLDEN") == "1":
        expected.write_text(got, encoding="utf-8")
    assert expected.exists(), f"{expected} is missing; write it with PERFONTO_UPDATE_GOLDEN=1 and review it"
    assert got == expected.read_text(encoding="utf-8")


def test_passes_do_not_mutate_the_previous_stage(sohu, others):
    parsed = parse(sohu, [HERE / "graph" / "cycle.metrics"], others=others)
    stage = parsed
    for name, fn in PASSES:
        before = (stage.diagnostics, getattr(stage, "bad", None), dict(getattr(stage, "unavailable", {}) or {}))
        nxt = fn(stage)
        assert (
            stage.diagnostics,
            getattr(stage, "bad", None),
            dict(getattr(stage, "unavailable", {}) or {}),
        ) == before, name
        stage = nxt
    assert isinstance(run_passes(parsed, until="graph"), Graphed)


def test_unknown_pass_name(sohu):
    with pytest.raises(KeyError, match="no compiler pass `typing`"):
        run_passes(parse(sohu, sources={"x.metrics": "metric a [ratio] = 1"}), until="typing")
