"""A real Nsight Compute capture from an H200 (tests/fixtures/h200, written by ``capture.sh`` there on a
lent machine): ``perfonto analyze --format ncu`` of ncu's raw page and of its default details page gives,
kernel by kernel, the figures ncu itself printed — its own bytes-per-second rates and its SOL
percentages. Before this capture, perfonto refused both files: ncu 2025 prints `ns` and `byte/s` (the
reader knew `nsecond`, `byte/second`), and the details page (one row per metric) was not read at all."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perfonto.cli import main

FIX = Path(__file__).parent / "fixtures" / "h200"


def _ncu_printed(name: str) -> dict[str, dict[str, float]]:
    """Per launch ID, the metric values ncu printed in file ``name`` (raw page: a column per metric; details
    page: a row per metric), thousands separators dropped. Each file is its own ncu run: its own oracle."""
    lines = [ln for ln in (FIX / name).read_text().splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    header = rows[0]
    want = ("gpu__", "dram__", "sm__")  # the metrics asked for (ncu adds device attributes, some text)
    out: dict[str, dict[str, float]] = {}
    if "Metric Name" in header:
        at = {h: i for i, h in enumerate(header)}
        for r in rows[1:]:
            out.setdefault(r[0], {})[r[at["Metric Name"]]] = float(r[at["Metric Value"]].replace(",", ""))
        return out
    return {r[0]: {h: float(v.replace(",", "")) for h, v in zip(header, r) if h.startswith(want)} for r in rows[2:]}


@pytest.mark.parametrize("name", ["ncu-raw.csv", "ncu-details.csv"])
def test_each_kernels_figures_are_the_ones_ncu_printed(tmp_path, name, capsys):
    assert main(["analyze", str(FIX / name), "--format", "ncu", "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    t = pq.read_table(tmp_path / "o" / "metrics.parquet").to_pydict()
    printed = _ncu_printed(name)
    assert len(t["window"]) == len(printed) == 2  # one window per launch: vector_add, sgemm_naive
    for w, kid in enumerate(sorted(printed, key=int)):
        ncu = printed[kid]
        checks = {
            "dram.read_bandwidth": ncu["dram__bytes_read.sum.per_second"] / 1e9,  # GB/s
            "dram.bandwidth": ncu["dram__bytes.sum.per_second"] / 1e9,
            "sm.throughput": ncu["sm__throughput.avg.pct_of_peak_sustained_elapsed"] / 100,
            "dram.throughput": ncu["dram__throughput.avg.pct_of_peak_sustained_elapsed"] / 100,
        }
        for metric, want in checks.items():
            # ncu prints its rates to 2 decimals of B/s and its percentages to 2 decimals
            tol = 1e-9 * want if "bandwidth" in metric else 5e-5 + 1e-9
            assert t[metric][w] == pytest.approx(want, abs=tol), (kid, metric, t[metric][w], want)
    if name == "ncu-raw.csv":  # the vector add by hand from ncu's counts: (134,227,712 + 54,697,216) B in 64,160 ns
        assert t["dram.bandwidth"][0] == pytest.approx((134_227_712 + 54_697_216) / 64_160, rel=1e-12)


def test_a_details_page_with_a_metric_twice_for_one_launch_is_refused(tmp_path, capsys):
    text = (FIX / "ncu-details.csv").read_text().splitlines()
    dup = next(ln for ln in text if "gpu__time_duration.sum" in ln)
    (tmp_path / "d.csv").write_text("\n".join(text + [dup]) + "\n")
    assert main(["analyze", str(tmp_path / "d.csv"), "--format", "ncu", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "d.csv:" in err and "metric gpu__time_duration.sum of launch 0 again" in err and "internal error" not in err
