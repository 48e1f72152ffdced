"""An imported perf top-down tree marks its level 1 in the metric file (``interop.perf_topdown``): retiring,
TMA's useful work, gets group ``useful`` (the bottleneck is chosen among the stalls), and a level 1 giving
only some of the four categories gets group ``topdown_partial`` on each node (its sum to 100 % is not
checked), with an import-report finding naming what is missing. Before, neither was written: the report
named retiring (60 %) the dominant bottleneck, and a file with frontend bound (14 %) and backend bound
(10 %) only was reported as a level 1 that does not add up (off by 0.76)."""

import json
from pathlib import Path

import pytest

from perfonto.interop import import_file
from perfonto.interop.perf_topdown import category

from test_checks_partial_tree import TMA

REAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "real-catalogs"
N2 = REAL / "perf_arm64_neoverse-n2-v2_metrics.json"


def _import(tmp_path, entries, name="tma"):
    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(entries))
    report = import_file("perf", src, tmp_path / name, name)
    assert report.ok, report.render()
    return report, (tmp_path / name / f"{name}.metrics").read_text()


def _groups(text: str) -> dict[str, list[str]]:
    """metric → its groups, from a written .metrics file."""
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("metric "):
            name = line.split()[1]
        elif line.strip().startswith("groups ") and name:
            out[name] = [g.strip() for g in line.strip()[7:].split(",")]
    return out


def _partial_findings(report) -> list[str]:
    return [f["message"] for f in report.to_json()["findings"] if f["code"] == "topdown-partial"]


@pytest.mark.parametrize(
    "name, want",
    [
        ("tma_retiring", "retiring"),
        ("Retiring", "retiring"),
        ("Frontend_Bound", "frontend_bound"),
        ("tma_bad_speculation", "bad_speculation"),
        ("backend_bound", "backend_bound"),
        ("tma_fetch_latency", None),
        ("retired_rate", None),
    ],
)
def test_category_names(name, want):
    assert category(name) == want


def test_retiring_is_marked_useful(tmp_path):
    report, text = _import(tmp_path, TMA)
    g = _groups(text)
    assert "useful" in g["tma_retiring"]
    for n in ("tma_frontend_bound", "tma_bad_speculation", "tma_backend_bound", "tma_fetch_latency"):
        assert "useful" not in g[n] and "topdown_partial" not in g[n], n
    assert "topdown_partial" not in g["tma_retiring"]
    assert _partial_findings(report) == []


def test_a_partial_level1_is_marked(tmp_path):
    """Frontend bound and backend bound only (an arch defining two of the four categories)."""
    part = [e for e in TMA if e["MetricName"] not in ("tma_retiring", "tma_bad_speculation", "tma_backend_bound")]
    part.append(
        {
            "MetricName": "tma_backend_bound",
            "MetricExpr": "(UOPS_ISSUED.ANY - UOPS_RETIRED.RETIRE_SLOTS) / tma_info_thread_slots",
            "MetricGroup": "TopdownL1;tma_L1_group",
            "ScaleUnit": "100%",
        }
    )
    report, text = _import(tmp_path, part)
    g = _groups(text)
    assert "topdown_partial" in g["tma_frontend_bound"] and "topdown_partial" in g["tma_backend_bound"]
    assert "topdown_partial" not in g["tma_fetch_latency"]  # level 2 is whole: still summed
    (msg,) = _partial_findings(report)
    assert msg.startswith("top-down level 1 is partial: `tma_frontend_bound`, `tma_backend_bound` without ")
    assert "bad_speculation, retiring;" in msg


def test_a_rejected_level1_node_makes_it_partial(tmp_path):
    """Retiring's formula uses perf's `%`, which has no counterpart: it is rejected, and level 1 is partial."""
    entries = [dict(e) for e in TMA]
    for e in entries:
        if e["MetricName"] == "tma_retiring":
            e["MetricExpr"] = "UOPS_RETIRED.RETIRE_SLOTS % tma_info_thread_slots"
        if e["MetricName"] == "tma_backend_bound":  # would be rejected with it (it reads retiring)
            e["MetricExpr"] = "(UOPS_ISSUED.ANY - IDQ_UOPS_NOT_DELIVERED.CORE) / tma_info_thread_slots"
    src = tmp_path / "rej.json"
    src.write_text(json.dumps(entries))
    report = import_file("perf", src, tmp_path / "rej", "rej")
    g = _groups((tmp_path / "rej" / "rej.metrics").read_text())
    assert "tma_retiring" not in g
    assert all("topdown_partial" in g[n] for n in ("tma_frontend_bound", "tma_bad_speculation", "tma_backend_bound"))
    (msg,) = _partial_findings(report)
    assert "retiring (`tma_retiring` not imported)" in msg


@pytest.mark.skipif(not N2.exists(), reason="the real catalogs are not checked out beside the project")
def test_real_neoverse_n2(tmp_path):
    """Linux's Neoverse N2/V2 file: its four ArchStdEvent top-down metrics (arm64 sbsa.json) are all there;
    without RETIRING and BAD_SPECULATION the level is partial."""
    entries = json.loads(N2.read_text())
    report, text = _import(tmp_path, entries, "n2")
    g = _groups(text)
    assert "useful" in g["retiring"] and "topdown_partial" not in g["retiring"]
    assert "useful" not in g["frontend_bound"] and "useful" not in g["retired_rate"]
    assert _partial_findings(report) == []
    cut = [e for e in entries if e.get("ArchStdEvent") not in ("RETIRING", "BAD_SPECULATION")]
    report, text = _import(tmp_path, cut, "n2cut")
    g = _groups(text)
    assert "topdown_partial" in g["frontend_bound"] and "topdown_partial" in g["backend_bound"]
    (msg,) = _partial_findings(report)
    assert "without bad_speculation, retiring" in msg


@pytest.mark.skipif(not (REAL / "intel_perfmon_HSW_haswell_metrics.json").exists(), reason="no real catalogs")
def test_the_marks_fit_intels_tma_tree():
    """Intel's Haswell TMA file (Level 1: Frontend_Bound, Bad_Speculation, Backend_Bound, Retiring — the file's
    own group for Retiring is BvUW, "useful work"): the same marks apply, for ``interop.intel`` to call."""
    from perfonto.interop import intel
    from perfonto.interop.perf_topdown import mark_level1

    cat = intel.read(REAL / "intel_perfmon_HSW_haswell_metrics.json", "hsw")
    mark_level1(cat)
    useful = [k for k, m in cat.metrics.items() if "useful" in m.groups]
    assert useful == ["Retiring"]
    assert not [k for k, m in cat.metrics.items() if "topdown_partial" in m.groups]
