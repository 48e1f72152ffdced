"""A caller of ``perfonto.evaluate`` is told what to do in the API's words: the capture readers' messages
name ``perfonto analyze``'s options (``give --timestamp-unit``), which a Python caller does not have (a new
user of the API followed "--timestamp-unit" into the docs and found no such keyword). Another tool's flag
quoted in a message (``ncu --metrics``) stays as it is, and the CLI's messages keep the options."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import perfonto
from perfonto.api_words import in_api_words
from perfonto.cli import main


@pytest.mark.parametrize(
    "message, expected",
    [
        (
            "x: column `timestamp` has no unit; give --timestamp-unit",
            "x: column `timestamp` has no unit; give timestamp_unit=",
        ),
        ("x: in ns, and --timestamp-unit us says otherwise", "x: in ns, and timestamp_unit='us' says otherwise"),
        ("evaluate it with --generation sohu", "evaluate it with load_catalog(generation='sohu')"),
        ("; --generation dcgm_h100", "; load_catalog(generation='dcgm_h100')"),
        ("is the --generation right? If", "is the load_catalog(generation=...) right? If"),
        ("evaluate it with --catalog DIR, the folder", "evaluate it with load_catalog(DIR), the folder"),
        ("give --sample-period MS if you ran dmon", 'give sample_period="Nms" if you ran dmon'),
        ("give --sample-period (or metadata)", "give sample_period= (or metadata)"),
        ("check the path given to --trace (the trace)", "check the path given to trace= (the trace)"),
        ("x (text); --sync takes the sync reads", "x (text); sync= takes the sync reads"),
        ("a coarser unit (--timestamp-unit, timestamp_unit=), or", "a coarser unit (timestamp_unit=), or"),
        ("give --sample-period 2ms", 'give sample_period="2ms"'),
        ("give --sample-period 100us.", 'give sample_period="100us".'),
        ("use --generation=sohu", "use load_catalog(generation='sohu')"),
        ("--trace=trace.parquet is not", "trace='trace.parquet' is not"),
        ("--catalog=my/dir here", "load_catalog('my/dir') here"),
        ("run `perfonto analyze --trace FILE` again", "run `perfonto analyze --trace FILE` again"),  # a command
        ("give --timestamp-unit us or timestamp_unit=us", "give timestamp_unit='us' or timestamp_unit=us"),
        # other tools' flags, and perfonto options the API has no keyword for, stay
        ("profile with `ncu --metrics gpu__time_duration.sum`", "profile with `ncu --metrics gpu__time_duration.sum`"),
        ("`perf stat --append`", "`perf stat --append`"),
        ("a topology goes to --topology", "a topology goes to --topology"),
        ("give --syncs or --trace-file", "give --syncs or --trace-file"),
    ],
)
def test_cli_options_become_keywords(message, expected):
    assert in_api_words(message) == expected


def _bare_timestamps(path) -> None:
    n = 4
    pq.write_table(
        pa.table(
            {
                "chip": pa.array(np.zeros(n, np.int32)),
                "timestamp": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
                "seq.elapsed_cycles": pa.array((np.arange(n) * 1000).astype(np.uint64)),
            }
        ),
        path,
    )


def test_evaluate_names_the_keyword_and_analyze_the_option(tmp_path, capsys):
    path = tmp_path / "d.parquet"
    _bare_timestamps(path)
    with pytest.raises(perfonto.DumpError) as info:
        perfonto.evaluate(perfonto.load_catalog(), path)
    msg = str(info.value)
    assert f"{path}: column `timestamp` has no unit" in msg
    assert "timestamp_unit=" in msg and "--timestamp-unit" not in msg
    # the keyword it names works
    result = perfonto.evaluate(perfonto.load_catalog(), path, timestamp_unit="ns")
    assert result.window.num_rows == 3
    # the CLI still names its option
    assert main(["analyze", str(path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "--timestamp-unit" in err and "timestamp_unit=" not in err
