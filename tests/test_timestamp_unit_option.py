"""``--timestamp-unit`` names the unit of a bare ``timestamp`` column. Given with a ``timestamp_ns`` column
(or with another tool's capture) it was ignored in silence: a user who said the stamps were in µs got
them read as ns. Now it is refused where it contradicts the column, and for a capture in another tool's
format; where it agrees, or the column is bare, it is read as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.cli import main

PERF_CSV = Path(__file__).parent / "fixtures" / "perf" / "perf-stat-interval.csv"


def _write(tmp_path, stamp: str, step: int) -> Path:
    n = 5
    path = tmp_path / f"{stamp}.parquet"
    pq.write_table(
        pa.table(
            {
                "chip": pa.array(np.zeros(n, np.int32)),
                stamp: pa.array(np.arange(n, dtype=np.int64) * step),
                "seq.elapsed_cycles": pa.array((np.arange(n) * 1000).astype(np.uint64)),
            }
        ),
        path,
    )
    return path


def _analyze(tmp_path, path, *opts) -> tuple[int, str]:
    """(exit code, the --out folder) of ``perfonto analyze path *opts``, into a new folder."""
    out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
    return main(["analyze", str(path), *opts, "--out", str(out), "--json"]), str(out)


def test_a_unit_option_that_contradicts_the_column_is_refused(tmp_path, capsys):
    path = _write(tmp_path, "timestamp_ns", 1_000_000)
    rc, out = _analyze(tmp_path, path, "--timestamp-unit", "us")
    err = capsys.readouterr().err
    assert rc == 1 and f"{path}: column `timestamp_ns` is in ns, and --timestamp-unit us says otherwise" in err, err
    assert not Path(out).exists()
    assert _analyze(tmp_path, path, "--timestamp-unit", "ns")[0] == 0  # agrees: read as without it


def test_a_bare_timestamp_column_takes_the_option(tmp_path, capsys):
    """Stamps 0, 1000, … read as µs: four windows of 1 ms starting 0, 1e6, … ns, as a timestamp_ns column
    of 0, 1e6, … gives."""

    def windows(out: str):
        t = pq.read_table(Path(out) / "metrics.parquet", columns=["start_ns", "interval_s"])
        return t.column("start_ns").to_pylist(), t.column("interval_s").to_pylist()

    rc, bare = _analyze(tmp_path, _write(tmp_path, "timestamp", 1000), "--timestamp-unit", "us")
    rc2, ns = _analyze(tmp_path, _write(tmp_path, "timestamp_ns", 1_000_000))
    capsys.readouterr()
    assert rc == rc2 == 0
    assert windows(bare) == windows(ns) == ([0, 1_000_000, 2_000_000, 3_000_000], [0.001] * 4)


def test_the_option_with_another_tools_capture_is_a_usage_error(tmp_path, capsys):
    rc = main(["analyze", str(PERF_CSV), "--timestamp-unit", "us", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "a perf-stat capture states its own times: drop the option" in err, err
    assert not (tmp_path / "o").exists()
