"""Generations that extend each other: caelius on sohu, aliases, removal, availability, and diff."""

import json

import numpy as np
import pytest
import yaml

from perfonto import emulator
from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import compile_files
from perfonto.ontology import load_generation
from perfonto.ontology.loader import catalog_dir
from perfonto.cli import main
from perfonto.metrics.diff import diff_generations
from perfonto.analysis.evaluate import evaluate_dump
from perfonto.codegen.python_evaluator import generate, load


@pytest.fixture(scope="module")
def caelius():
    g, diags = load_generation("caelius")
    assert g is not None, [d.render() for d in diags]
    return g


def test_check_caelius_passes(capsys):
    assert main(["check", "--generation", "caelius"]) == 0
    out = capsys.readouterr().out
    assert "warning[renamed-signal]" in out and "c2c.retries" in out  # old name resolves through the alias


def test_caelius_extends_sohu(caelius, sohu):
    assert caelius.lineage == ("sohu", "caelius")
    assert dict(caelius.blocks["hbm"]["axes"]) == {"stack": 8}
    assert (
        caelius.signals["hbm.read_bytes"].width == 64 and caelius.signals["hbm.read_bytes"].scale == 64
    )  # partial override
    assert caelius.signals["mxu.flops_fp4"].since == "caelius" and caelius.signals["mxu.flops_bf16"].since == "sohu"
    assert caelius.aliases == {"c2c.retries": "c2c.replays"} and caelius.removed == {"hbm.refresh_cycles": "caelius"}
    assert all(c.provenance == "assumed" for c in caelius.spec.values())


def test_diff_lists_exactly_what_caelius_yaml_changes(sohu, caelius):
    text = yaml.safe_load((catalog_dir() / "caelius.yaml").read_text())
    doc = diff_generations(sohu, caelius)
    declared_new = {
        f"{b}.{s}"
        for b, blk in text["blocks"].items()
        for s in (blk.get("signals") or {})
        if f"{b}.{s}" not in sohu.signals
    }
    assert set(doc["signals"]["added"]) == declared_new
    assert doc["signals"]["removed"] == text["removed"]
    assert doc["signals"]["renamed"] == [{"from": k, "to": v} for k, v in text["renamed"].items()]
    changed = {(c["signal"], c["field"]) for c in doc["signals"]["changed"]}
    # overridden widths and instance counts, and nothing else
    expect = {(f"hbm.{s}", "width") for s in ("read_bytes", "write_bytes")}
    for b, blk in text["blocks"].items():
        if "instances" in blk:
            expect |= {(n, "scope") for n, s in sohu.signals.items() if s.block == b and n not in text["removed"]}
    assert changed == expect
    assert doc["metrics"]["became_unavailable"] == [
        {"metric": "hbm.refresh_overhead", "reason": "signal `hbm.refresh_cycles` was removed in generation `caelius`"}
    ]
    assert doc["errors"] == []


def test_diff_cli_exits_1_on_a_stable_unit_change(tmp_path, capsys):
    child = tmp_path / "badgen.yaml"
    child.write_text(
        "generation: badgen\nextends: sohu\ndescription: changes a stable unit\n"
        "blocks:\n  pcie:\n    signals:\n      rx_bytes: {unit: KiB}\n"
    )
    assert main(["diff", "sohu", str(child), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert any("pcie.rx_bytes" in e and "changes unit" in e for e in doc["errors"])
    assert main(["diff", "sohu", "caelius", "--json"]) == 0
    capsys.readouterr()


def test_removing_a_stable_signal_without_deprecation_is_an_error(tmp_path, capsys):
    child = tmp_path / "g2.yaml"
    child.write_text("generation: g2\nextends: sohu\ndescription: drops a stable counter\nremoved: [pcie.doorbells]\n")
    assert main(["diff", "sohu", str(child)]) == 1
    assert "disappears without deprecation" in capsys.readouterr().out


def test_unavailable_metric_and_the_rest_evaluate(tmp_path, caelius):
    graph = compile_files(caelius, others=shipped_others(caelius))
    assert graph.unavailable == {
        "hbm.refresh_overhead": "signal `hbm.refresh_cycles` was removed in generation `caelius`"
    }
    assert not graph.errors
    res = emulator.run(caelius, chips=2, duration_s=0.05, sample_period_s=5e-3, warmup_steps=50, out_dir=tmp_path)
    ev = evaluate_dump(graph, load(generate(graph)), res.counters_path)
    assert set(ev.server) == set(graph.metrics)
    assert np.isfinite(ev.server["mfu"]) and ev.server["mfu"] > 0


def test_metric_on_a_signal_of_another_generation_is_unavailable_not_an_error(sohu):
    from perfonto.metrics.compiler import compile_texts

    src = {"m.metrics": "metric fp4 [TFLOP/s] = sum(mxu.flops_fp4) / interval\nmetric ok [1] = 1"}
    alone = compile_texts(sohu, src)  # the compiler knows only the generations it is given
    assert [d.code for d in alone.errors] == ["unknown-name"]
    g = compile_texts(sohu, src, others=shipped_others(sohu))
    assert not g.errors and list(g.metrics) == ["ok"]
    assert "exists on: b200, caelius" in g.unavailable["fp4"]


def test_extends_cycle_and_missing_parent(tmp_path):
    (tmp_path / "a.yaml").write_text("generation: a\nextends: b\ndescription: a\n")
    (tmp_path / "b.yaml").write_text("generation: b\nextends: a\ndescription: b\n")
    gen, diags = load_generation(tmp_path / "a.yaml")
    assert gen is None and diags[0].code == "extends-cycle" and "a extends b extends a" in diags[0].message
    assert diags[0].span.line == 2
    (tmp_path / "c.yaml").write_text("generation: c\ndescription: c\nextends: sohuu\n")
    gen, diags = load_generation(tmp_path / "c.yaml")
    assert gen is None and diags[0].code == "unknown-parent" and "`sohu`" in diags[0].hint
    assert (diags[0].span.file, diags[0].span.line, diags[0].span.col) == (str(tmp_path / "c.yaml"), 3, 10)


def test_inherited_error_points_into_the_child(tmp_path):
    (tmp_path / "d.yaml").write_text(
        "generation: d\nextends: sohu\ndescription: d\nblocks:\n  hbm:\n    signals:\n      read_bytes: {width: 99}\n"
    )
    gen, diags = load_generation(tmp_path / "d.yaml")
    assert gen is None
    (d,) = diags
    assert d.span.file == str(tmp_path / "d.yaml") and d.span.line == 7
