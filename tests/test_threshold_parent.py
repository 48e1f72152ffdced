"""A `threshold … when parent:` counts as crossed only where every ancestor on the metric's `parent` chain
that declares a threshold is crossed too (the TMA drill-down rule). perf's `MetricThreshold` and Intel's
`Threshold` write a node's condition with its parent's (`tma_fetch_latency > 0.1 & tma_frontend_bound >
0.15`); the importers write the metric's own bound `when parent`, so the analysis checks the parent's.
A threshold without it stands alone (the shipped library's).

The capture (perf stat -I -x, two 1 s intervals, SMT on) by hand, per interval: core clocks =
CPU_CLK_UNHALTED.THREAD_ANY / 2 = 2000 / 2 = 1000, slots = 4 × 1000 = 4000; frontend bound =
IDQ_UOPS_NOT_DELIVERED.CORE / slots = 560 / 4000 = 14 %; fetch latency = 4 × min(1000, 120) / 4000 = 12 %.
The source's condition 0.12 > 0.1 & 0.14 > 0.15 is false: fetch latency is not crossed. With 640 uops not
delivered, frontend bound is 640 / 4000 = 16 % > 15 % and fetch latency (still 12 %) is crossed."""

import json

import numpy as np
import pytest

from perfonto.analysis.bottleneck import bottleneck_label, thresholds_crossed
from perfonto.cli import main
from perfonto.interop import import_file
from perfonto.metrics.catalog import load_catalog

TMA = [  # from Linux perf's x86 TMA metrics (tools/perf/pmu-events/arch/x86/*/*-metrics.json), cut down
    {
        "MetricName": "tma_frontend_bound",
        "MetricExpr": "IDQ_UOPS_NOT_DELIVERED.CORE / tma_info_thread_slots",
        "MetricGroup": "Default;TopdownL1;tma_L1_group",
        "MetricThreshold": "tma_frontend_bound > 0.15",
        "ScaleUnit": "100%",
        "BriefDescription": "Frontend bound",
    },
    {
        "MetricName": "tma_fetch_latency",
        "MetricExpr": "4 * min(CPU_CLK_UNHALTED.THREAD, IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE) / "
        "tma_info_thread_slots",
        "MetricGroup": "Frontend;TopdownL2;tma_L2_group;tma_frontend_bound_group",
        "MetricThreshold": "tma_fetch_latency > 0.1 & tma_frontend_bound > 0.15",
        "ScaleUnit": "100%",
        "BriefDescription": "Fetch latency",
    },
    {
        "MetricName": "tma_info_core_core_clks",
        "MetricExpr": "(CPU_CLK_UNHALTED.THREAD_ANY / 2 if #SMT_on else CPU_CLK_UNHALTED.THREAD)",
        "BriefDescription": "Core clocks",
    },
    {
        "MetricName": "tma_info_thread_slots",
        "MetricExpr": "4 * tma_info_core_core_clks",
        "BriefDescription": "Slots",
    },
]


def _capture(path, idq_core: int):
    rows = {
        "cpu_clk_unhalted.thread": 1000,
        "cpu_clk_unhalted.thread_any": 2000,
        "idq_uops_not_delivered.core": idq_core,
        "idq_uops_not_delivered.cycles_0_uops_deliv.core": 120,
    }
    path.write_text("".join(f"{t}.000100000,{v},,{ev},1000000000,100.00,,\n" for t in (1, 2) for ev, v in rows.items()))
    return path


@pytest.fixture(scope="module")
def tma(tmp_path_factory):
    d = tmp_path_factory.mktemp("tma")
    src = d / "perf_tma.json"
    src.write_text(json.dumps(TMA))
    report = import_file("perf", src, d / "out", "tma")
    assert report.ok, report.render()
    return d


@pytest.mark.parametrize("idq_core, frontend, crossed", [(560, 14.0, []), (640, 16.0, ["fetch", "frontend"])])
def test_a_child_past_its_bound_under_a_parent_under_its_own_is_not_crossed(
    tma, tmp_path, capsys, idq_core, frontend, crossed
):
    csv = _capture(tmp_path / "tma_perf.csv", idq_core)
    capsys.readouterr()
    argv = ["analyze", str(csv), "--catalog", str(tma / "out"), "--no-library", "--out", str(tmp_path / "o"), "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["tma_frontend_bound"]["value"] == pytest.approx(frontend, rel=1e-12)
    assert doc["metrics"]["tma_fetch_latency"]["value"] == pytest.approx(12.0, rel=1e-12)  # past its own 10 %
    got = sorted(t["metric"] for t in doc["thresholds_crossed"])
    assert got == sorted({"fetch": "tma_fetch_latency", "frontend": "tma_frontend_bound"}[c] for c in crossed)
    assert ("tma_fetch_latency" in {f["metric"] for f in doc["findings"]}) == bool(crossed)


def test_a_threshold_without_when_parent_stands_alone():
    """The shipped library's thresholds are findings whatever their parent's share (a review found the rule,
    applied to every metric with a parent, silenced "HBM bandwidth bound" at 92 % under a 45 % memory bound,
    and a 1.2 x slower chip's 7.3 % wait under a 19.4 % interconnect share — the case the library's 5 %
    threshold is there for)."""
    graph = load_catalog(None, "sohu").graph
    zero = {n: np.float64(0.0) for n in graph.metrics}
    values = zero | {
        "topdown.compute_bound": np.float64(32.6),  # under its 50 %
        "topdown.compute.matrix": np.float64(32.6),  # past its 25 %
        "topdown.memory_bound": np.float64(45.0),
        "hbm.bandwidth_utilization": np.float64(92.0),  # past its 80 %
        "topdown.interconnect_bound": np.float64(19.4),  # under its 20 %
        "topdown.interconnect.peer_wait": np.float64(7.3),  # past its 5 %
    }
    names = [n for n, _, _ in thresholds_crossed(graph, values)]
    for n in ("topdown.compute.matrix", "hbm.bandwidth_utilization", "topdown.interconnect.peer_wait"):
        assert n in names, n
    assert "topdown.compute_bound" not in names and "topdown.interconnect_bound" not in names


TREE = """\
metric t.root [percent] = 100 * sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Root."
  threshold > 50 %: "root"
metric t.mid [percent] = 100 * sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Mid."
  threshold > 20 % when parent: "mid"
  parent t.root
metric t.leaf [percent] = 100 * sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Leaf."
  threshold > 5 % when parent: "leaf"
  parent t.mid
"""


def test_a_when_parent_threshold_checks_the_chain_to_the_root(tmp_path):
    (tmp_path / "t.metrics").write_text(TREE.replace("100 * ", ""))
    cat = load_catalog(tmp_path, "sohu")
    assert not cat.errors, [d.render() for d in cat.errors]
    graph = cat.graph
    assert graph.metrics["t.leaf"].threshold_when_parent and not graph.metrics["t.root"].threshold_when_parent
    v = {"t.root": np.float64(60.0), "t.mid": np.float64(25.0), "t.leaf": np.float64(6.0)}
    assert {n for n, _, _ in thresholds_crossed(graph, v) if n.startswith("t.")} == {"t.root", "t.mid", "t.leaf"}
    v["t.root"] = np.float64(40.0)  # the root under its own: neither the mid nor the leaf below it
    assert {n for n, _, _ in thresholds_crossed(graph, v) if n.startswith("t.")} == set()
    v["t.root"], v["t.mid"] = np.float64(60.0), np.float64(15.0)  # the leaf's parent under its own
    assert {n for n, _, _ in thresholds_crossed(graph, v) if n.startswith("t.")} == {"t.root"}
    v["t.mid"] = np.float64(np.nan)  # no value: listed, and the message says it was not checked
    (msg,) = [m for n, _, m in thresholds_crossed(graph, v) if n == "t.leaf"]
    assert msg.startswith("leaf") and "t.mid" in msg and "not checked" in msg


def test_the_bottleneck_label_does_not_read_an_uncrossed_threshold_as_true():
    graph = load_catalog(None, "sohu").graph
    values = {"topdown.memory_bound": np.float64(45.0)}
    assert bottleneck_label(graph, "topdown.memory_bound", values) == "memory bound (under its threshold > 50 %)"
    values = {"topdown.memory_bound": np.float64(55.0)}
    assert bottleneck_label(graph, "topdown.memory_bound", values) == "memory bound"


def test_import_writes_when_parent_and_export_writes_the_parents_condition_back(tma, tmp_path):
    """The import writes the TMA child's threshold `when parent`; perfonto's perf-json export writes it back
    as perf does, the own comparison `&` the parent's, and a re-import reads it `when parent` again."""
    from perfonto.interop.perf_export import export

    text = "".join(p.read_text() for p in (tma / "out").glob("*.metrics"))
    assert "threshold > 10 when parent:" in text  # fetch latency: 0.1 × the 100 % scale, in percent
    assert "threshold > 15:" in text  # frontend bound: a level-1 node stands alone
    graph = load_catalog(tma / "out", "tma", library=False).graph
    assert graph.metrics["tma_fetch_latency"].threshold_when_parent
    exported = export(graph).entries
    entries = {e["MetricName"]: e for e in exported if "MetricName" in e}
    assert entries["tma_fetch_latency"]["MetricThreshold"] == "tma_fetch_latency > 0.1 & tma_frontend_bound > 0.15"
    assert entries["tma_frontend_bound"]["MetricThreshold"] == "tma_frontend_bound > 0.15"
    again = tmp_path / "again.json"
    again.write_text(json.dumps(exported))
    report = import_file("perf", again, tmp_path / "re", "tma2")
    assert report.ok, report.render()
    assert "threshold > 10 when parent:" in "".join(p.read_text() for p in (tmp_path / "re").glob("*.metrics"))
