"""`perfonto analyze` over an imported perf top-down tree: the dominant bottleneck is a stall, not retiring
(group ``useful``), and a level 1 that is partial — in the catalog (group ``topdown_partial``) or in what
``--metrics`` evaluates — is not summed to 100 %, and a note says so.

Needs the analysis side proposed with it (``analysis.bottleneck.stall_shares``,
``analysis.checks.level1_not_summed``) as well as the importer's marks (``interop.perf_topdown``).

The capture is ``test_checks_partial_tree``'s (perf stat -I -x, two 1 s intervals, SMT on), by hand per
interval: slots = 4 × 2000 / 2 = 4000; frontend bound = 560 / 4000 = 14 %, retiring = 2400 / 4000 = 60 %,
bad speculation = (2800 − 2400 + 4 × 50) / 4000 = 15 %, backend bound = 100 − 14 − 60 − 15 = 11 %.
Retiring is the largest share but useful work: the largest stall is bad speculation, 15 %. A file that
gives only frontend bound and backend bound = (2800 − 2400) / 4000 = 10 % sums to 24 %: off by 0.76, a
false violation before."""

import json

import pytest

from perfonto.cli import main
from perfonto.interop import import_file

from test_checks_partial_tree import ROWS, TMA

PARTIAL = [e for e in TMA if e["MetricName"] not in ("tma_retiring", "tma_bad_speculation", "tma_backend_bound")] + [
    {
        "MetricName": "tma_backend_bound",
        "MetricExpr": "(UOPS_ISSUED.ANY - UOPS_RETIRED.RETIRE_SLOTS) / tma_info_thread_slots",
        "MetricGroup": "TopdownL1;tma_L1_group",
        "ScaleUnit": "100%",
    }
]


def _catalog(tmp_path, entries, name):
    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(entries))
    report = import_file("perf", src, tmp_path / name, name)
    assert report.ok, report.render()
    return tmp_path / name


def _analyze(catalog, tmp_path, capsys, metrics=None):
    csv = tmp_path / "tma_perf.csv"
    csv.write_text("".join(f"{t}.000100000,{v},,{ev},1000000000,100.00,,\n" for t in (1, 2) for ev, v in ROWS.items()))
    argv = ["analyze", str(csv), "--catalog", str(catalog), "--out", str(tmp_path / "o"), "--json", "--force"]
    capsys.readouterr()
    assert main(argv + (["--metrics", metrics] if metrics else [])) == 0
    return json.loads(capsys.readouterr().out)


def _skip_notes(doc) -> list[str]:
    return [n for n in doc.get("notes", []) if "not checked to add up to 100 %" in n]


def test_retiring_is_not_the_bottleneck(tmp_path, capsys):
    doc = _analyze(_catalog(tmp_path, TMA, "tma"), tmp_path, capsys)
    assert doc["topdown"]["tma_retiring"] == pytest.approx(60.0, rel=1e-12)  # still in the split
    assert doc["bottleneck"] == "tma_bad_speculation"  # the largest stall, 15 % (was tma_retiring)
    assert doc["topdown"]["tma_bad_speculation"] == pytest.approx(15.0, rel=1e-12)
    assert doc["topdown_tree_violations"] == []  # 14 + 60 + 15 + 11 = 100 %: whole, still summed
    assert _skip_notes(doc) == []


def test_a_partial_level1_is_not_summed(tmp_path, capsys):
    doc = _analyze(_catalog(tmp_path, PARTIAL, "part"), tmp_path, capsys)
    assert doc["topdown"]["tma_frontend_bound"] == pytest.approx(14.0, rel=1e-12)
    assert doc["topdown"]["tma_backend_bound"] == pytest.approx(10.0, rel=1e-12)
    assert doc["topdown_tree_violations"] == []  # was: level-1 shares … off by 0.76
    (note,) = _skip_notes(doc)
    assert "the catalog gives only part of level 1" in note
    assert doc["bottleneck"] == "tma_frontend_bound"  # 14 % > 10 %


def test_metrics_choosing_part_of_level1_says_it_skipped(tmp_path, capsys):
    """Frontend bound and its child only (backend bound would not do: it reads the other three, so naming it
    evaluates all of level 1, which is then summed)."""
    doc = _analyze(_catalog(tmp_path, TMA, "tma"), tmp_path, capsys, "tma_frontend_bound,tma_fetch_latency")
    assert doc["topdown_tree_violations"] == []
    (note,) = _skip_notes(doc)
    assert "only part of level 1 is evaluated" in note


def test_per_chip_dominant_node_is_the_largest_stall(tmp_path, capsys):
    """The terminal's per-chip column names the largest stall too (bad speculation 15 %), not retiring's 60 %."""
    csv = tmp_path / "tma_perf.csv"
    csv.write_text("".join(f"{t}.000100000,{v},,{ev},1000000000,100.00,,\n" for t in (1, 2) for ev, v in ROWS.items()))
    catalog = _catalog(tmp_path, TMA, "tma")
    capsys.readouterr()
    assert main(["analyze", str(csv), "--catalog", str(catalog), "--out", str(tmp_path / "o"), "--force"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Per chip (run level)") :]
    assert "tma_bad_speculation 15.0 %" in table and "tma_retiring 60.0 %" not in table


def test_per_op_bound_is_the_largest_stall(tmp_path):
    """The per-op 'bound' column (``GroupMetrics.dominant``) skips useful work as the bottleneck does: an op
    retiring 60 % of its slots is bound by its largest stall (bad speculation 15 %), not by retiring."""
    import numpy as np

    from perfonto.analysis.groups import GroupMetrics
    from perfonto.metrics.catalog import load_catalog

    graph = load_catalog(_catalog(tmp_path, TMA, "tma"), None, library=False).graph
    shares = {"tma_frontend_bound": 14.0, "tma_bad_speculation": 15.0, "tma_retiring": 60.0, "tma_backend_bound": 11.0}
    gm = GroupMetrics("op", ["gemm"], np.ones(1), np.ones(1), {n: np.array([v]) for n, v in shares.items()})
    assert gm.dominant(graph) == ["tma_bad_speculation"]
