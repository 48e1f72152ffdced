"""`perfonto analyze`'s side files (--requests, --trace, --sync, --snapshots) are checked before
anything is compiled or evaluated: a missing one is "FILE: no such file" naming the option, one that
is not Parquet says so and what it seems to be — never pyarrow's "internal error: ArrowInvalid …
Parquet magic bytes", an error naming the counter dump, or a failure after the whole evaluation.
Exit 1 (the capture cannot be read, as for a missing dump), one JSON document under --json."""

from __future__ import annotations

import json

import pytest

from perfonto.analysis.capture import Capture
from perfonto.analysis.side_files import check_side_files
from perfonto.cli import main
from perfonto.capture.dump import DumpError


@pytest.fixture(scope="module")
def run1(tmp_path_factory):
    out = tmp_path_factory.mktemp("run1") / "run"
    assert main(["run", "--duration", "50ms", "--chips", "1", "--out", str(out), "--json"]) == 0
    return out


def _analyze(capsys, run1, out, *extra):
    capsys.readouterr()
    code = main(["analyze", str(run1 / "counters.parquet"), *extra, "--out", str(out), "--json"])
    got = capsys.readouterr()
    doc = json.loads(got.out)  # one JSON document, nothing else
    return code, doc, got.err


@pytest.mark.parametrize(
    "flag, what",
    [
        ("--trace", "the trace"),
        ("--sync", "the sync reads"),
        ("--requests", "the request records"),
        ("--snapshots", "the op-boundary snapshots"),
    ],
)
def test_a_missing_side_file_is_named_before_anything_runs(run1, tmp_path, capsys, flag, what):
    missing = tmp_path / "missing.parquet"
    code, doc, err = _analyze(capsys, run1, tmp_path / "o", flag, str(missing))
    assert (code, doc["ok"], doc["exit_code"]) == (1, False, 1)
    assert doc["error"] == f"{missing}: no such file; check the path given to {flag} ({what})"
    assert "compiled catalog" not in err and not (tmp_path / "o").exists()  # up front: nothing compiled or written


@pytest.mark.parametrize("flag", ["--trace", "--sync", "--requests"])
def test_a_csv_side_file_is_not_parquet(run1, tmp_path, capsys, flag):
    csv = tmp_path / "some.csv"
    csv.write_text("chip,start_ns,end_ns\n0,1,2\n")
    code, doc, _ = _analyze(capsys, run1, tmp_path / "o", flag, str(csv))
    assert (code, doc["exit_code"]) == (1, 1)
    assert doc["error"].startswith(
        f"{csv}: not a Parquet file (it starts with 'chip,sta': text, a CSV?); {flag} takes "
    )
    assert "internal error" not in doc["error"] and "collector-format guide" in doc["error"]


def test_a_parquet_file_of_the_wrong_kind_names_the_missing_columns(run1, tmp_path, capsys):
    code, doc, _ = _analyze(capsys, run1, tmp_path / "o", "--sync", str(run1 / "trace.parquet"))
    assert code == 1
    assert doc["error"].startswith(
        f"{run1 / 'trace.parquet'}: no column `host_before_ns`, `device_ns`, `host_after_ns`; "
        "the wrong file? --sync takes a table with chip, host_before_ns, device_ns, host_after_ns"
    )


def test_empty_and_truncated_parquet(tmp_path):
    (tmp_path / "empty.parquet").write_bytes(b"")
    (tmp_path / "cut.parquet").write_bytes(b"PAR1" + b"\0" * 20 + b"PAR1")
    with pytest.raises(DumpError, match=r"empty\.parquet: not a Parquet file \(the file is empty\); --trace takes"):
        check_side_files(Capture(None, trace=tmp_path / "empty.parquet"))
    with pytest.raises(
        DumpError,
        match=r"cut\.parquet: not a readable Parquet file \(.*\); the request records \(--requests\) "
        r"may be truncated",
    ):
        check_side_files(Capture(None, requests=tmp_path / "cut.parquet"))


def test_the_run_folders_own_side_files_pass(run1, tmp_path, capsys):
    code, doc, _ = _analyze(
        capsys,
        run1,
        tmp_path / "o",
        "--trace",
        str(run1 / "trace.parquet"),
        "--sync",
        str(run1 / "sync.parquet"),
        "--requests",
        str(run1 / "requests.parquet"),
    )
    assert code == 0 and doc["chips"] == 1
