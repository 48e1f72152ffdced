"""A dump whose key columns are wrong names the rows: a repeated sample (the two rows, in the file's
order; in a folder, the file of each), an empty chip or timestamp cell."""

from __future__ import annotations

from perfonto.cli import main


def _csv(rows: list[tuple]) -> str:
    return "chip,timestamp_ns,pcie.rx_bytes\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows)


GOOD = [(c, t * 1_000_000, t * 100) for t in range(6) for c in (0, 1)]  # data rows 1..12


def _error(capsys, path, tmp_path) -> str:
    assert main(["analyze", str(path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err
    return " ".join(err.split())


def test_a_repeated_sample_names_both_rows(tmp_path, capsys):
    rows = GOOD[:7] + [GOOD[6]] + GOOD[7:]  # data row 8 repeats row 7 (chip 0 at 3 ms)
    (tmp_path / "d.csv").write_text(_csv(rows))
    err = _error(capsys, tmp_path / "d.csv", tmp_path)
    assert "d.csv: timestamps of chip 0 do not increase: row 7 is at 3000000 ns, row 8 at 3000000 ns" in err
    assert "a duplicate sample" in err


def test_a_repeated_sample_in_a_folder_names_its_file(tmp_path, capsys):
    rows = GOOD[:]
    rows[4] = (0, 1_000_000, 9)  # chip 0 at 1 ms again (rows 3 and 5); rows out of order alone are sorted, noted
    for host, data in (("a", GOOD), ("b", rows)):
        (tmp_path / "fleet" / f"host={host}").mkdir(parents=True)
        (tmp_path / "fleet" / f"host={host}" / "part-0.csv").write_text(_csv(data))
    err = _error(capsys, tmp_path / "fleet", tmp_path)
    assert "timestamps of chip b/0 do not increase" in err and "a duplicate sample" in err
    assert "host=b/part-0.csv: row 3 is at 1000000 ns, host=b/part-0.csv: row 5 at 1000000 ns" in err


def test_an_empty_timestamp_names_its_row(tmp_path, capsys):
    text = _csv(GOOD).splitlines()
    text[9] = "0,,400"  # data row 9
    (tmp_path / "d.csv").write_text("\n".join(text) + "\n")
    err = _error(capsys, tmp_path / "d.csv", tmp_path)
    assert "d.csv: row 9: `timestamp_ns` is empty" in err
