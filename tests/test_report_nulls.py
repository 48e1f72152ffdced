"""The text report never prints ``nan``: a metric whose server value is null (all its windows null)
shows ``null`` with a pointer to the reason, as JSON and Parquet hold null; a section with nothing
evaluated (the top-down tree) is one line, and the per-chip legend names only the columns shown."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.report_format import finite, ms_text, number_text, pct, si_text, value_text

N = 5


def _dump(path) -> None:
    """One chip, PCIe counters that count, HBM byte counters null in every sample."""
    cols = {
        "chip": pa.array(np.zeros(N, np.int32)),
        "timestamp_ns": pa.array(np.arange(N, dtype=np.int64) * 1_000_000),
        "pcie.rx_bytes": pa.array(np.arange(N, dtype=np.uint64) * 1000),
        "pcie.tx_bytes": pa.array(np.zeros(N, np.uint64)),
        "seq.elapsed_cycles": pa.array(np.arange(N, dtype=np.uint64) * 1_000_000),
    }
    for i in range(6):
        cols[f"hbm.read_bytes[{i}]"] = pa.array([None] * N, pa.uint64())
        cols[f"hbm.write_bytes[{i}]"] = pa.array([None] * N, pa.uint64())
    pq.write_table(pa.table(cols), path)


@pytest.mark.parametrize("v", [None, float("nan"), np.float32("nan"), np.float64("inf"), np.array(np.nan)])
def test_formatters_show_null_not_nan(v):
    assert finite(v) is None
    assert value_text(v, "GB/s") == "null" and value_text(v, "percent") == "null" and number_text(v) == "null"
    assert pct(v) == "—" and si_text(v, "FLOP/s") == "—" and ms_text(v) == "—"


def test_formatters_keep_finite_numpy_values():
    assert value_text(np.float32(12.5), "GB/s") == "12.500 GB/s" and value_text(np.array(3.0), "percent") == "3.00 %"
    assert pct(np.float32(0.25)) == "25.0 %"


def test_a_metric_with_all_windows_null_prints_null_with_its_reason(tmp_path, capsys):
    _dump(tmp_path / "d.parquet")
    assert main(["analyze", str(tmp_path / "d.parquet"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    import re

    assert not re.search(r"\bnan\b", out.replace("never NaN", ""))
    row = next(line for line in out.splitlines() if "hbm.write_bandwidth" in line and "│" in line)
    assert "null" in row and "all windows null (see Null window values)" in row
    chip = next(line for line in out.splitlines() if line.startswith("│    0 "))
    assert "null" in chip  # the per-chip HBM GB/s column
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    assert doc["metrics"]["hbm.write_bandwidth"]["value"] is None


def test_no_topdown_table_and_a_legend_of_the_columns_shown(tmp_path, capsys):
    # --metrics without a top-down metric: JSON has topdown {}, so the text has no top-down table (no
    # "sum │ 0.00 %" row), no dominant-node column, and the legend names only the two columns shown.
    _dump(tmp_path / "d.parquet")
    argv = [
        "analyze",
        str(tmp_path / "d.parquet"),
        "--out",
        str(tmp_path / "o"),
        "--metrics",
        "hbm.bandwidth,pcie.bandwidth_utilization",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert json.loads((tmp_path / "o" / "report.json").read_text())["topdown"] == {}
    assert "Top-down: not evaluated" in out and "Top-down levels" not in out
    assert not any(line.strip("│ ").startswith("sum ") for line in out.splitlines())
    assert "dominant top-down node" not in out
    legend = next(line for line in out.splitlines() if line.startswith("per-chip columns:"))
    assert legend == "per-chip columns: HBM GB/s = hbm.bandwidth, PCIe % = pcie.bandwidth_utilization"


def test_a_server_value_null_while_chips_have_values_says_so(tmp_path, capsys):
    # a new user read 'null: all windows null' where 3 of 8 chips had every window valid: the server level
    # sums the windows valid on every chip at once, and here there is none
    n = 2 * N
    chip = np.repeat(np.arange(2, dtype=np.int32)[None], N, axis=0).reshape(-1)
    rx = np.repeat(np.arange(N, dtype=np.uint64)[:, None] * 1000, 2, axis=1).reshape(-1)
    t = pa.table(
        {
            "chip": pa.array(chip),
            "timestamp_ns": pa.array(np.repeat(np.arange(N, dtype=np.int64) * 1_000_000, 2)),
            "pcie.rx_bytes": pa.array([None if c == 1 else int(v) for c, v in zip(chip, rx)], pa.uint64()),
            "pcie.tx_bytes": pa.array(np.zeros(n, np.uint64)),
        }
    )
    pq.write_table(t, tmp_path / "d.parquet")
    assert main(["analyze", str(tmp_path / "d.parquet"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "pcie.bandwidth_utilization" in line and "│" in line)
    assert "null" in row and "no window valid on every chip at once" in row, row
