"""The top-down sum check over part of a tree: `analyze --metrics` evaluates only the metrics named and what
they need, and a node's parent or siblings are not needed. A level is summed only where the level and its
parent are all evaluated (`analysis.checks.summed_levels`); `--metrics fetch_latency` ended in an internal
`KeyError: 'frontend_bound'`, and `--metrics frontend_bound,fetch_latency` reported a tree violation.

The capture (perf stat -I -x, two 1 s intervals, SMT on) by hand, per interval: core clocks =
CPU_CLK_UNHALTED.THREAD_ANY / 2 = 2000 / 2 = 1000, slots = 4 × 1000 = 4000;
frontend bound = 560 / 4000 = 14 %, retiring = 2400 / 4000 = 60 %,
bad speculation = (2800 − 2400 + 4 × 50) / 4000 = 15 %, backend bound = 100 − 14 − 60 − 15 = 11 %
(level 1 adds up to 100 %); fetch latency = 4 × min(1000, 120) / 4000 = 12 %, fetch bandwidth =
FETCH_BW / 4000: 80 gives 2 % (12 + 2 = 14 %, the level adds up), 200 gives 5 % (17 % ≠ 14 %: off by 0.03)."""

import json

import pytest

from perfonto.cli import main
from perfonto.interop import import_file

SLOTS = "tma_info_thread_slots"
TMA = [  # Linux perf's x86 TMA metrics (tools/perf/pmu-events/arch/x86/*/*-metrics.json), cut down
    {
        "MetricName": "tma_frontend_bound",
        "MetricExpr": f"IDQ_UOPS_NOT_DELIVERED.CORE / {SLOTS}",
        "MetricGroup": "TopdownL1;tma_L1_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_retiring",
        "MetricExpr": f"UOPS_RETIRED.RETIRE_SLOTS / {SLOTS}",
        "MetricGroup": "TopdownL1;tma_L1_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_bad_speculation",
        "MetricExpr": f"(UOPS_ISSUED.ANY - UOPS_RETIRED.RETIRE_SLOTS + 4 * INT_MISC.RECOVERY_CYCLES) / {SLOTS}",
        "MetricGroup": "TopdownL1;tma_L1_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_backend_bound",
        "MetricExpr": "1 - (tma_frontend_bound + tma_bad_speculation + tma_retiring)",
        "MetricGroup": "TopdownL1;tma_L1_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_fetch_latency",
        "MetricExpr": f"4 * min(CPU_CLK_UNHALTED.THREAD, IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE) / {SLOTS}",
        "MetricGroup": "TopdownL2;tma_L2_group;tma_frontend_bound_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_fetch_bandwidth",
        "MetricExpr": f"FETCH_BW / {SLOTS}",
        "MetricGroup": "TopdownL2;tma_L2_group;tma_frontend_bound_group",
        "ScaleUnit": "100%",
    },
    {
        "MetricName": "tma_info_core_core_clks",
        "MetricExpr": "(CPU_CLK_UNHALTED.THREAD_ANY / 2 if #SMT_on else CPU_CLK_UNHALTED.THREAD)",
    },
    {"MetricName": SLOTS, "MetricExpr": "4 * tma_info_core_core_clks"},
]


@pytest.fixture(scope="module")
def tma(tmp_path_factory):
    d = tmp_path_factory.mktemp("tma")
    src = d / "perf_tma.json"
    src.write_text(json.dumps(TMA))
    report = import_file("perf", src, d / "out", "tma")
    assert report.ok, report.render()
    return d / "out"


#: One interval's counts for the TMA tree (by hand: slots = 4 × 2000 / 2 = 4000; frontend 560 / 4000 = 14 %).
ROWS = {
    "cpu_clk_unhalted.thread": 1000,
    "cpu_clk_unhalted.thread_any": 2000,
    "idq_uops_not_delivered.core": 560,
    "idq_uops_not_delivered.cycles_0_uops_deliv.core": 120,
    "uops_retired.retire_slots": 2400,
    "uops_issued.any": 2800,
    "int_misc.recovery_cycles": 50,
    "fetch_bw": 80,
}


def _analyze(tma, tmp_path, capsys, fetch_bw: int, metrics: str | None):
    rows = {**ROWS, "fetch_bw": fetch_bw}
    csv = tmp_path / "tma_perf.csv"
    csv.write_text("".join(f"{t}.000100000,{v},,{ev},1000000000,100.00,,\n" for t in (1, 2) for ev, v in rows.items()))
    argv = ["analyze", str(csv), "--catalog", str(tma), "--out", str(tmp_path / "o"), "--json"]
    capsys.readouterr()
    assert main(argv + (["--metrics", metrics] if metrics else [])) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "metrics",
    [
        "tma_fetch_latency",  # a child without its parent: the internal KeyError
        "tma_frontend_bound,tma_fetch_latency",  # one child of two, one level-1 node of four: no sum to check
        "tma_frontend_bound",
    ],
)
def test_a_part_of_a_level_is_not_summed(tma, tmp_path, capsys, metrics):
    doc = _analyze(tma, tmp_path, capsys, 80, metrics)
    for name, want in {"tma_fetch_latency": 12.0, "tma_frontend_bound": 14.0}.items():
        if name in metrics.split(","):
            assert doc["metrics"][name]["value"] == pytest.approx(want, rel=1e-12)
    assert doc["topdown_tree_violations"] == []


def test_a_whole_level_is_still_summed(tma, tmp_path, capsys):
    doc = _analyze(tma, tmp_path, capsys, 80, None)
    assert doc["metrics"]["tma_fetch_bandwidth"]["value"] == pytest.approx(2.0, rel=1e-12)
    assert doc["metrics"]["tma_backend_bound"]["value"] == pytest.approx(11.0, rel=1e-12)
    assert doc["topdown_tree_violations"] == []  # 14 + 60 + 15 + 11 = 100 %, 12 + 2 = 14 %
    for metrics in (None, "tma_frontend_bound,tma_fetch_latency,tma_fetch_bandwidth"):
        doc = _analyze(tma, tmp_path, capsys, 200, metrics)  # fetch bandwidth 5 %: 12 + 5 = 17 % ≠ 14 %
        (msg,) = doc["topdown_tree_violations"]
        assert msg.startswith("children of tma_frontend_bound (tma_fetch_bandwidth, tma_fetch_latency) do not add up")
        assert msg.endswith("off by 0.03")
