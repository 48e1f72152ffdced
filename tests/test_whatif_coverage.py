"""perfonto coverage (issue 18, point 4): the six shipped scenarios on the shipped Sohu catalog, three seeds
each; which pairs the catalog tells apart, and what removing a counter loses."""

from __future__ import annotations

import json
import textwrap

import pytest

from perfonto.cli import main
from perfonto.whatif.catalogs import compiled, parts
from perfonto.whatif.coverage import judge, moved_metrics
from perfonto.whatif.points import Target
from perfonto.whatif.runs import diagnose, run_all
from perfonto.whatif.scenarios import ScenarioError, load_scenarios

SIX = ["slow-chip", "throttled-link", "hbm-bound", "host-bound", "kv-capacity-bound", "idle"]
WITHOUT = ["c2c.busy_cycles", "seq.collective_wait_cycles", "hbm.allocated_bytes"]


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    t = Target()
    nominal, scs = load_scenarios(None, parts(t)[0].generation)
    assert [s.name for s in scs] == SIX
    work = tmp_path_factory.mktemp("coverage")
    # the default --seeds 3 (seed 2 read the idle scenario as weight streaming when it ran 300 ms)
    runs = run_all(t, nominal, scs, [0, 1, 2], work, jobs=2)
    return scs, runs, judge(t, scs, runs, without=WITHOUT, all_counters=False)


def test_the_catalog_tells_the_six_scenarios_apart(six):
    scs, runs, cov = six
    assert not [r for r in runs if r["error"]]
    assert cov.scenarios == SIX and len(cov.pairs) == 15 and cov.all_told_apart
    head = {s: set(cov.diagnosis[s]["headlines"]) for s in SIX}
    assert head == {
        "slow-chip": {"topdown.interconnect.peer_wait"},
        "throttled-link": {"topdown.interconnect.link_transfer"},
        "hbm-bound": {"topdown.memory.weights"},
        "host-bound": {"topdown.host.launch"},
        "kv-capacity-bound": {"topdown.memory.weights"},
        "idle": {"topdown.idle"},
    }
    assert all(e["met"] for e in cov.expected.values())
    # the one pair with the same headline is told apart by what the KV-capacity run adds to the report
    assert cov.pairs["hbm-bound | kv-capacity-bound"] == {
        "by": "finding",
        "metric": "hbm.occupancy",
        "of": "kv-capacity-bound",
    }
    assert cov.diagnosis["kv-capacity-bound"]["findings"] == ["hbm.occupancy"]
    # the value-based judgement agrees with each run's own report
    assert all(r["report"]["headline"] == r["headline"] for r in runs)


def test_removing_the_peer_wait_counter_loses_the_slow_chip_diagnosis(six):
    _, _, cov = six
    w = cov.without["seq.collective_wait_cycles"]
    assert w["rejudged"] and w["unavailable"] == ["topdown.interconnect.peer_wait"]
    lost = {(x["scenario"], x["what"]): x for x in w["lost_diagnoses"]}
    assert lost[("slow-chip", "headline")]["before"] == ["topdown.interconnect.peer_wait"]
    assert lost[("slow-chip", "headline")]["after"] == ["topdown.memory.weights"]  # now read as weight streaming
    assert "waiting for chip 1 at collectives" in lost[("slow-chip", "headline")]["message"]
    assert w["lost_pairs"] == ["slow-chip | hbm-bound"]  # ... and confused with the HBM-bound run
    assert {x["scenario"] for x in w["lost_diagnoses"]} == {"slow-chip"}


def test_removing_the_allocation_gauge_loses_the_kv_capacity_diagnosis(six):
    _, _, cov = six
    w = cov.without["hbm.allocated_bytes"]
    assert w["lost_diagnoses"] == [
        {
            "scenario": "kv-capacity-bound",
            "what": "finding",
            "before": ["hbm.occupancy"],
            "after": [],
            "message": "hbm.occupancy no longer flags",
        }
    ]
    assert w["lost_pairs"] == ["hbm-bound | kv-capacity-bound"]


def test_link_busy_cycles_are_evidence_but_no_diagnosis(six):
    # c2c.busy_cycles feeds c2c.link_busy only, which has no threshold and is not in the top-down tree:
    # removing it loses evidence (the metric moved under the throttled link) but no diagnosis.
    _, _, cov = six
    w = cov.without["c2c.busy_cycles"]
    assert w["rejudged"] and w["metrics"] == ["c2c.link_busy"]
    assert w["lost_diagnoses"] == [] and w["lost_pairs"] == []
    assert "c2c.link_busy" in w["lost_evidence"]["throttled-link"]
    assert "c2c.link_busy" in cov.moves["throttled-link"]


def test_counters_not_judged_are_not_reported_as_losing_nothing(six, capsys):
    # Judged with all_counters=False (--only-without): seq.compute_cycles feeds the top-down tree and
    # seq.memory_weight_cycles the memory branch: both are "not judged", never "no diagnosis can change".
    import argparse

    from perfonto.commands.coverage import _render

    _, _, cov = six
    for sig in ("seq.compute_cycles", "seq.memory_weight_cycles"):
        e = cov.without[sig]
        assert e["rejudged"] is False and e["can_change"] is True and e["lost_diagnoses"] is None
        assert e["note"].startswith("not judged") and "no diagnosis can change" not in e["note"]
    assert "topdown.compute_bound" in cov.without["seq.compute_cycles"]["note"]
    # a counter only evidence metrics read cannot change a diagnosis, and says so
    plain = [s for s, e in cov.without.items() if e.get("can_change") is False]
    assert plain and all(cov.without[s]["lost_diagnoses"] == [] for s in plain)
    assert all("no diagnosis can change" in cov.without[s]["note"] for s in plain)
    _render(cov, "sohu", argparse.Namespace(seeds=2, without=WITHOUT))
    out = capsys.readouterr().out.replace("\n", " ")
    quiet = out.split("counters lose no diagnosis")[1].split("counters not judged")[0]
    assert "seq.compute_cycles" not in quiet and "seq.collective_wait_cycles" not in quiet
    assert "counters not judged (--only-without" in out and "seq.compute_cycles" in out.split("counters not judged")[1]


def test_unread_counters_and_unmoved_metrics(six):
    _, _, cov = six
    assert {"seq.boot_count", "dma.descriptors", "vpu.instructions"} <= set(cov.unread)
    assert "hbm.read_bytes" not in cov.unread
    assert "c2c.retry_rate" in cov.unmoved  # random retry events: noise, in every scenario
    assert "topdown.interconnect.peer_wait" in cov.moves["slow-chip"]
    assert "topdown.host.launch" in cov.moves["host-bound"] and "topdown.idle" in cov.moves["idle"]


def test_rejudging_from_values_equals_a_full_reanalysis(six):
    # The judgement without a counter reuses the metric values of the full evaluation; a full
    # analysis of the capture with the recompiled catalog gives the same headline and findings.
    from perfonto.analysis.capture import Capture, analyse_capture

    _, runs, _ = six
    r = next(x for x in runs if x["scenario"] == "slow-chip" and x["seed"] == 0)
    graph = compiled(Target(), {}, without=("seq.collective_wait_cycles",))
    from pathlib import Path

    d = Path(r["folder"])
    rep = analyse_capture(graph, Capture(d / "counters.parquet", d / "requests.parquet", None, d / "sync.parquet"))
    mine = diagnose(graph, r["values"], r["per_chip"], r["chips"])
    assert mine["headline"] == rep.headline["metric"] == "topdown.memory.weights"
    assert mine["findings"] == sorted(t[0] for t in rep.analysis.thresholds)


def test_moves_need_more_than_the_seed_noise():
    a = [{"values": {"m": 10.0, "n": 5.0}}, {"values": {"m": 10.2, "n": 5.0}}]
    b = [{"values": {"m": 10.1, "n": 5.001}}, {"values": {"m": 10.3, "n": 5.0}}]
    c = [{"values": {"m": 13.0, "n": 5.0}}, {"values": {"m": 13.1, "n": 6.0}}]
    assert moved_metrics(b, a) == {}  # within 3 σ of the seeds, and within 1 % (n)
    assert set(moved_metrics(c, a)) == {"m"}  # n: its own noise covers the 0.5 change


PROPOSAL = """
generation: sohu_kv
extends: sohu
description: "Sohu with a proposed counter: HBM bytes read from the KV cache."
blocks:
  hbm:
    signals:
      kv_read_bytes: {kind: counter, unit: B, width: 48, scale: 64, description: "KV-cache bytes read from HBM.",
                      emulator: {linear: {hbm_kv_read: 1}, split: jitter}}
"""
METRIC = """
metric hbm.kv_read_share [percent] = sum(hbm.kv_read_bytes) / sum(hbm.read_bytes)
  "Share of HBM reads that are KV-cache history."
  groups memory, hbm
  bounds 0 .. 100
  threshold > 25 %: "HBM reads dominated by the KV cache: long contexts"
  source "a proposal judged by perfonto coverage"
"""
LONG = """
scenarios:
  long-context:
    description: "prompts of 3072 tokens: decode re-reads a long KV history every step"
    run: {isl: 3072, osl: 256, concurrency: 64}
"""


@pytest.mark.slow
def test_a_proposed_counter_is_judged_by_what_it_adds(tmp_path, capsys):
    # The shipped catalog reads an HBM-bound run and a long-context run the same way (weight
    # streaming); the proposed KV-read counter tells them apart.
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "sohu_kv.yaml").write_text(textwrap.dedent(PROPOSAL))
    (cat / "kv.metrics").write_text(METRIC)
    (tmp_path / "long.yaml").write_text(LONG)
    argv = [
        "coverage",
        "--catalog",
        str(cat),
        "--scenarios",
        str(tmp_path / "long.yaml"),
        "--only",
        "hbm-bound,long-context",
        "--seeds",
        "2",
        "--only-without",
        "--jobs",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    p = doc["proposed"]["hbm.kv_read_bytes"]
    assert p["metrics"] == ["hbm.kv_read_share"] and "hbm.kv_read_share" in doc["moves"]["long-context"]
    assert doc["pairs"]["hbm-bound | long-context"] == {
        "by": "finding",
        "metric": "hbm.kv_read_share",
        "of": "long-context",
    }
    assert p["lost_pairs"] == ["hbm-bound | long-context"]  # without it the pair is confused
    assert p["pairs_after"]["hbm-bound | long-context"] is None


def test_scenario_file_errors_are_located(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "scenarios:\n  x:\n    run: {slow_chipp: '1:2', isl: -3}\n    spec: {hbm.peak_bandwith: 1 TB/s}\n    colour: "
        "red\n"
    )
    with pytest.raises(ScenarioError) as e:
        load_scenarios(bad, parts(Target())[0].generation)
    msgs = [d.message for d in e.value.diagnostics]
    assert any("unknown run key `slow_chipp`" in m for m in msgs) and any(
        "`isl` must be a whole number" in m for m in msgs
    )
    assert any("unknown key `colour`" in m for m in msgs) and any("spec.hbm.peak_bandwith" in m for m in msgs)
    assert all(d.span.file.endswith("bad.yaml") and d.span.line >= 2 for d in e.value.diagnostics)


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["coverage", "--without", "c2c.busy_cycle"], 2, "did you mean `c2c.busy_cycles`"),
        (["coverage", "--only", "slow-chip,idel"], 2, "did you mean `idle`"),
        (["coverage", "--only", "idle"], 2, "at least two"),
        (["coverage", "--scenarios", "nope.yaml"], 2, "scenarios do not load"),
    ],
)
def test_coverage_usage_errors(argv, code, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--json"]) == code
    assert message in json.loads(capsys.readouterr().out)["error"]
