"""A real Nsight Compute capture from an H200 (tests/fixtures/h200, written by ``capture.sh`` there on a
lent machine): ``perfonto analyze --format ncu`` of ncu's raw page and of its default details page gives,
kernel by kernel, the figures ncu itself printed — its own bytes-per-second rates and its SOL
percentages. Before this capture, perfonto refused both files: ncu 2025 prints `ns` and `byte/s` (the
reader knew `nsecond`, `byte/second`), and the details page (one row per metric) was not read at all."""

from __future__ import annotations

import csv
import json
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
            "sm.throughput": ncu["sm__throughput.avg.pct_of_peak_sustained_elapsed"],  # percent, as ncu prints it
            "dram.throughput": ncu["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
        }
        for metric, want in checks.items():
            # ncu prints its rates to 2 decimals of B/s and its percentages to 2 decimals
            tol = 1e-9 * want if "bandwidth" in metric else 5e-3 + 1e-9
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


def test_the_raw_page_names_the_h200_and_its_peak_is_the_h200s(tmp_path, capsys):
    """The raw page prints device__attribute_display_name (`NVIDIA H200`): the capture is read against
    ncu_h200, so hbm.peak_share is the kernel's DRAM bytes/s over 4.8 TB/s — which ncu's own SOL DRAM %
    confirms (vector_add: 2,944.6 GB/s is 61.3 % of 4.8 TB/s, ncu printed 61.23 %; against the H100's
    3.35 TB/s it read 87.9 %). No --format: the file is recognised as ncu's."""
    assert main(["analyze", str(FIX / "ncu-raw.csv"), "--out", str(tmp_path / "o"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["generation"] == "ncu_h200"
    assert doc["constants"]["spec.hbm.peak_bandwidth"]["value"] == 4.8
    t = pq.read_table(tmp_path / "o" / "metrics.parquet").to_pydict()
    ncu = _ncu_printed("ncu-raw.csv")
    for w, kid in enumerate(sorted(ncu, key=int)):
        assert t["hbm.peak_share"][w] == pytest.approx(100 * ncu[kid]["dram__bytes.sum.per_second"] / 4.8e12, rel=1e-9)
        assert t["hbm.peak_share"][w] == pytest.approx(
            ncu[kid]["dram__throughput.avg.pct_of_peak_sustained_elapsed"], abs=0.2
        )


def test_a_page_that_names_no_gpu_or_another_says_which_peaks_it_uses(tmp_path, capsys):
    """The details page names no GPU unless asked: read as ncu_h100 with a note saying so and how to pick
    ncu_h200 (which then gives the H200's share); a raw page naming a GPU without a shipped ncu generation
    names it in the note."""
    assert main(["analyze", str(FIX / "ncu-details.csv"), "--out", str(tmp_path / "a"), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["generation"] == "ncu_h100"
    assert "names no GPU (device__attribute_display_name)" in cap.err and "--generation ncu_h100 or ncu_h200" in cap.err
    o = tmp_path / "b"
    assert main(["analyze", str(FIX / "ncu-details.csv"), "--generation", "ncu_h200", "--out", str(o), "--json"]) == 0
    capsys.readouterr()
    share = pq.read_table(o / "metrics.parquet").to_pydict()["hbm.peak_share"]
    assert share[0] == pytest.approx(
        100 * _ncu_printed("ncu-details.csv")["0"]["dram__bytes.sum.per_second"] / 4.8e12, rel=1e-9
    )
    (tmp_path / "a100.csv").write_text(
        (FIX / "ncu-raw.csv").read_text().replace('"NVIDIA H200"', '"NVIDIA A100-SXM4-80GB"')
    )
    assert main(["analyze", str(tmp_path / "a100.csv"), "--out", str(tmp_path / "c"), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["generation"] == "ncu_h100"
    assert "names GPU NVIDIA A100-SXM4-80GB, which no shipped ncu generation describes" in cap.err


@pytest.mark.parametrize(
    "names, says",
    [
        (["NVIDIA GH200 480GB"] * 2, "names GPU NVIDIA GH200 480GB, which no shipped ncu generation"),  # not an H200
        (["NVIDIA H100 PCIe"] * 2, "names GPU NVIDIA H100 PCIe, which no shipped"),  # 2.0 TB/s, not the SXM5's
        (
            ["NVIDIA H100 80GB HBM3", "NVIDIA H200"],
            "ran on more than one GPU model (NVIDIA H100 80GB HBM3; NVIDIA H200)",
        ),
        (["NVIDIA \x1b[2JH200"] * 2, "names GPU NVIDIA \\x1b[2JH200, which"),  # the escape shown, not sent
    ],
)
def test_only_the_parts_a_generation_describes_pick_it(tmp_path, capsys, names, says):
    """The GPU name must be the part's own (H100 SXM5 `NVIDIA H100 80GB HBM3`, H200 SXM `NVIDIA H200`): a
    GH200 or an H100 PCIe only contains one, and has other peaks; launches on two models share one
    generation's peaks. Each says so, with the name printable, and reads with ncu_h100's peaks."""
    text = (FIX / "ncu-raw.csv").read_text().split('"NVIDIA H200"')
    assert len(text) == 3  # one name per launch
    (tmp_path / "n.csv").write_text(text[0] + f'"{names[0]}"' + text[1] + f'"{names[1]}"' + text[2])
    assert main(["analyze", str(tmp_path / "n.csv"), "--out", str(tmp_path / "o"), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["generation"] == "ncu_h100"
    assert says in " ".join(cap.err.split()) and "\x1b" not in cap.err


def test_a_file_that_cannot_be_read_gets_no_gpu_note_first(tmp_path, capsys):
    head = [ln for ln in (FIX / "ncu-raw.csv").read_text().splitlines() if ln.startswith('"ID"')]
    (tmp_path / "h.csv").write_text(head[0] + "\n")  # a header, no units row, no launch
    assert main(["analyze", str(tmp_path / "h.csv"), "--format", "ncu", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "names no GPU" not in err and "h.csv" in err


def test_a_generation_given_for_another_part_is_used_and_said(tmp_path, capsys):
    """--generation ncu_h100 on the H200 capture: honoured (3.35 TB/s), with a note that the capture names an
    H200; the matching generation given says nothing."""
    o = tmp_path / "o"
    assert main(["analyze", str(FIX / "ncu-raw.csv"), "--generation", "ncu_h100", "--out", str(o), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["constants"]["spec.hbm.peak_bandwidth"]["value"] == 3.35
    assert "the capture names GPU NVIDIA H200 (ncu_h200); --generation ncu_h100's peaks are used" in " ".join(
        cap.err.split()
    )
    assert main(["analyze", str(FIX / "ncu-raw.csv"), "--generation", "ncu_h200", "--out", str(tmp_path / "p")]) == 0
    assert "the capture names GPU" not in capsys.readouterr().err
