"""`perfonto analyze --format dcgm` (capture/dcgm_dmon.py, issue 27): `dcgmi dmon` text read against the shipped
`dcgm` catalog, whose signals name their DCGM fields (`sources: {dcgm: DCGM_FI_…}`).

The fixture is laid out as NVIDIA's DCGM User Guide shows `dcgmi dmon` output
(https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html, `dcgmi dmon`; field ids and
short names from the DCGM API reference, "Field Identifiers",
https://docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/dcgm-api-field-ids.html): what
`dcgmi dmon -e 1001,1002,1005,155,156 -d 100` prints — an `#Entity GRACT SMACT DRAMA POWER TOTEC` header, a
units line (`ID`, `W`, `mJ`), then one line per GPU per interval (GPUs in descending order, as dmon lists
them), `N/A` for the profiling fields' first sample. The expected values are computed by hand below."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfonto.capture.dcgm_dmon import dmon_capture, read_dmon, short_name
from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect

from helpers import analyze_err, tool_generation_fixture

FIX = Path(__file__).parent / "fixtures" / "dcgm-dmon" / "dmon-2gpu.txt"


gen = tool_generation_fixture("dcgm", "dcgm_h100")


def test_dmon_gives_the_hand_computed_values(capsys, tmp_path):
    code, doc, _ = analyze_err(capsys, FIX, tmp_path / "o", "--generation", "dcgm_h100", "--sample-period", "100ms")
    assert code == 0
    chips = {r["chip"]: r["metrics"] for r in doc["per_chip"]}
    # TOTEC (mJ): GPU 0 1,000,000 -> 1,085,000 over 2 x 100 ms = 425 W; GPU 1 60,000 mJ / 0.2 s = 300 W
    assert chips[0]["power.average"] == pytest.approx(425.0, rel=1e-12)
    assert chips[1]["power.average"] == pytest.approx(300.0, rel=1e-12)
    assert doc["metrics"]["power.average"]["value"] == pytest.approx(725.0, rel=1e-12)
    # POWER (W) 390.5, 410, 440.75: windows 400.25 and 425.375, run 412.8125
    assert chips[0]["power.draw"] == pytest.approx(412.8125, rel=1e-12)
    # DRAMA: the first sample N/A nulls the first window; the second is (0.3 + 0.5) / 2 on GPU 0, 0.1 on GPU 1
    assert chips[0]["hbm.bandwidth_estimate"] == pytest.approx(0.4 * 3.35, rel=1e-12)
    assert doc["metrics"]["hbm.bandwidth_estimate"]["value"] == pytest.approx((0.4 + 0.1) * 3.35, rel=1e-12)
    assert doc["metrics"]["gr_engine.active"]["value"] == pytest.approx((0.925 + 0.7) / 2, rel=1e-12)
    assert "tensor.flops_estimate" in doc["unavailable"]  # no TENSO field in this capture
    assert any("sample k placed at k x 100 ms (--sample-period" in n for n in doc["notes"])


def test_without_a_sample_period_dmon_default_is_used_and_said(capsys, tmp_path):
    code, doc, err = analyze_err(capsys, FIX, tmp_path / "o")
    assert code == 0 and doc["generation"] == "dcgm_h200"
    assert "dcgmi dmon does not name the GPU model" in err
    assert any("dmon's default -d 1000" in n for n in doc["notes"])
    assert doc["metrics"]["power.average"]["value"] == pytest.approx(145_000 / 2.0 / 1000, rel=1e-12)  # mJ over 2 s


def test_format_names_and_blocks(gen):
    assert detect(FIX) == "dcgm"
    assert short_name("DCGM_FI_PROF_DRAM_ACTIVE") == short_name("1005") == "DRAMA"
    fields, units, units_line, rows = read_dmon(FIX)
    assert fields == ["GRACT", "SMACT", "DRAMA", "POWER", "TOTEC"] and units_line == 2
    assert (units["POWER"], units["TOTEC"], units["GRACT"]) == ("W", "mJ", "")
    t = dmon_capture(FIX, gen, [], sample_period_ns=100_000_000).to_pydict()
    assert t["chip"] == [0, 1] * 3 and t["timestamp_ns"] == [0, 0, 100_000_000, 100_000_000, 200_000_000, 200_000_000]
    assert t["gpu.energy"] == [1_000_000, 500_000, 1_040_000, 530_000, 1_085_000, 560_000]
    assert t["gpu.dram_active"][:2] == [None, None] and t["gpu.dram_active"][2:4] == [300_000, 100_000]


@pytest.mark.parametrize(
    "old, new, match",
    [
        # a unit the signal does not read: TOTEC (energy, mJ) printed in mW, line 2, column 6
        ("W            mJ", "W            mW", r"dmon\.txt:2 \(the units line\): column 6 \(TOTEC\) is in `mW`"),
        ("GPU 0     0.900        0.800", "GPU 0     0.900", r"dmon\.txt:6: 4 value\(s\) where the header names 5"),
        ("GPU 1     0.700        0.600        0.100        300.000", "GPU 1     busy", r"dmon\.txt:5: 2 value"),
        ("0.950", "high", r"dmon\.txt:8: column 2 \(GRACT\): `high` is not a number or N/A"),
        ("#Entity   GRACT", "#Entity   GRACT   TENSO", r"dmon\.txt:3: 5 value\(s\) where the header names 6"),
    ],
)
def test_bad_files_name_the_file_line_and_column(tmp_path, gen, old, new, match):
    text = FIX.read_text()
    assert old in text
    p = tmp_path / "dmon.txt"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(DumpError, match=match):
        dmon_capture(p, gen, [], sample_period_ns=100_000_000)


def test_no_header_and_no_mapped_field(tmp_path, gen):
    p = tmp_path / "dmon.txt"
    p.write_text("GPU 0  1  2\n")
    with pytest.raises(DumpError, match=r"dmon\.txt:1: a line before dmon's `#Entity …` header"):
        dmon_capture(p, gen, [])
    p.write_text("#Entity   FBUSD\nID        MiB\nGPU 0     1024\nGPU 0     1024\n")
    with pytest.raises(DumpError, match=r"none of its fields \(FBUSD\) is a signal's `sources: \{dcgm: …\}`"):
        dmon_capture(p, gen, [])


def test_an_impossible_activity_ratio_is_flagged_out_of_bounds(capsys, tmp_path):
    """Found by a session trying to break the readers: `GRACT 57.0` (a ratio, 0 … 1 in DCGM) on dmon's line 6 read
    gr_engine.active 14.837 with nothing said. The shipped ratio metrics declare their bounds: the window and the
    run value are flagged."""
    from helpers import analyze

    lines = FIX.read_text().splitlines()
    assert lines[5].split()[:3] == ["GPU", "0", "0.900"]
    bad = tmp_path / "dmon.txt"
    bad.write_text("\n".join([*lines[:5], lines[5].replace("0.900 ", "57.0  ", 1), *lines[6:]]) + "\n")
    code, doc = analyze(capsys, bad, tmp_path / "o")
    assert code == 0 and doc["bounds_violations"]["counts"] == {"gr_engine.active": 1}
    (first,) = doc["bounds_violations"]["first"]
    assert first["chip"] == 0 and first["bounds"] == [0.0, 1.0] and first["value"] > 1


def test_a_negative_power_names_its_line_and_column(tmp_path, gen):
    """`POWER -410` on line 6 said "field POWER holds a value outside an unsigned 64-bit register", with no line."""
    lines = FIX.read_text().splitlines()
    bad = tmp_path / "neg.txt"
    bad.write_text("\n".join([*lines[:5], lines[5].replace(" 410.000 ", "-410.000 "), *lines[6:]]) + "\n")
    with pytest.raises(DumpError, match=r"neg\.txt:6: column 5 \(POWER\) holds -410, a negative value"):
        dmon_capture(bad, gen, [])
