"""A chip's device clock that resets mid-run, in the counters as in the sync reads and the trace (an SRE's
fleet trial, finding 3). The counters' sampling grid cannot be read across a reset (a window across it has
no known length), and the dump readers said only "two samples of one chip fall on the same 1000000 ns grid
point; is sample_period_ns right?" — no chip, no row, the wrong cause — and `perfonto align` refused the
whole run although its clock fits and trace mapping handle resets. Now the refusal names the chip, the row
and the step back, calls it a device-clock reset and says what to do; `perfonto align` aligns the run and
skips only the counters' load and saturation analysis, with that note; and the collective waits of a
reset run are those of the same run without the reset (its spans after the reset were NaN: every chip's
wait read "—")."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import SHORT_STEPS
from perfonto import emulator
from perfonto.capture.dump import read_counters
from perfonto.capture.dump_grid import ClockReset
from perfonto.capture.dump_io import DumpError
from perfonto.capture.dump_scan import plan_dump
from perfonto.cli import main

PERIOD = 1_000_000  # ns


def _reset_table() -> pa.Table:
    """Two chips, six samples each, written sample by sample (chip 0, chip 1, chip 0, …). Chip 0 samples at
    0, 1, …, 5 ms; chip 1's clock reads 1, 2, 3 ms for samples 0–2, then restarts: 0.4, 1.4, 2.4 ms. In time
    order chip 1's samples interleave, 0.4, 1, 1.4, 2, …: 1.4 ms is 0.4 of a period after 1 ms, one grid point."""
    c0 = [k * PERIOD for k in range(6)]
    c1 = [PERIOD + k * PERIOD for k in range(3)] + [400_000 + k * PERIOD for k in range(3)]
    chip = [c for _ in range(6) for c in (0, 1)]
    ts = [t for pair in zip(c0, c1) for t in pair]
    return pa.table(
        {
            "chip": pa.array(chip, pa.int32()),
            "timestamp_ns": pa.array(ts, pa.int64()),
            "seq.elapsed_cycles": pa.array([1000 * i for i in range(12)], pa.uint64()),
        },
        metadata={"perfonto": json.dumps({"generation": "sohu", "sample_period_ns": PERIOD})},
    )


def test_a_device_clock_reset_in_the_counters_is_named_with_its_chip_row_and_step(sohu, tmp_path):
    # chip 1's rows are rows 2, 4, 6, 8, 10, 12 (counted from 1); its stamps go 3 ms (row 6) → 0.4 ms (row 8)
    p = tmp_path / "reset.parquet"
    pq.write_table(_reset_table(), p)
    for read in (lambda: read_counters(str(p), sohu), lambda: plan_dump(str(p), sohu)):
        with pytest.raises(ClockReset) as e:
            read()
        msg = str(e.value)
        assert msg.startswith(f"{p}: the timestamps of chip 1 go back at row 8 (3000000 ns in row 6, then 400000 ns")
        assert "device-clock reset" in msg and "grid point" in msg
        assert "split the dump there" in msg and "perfonto align RUN" in msg
        assert "is sample_period_ns right" not in msg  # the period is right: that was the wrong cause


def test_a_reset_that_repeats_the_stamps_exactly_is_a_reset_not_a_duplicate(sohu, tmp_path):
    """The common reset: the clock restarts at 0 on the same period, so its stamps repeat exactly (0 … 2 ms,
    then 0 … 2 ms). It was "a duplicate sample … sort the rows by time", and sorting interleaves the runs."""
    t = pa.table(
        {
            "chip": pa.array([0] * 6, pa.int32()),
            "timestamp_ns": pa.array([0, PERIOD, 2 * PERIOD, 0, PERIOD, 2 * PERIOD], pa.int64()),
            "seq.elapsed_cycles": pa.array([0, 1, 2, 3, 4, 5], pa.uint64()),
        },
        metadata={"perfonto": json.dumps({"generation": "sohu", "sample_period_ns": PERIOD})},
    )
    p = tmp_path / "repeat.parquet"
    pq.write_table(t, p)
    for read in (lambda: read_counters(str(p), sohu), lambda: plan_dump(str(p), sohu)):
        with pytest.raises(ClockReset) as e:
            read()
        msg = str(e.value)
        assert msg.startswith(f"{p}: the timestamps of chip 0 go back at row 4 (2000000 ns in row 3, then 0 ns")
        assert "their stamps repeat" in msg and "sort the rows" not in msg


def test_two_samples_too_close_name_the_chip_and_rows(sohu, tmp_path):
    # no step back: chip 0's samples at 0, 1, 1.3 (under half a period after 1 ms), 3 ms — the period is the question
    t = pa.table(
        {
            "chip": pa.array([0, 0, 0, 0], pa.int32()),
            "timestamp_ns": pa.array([0, PERIOD, 1_300_000, 3 * PERIOD], pa.int64()),
            "seq.elapsed_cycles": pa.array([0, 1, 2, 3], pa.uint64()),
        },
        metadata={"perfonto": json.dumps({"generation": "sohu", "sample_period_ns": PERIOD})},
    )
    p = tmp_path / "close.parquet"
    pq.write_table(t, p)
    with pytest.raises(DumpError) as e:
        read_counters(str(p), sohu)
    assert not isinstance(e.value, ClockReset)
    assert "two samples of chip 0 are 300000 ns apart (row 2 at 1000000 ns, row 3 at 1300000 ns)" in str(e.value)
    assert "is sample_period_ns right" in str(e.value)


RESET_HOST_NS = 250_000_000  # chip 1's device clock restarts from 0 at this host time


def _with_reset(src, dst, gt: dict) -> int:
    """A copy of run ``src`` in which chip 1's device clock restarts from 0 at host ``RESET_HOST_NS``, in
    its sync reads, its device-clock trace spans and its counter samples alike; the device time of the
    reset (``offset + (1 + drift) × host``, the emulator's own clock) is returned."""
    shutil.copytree(src, dst)
    off, drift = gt["clock_offsets_ns"][1], gt["clock_drifts_ppm"][1] * 1e-6
    d = int(round(off + (1 + drift) * RESET_HOST_NS))

    def shift(name: str, cols: list[str], where=None) -> None:
        t = pq.read_table(dst / name)
        chip = t.column("chip").to_numpy()
        sel = chip == 1 if where is None else (chip == 1) & where(t)
        for col in cols:
            i = t.schema.get_field_index(col)
            v = t.column(col).to_numpy().copy()
            v[sel & (v > d)] -= d
            t = t.set_column(i, t.schema.field(i), pa.array(v, t.schema.field(i).type))
        pq.write_table(t, dst / name)

    shift("sync.parquet", ["device_ns"])
    shift("trace.parquet", ["start_ns", "end_ns"], lambda t: np.asarray(t.column("clock").to_pylist()) == "device")
    shift("counters.parquet", ["timestamp_ns"])
    return d


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("reset_runs")
    res = emulator.run(
        "sohu", chips=4, duration_s=0.5, sample_period_s=0.002, warmup_steps=50, slow_chip=(2, 1.3),
        out_dir=base / "plain", **SHORT_STEPS,
    )  # fmt: skip
    d = _with_reset(base / "plain", base / "reset", res.ground_truth)
    return base / "plain", base / "reset", d


def _align(run, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["align", str(run), "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def test_align_aligns_a_run_whose_chip_clock_resets_and_its_waits_are_the_plain_runs(runs, capsys):
    plain, reset, d = runs
    rc0, a = _align(plain, capsys)
    rc1, b = _align(reset, capsys)
    assert rc0 == 0 and rc1 == 0  # was 1: "two samples of one chip fall on the same … grid point"
    assert (reset / "aligned_counters.parquet").exists() and (reset / "aligned_trace.parquet").exists()
    assert [len(c["resets"]) for c in b["alignment"]["chips"]] == [0, 1, 0, 0]
    # the counters' load and saturation analysis is what cannot run, and it says why
    assert "imbalance" not in b and "imbalance" in a
    assert "chip 1 go back" in b["counters_skipped"] and "device-clock reset" in b["counters_skipped"]
    # the same collective calls, mapped with their submissions as hints: the waits are the plain run's within
    # the clock fits' error (chip 1's arrivals move by at most ~0.3 µs, which over its ~650 calls adds up to
    # tens of µs of its ~85 ms of wait: 1e-3), where before every chip's wait was NaN (shown "—")
    wa, wb = a["collective"]["wait_s"], b["collective"]["wait_s"]
    assert all(np.isfinite(wb)) and wb == pytest.approx(wa, rel=1e-3)
    assert b["collective"]["straggler"]["chip"] == a["collective"]["straggler"]["chip"] == 2
    assert b["collective"]["unmapped_calls"] == 0


def test_analyze_refuses_the_reset_run_by_chip_and_row_without_a_traceback(runs, tmp_path, capsys):
    _, reset, d = runs
    t = pq.read_table(reset / "counters.parquet")
    chip, ts = t.column("chip").to_numpy(), t.column("timestamp_ns").to_numpy()
    rows = np.flatnonzero(chip == 1)  # chip 1's rows, in file order: its stamps step back once
    k = int(np.flatnonzero(np.diff(ts[rows]) < 0)[0])
    before, after = int(rows[k]) + 1, int(rows[k + 1]) + 1  # rows counted from 1
    capsys.readouterr()
    rc = main(["analyze", str(reset), "--out", str(tmp_path / "o"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["ok"] is False
    assert (
        f"the timestamps of chip 1 go back at row {after} ({int(ts[before - 1])} ns in row {before}, then "
        f"{int(ts[after - 1])} ns" in doc["error"]
    )
    # the step is the reset's: the last stamp before it within a 2 ms sample period of the reset's device time,
    # the first after it within one period of the restarted clock's 0
    assert d - 2_000_000 < int(ts[before - 1]) <= d and 0 <= int(ts[after - 1]) < 2_000_000
    assert "Traceback" not in doc["error"]
