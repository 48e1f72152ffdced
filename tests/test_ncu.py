"""`perfonto analyze --format ncu` (capture/ncu.py, issue 27): Nsight Compute's `ncu --csv --page raw` read one
window per kernel launch against the shipped `ncu` catalog.

The fixture is laid out as NVIDIA's Nsight Compute CLI documentation describes the raw page
(https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html, "Output Pages": `--page raw` prints every
collected metric of each kernel launch; `--csv`; "Metrics and Units"): `==PROF==` lines, a header row of the
launch's identifiers then the metric names, a row of units (empty under the identifiers; auto-scaled, `Mbyte`,
`usecond`, `%`), one row per kernel, thousands separators in the values. The expected values are computed by
hand below from the fixture's numbers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect
from perfonto.capture.ncu import ncu_capture, ncu_trace, unit_expr

from helpers import analyze, analyze_windows, tool_generation_fixture

FIX = Path(__file__).parent / "fixtures" / "ncu" / "two-kernels.csv"


gen = tool_generation_fixture("ncu")


def test_two_kernels_give_the_hand_computed_bandwidths(capsys, tmp_path):
    doc, w = analyze_windows(capsys, FIX, tmp_path / "o", "ncu_h100")
    # kernel 0: (134.22 + 67.11) Mbyte = 201,330,000 B in 80 usecond; kernel 1: (2,000 + 500) Mbyte in 1,250 usecond
    assert w["start_ns"] == [0, 80_000]  # back to back, each lasting its gpu__time_duration.sum
    assert w["interval_s"] == pytest.approx([80e-6, 1250e-6], rel=1e-12)
    assert w["dram.bandwidth"] == pytest.approx([201_330_000 / 80e-6 / 1e9, 2.5e9 / 1.25e-3 / 1e9], rel=1e-12)
    assert w["dram.bandwidth"] == pytest.approx([2516.625, 2000.0], rel=1e-12)
    assert w["sm.throughput"] == pytest.approx([12.25, 90.0], rel=1e-12)  # percent, as ncu prints it
    m = doc["metrics"]
    # the run: 2,701,330,000 B over 1,330 us
    assert m["dram.bandwidth"]["value"] == pytest.approx(2_701_330_000 / 1.33e-3 / 1e9, rel=1e-12)
    assert m["hbm.peak_share"]["value"] == pytest.approx(100 * 2_701_330_000 / 1.33e-3 / 3.35e12, rel=1e-12)
    # percentages weighted by duration: (12.25 % x 80 + 90 % x 1250) / 1330, (85.5 % x 80 + 40 % x 1250) / 1330
    assert m["sm.throughput"]["value"] == pytest.approx((12.25 * 80 + 90 * 1250) / 1330, rel=1e-12)
    assert m["dram.throughput"]["value"] == pytest.approx((85.5 * 80 + 40 * 1250) / 1330, rel=1e-12)
    assert m["dram.throughput"]["unit"] == "percent"
    assert any("laid back to back in ID order" in n for n in doc["notes"])


def test_format_is_recognised(tmp_path):
    assert detect(FIX) == "ncu"
    (tmp_path / "c.csv").write_text("chip,timestamp_ns,a\n0,0,1\n")
    assert detect(tmp_path / "c.csv") == "collector"


def test_the_kernels_as_op_spans(gen):
    t = ncu_trace(FIX, gen).to_pydict()
    assert t["kind"] == ["op", "op"] and t["clock"] == ["device", "device"]
    assert t["start_ns"] == [0, 80_000] and t["end_ns"] == [80_000, 1_330_000]
    assert t["name"][1].startswith("gemm_bf16(")


@pytest.mark.parametrize(
    "unit, expr", [("Mbyte", "1e+06 * B"), ("byte/second", "1 * B / s"), ("%", "percent"), ("usecond", "us")]
)
def test_ncu_units(unit, expr):
    assert unit_expr(unit) == expr
    assert unit_expr("furlong") is None


def _bad(tmp_path, old, new) -> Path:
    text = FIX.read_text()
    assert old in text
    p = tmp_path / "bad.csv"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(
    "old, new, match",
    [
        # a missing column: the header (line 5) without gpu__time_duration.sum
        (',"gpu__time_duration.sum"', ',"gpu__time_duration.avg"', r'bad\.csv:5: no column "gpu__time_duration\.sum"'),
        # a unit no signal can read: the units row is line 6, dram__bytes_read.sum column 12
        (
            '"","Mbyte","Mbyte"',
            '"","Mfurlong","Mbyte"',
            r"bad\.csv:6: column 12 \(dram__bytes_read\.sum\): the unit `Mfurlong`",
        ),
        (
            '"","Mbyte","Mbyte"',
            '"","%","Mbyte"',
            r"bad\.csv:6: column 12 .*the unit `%` is not one signal `gpu\.dram_read`",
        ),
        # a kernel row with no duration: kernel 0 is line 7, gpu__time_duration.sum column 15
        (
            '"85.50","80.00"',
            '"85.50","n/a"',
            r"bad\.csv:7: column 15 \(gpu__time_duration\.sum\): the kernel has no duration",
        ),
        ('"134.22"', '"lots"', r"bad\.csv:7: column 12 \(dram__bytes_read\.sum\): `lots` is not a number"),
        ('"1","4242"', '"0","4242"', r'bad\.csv:8: column 1 \("ID"\): launch 0 again \(first on row 7\)'),
        # a metric's column twice (found by a session trying to break the reader: the later one was read)
        (
            '"dram__bytes_write.sum"',
            '"dram__bytes_read.sum"',
            r'bad\.csv:5: column "dram__bytes_read\.sum" is in the header twice \(columns 12 and 13\)',
        ),
    ],
)
def test_bad_files_name_the_file_row_and_column(tmp_path, gen, old, new, match):
    with pytest.raises(DumpError, match=match):
        ncu_capture(_bad(tmp_path, old, new), gen, [])


def test_a_sample_period_is_refused_and_the_cli_exits_1(capsys, tmp_path, gen):
    with pytest.raises(DumpError, match="--sample-period does not apply"):
        ncu_capture(FIX, gen, [], sample_period_ns=1_000_000)
    p = _bad(tmp_path, '"85.50","80.00"', '"85.50",""')
    code, doc = analyze(capsys, p, tmp_path / "o", "--format", "ncu")
    assert (code, doc["ok"]) == (1, False)
    assert f"{p}:7: column 15" in doc["error"]


def test_a_missing_metric_column_leaves_its_metrics_unavailable(capsys, tmp_path):
    text = FIX.read_text().replace("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__cycles_elapsed.avg")
    p = tmp_path / "k.csv"
    p.write_text(text.replace('"%","usecond","%"', '"%","usecond","cycle"'))
    code, doc = analyze(capsys, p, tmp_path / "o")
    assert code == 0
    assert "sm.throughput" in doc["unavailable"] and doc["metrics"]["dram.bandwidth"]["value"] > 0


def test_by_op_groups_the_kernels_by_their_kernel_name(capsys, tmp_path):
    # a third launch of vector_add (ID 2): 33.56 + 16.78 Mbyte in 20 usecond, so the op table holds two ops:
    # vector_add: 80 + 20 = 100 us over 2 launches, (134.22 + 67.11 + 33.56 + 16.78) Mbyte = 251,670,000 B
    # -> 251,670,000 B / 100e-6 s = 2,516.7 GB/s; gemm_bf16: 1,250 us, 1 launch, 2,500 Mbyte -> 2,000 GB/s;
    # the run: 1,350 us, so the shares are 100 / 1,350 and 1,250 / 1,350
    vec = "vector_add(const float *, const float *, float *, int)"
    gemm = "gemm_bf16(const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *)"
    p = tmp_path / "three.csv"
    row = f'"2","4242","bench","127.0.0.1","{vec}","1","7","(256, 1, 1)","(16384, 1, 1)","0","9.0",'
    p.write_text(FIX.read_text() + row + '"33.56","16.78","80.00","20.00","10.00"\n')
    code, doc = analyze(capsys, p, tmp_path / "o", "--format", "ncu", "--by", "op")
    assert code == 0
    ops = {r["op"]: r for r in doc["ops"]["rows"]}
    assert set(ops) == {vec, gemm}
    assert (ops[vec]["spans"], ops[gemm]["spans"]) == (2, 1)
    assert ops[vec]["time_s"] == pytest.approx(100e-6, rel=1e-12)
    assert ops[gemm]["time_s"] == pytest.approx(1250e-6, rel=1e-12)
    assert ops[vec]["time_share"] == pytest.approx(100 / 1350, rel=1e-12)
    t = pq.read_table(tmp_path / "o" / "metrics_by_op.parquet").to_pydict()
    by = {op: i for i, op in enumerate(t["op"])}
    assert t["time_s"][by[vec]] == pytest.approx(100e-6, rel=1e-12)
    assert t["dram.bandwidth"][by[vec]] == pytest.approx(251_670_000 / 100e-6 / 1e9, rel=1e-12)
    assert t["dram.bandwidth"][by[gemm]] == pytest.approx(2_500_000_000 / 1250e-6 / 1e9, rel=1e-12)
