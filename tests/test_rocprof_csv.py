"""`perfonto analyze --format rocprof` (capture/rocprof.py, issue 27): rocprofv3's counter-collection CSV read
one window per dispatch, on the dispatches' own time stamps, against the shipped `rocprof` catalog.

The fixture is laid out as AMD's rocprofv3 documentation shows `counter_collection.csv`
(https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html, "Kernel counter
collection" and "Output file fields"): long format, one row per dispatch per counter, the columns
Correlation_Id … SGPR_Count, Counter_Name, Counter_Value, Start_Timestamp, End_Timestamp (ns). The expected
values are computed by hand below from the fixture's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect
from perfonto.capture.kernel_windows import Kernel, kernel_table
from perfonto.capture.rocprof import rocprof_capture, rocprof_trace

from helpers import analyze_windows, tool_generation_fixture

FIX = Path(__file__).parent / "fixtures" / "rocprof-csv" / "1234_counter_collection.csv"


gen = tool_generation_fixture("rocprof")


def test_two_dispatches_give_the_hand_computed_values(capsys, tmp_path):
    doc, w = analyze_windows(capsys, FIX, tmp_path / "o", "rocprof_mi300x")
    # dispatch 1: 100 us, FETCH_SIZE 97,656.25 KiB (100,000,000 B) + WRITE_SIZE 48,828.125 KiB (50,000,000 B);
    # 50 us idle; dispatch 2: 400 us, 390,625 KiB (400,000,000 B) fetched, nothing written
    assert w["start_ns"] == [0, 100_000, 150_000] and w["interval_s"] == pytest.approx([100e-6, 50e-6, 400e-6])
    assert w["hbm.bandwidth"] == pytest.approx([150e6 / 100e-6 / 1e9, None, 400e6 / 400e-6 / 1e9])
    assert w["hbm.bandwidth"][0] == pytest.approx(1500.0, rel=1e-12)
    assert w["gpu.busy"] == [1.0, 0.0, 1.0]  # the gap between dispatches is a window in which nothing ran
    assert w["valu.busy"] == pytest.approx([0.25, None, 0.50])
    m = doc["metrics"]
    assert m["hbm.bandwidth"]["value"] == pytest.approx(550e6 / 500e-6 / 1e9, rel=1e-12)  # 1,100 GB/s
    assert m["hbm.peak_share"]["value"] == pytest.approx(550e6 / 500e-6 / 5.3e12, rel=1e-12)
    assert m["gpu.busy"]["value"] == pytest.approx(500 / 550, rel=1e-12)
    assert m["valu.busy"]["value"] == pytest.approx((0.25 * 100 + 0.50 * 400) / 500, rel=1e-12)
    assert m["waves.per_second"]["value"] == pytest.approx((16384 + 4096) / 500e-6, rel=1e-12)
    assert any("chips: 0 = agent 4" in n for n in doc["notes"])


def test_format_is_recognised_and_spans(gen):
    assert detect(FIX) == "rocprof"
    t = rocprof_trace(FIX, gen).to_pydict()
    assert (t["start_ns"], t["end_ns"], t["chip"]) == ([0, 150_000], [100_000, 550_000], [0, 0])
    assert t["name"][1] == "reduce_sum(float const*, float*, int)"


def _bad(tmp_path, text) -> Path:
    p = tmp_path / "bad_counter_collection.csv"
    p.write_text(text)
    return p


def test_bad_files_name_the_file_row_and_column(tmp_path, gen):
    text = FIX.read_text()
    lines = text.splitlines(keepends=True)
    # a missing column: an older rocprof's CSV without time stamps
    old = "".join(ln.rsplit(",", 2)[0] + "\n" for ln in lines)
    with pytest.raises(DumpError, match=r"bad_counter_collection\.csv:1: no column Start_Timestamp"):
        rocprof_capture(_bad(tmp_path, old), gen, [])
    # a dispatch row with no time stamp: line 3, Start_Timestamp is column 18
    cut = lines[:2] + [lines[2].replace(",1000000000000,", ",,")] + lines[3:]
    with pytest.raises(DumpError, match=r"bad_counter_collection\.csv:3: column 18 \(Start_Timestamp\): empty"):
        rocprof_capture(_bad(tmp_path, "".join(cut)), gen, [])
    with pytest.raises(DumpError, match=r":4: column 17 \(Counter_Value\): `many` is not a number"):
        rocprof_capture(_bad(tmp_path, text.replace("97656.250000", "many")), gen, [])
    # dispatch 2 starting 1 ns before dispatch 1 ends, on the same agent (dispatch counting runs one at a time)
    over = text.replace("1000000150000", "1000000099999")
    with pytest.raises(
        DumpError, match=r":7: column 18 \(Start_Timestamp\): the dispatch starts before the one of row 2"
    ):
        rocprof_capture(_bad(tmp_path, over), gen, [])
    with pytest.raises(
        DumpError, match=r":7: column 16 \(Counter_Name\): SQ_WAVES again for dispatch 1 \(first on row 2\)"
    ):
        rocprof_capture(_bad(tmp_path, "".join(lines[:6] + lines[1:2])), gen, [])
    with pytest.raises(DumpError, match=r":2: column 19 \(End_Timestamp\): 1000000000000 is not after"):
        rocprof_capture(_bad(tmp_path, text.replace(",1000000100000", ",1000000000000")), gen, [])


def test_overlapping_kernels_of_two_chips_are_spread_in_proportion_to_time():
    """Chip 0 runs 0–100 ns (1,000 counts), chip 1 runs 50–150 ns (300 counts): the samples are at 0, 50, 100
    and 150 ns; each kernel's counts are split over its two windows by time, the chips' totals exact."""
    notes: list[str] = []
    ks = [Kernel(0, 0, 100, "a", {"x": 1000.0}), Kernel(1, 50, 150, "b", {"x": 300.0})]
    t = kernel_table(ks, ["x"], label="k", notes=notes).to_pydict()
    assert t["timestamp_ns"] == [0, 0, 50, 50, 100, 100, 150, 150]
    assert t["x"] == [0, 0, 500, 0, 1000, 150, 1000, 300]
    assert "2 kernel(s) overlap another chip's kernel boundaries" in notes[0]
    # an unknown count nulls the samples up to the kernel's end and is left out of the totals after it
    ks = [Kernel(0, 0, 10, "a", {"x": 5.0}), Kernel(0, 10, 20, "b", {"x": None}), Kernel(0, 20, 30, "c", {"x": 7.0})]
    assert kernel_table(ks, ["x"], label="k", notes=[]).to_pydict()["x"] == [0, 5, None, 12]
