"""Found by a tester trying to break the GPU readers (capture/dcgm_dmon.py, capture/ncu.py,
capture/openmetrics.py); each of these exited 0 with wrong figures, or blamed the wrong thing:

1. `dcgmi dmon` lines of one interval in another GPU order (`GPU 1` before `GPU 0` in the third interval)
   split that interval in two: 6 windows over 0.6 s, power.average 583.333 W where 700 W was right.
   A header naming a field twice was blamed on a unit of the first column of that name.
2. An `ncu --csv` value in a locale's format (`"2.000,00"` Mbyte) was read as 2.0: dram.read_bandwidth
   102.4 GB/s where 1,604.7 GB/s was right.
3. dcgm-exporter scrapes of an H100 (gpu 0) and an H200 (gpu 1) were both read with the H100's peaks:
   GPU 1's hbm.bandwidth_estimate 0.25 x 3.35 = 0.8375 TB/s where 0.25 x 4.8 = 1.2 TB/s was right.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from perfonto.capture.dcgm_dmon import dmon_capture, read_dmon
from perfonto.capture.dump_io import DumpError

from helpers import analyze_err, tool_generation_fixture

FIXTURES = Path(__file__).parent / "fixtures"
gen = tool_generation_fixture("dcgm", "dcgm_h100")


# --- 1. dcgmi dmon --------------------------------------------------------------------------------------------


def _line(*cells) -> str:
    return "".join(f"{c:<13}" for c in cells).rstrip()


def _dmon(tmp_path: Path, name: str, order_of: dict[int, tuple[int, ...]], intervals: int = 6) -> Path:
    """A `dcgmi dmon -e 1001,1002,1005,155,156 -d 100` file of GPUs 0 and 1: GPU 0's TOTEC rises 40,000 mJ
    and GPU 1's 30,000 mJ per 100 ms interval (400 W and 300 W); GRACT 0.8 / 0.5, SMACT 0.7 / 0.4, DRAMA
    0.3 / 0.2, POWER 700 / 600 W throughout. ``order_of[k]``: the GPUs' lines of interval k, in order
    (default: GPU 0, GPU 1)."""
    lines = [_line("#Entity", "GRACT", "SMACT", "DRAMA", "POWER", "TOTEC"), _line("ID", "", "", "", "W", "mJ")]
    for k in range(intervals):
        row = {
            0: _line("GPU 0", "0.800", "0.700", "0.300", "700.000", 1_000_000 + 40_000 * k),
            1: _line("GPU 1", "0.500", "0.400", "0.200", "600.000", 2_000_000 + 30_000 * k),
        }
        lines += [row[g] for g in order_of.get(k, (0, 1))]
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    return f


def test_dmon_lines_of_one_interval_in_another_order_read_as_in_order(capsys, tmp_path, gen):
    straight = _dmon(tmp_path, "in-order.txt", {})
    swapped = _dmon(tmp_path, "swapped.txt", {2: (1, 0)})
    t = dmon_capture(swapped, gen, [], sample_period_ns=100_000_000).to_pydict()
    # 6 intervals of 2 GPUs: samples 0..5 at 0..500 ms, GPU 0's energy 1,000,000 + 40,000 k mJ
    assert t["sample"] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert t["timestamp_ns"][-1] == 500_000_000
    assert t["gpu.energy"][4:6] == [1_080_000, 2_060_000]  # interval 2, its lines read as GPU 1 then GPU 0
    assert t == dmon_capture(straight, gen, [], sample_period_ns=100_000_000).to_pydict()

    docs = {}
    for f in (straight, swapped):
        code, doc, _ = analyze_err(
            capsys, f, tmp_path / f.stem, "--sample-period", "100ms", "--generation", "dcgm_h100"
        )
        assert code == 0
        docs[f.stem] = doc
    doc = docs["swapped"]
    chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
    # 40,000 mJ / 0.1 s = 400 W on GPU 0, 30,000 mJ / 0.1 s = 300 W on GPU 1, in every one of the 5 windows
    assert chips[0]["power.average"] == pytest.approx(400.0, rel=1e-12)
    assert chips[1]["power.average"] == pytest.approx(300.0, rel=1e-12)
    assert doc["metrics"]["power.average"]["value"] == pytest.approx(700.0, rel=1e-12)
    assert doc["metrics"]["sm.active"]["value"] == pytest.approx((0.7 + 0.4) / 2, rel=1e-12)
    assert doc["null_windows"] == {}
    assert doc["metrics"] == docs["in-order"]["metrics"]
    import pyarrow.parquet as pq

    windows = pq.read_table(tmp_path / "swapped" / "metrics.parquet").to_pydict()
    assert len(windows["window"]) == 5 * 2 and max(windows["start_ns"]) == 400_000_000  # 5 windows over 0.5 s


def test_dmon_lines_in_a_changing_order_with_a_line_missing_are_refused_naming_the_line(tmp_path, gen):
    # GPU 0, GPU 1 | GPU 1 | GPU 0, GPU 1: GPU 0's line of interval 1 missing, or interval 1 as GPU 1, GPU 0
    # and the last interval cut short: two readings, so the line where they part (line 6, GPU 0) is named
    f = _dmon(tmp_path, "gap.txt", {1: (1,)}, intervals=3)
    assert f.read_text().splitlines()[5].startswith("GPU 0")
    with pytest.raises(
        DumpError, match=r"gap\.txt:6: which interval this `GPU 0` line is of is ambiguous.*5 GPU lines"
    ):
        dmon_capture(f, gen, [], sample_period_ns=100_000_000)
    # a gap that reads one way (GPU 1's line missing in interval 1; the order kept) still reads, null there
    ok = _dmon(tmp_path, "gap-in-order.txt", {1: (0,)}, intervals=3)
    t = dmon_capture(ok, gen, [], sample_period_ns=100_000_000).to_pydict()
    assert t["sample"] == [0, 0, 1, 1, 2, 2] and t["gpu.energy"] == [
        1_000_000,
        2_000_000,
        1_040_000,
        None,
        1_080_000,
        2_060_000,
    ]


def test_dmon_header_naming_a_field_twice_names_the_duplicate_column(tmp_path):
    f = tmp_path / "dup.txt"
    f.write_text(
        _line("#Entity", "GRACT", "SMACT", "DRAMA", "POWER", "SMACT")
        + "\n"
        + _line("ID", "", "", "", "W", "")
        + "\n"
        + _line("GPU 0", "0.800", "0.700", "0.300", "700.000", "0.700")
        + "\n"
    )
    # columns: 1 the entity, 2 GRACT, 3 SMACT, 4 DRAMA, 5 POWER, 6 SMACT again
    with pytest.raises(DumpError, match=r"dup\.txt:1: column 6 \(SMACT\) names the field of column 3 again"):
        read_dmon(f)


# --- 2. Nsight Compute --------------------------------------------------------------------------------------


NCU = FIXTURES / "ncu" / "two-kernels.csv"


def test_ncu_fixture_still_reads_its_grouped_values(capsys, tmp_path):
    code, doc, _ = analyze_err(capsys, NCU, tmp_path / "o")
    assert code == 0
    # dram__bytes_read.sum 134.22 + "2,000.00" Mbyte over 80 + "1,250.00" us: 2,134.22 MB / 1,330 us
    assert doc["metrics"]["dram.read_bandwidth"]["value"] == pytest.approx(2134.22 / 1330 * 1000, rel=1e-12)


@pytest.mark.parametrize("value", ["2.000,00", "2,00", "1,2345", "2 000,00", "2'000.00", "0,123"])
def test_ncu_value_in_a_locale_format_is_refused(capsys, tmp_path, value):
    text = NCU.read_text()
    assert text.count('"2,000.00","500.00"') == 1
    f = tmp_path / "locale.csv"
    f.write_text(text.replace('"2,000.00","500.00"', f'"{value}","500.00"'))
    line = 1 + next(i for i, ln in enumerate(f.read_text().splitlines()) if value in ln)
    code, doc, err = analyze_err(capsys, f, tmp_path / "o")
    # read as 2.0 it gave (134.22 + 2) MB / 1,330 us = 102.4 GB/s, exit 0
    assert code == 1 and doc["ok"] is False and doc["error"] in err
    assert f"locale.csv:{line}: column 12 (dram__bytes_read.sum): `{value}` is not a number" in err
    assert "LC_ALL=C" in err and "Traceback" not in err


# --- 3. dcgm-exporter ---------------------------------------------------------------------------------------


H100 = 'modelName="NVIDIA H100 80GB HBM3"'


def _scrapes(tmp_path: Path, gpu1_model: str | None, gpu0_model: str | None = None) -> Path:
    """The dcgm-exporter fixture with gpu 1's (and gpu 0's) model renamed."""
    d = tmp_path / "dcgm"
    shutil.copytree(FIXTURES / "dcgm-exporter", d)
    for f in d.glob("*.prom"):
        text = f.read_text()
        for gpu, model in (("1", gpu1_model), ("0", gpu0_model)):
            if model is not None:
                text, n = re.subn(r'(gpu="' + gpu + r'"[^}]*)' + re.escape(H100), r"\1" + f'modelName="{model}"', text)
                assert n > 0
        f.write_text(text)
    return d


def test_dcgm_exporter_two_models_side_by_side_are_refused(capsys, tmp_path):
    d = _scrapes(tmp_path, "NVIDIA H200")
    for extra in ((), ("--generation", "dcgm_h200")):
        code, doc, err = analyze_err(capsys, d, tmp_path / "o", *extra)
        assert code == 1 and doc["ok"] is False and doc["error"] in err
        assert "1764650000.000.prom:4: one scrape's series name 2 GPU models" in err  # line 4: gpu 1's first series
        assert "`NVIDIA H100 80GB HBM3` (gpu 0 on node-17; --generation dcgm_h100)" in err
        assert "`NVIDIA H200` (gpu 1 on node-17; --generation dcgm_h200)" in err
        assert "analyse each model's series apart" in err and "Traceback" not in err


def test_dcgm_exporter_one_model_reads_as_before(capsys, tmp_path):
    # DCGM_FI_PROF_DRAM_ACTIVE is 0.5 on gpu 0 and 0.25 on gpu 1 in every scrape
    code, doc, _ = analyze_err(capsys, FIXTURES / "dcgm-exporter", tmp_path / "h100")
    assert code == 0 and doc["generation"] == "dcgm_h100"
    chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
    assert chips[1]["hbm.bandwidth_estimate"] == pytest.approx(0.25 * 3.35, rel=1e-12)
    # both GPUs H200 (one model, written with other spacing on gpu 0): dcgm_h200's 4.8 TB/s
    code, doc, _ = analyze_err(capsys, _scrapes(tmp_path / "b", "NVIDIA H200", "NVIDIA  H200"), tmp_path / "h200")
    assert code == 0 and doc["generation"] == "dcgm_h200"
    chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
    assert chips[0]["hbm.bandwidth_estimate"] == pytest.approx(0.5 * 4.8, rel=1e-12)
    assert chips[1]["hbm.bandwidth_estimate"] == pytest.approx(0.25 * 4.8, rel=1e-12)
