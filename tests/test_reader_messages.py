"""Messages of the tool readers and of format detection for input a tester broke them with: each names the
file (and line, column) and says what the file is and what to do — not the message of a format the file is
not, and no silently wrong value.

- Detection (capture/formats.py): an empty file, UTF-16 text, or perf stat's `# started on` header alone
  was taken for a collector-format dump, so the error spoke of CSV columns or looked `--generation ncu_h100`
  up in the default catalog.
- OpenMetrics: `# TYPE X_total counter` in a file ending `# EOF` gave "Clashing name"; a series written
  twice for one time stamp was named without its labels.
- rocprof / ncu: a value taking a running total past 2^64 raw counts was refused without its row; an ncu
  percentage column with an empty unit cell was read as a count (85.32 % became 8532 %).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.capture.dump_io import DumpError
from perfonto.capture.formats import detect, export_text
from perfonto.capture.ncu import read_ncu
from perfonto.capture.openmetrics import read_scrapes
from perfonto.capture.rocprof import read_rocprof

from helpers import analyze, tool_generation

FIX = Path(__file__).parent / "fixtures"
PERF_CSV = FIX / "perf" / "perf-stat-interval.csv"
NCU = FIX / "ncu" / "two-kernels.csv"
ROCPROF = FIX / "rocprof-csv" / "1234_counter_collection.csv"


# --- format detection ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "generation"), [("empty.csv", "ncu_h100"), ("dmon.txt", "dcgm_h100")])
def test_an_empty_file_is_said_to_be_empty_not_a_dump_of_an_unknown_generation(capsys, tmp_path, name, generation):
    empty = tmp_path / name
    empty.write_bytes(b"")
    code, doc = analyze(capsys, empty, tmp_path / "o", "--generation", generation)
    assert code != 0
    assert doc["error"].startswith(f"{empty}: an empty file (0 bytes)"), doc["error"]
    assert "--format" in doc["error"] and "no generation named" not in doc["error"]
    blank = tmp_path / "blank.csv"
    blank.write_text("\n  \n")
    with pytest.raises(DumpError, match=r"blank\.csv: only blank lines"):
        detect(blank)


@pytest.mark.parametrize(
    ("encoding", "said"), [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")]
)
def test_utf16_perf_output_is_said_to_be_utf16_with_how_to_convert(tmp_path, encoding, said):
    p = tmp_path / "perf.csv"
    p.write_bytes(PERF_CSV.read_text().encode(encoding))
    with pytest.raises(DumpError, match=rf"perf\.csv: the file is {said} text, not UTF-8.*iconv -f {said} -t UTF-8"):
        detect(p)
    with pytest.raises(DumpError, match=rf"perf\.csv: the file is {said} text.*convert it to UTF-8"):
        export_text(p, "give a file", "perf stat's output")  # what a reader says with --format perf-stat


def test_perf_header_alone_is_said_to_be_perf_without_counter_lines(capsys, tmp_path):
    hdr = tmp_path / "perf.csv"
    hdr.write_text("# started on Mon Jan  1 00:00:00 2024\n\n")
    code, doc = analyze(capsys, hdr, tmp_path / "o")
    assert code != 0
    assert re.match(rf"{re.escape(str(hdr))}: perf stat's header \(`# started on Mon Jan  1", doc["error"]), doc
    assert "no counter line" in doc["error"] and "perf stat -x, -o FILE" in doc["error"]
    bad = tmp_path / "bad.csv"  # perf's header, then a line no reader takes: perf's reader names the line
    bad.write_text("# started on Mon Jan  1 00:00:00 2024\n\nhello world\n")
    assert detect(bad) == "perf-stat"


def test_collector_dumps_are_still_detected_as_the_collector_format(tmp_path):
    part = tmp_path / "dump.parquet"
    pq.write_table(pa.table({"chip": [0, 0], "sample": [0, 1], "timestamp_ns": [0, 1000]}), part)
    csv = tmp_path / "dump.csv"
    csv.write_text("chip,sample,timestamp_ns\n0,0,0\n0,1,1000\n")
    assert detect(part) == "collector" and detect(csv) == "collector"


# --- OpenMetrics ----------------------------------------------------------------------------------------------


def test_openmetrics_counter_family_named_with_total_says_how_to_write_it(tmp_path):
    p = tmp_path / "s.om"
    p.write_text(
        "# TYPE node_cpu_seconds_total counter\n"
        'node_cpu_seconds_total{cpu="0",mode="idle"} 100.0 1764650000.0\n'
        'node_cpu_seconds_total{cpu="0",mode="idle"} 101.0 1764650001.0\n'
        "# EOF\n"
    )
    with pytest.raises(
        DumpError,
        match=r"s\.om:1: `# TYPE node_cpu_seconds_total counter`: in OpenMetrics text .* without `_total`.*"
        r"write `# TYPE node_cpu_seconds counter`; or give the file as Prometheus text: drop the `# EOF` line",
    ):
        read_scrapes(p)


def test_openmetrics_family_split_in_two_names_the_line_where_it_comes_back(tmp_path):
    p = tmp_path / "s.om"
    p.write_text(
        "# TYPE a counter\n"
        'a_total{cpu="0"} 1.0 1764650000.0\n'
        "# TYPE b gauge\n"
        'b{cpu="0"} 1.0 1764650000.0\n'
        'a_total{cpu="0"} 2.0 1764650001.0\n'
        "# EOF\n"
    )
    with pytest.raises(DumpError, match=r"s\.om:5: a_total comes back here after another family's lines .*line 1\)"):
        read_scrapes(p)


def test_openmetrics_series_written_twice_is_named_with_its_labels(tmp_path):
    p = tmp_path / "s.om"
    p.write_text(
        "# TYPE node_cpu_seconds counter\n"
        'node_cpu_seconds_total{cpu="0",mode="idle"} 100.0 1764650000.0\n'
        'node_cpu_seconds_total{cpu="0",mode="idle"} 103.0 1764650000.0\n'
        'node_cpu_seconds_total{cpu="0",mode="idle"} 104.0 1764650001.0\n'
        "# EOF\n"
    )
    with pytest.raises(
        DumpError,
        match=r's\.om:3: .*line 2 \(the series node_cpu_seconds_total\{cpu="0",mode="idle"\}, '
        r"time stamp 1764650000\.0\)",
    ):
        read_scrapes(p)


# --- rocprof and ncu --------------------------------------------------------------------------------------------


def test_rocprof_value_past_2_64_raw_counts_names_its_row_and_column(tmp_path):
    lines = ROCPROF.read_text().splitlines()
    assert ',"SQ_WAVES",16384.000000,' in lines[1]
    p = tmp_path / "huge.csv"
    p.write_text("\n".join([lines[0], lines[1].replace(",16384.000000,", ",1e30,"), *lines[2:]]) + "\n")
    with pytest.raises(
        DumpError, match=r"huge\.csv:2: column 17 \(Counter_Value\): .*`gpu\.waves` on agent 4 past 2\^64 raw counts"
    ):
        read_rocprof(p, tool_generation("rocprof"), [])


def test_ncu_value_past_2_64_raw_counts_names_its_row_and_column(tmp_path):
    text = NCU.read_text()
    assert '"2,000.00"' in text
    p = tmp_path / "huge.csv"
    p.write_text(text.replace('"2,000.00"', '"1e30"'))
    with pytest.raises(
        DumpError, match=r"huge\.csv:8: column 12 \(dram__bytes_read\.sum\): this kernel takes the running total"
    ):
        read_ncu(p, tool_generation("ncu"), [])


@pytest.mark.parametrize(("cell", "shown"), [("", "empty"), ("byte", "`byte`"), ("nsecond", "`nsecond`")])
def test_ncu_percentage_column_without_percent_unit_is_refused(tmp_path, cell, shown):
    """An empty unit cell read sm__throughput's 85.32 as a count: 8532 % (caught only by a bounds warning)."""
    text = NCU.read_text()
    units = '"Mbyte","Mbyte","%","usecond","%"\n'
    assert units in text
    p = tmp_path / "ncu.csv"
    p.write_text(text.replace(units, f'"Mbyte","Mbyte","%","usecond","{cell}"\n'))
    with pytest.raises(
        DumpError,
        match=rf"ncu\.csv:6: column 16 \(sm__throughput\.avg\.pct_of_peak_sustained_elapsed\): the unit is {shown}, "
        r"but the metric's name says it is a percentage",
    ):
        read_ncu(p, tool_generation("ncu"), [])
