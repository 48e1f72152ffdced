"""A CSV value that does not convert names the file, the row (counted from 1 below the header), the
column by name and what the column holds — not pyarrow's "In CSV column #5: CSV conversion error to
uint64", whose index is 0-based and names no column."""

from __future__ import annotations

import pytest

from perfonto.cli import main
from perfonto.capture.dump import DumpError
from perfonto.capture.dump_scan import plan_dump
from perfonto.metrics.windows import read_counters
from perfonto.ontology import load_generation

MS = 1_000_000
HEADER = "chip,timestamp_ns,seq.elapsed_cycles,seq.idle_cycles\n"


@pytest.fixture(scope="module")
def sohu():
    return load_generation("sohu")[0]


def _csv(path, rows: int, bad_row: int, column: int, value: str):
    """``rows`` samples of chip 0; the value of ``column`` (0-based) in data row ``bad_row`` (1-based) is ``value``."""
    lines = []
    for r in range(1, rows + 1):
        cells = ["0", str((r - 1) * MS), str(r * 1000), str(r)]
        if r == bad_row:
            cells[column] = value
        lines.append(",".join(cells))
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("value", ["12.5", "-3", "abc"])
def test_a_register_value_that_is_not_an_unsigned_integer(tmp_path, sohu, capsys, value):
    p = _csv(tmp_path / "d.csv", 5, 4, 3, value)
    want = (
        f"{p}: row 4, column `seq.idle_cycles`: value '{value}' is not an unsigned integer "
        "(raw registers are unsigned integer counts)"
    )
    with pytest.raises(DumpError) as exc:
        read_counters(p, sohu)
    assert str(exc.value) == want
    with pytest.raises(DumpError) as exc:
        plan_dump(p, sohu)  # the embedded engine reads CSV parts the same way
    assert str(exc.value) == want
    assert main(["analyze", str(p), "--out", str(tmp_path / "o")]) == 1
    assert capsys.readouterr().err.strip().endswith(f"error: {want}")


def test_the_row_is_found_past_the_first_block(tmp_path, sohu):
    p = _csv(tmp_path / "big.csv", 120_000, 97_531, 2, "7e3")  # pyarrow reads a file this size in several blocks
    with pytest.raises(
        DumpError, match=r"big\.csv: row 97531, column `seq\.elapsed_cycles`: value '7e3' is not an unsigned"
    ):
        read_counters(p, sohu)


def test_a_key_value_says_what_the_key_holds(tmp_path, sohu):
    p = _csv(tmp_path / "k.csv", 5, 2, 0, "chip0")
    with pytest.raises(DumpError, match=r"k\.csv: row 2, column `chip`: value 'chip0' is not an integer$"):
        read_counters(p, sohu)


def test_a_header_that_is_not_utf8_with_a_bad_value_is_a_clear_error(sohu, tmp_path):
    """Locating the bad value reads the header again: a header that is not UTF-8 (byte 0xf6) must end
    in the reader's refusal, not a UnicodeDecodeError (fuzz finding, 229 inputs of one campaign)."""
    p = tmp_path / "d.csv"
    p.write_bytes(b"chip,timestamp_ns,seq.idle_cycles,x\xf6\n0,0,12.5,1\n")
    with pytest.raises(DumpError) as exc:
        read_counters(p, sohu)
    assert str(p) in str(exc.value)


def test_a_ragged_row_names_its_row(tmp_path, sohu):
    """A data row with a field missing names the row (from 1 below the header) and both counts."""
    p = _csv(tmp_path / "d.csv", 6, 6, 0, "0")
    lines = p.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0]  # data row 5 loses its last field
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DumpError) as exc:
        read_counters(p, sohu)
    assert str(exc.value).startswith(f"{p}: row 5: 3 field(s) where the header has 4 column(s) ('0,4000000,5000');"), (
        str(exc.value)
    )


def test_a_ragged_row_with_bytes_not_utf8_is_one_clear_error(tmp_path, sohu, capfd):
    """pyarrow decodes a bad row as UTF-8 before the row handler sees it; that failure must not print a
    traceback ("Exception ignored in …"): one error naming the file and both problems (found in CI's fuzz log)."""
    p = tmp_path / "d.csv"
    p.write_bytes(HEADER.encode() + b"0,0,1000,1\n0,1000000,2000,2,\xb5\xb5\n")
    with pytest.raises(DumpError) as exc:
        read_counters(p, sohu)
    msg = str(exc.value)
    assert msg.startswith(
        f"{p}: a row has another number of fields than the header has columns, and bytes that are not UTF-8"
    ), msg
    assert "save the file as UTF-8" in msg
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err, err
