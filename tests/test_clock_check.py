"""The run's time base checked against its clocks (``analysis/clock_check.py``): time stamps written in ns but
read as µs (a new user's ``timestamp_unit="us"``) made every window 1,000 × too long and every rate 1,000 × too
low — ``hbm.bandwidth`` 6.29 GB/s for 6,292 — with no sign but an energy note blaming a sensor. A free-running
cycle counter tells: it advances at its clock."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.analysis.clock_check import clock_notes
from perfonto.cli import main

N = 20
PERIOD_NS = 1_000_000  # 1 ms samples
CORE_HZ = 1.5e9  # the shipped sohu's core clock


def _dump(tmp_path, busy_share: float = 0.5):
    """20 samples 1 ms apart, stamps in ns in a bare ``timestamp`` column: the core clock's elapsed cycles
    (1.5e6 a sample) and the matrix engine busy ``busy_share`` of them."""
    per = int(CORE_HZ * PERIOD_NS / 1e9)
    cols = {
        "chip": pa.array(np.zeros(N, np.int32)),
        "timestamp": pa.array(np.arange(N, dtype=np.int64) * PERIOD_NS),
        "mxu.busy_cycles": pa.array(
            np.repeat((np.arange(N, dtype=np.uint64) * int(per * busy_share))[:, None], 8, axis=1).tolist(),
            pa.list_(pa.uint64(), 8),
        ),
    }
    cols["seq.elapsed_cycles"] = pa.array(np.arange(N, dtype=np.uint64) * per)
    path = tmp_path / f"dump-{busy_share}.parquet"
    pq.write_table(pa.table(cols), path)
    return path


def _notes(tmp_path, path, unit: str, capsys) -> list[str]:
    out = tmp_path / f"o-{unit}-{path.stem}"
    assert main(["analyze", str(path), "--timestamp-unit", unit, "--out", str(out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["notes"]


def test_ns_stamps_read_as_us_are_named_with_the_factor(tmp_path, capsys):
    """Read as µs, the 19 windows span 19 s: 19 × 1.5e6 cycles / 19 s = 1.5e6 cycles/s, 0.001 × the 1.5 GHz
    clock: every rate up to 1,000 × too low."""
    path = _dump(tmp_path)
    notes = [n for n in _notes(tmp_path, path, "us", capsys) if "× the core clock" in n]
    assert len(notes) == 1, notes
    assert "`seq.elapsed_cycles`, counted 1.5e+06 core_cycle/s, 0.001 × the core clock of 1.5 GHz" in notes[0]
    assert "time stamps read as `us` but written in a finer unit" in notes[0] and "1e+03 × too low" in notes[0]
    assert not [n for n in _notes(tmp_path, path, "ns", capsys) if "× the core clock" in n]  # the right unit: none


def test_an_idle_chip_is_named_as_a_possibility_not_an_error(tmp_path, capsys):
    """Without a free-running counter, HBM controllers busy 0.1 % of the time at the right time base read
    the same as busy ones on a time base 1,000 × too long: the note says either, the run is analysed. The
    controllers' 4.8 GHz clock: 4,800 cycles a 1 ms sample at 0.1 %, 4.8e6 cycles/s."""
    cols = {
        "chip": pa.array(np.zeros(N, np.int32)),
        "timestamp": pa.array(np.arange(N, dtype=np.int64) * PERIOD_NS),
        "hbm.active_cycles": pa.array(
            np.repeat((np.arange(N, dtype=np.uint64) * 4800)[:, None], 6, axis=1).tolist(), pa.list_(pa.uint64(), 6)
        ),
    }
    path = tmp_path / "hbm.parquet"
    pq.write_table(pa.table(cols), path)
    (note,) = [n for n in _notes(tmp_path, path, "ns", capsys) if "× the hbm clock" in n]
    assert "`hbm.active_cycles`, counted 4.8e+06 hbm_cycle/s, 0.001 × the hbm clock of 4.8 GHz" in note
    assert "either the chip was idle 99.9 %" in note


def test_a_counter_faster_than_its_clock_says_the_windows_are_too_short(sohu):
    """2.4e9 core cycles a second on a 1.5 GHz clock (1.6 ×) is impossible: stamps in a coarser unit than read."""

    class Sums:
        sums = {frozenset(): ({"seq.elapsed_cycles": np.array([2.4e9, 1.5e9])}, np.array([1.0, 1.0]))}

    (note,) = clock_notes(sohu, [Sums()], "ns")
    assert "`seq.elapsed_cycles` counted 2.4e+09 core_cycle/s, 1.6 × the core clock of 1.5 GHz" in note
    assert "written in a coarser unit" in note and "1.6 × too high" in note
    Sums.sums = {frozenset(): ({"seq.elapsed_cycles": np.array([1.49e9, 1.5e9])}, np.array([1.0, 1.0]))}
    assert clock_notes(sohu, [Sums()], "ns") == []  # at its clock: nothing to say
