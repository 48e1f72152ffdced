"""Issue 8 acceptance: `perfonto align RUN` on a 10 s emulated run with per-chip clocks (offsets up to
±10 ms, drifts up to ±100 ppm) maps every counter sample and device event to the host timeline with
a median error under 1 µs and a p99 under 5 µs."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from perfonto.cli import main


@pytest.fixture(scope="module")
def run10(tmp_path_factory):
    out = tmp_path_factory.mktemp("run10")
    r = emulator.run("sohu", duration_s=10.0, sample_period_s=0.01, warmup_steps=400, seed=3, out_dir=out)
    return out, r.ground_truth


def test_alignment_error_of_a_10s_run(run10, capsys):
    out, gt = run10
    drifts, offsets = np.abs(gt["clock_drifts_ppm"]), np.abs(gt["clock_offsets_ns"])
    assert drifts.max() > 80 and drifts.max() <= 100 and offsets.max() > 5e6 and offsets.max() <= 1e7
    assert main(["align", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    al = doc["alignment"]
    e = al["error_ns"]
    assert al["samples"] > 8 * 1000 and e["median"] < 1000 and e["p99"] < 5000, e
    for row in al["chips"]:
        assert row["drift_ppm"] == pytest.approx(row["true_drift_ppm"], abs=0.05)
        assert row["offset_ns"] == pytest.approx(row["true_offset_ns"], abs=1000)
    # every counter sample is mapped, monotonically per chip, within the error of its true host time
    t = pq.read_table(out / "aligned_counters.parquet")
    chip, ts, host = (t.column(k).to_numpy() for k in ("chip", "timestamp_ns", "host_ns"))
    true = (ts - np.array(gt["clock_offsets_ns"])[chip]) / (1 + np.array(gt["clock_drifts_ppm"])[chip] * 1e-6)
    assert np.abs(host - true).max() < 5000
    for c in range(8):
        assert (np.diff(host[chip == c]) > 0).all()
    tr = pq.read_table(out / "aligned_trace.parquet", columns=["host_start_ns", "host_end_ns"])
    assert (
        tr.num_rows > 100_000 and (tr.column("host_end_ns").to_numpy() >= tr.column("host_start_ns").to_numpy()).all()
    )


def test_align_text_and_missing_run(run10, capsys, tmp_path):
    out, _ = run10
    assert main(["align", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Clock alignment" in text and "alignment error over" in text and "no straggler" in text
    assert main(["align", str(tmp_path)]) == 1
    assert "no sync.parquet" in capsys.readouterr().err
