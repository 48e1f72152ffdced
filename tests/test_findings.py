"""Issue 31, part 2: guided findings — rules as catalog data, a gain bound by the share of time, and a
re-projection on the emulator that checks the bound.

The slow-chip acceptance: chip 3 runs every op 1.3 × as long; the other chips wait for it at every
collective. The finding "waiting for a slower chip" estimates the gain of removing that wait from the
largest per-chip wait share ``s`` as ``s / (1 − s)`` (Amdahl's law); repeating the run without the slow
chip must land within 10 % of that estimate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfonto.analysis.findings import estimated_gain
from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.findings import load_findings


def test_the_gain_bound_is_amdahls_law():
    # a cause taking 20 % of the time: the rest runs in 80 %, 1 / 0.8 = 1.25 × the throughput
    assert estimated_gain(0.2) == pytest.approx(0.25)
    assert estimated_gain(0.5) == pytest.approx(1.0)
    assert estimated_gain(0.0) == 0.0
    for bad in (1.0, 1.5, -0.1, float("nan"), float("inf")):
        assert estimated_gain(bad) is None


def test_the_shipped_rules_load_clean():
    cat = load_catalog(cache=False)
    rules = {r.metric: r for r in cat.graph.findings}
    assert "topdown.interconnect.peer_wait" in rules and len(rules) >= 10
    assert not [d for d in cat.diagnostics if d.code.startswith("finding")]
    peer = rules["topdown.interconnect.peer_wait"]
    assert peer.over == "chip_max" and peer.remove == {"slow_chip": None, "router_skew": 0.0}
    for r in rules.values():  # every rule's share is itself a share of time
        assert cat.graph.all_metrics[r.share].unit_text == "percent"


@pytest.fixture(scope="module")
def graph():
    return load_catalog(cache=False).graph


@pytest.mark.parametrize(
    "text, code, where",
    [
        ("findings:\n  - metric: no.such\n    title: x\n", "finding-unknown-metric", (2, 13)),
        ("findings:\n  - metric: mfu\n    title: x\n    next: [mfu, nope]\n", "finding-unknown-metric", (4, 11)),
        ("findings:\n  - metric: mfu\n    title: x\n    remove: {clock: none}\n", "finding-knob", (4, 21)),
        ("findings:\n  - metric: mfu\n    title: x\n    over: worst\n", "finding-field", (4, 11)),
        ("findings:\n  - metric: mfu\n    title: x\n    colour: red\n", "finding-field", (4, 13)),
        ("findings:\n  - metric: mfu\n", "finding-field", (2, 5)),
        ("findings:\n  - metric: mfu\n    title: x\n    share: hbm.bandwidth\n", "finding-share-unit", (4, 12)),
        ("rules: []\n", "finding-file", (1, 1)),
        ("findings: [\n", "yaml-syntax", None),
    ],
)
def test_a_bad_rule_names_file_line_and_column(tmp_path, graph, text, code, where):
    f = tmp_path / "mine.findings.yaml"
    f.write_text(text)
    rules, diags, _ = load_findings([f], graph)
    assert rules == [] and [d.code for d in diags] == [code], [d.render() for d in diags]
    d = diags[0]
    assert d.span.file == str(f)
    if where:
        assert (d.span.line, d.span.col) == where, d.render()


def _catalog_with_rule(tmp_path: Path) -> Path:
    """A catalog folder (the shipped generation and library) whose own rule replaces the library's
    peer-wait rule and adds one for a metric the library has no rule for."""
    d = tmp_path / "cat"
    d.mkdir()
    (d / "extra.metrics").write_text(
        'metric my.busy [percent] = mxu.utilization\n  "The matrix engines\' busy share, again."\n'
        '  threshold > 1 %: "my busy"\n'
    )
    (d / "team.findings.yaml").write_text(
        "findings:\n"
        "  - metric: topdown.interconnect.peer_wait\n"
        "    title: our straggler rule\n"
        "    share: topdown.interconnect.peer_wait\n"
        "    next: [mfu]\n"
        "  - metric: my.busy\n"
        "    title: our own finding\n"
        "    evidence: [mfu]\n"
    )
    return d


def test_a_catalog_adds_and_overrides_rules(tmp_path, capsys):
    d = _catalog_with_rule(tmp_path)
    cat = load_catalog(d, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    rules = {r.metric: r for r in cat.graph.findings}
    assert rules["topdown.interconnect.peer_wait"].title == "our straggler rule"
    assert rules["topdown.interconnect.peer_wait"].over == "server"  # the folder's rule replaced the library's
    assert rules["my.busy"].share is None and "topdown.memory_bound" in rules  # the library's others stay
    out = tmp_path / "run"
    assert main(["run", "--duration", "0.2s", "--catalog", str(d), "--out", str(out)]) == 0
    capsys.readouterr()
    found = json.loads((out / "report.json").read_text())["findings"]
    mine = [f for f in found if f["metric"] == "my.busy"]
    assert len(mine) == 1 and mine[0]["title"] == "our own finding"
    assert mine[0]["estimated_gain"] is None and mine[0]["evidence"]["mfu"] is not None


SLOW = ["--duration", "1s", "--isl", "128", "--osl", "128", "--sample-period", "10ms"]


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("slow") / "run"
    assert main(["run", *SLOW, "--slow-chip", "3:1.3", "--out", str(out)]) == 0
    return out


def test_slow_chip_finding_estimate_lands_within_10_percent_of_the_reprojection(slow_run, tmp_path, capsys):
    capsys.readouterr()
    report = json.loads((slow_run / "report.json").read_text())
    first = report["findings"][0]
    assert first["metric"] == "topdown.interconnect.peer_wait"
    assert "chip 3" in first["message"]
    # the estimate by hand from the per-chip wait shares in the same report: the largest one, s / (1 - s)
    waits = [c["metrics"]["topdown.interconnect.peer_wait"] / 100 for c in report["per_chip"]]
    s = max(waits)
    assert min(waits) < 1e-6 < s  # chip 3 itself does not wait; the others do
    assert first["share"] == pytest.approx(s, rel=1e-12)
    assert first["estimated_gain"] == pytest.approx(s / (1 - s), rel=1e-12)
    out = tmp_path / "findings"
    assert main(["findings", str(slow_run), "--reproject", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    peer = doc["findings"][0]["reprojection"]
    assert peer["knobs"] == {"slow_chip": None}
    assert peer["steps"] >= 5
    # without the slow chip every op of chip 3 is 1.3 × shorter; the step shrinks by the others' wait
    assert peer["step_period_s"][0] > peer["step_period_s"][1]
    assert abs(peer["gain"] - first["estimated_gain"]) <= 0.10 * first["estimated_gain"], (peer, first)
    assert abs(peer["estimate_error"]) <= 0.10
    # a finding whose knob the run does not set is not re-projected, and says why
    link = [f for f in doc["findings"] if f["metric"] == "topdown.interconnect.link_transfer"]
    assert link and "skipped" in link[0]["reprojection"]
    saved = json.loads((out / "findings.json").read_text())
    assert saved[0]["reprojection"]["gain"] == peer["gain"]


def test_findings_bad_input_is_a_clear_error(tmp_path, capsys, slow_run):
    assert main(["findings", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "no report.json" in err and "Traceback" not in err
    analyzed = tmp_path / "an"
    assert main(["analyze", str(slow_run / "counters.parquet"), "--out", str(analyzed)]) == 0
    capsys.readouterr()
    assert main(["findings", str(analyzed)]) == 0  # the findings are in any report
    assert main(["findings", str(analyzed), "--reproject", "--out", str(tmp_path / "f")]) == 1
    err = capsys.readouterr().err
    assert "ground_truth.json" in err and "Traceback" not in err
    assert not (tmp_path / "f").exists()  # nothing left behind by a refused re-projection


def test_the_terminal_report_prints_the_findings(slow_run, capsys):
    assert main(["findings", str(slow_run)]) == 0
    out = capsys.readouterr().out
    assert "waiting for a slower chip at collectives: up to +" in out
    assert "look next at:" in out
    assert math.isfinite(float(out.split("up to +")[1].split(" %")[0]))
