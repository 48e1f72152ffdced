"""A sampling timer that drifts (perf's -I timer: 2–8 ms per 100 ms; issue 27): with --sample-period,
samples within ±25 % of the period of the previous one are one grid step, so no gap is invented, the
run totals equal the last-minus-first running totals, and a note gives the largest offset. A step of
two periods is a dropped sample: a gap, its windows null. Hand-built collector dumps on the shipped
`linux` catalog."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from perfonto.cli import main

LINUX = str(resources.files("perfonto").joinpath("catalogs", "linux"))
PERIOD = 100_000_000  # 100 ms


def _dump(tmp_path, steps_ns, clock_inc_ns):
    ts = np.concatenate([[0], np.cumsum(steps_ns)]).astype(np.int64)
    clock = np.concatenate([[0], np.cumsum(clock_inc_ns)]).astype(np.int64)
    p = tmp_path / "c.csv"
    p.write_text(
        "chip,timestamp_ns,task.clock,task.page_faults\n"
        + "".join(f"0,{t},{c},{10 * k}\n" for k, (t, c) in enumerate(zip(ts, clock)))
    )
    return p, ts, clock


def _analyze(capsys, p, out):
    capsys.readouterr()
    code = main(
        [
            "analyze",
            str(p),
            "--format",
            "collector",
            "--catalog",
            LINUX,
            "--no-library",
            "--sample-period",
            "100ms",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_drift_of_8_percent_invents_no_gap_and_keeps_the_run_totals(tmp_path, capsys):
    rng = np.random.default_rng(27)
    offsets = rng.uniform(-0.08, 0.08, 40)
    offsets[7] = 0.08  # the largest offset, named in the note
    steps = np.rint(PERIOD * (1 + offsets)).astype(np.int64)
    clock_inc = rng.integers(20_000_000, 90_000_000, 40)
    p, ts, clock = _dump(tmp_path, steps, clock_inc)
    doc = _analyze(capsys, p, tmp_path / "o")
    assert doc["null_windows"] == {}  # no window null: no gap invented
    want = (clock[-1] - clock[0]) / (ts[-1] - ts[0])  # CPUs utilized over the run: last minus first
    assert doc["metrics"]["cpus_utilized"]["value"] == pytest.approx(want, rel=1e-12)
    note = [n for n in doc["notes"] if "sampling timer drifts" in n]
    assert note and "up to 8.0% of the 100000000 ns period" in note[0]


def test_a_dropped_sample_is_a_gap(tmp_path, capsys):
    steps = np.full(20, PERIOD, np.int64)
    steps[5] = 2 * PERIOD + 3_000_000  # two periods (and a little drift): one sample missing
    p, _, _ = _dump(tmp_path, steps, np.full(20, 50_000_000))
    doc = _analyze(capsys, p, tmp_path / "o")
    assert doc["null_windows"]["cpus_utilized"] == {"missing sample": 2}
