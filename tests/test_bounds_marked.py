"""Bounds violations are marked where values are read (issue 15, point 12): metrics.parquet has an
``out_of_bounds`` column listing, per window and chip, the metrics outside their declared bounds,
and the report's headline table marks the metric (not only the list after it)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.cli import main


def test_out_of_bounds_flag_per_window_and_headline_mark(sohu, tmp_path, capsys):
    n = 5
    rx = np.array([0, 1e7, 2e7, 1.2e8, 1.3e8])  # bytes; window 2 moves 1e8 B in 1 ms: 100 GB/s of a 64 GB/s link
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "pcie.rx_bytes": pa.array(rx.astype(np.uint64)),
            "pcie.tx_bytes": pa.array(np.zeros(n, np.uint64)),
        }
    )
    pq.write_table(t, tmp_path / "d.parquet")
    assert main(["analyze", str(tmp_path / "d.parquet"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    m = pq.read_table(tmp_path / "o" / "metrics.parquet").to_pydict()
    assert [("pcie.bandwidth_utilization" in x) for x in m["out_of_bounds"]] == [False, False, True, False]
    assert m["pcie.bandwidth_utilization"][2] == 156.25
    row = next(line for line in out.splitlines() if "pcie.bandwidth_utilization" in line and "│" in line)
    assert "⚠" in row and "outside bounds 0 .. 100" in row and "1 window value(s)" in row
    assert not any("⚠" in line for line in out.splitlines() if "pcie.rx_bandwidth" in line)
