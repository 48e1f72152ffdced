"""Multiplexed captures (issue 29, point 2; capture/multiplex.py, analysis/multiplexed.py).

A workload with two phases per 1 s window: in the first half 1000 loads and 900 misses, in the second half
200 loads and 10 misses. The true miss ratio of a window is (900 + 10) / (1000 + 200) = 75.83 %. Counted by
two multiplexed groups that never overlap — misses in group 1 during the first half, loads in group 2
during the second — and scaled as perf scales (count x enabled / running), the ratio reads
(900 x 2) / (200 x 2) = 450 %: far above its 0..100 bound, and no measurement of any interval.

perf's CSV layout (perf-stat(1), "CSV FORMAT"): optional time stamp (-I), optional CPU, counter value, unit,
event, run time of counter (ns), percentage of measurement time the counter was running, optional
variance, optional metric value and unit. The count perf prints is already scaled
(tools/perf/util/evsel.c, perf_counts_values__scale: val = (u64)((double)val * ena / run)); run time x 100 /
percentage gives the time enabled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.multiplex import split_multiplex
from perfonto.capture.perf_stat import collector_table, read_perf_stat
from perfonto.cli import main

FIX = Path(__file__).parent / "fixtures" / "perf"
GEN = """generation: muxtest
description: Three core counters for the multiplexing tests.
clock_domains:
  cpu:
    description: nominal clock
    frequency: {value: 1, unit: GHz, provenance: assumed, source: "a test"}
blocks:
  core:
    description: one core's PMU
    clock: cpu
    signals:
      loads: {kind: counter, unit: event, width: 48, description: loads, sources: {perf: L1-dcache-loads}}
      misses: {kind: counter, unit: event, width: 48, description: misses, sources: {perf: L1-dcache-load-misses}}
      stores: {kind: counter, unit: event, width: 16, max_rate: "1000 event/s", description: stores,
               sources: {perf: L1-dcache-stores}}
"""
METRICS = """metric core.miss_ratio [percent] = core.misses / core.loads
  "Load misses per load."
  bounds 0 .. 100

metric core.load_rate [event/s] = core.loads / interval
  "Loads per second."

metric core.store_rate [event/s] = core.stores / interval
  "Stores per second."
"""
RATIO = "core.miss_ratio"
APART = (
    "mismeasured: core.loads (group 2) and core.misses (group 1) never counted together "
    "(multiplexed in different groups)"
)
S = 10**9  # ns


def mux_catalog(d: Path) -> Path:
    """Write the test catalog (``GEN``, ``METRICS``) into folder ``d``."""
    (d / "mux.yaml").write_text(GEN)
    (d / "mux.metrics").write_text(METRICS)
    return d


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return mux_catalog(tmp_path_factory.mktemp("muxcat"))


def _dump(path, misses, loads, run_m, run_l, group_m, group_l, stores=None):
    """A 1-chip wide dump read at 0, 1 and 2 s; each counter enabled the whole time, running ``run_*``
    (running totals, ns) in group ``group_*``."""
    cols = {
        "chip": pa.array([0, 0, 0], pa.int32()),
        "timestamp_ns": pa.array([0, S, 2 * S], pa.int64()),
        "core.misses": pa.array(misses, pa.uint64()),
        "core.loads": pa.array(loads, pa.uint64()),
        "core.misses@enabled_ns": [0, S, 2 * S],
        "core.misses@running_ns": run_m,
        "core.misses@group": [group_m] * 3,
        "core.loads@enabled_ns": [0, S, 2 * S],
        "core.loads@running_ns": run_l,
        "core.loads@group": [group_l] * 3,
    }
    if stores is not None:
        cols["core.stores"] = pa.array(stores, pa.uint64())
    pq.write_table(pa.table(cols), path)
    return path


def _analyze(cat, dump, out, *extra):
    args = ["analyze", str(dump), "--out", str(out), "--catalog", str(cat), "--no-library", *extra]
    assert main(args) == 0
    return pq.read_table(out / "metrics.parquet").to_pydict(), json.loads((out / "report.json").read_text())


HALF = [0, S // 2, S]  # ran half of each window


def test_two_groups_that_never_overlapped_are_mismeasured_never_above_the_bound(cat, tmp_path, capsys):
    # misses: 900 raw per window in group 1, loads: 200 raw per window in group 2, each ran 0.5 s of 1 s
    d = _dump(tmp_path / "d.parquet", [0, 900, 1800], [0, 200, 400], HALF, HALF, 1, 2)
    m, rep = _analyze(cat, d, tmp_path / "o")
    out = capsys.readouterr().out
    assert m[RATIO] == [None, None]  # 1800 / 400 = 450 % were it printed
    assert m["mismeasured"] == [[RATIO], [RATIO]]
    assert m["core.load_rate"] == [400.0, 400.0]  # one input: 200 x (1 s / 0.5 s) / 1 s, scaled as perf does
    assert rep["null_windows"][RATIO] == {APART: 2}
    assert rep["metrics"][RATIO]["value"] is None and rep["mismeasured"] == {RATIO: 2}
    assert rep["bounds_violations"]["counts"] == {}
    assert "450.00" not in out and f"{RATIO}: 2 mismeasured: core.loads (group 2)" in " ".join(out.split())
    assert any("core.loads ran 50.00 % (x2)" in n for n in rep["notes"])  # the scaling is recorded


def test_flag_policy_keeps_the_value_with_its_mark(cat, tmp_path, capsys):
    d = _dump(tmp_path / "d.parquet", [0, 900, 1800], [0, 200, 400], HALF, HALF, 1, 2)
    m, rep = _analyze(cat, d, tmp_path / "o", "--multiplexed", "flag")
    out = capsys.readouterr().out
    assert m[RATIO] == [450.0, 450.0] and m["mismeasured"] == [[RATIO], [RATIO]]  # 1800 / 400
    assert RATIO not in rep["null_windows"] and rep["mismeasured"] == {RATIO: 2}
    lines = [ln for ln in out.splitlines() if "450.00" in ln]  # not a pytest-450 tmp path
    assert lines and all("mismeasured" in ln for ln in lines)  # never outside the bound without the mark


def test_one_group_gives_the_true_value(cat, tmp_path):
    # both counters in one group (as a planner lays them out), running the whole window: (900 + 10) / (1000 + 200)
    d = _dump(tmp_path / "a.parquet", [0, 910, 1820], [0, 1200, 2400], [0, S, 2 * S], [0, S, 2 * S], 1, 1)
    m, rep = _analyze(cat, d, tmp_path / "o")
    assert m[RATIO] == pytest.approx([75.833333333, 75.833333333]) and m["mismeasured"] == [[], []]
    assert rep["metrics"][RATIO]["value"] == pytest.approx(75.833333333)
    # one group running the first half only (another pass in the second): 900 / 1000 over the half it ran,
    # the loads scaled 1000 x 2 = 2000 per s
    d = _dump(tmp_path / "b.parquet", [0, 900, 1800], [0, 1000, 2000], HALF, HALF, 1, 1)
    m, _ = _analyze(cat, d, tmp_path / "o2")
    assert m[RATIO] == pytest.approx([90.0, 90.0]) and m["core.load_rate"] == [2000.0, 2000.0]
    assert m["mismeasured"] == [[], []]


def test_scaling_follows_perf_and_a_counter_that_never_ran_is_null(sohu_free_gen):
    gen = sohu_free_gen
    t = pa.table(
        {
            "chip": pa.array([0, 0, 0], pa.int32()),
            "timestamp_ns": pa.array([0, S, 2 * S], pa.int64()),
            "core.misses": pa.array([0, 900, 900], pa.uint64()),
            "core.misses@enabled_ns": [0, S, 2 * S],
            "core.misses@running_ns": [0, 500_100_000, 500_100_000],  # window 1: enabled, never on the PMU
        }
    )
    notes: list[str] = []
    out, mux = split_multiplex(t, gen, notes)
    # perf: (u64)(900 x 1e9 / 500,100,000) = (u64)1799.64 = 1799; window 1 is perf's <not counted>: null
    assert out.column("core.misses").to_pylist() == [0, 1799, None]
    assert mux.scaling["core.misses"]["raw"] == 900 and mux.scaling["core.misses"]["scaled"] == 1799
    assert mux.scaling["core.misses"]["running_pct"] == pytest.approx(25.005)  # 0.5001 s of 2 s
    assert "core.misses ran 25.00 %" in notes[0]


@pytest.fixture(scope="module")
def sohu_free_gen(cat):
    from perfonto.metrics.catalog import load_catalog

    return load_catalog(cat, None, library=False).graph.generation


def test_perf_csv_with_multiplexing_is_read_as_perf_printed_it(sohu_free_gen, cat, tmp_path, capsys):
    gen = sohu_free_gen
    from perfonto.capture.perf_stat import mapping_of

    t = collector_table(read_perf_stat(FIX / "perf-stat-multiplexed.csv"), mapping_of(gen)).to_pydict()
    # perf printed 1800 misses and 400 loads per interval, already scaled: read once, never scaled again
    assert t["core.misses"] == [0, 1800, 3600] and t["core.loads"] == [0, 400, 800]
    # enabled = run time x 100 / percentage: 450,000,000 x 100 / 45.00 = 1e9 ns; running totals from 0
    assert t["core.misses@enabled_ns"] == [0, S, 2 * S] and t["core.misses@running_ns"] == [0, 450_000_000, 900_000_000]
    assert t["core.loads@running_ns"] == [0, 500_000_000, 1_000_000_000]
    # the raw count perf scaled: 1800 x 0.45 = 810; scaled back by perf's rule: (u64)(810 x 1e9 / 4.5e8) = 1800
    assert int(810 * S / 450_000_000) == 1800
    # run times 450 ms and 500 ms in one interval: two groups (perf's groups share one run time)
    assert t["core.misses@group"] == [-1, 0, 0] and t["core.loads@group"] == [-1, 1, 1]
    args = ["--format", "perf-stat"]
    m, rep = _analyze(cat, FIX / "perf-stat-multiplexed.csv", tmp_path / "o", *args)
    assert m[RATIO] == [None, None] and m["mismeasured"] == [[RATIO], [RATIO]]
    assert list(rep["null_windows"][RATIO]) == [
        "mismeasured: core.loads (group 1) and core.misses (group 0) never counted together "
        "(multiplexed in different groups)"
    ]
    assert m["core.load_rate"] == pytest.approx([400 / 1.000123456] * 2)  # 399.9506 loads/s as perf printed
    # the same events with one run time (one group {misses,loads}, 50 %): 1800 / 2000 = 90 %
    m, _ = _analyze(cat, FIX / "perf-stat-one-group.csv", tmp_path / "o2", *args)
    assert m[RATIO] == pytest.approx([90.0, 90.0]) and m["mismeasured"] == [[], []]


def test_perf_json_event_runtime_is_read():
    from perfonto.capture.perf_stat import _json_line

    line = {"interval": 1.0, "counter-value": "400", "unit": "", "event": "x", "event-runtime": 5e8, "pcnt-running": 50}
    x = _json_line(line, "p.json", 1)
    assert x.run_ns == 5e8 and x.enabled == 50.0


def test_bad_side_columns_name_file_row_and_column(sohu_free_gen, tmp_path):
    gen = sohu_free_gen
    base = {"chip": pa.array([0, 0], pa.int32()), "timestamp_ns": pa.array([0, S], pa.int64())}
    t = pa.table(base | {"core.loads": pa.array([0, 5], pa.uint64()), "core.loads@enabled_ns": [0, S]})
    with pytest.raises(DumpError, match=r"`core.loads` has enabled_ns but not both"):
        split_multiplex(t, gen, [])
    t = pa.table(
        base
        | {
            "core.loads": pa.array([0, 5], pa.uint64()),
            "core.loads@enabled_ns": [0, S],
            "core.loads@running_ns": [0, 2 * S],
        }
    )
    pq.write_table(t, tmp_path / "bad.parquet")
    with pytest.raises(DumpError, match=r"bad.parquet: row 2, column `core.loads@enabled_ns`/`core.loads@running_ns`"):
        split_multiplex(tmp_path / "bad.parquet", gen, [])


def test_a_capture_laid_out_per_the_planner_gives_the_true_value(cat, tmp_path):
    from perfonto.metrics.catalog import load_catalog
    from perfonto.metrics.plan_groups import plan_groups

    graph = load_catalog(cat, None, library=False).graph
    # one slot per block: the ratio's two counters cannot share a group, the planner says so
    assert [i.metric for i in plan_groups(graph, [RATIO], slots=1).inconsistent] == [RATIO]
    plan = plan_groups(graph, [RATIO, "core.store_rate"], slots=2)
    groups = [g.counters for p in plan.passes for g in p.groups]
    assert ("core.loads", "core.misses") in [tuple(sorted(g)) for g in groups] and not plan.inconsistent
    # the capture laid out per the plan: each pass is a group, the passes take turns within each window
    gid = {c: i for i, p in enumerate(plan.passes) for g in p.groups for c in g.counters}
    n = len(plan.passes)
    run = [0, S // n, 2 * S // n]
    # the pair's pass ran in the first 1/n of each window: for n = 2 the first half (900 misses, 1000 loads)
    assert n == 2
    d = _dump(tmp_path / "p.parquet", [0, 900, 1800], [0, 1000, 2000], run, run, gid["core.misses"], gid["core.loads"])
    m, _ = _analyze(cat, d, tmp_path / "o")
    assert m[RATIO] == pytest.approx([90.0, 90.0]) and m["mismeasured"] == [[], []]  # 900 / 1000 over that half


def test_scaled_register_wraps_at_its_width_and_restarts_after_a_null(sohu_free_gen):
    R = 2**48  # core.misses is 48 bits wide
    t = pa.table(
        {
            "chip": pa.array([0] * 5, pa.int32()),
            "timestamp_ns": pa.array([0, S, 2 * S, 3 * S, 4 * S], pa.int64()),
            "core.misses": pa.array([R - 100, 100, None, 700, 800], pa.uint64()),
            "core.misses@enabled_ns": [0, S, 2 * S, 3 * S, 4 * S],
            "core.misses@running_ns": [0, S // 2, S, 3 * S // 2, 2 * S],  # half of every window
        }
    )
    out, _ = split_multiplex(t, sohu_free_gen, [])
    # window 0: 200 raw across the wrap, x2 = 400, so R - 100 + 400 = 300 modulo 2^48; windows 1, 2 touch the
    # null; the total restarts from the raw 700 at read 3 (the kernel reads no window across the null), then
    # window 3 adds 100 x 2 = 200: 900
    assert out.column("core.misses").to_pylist() == [R - 100, 300, None, 700, 900]


def test_a_read_pair_beyond_the_wrap_cap_stays_ambiguous_and_an_oversized_increase_is_null(cat, tmp_path):
    # stores: 16 bits at most 1000/s wrap in 65.536 s; reads at 0, 1 and 101 s, the counter running half the time
    stamps = [0, S, 101 * S]
    cols = {
        "chip": pa.array([0, 0, 0], pa.int32()),
        "timestamp_ns": pa.array(stamps, pa.int64()),
        "core.misses": pa.array([0, 10, 20], pa.uint64()),
        "core.loads": pa.array([0, 100, 200], pa.uint64()),
        "core.stores": pa.array([0, 100, 200], pa.uint64()),
        "core.stores@enabled_ns": stamps,
        "core.stores@running_ns": [0, S // 2, 101 * S // 2],
    }
    pq.write_table(pa.table(cols), tmp_path / "d.parquet")
    m, rep = _analyze(cat, tmp_path / "d.parquet", tmp_path / "o")
    # window 0: 100 x 2 = 200 stores in 1 s; window 1: 100 s apart, beyond the 65.5 s wrap: ambiguous, as without
    # multiplexing
    assert m["core.store_rate"] == [200.0, None]
    assert rep["null_windows"]["core.store_rate"] == {"window longer than the counter's wrap period": 1}
    assert m[RATIO] == [10.0, 10.0] and m["mismeasured"] == [[], []]  # one input multiplexed: nothing to pair
    # 20,000 raw stores in a window where the counter ran a quarter: 80,000 >= 2^15, more than the 16-bit register
    # can carry once scaled: null, with a note, never a made-up wrap
    t = pa.table(
        {
            "chip": pa.array([0, 0], pa.int32()),
            "timestamp_ns": pa.array([0, 100 * S], pa.int64()),
            "core.stores": pa.array([0, 20_000], pa.uint64()),
            "core.stores@enabled_ns": [0, 100 * S],
            "core.stores@running_ns": [0, 25 * S],
        }
    )
    notes: list[str] = []
    out, _ = split_multiplex(t, load_gen(cat), notes)
    assert out.column("core.stores").to_pylist() == [0, None]
    assert any("`core.stores`: 1 window(s) whose scaled increase is half the register's range" in n for n in notes)


def load_gen(cat):
    from perfonto.metrics.catalog import load_catalog

    return load_catalog(cat, None, library=False).graph.generation


def test_a_forced_engine_still_checks_the_groups(cat, tmp_path):
    d = _dump(tmp_path / "d.parquet", [0, 900, 1800], [0, 200, 400], HALF, HALF, 1, 2)
    m, rep = _analyze(cat, d, tmp_path / "o", "--engine", "embedded")
    assert m[RATIO] == [None, None] and rep["null_windows"][RATIO] == {APART: 2}  # not 450 %
    assert any("analysed by the in-memory engine" in n for n in rep["notes"])


def test_a_window_the_counter_never_ran_is_not_bridged_with_raw_and_scaled_totals(cat, tmp_path):
    """loads run half of each 1 s window at 1000/s (500 counted, 1000 scaled), except the third, where the
    group never ran (review finding). The scaled register is a running total of scaled increments, so the
    gap is not bridged from the totals on either side (that mixed the raw value the register restarts from
    with the scaled total before it: 600/s). The read after the gap is not a scaled total either, so the
    windows on both sides of it are null; the run rate is 3 x 1000 loads over the 3 s measured = 1000/s."""
    t = pa.table(
        {
            "chip": pa.array([0] * 6, pa.int32()),
            "timestamp_ns": pa.array([k * S for k in range(6)], pa.int64()),
            "core.loads": pa.array([0, 500, 1000, 1000, 1500, 2000], pa.uint64()),
            "core.loads@enabled_ns": pa.array([k * S for k in range(6)], pa.int64()),
            "core.loads@running_ns": pa.array([0, S // 2, S, S, 3 * S // 2, 2 * S], pa.int64()),
            "core.loads@group": pa.array([1] * 6, pa.int64()),
        }
    )
    pq.write_table(t, tmp_path / "d.parquet")
    m, rep = _analyze(cat, tmp_path / "d.parquet", tmp_path / "o")
    assert m["core.load_rate"] == [1000.0, 1000.0, None, None, 1000.0]
    assert rep["metrics"]["core.load_rate"]["value"] == pytest.approx(1000.0, rel=1e-12)
    assert any("not bridged" in n and "core.loads" in n for n in rep["notes"])


def test_a_negative_register_in_a_signed_column_is_named_as_negative(sohu_free_gen):
    """A review: a signed (Spark) column's -1 was reported as 18446744073709551615 past the 48-bit width."""
    gen = sohu_free_gen
    t = pa.table(
        {
            "chip": pa.array([0, 0], pa.int32()),
            "timestamp_ns": pa.array([0, S], pa.int64()),
            "core.loads": pa.array([0, -1], pa.int64()),
            "core.loads@enabled_ns": [0, S],
            "core.loads@running_ns": [0, S],
        }
    )
    with pytest.raises(
        DumpError, match=r"row 2, column `core.loads`: value -1 is negative; raw registers are unsigned"
    ):
        split_multiplex(t, gen, [])
