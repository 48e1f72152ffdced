"""A dump whose columns or ``perfonto`` metadata contradict the collector format is refused by
``perfonto analyze`` naming the file, the column or key, and what to do (a bad-input pass found a
column given twice, or a signal given both whole and per instance, ending in an internal error, and a
newer collector_format, metadata that is not an object and a negative duration_ns read silently)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main


def _dump(**extra) -> pa.Table:
    n = 4
    return pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "seq.elapsed_cycles": pa.array((np.arange(n) * 1000).astype(np.uint64)),
            **extra,
        }
    )


def _analyze(tmp_path, t: pa.Table, capsys, name="d.parquet"):
    path = tmp_path / name
    if name.endswith(".csv"):
        import pyarrow.csv as pcsv

        pcsv.write_csv(t, path)
    else:
        pq.write_table(t, path)
    code = main(["analyze", str(path), "--out", str(tmp_path / "o")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", ["d.parquet", "d.csv"])
def test_a_column_given_twice_is_named(tmp_path, capsys, name):
    t = _dump()
    t = t.append_column("seq.elapsed_cycles", t["seq.elapsed_cycles"])
    code, err = _analyze(tmp_path, t, capsys, name)
    assert code == 1 and "internal error" not in err
    assert f"{name}: column `seq.elapsed_cycles` appears 2 times" in err and "keep one" in err
    assert not (tmp_path / "o").exists()


def test_a_signal_whole_and_per_instance_is_named(tmp_path, capsys):
    t = _dump()
    t = t.append_column("seq.elapsed_cycles[0]", t["seq.elapsed_cycles"])
    code, err = _analyze(tmp_path, t, capsys)
    assert code == 1 and "internal error" not in err
    assert "both as column `seq.elapsed_cycles` and as `seq.elapsed_cycles[0]`" in err and "drop the other" in err


@pytest.mark.parametrize(
    "meta, says",
    [
        ({"collector_format": 99}, "written in collector format 99; this perfonto reads format 1"),
        ([1, 2], "metadata is JSON list, not an object"),
        ({"duration_ns": -5}, "metadata duration_ns is -5;"),
        ({"duration_ns": "1s"}, 'metadata duration_ns is "1s";'),
        ({"collector_format": "1"}, "metadata collector_format is '1'"),
    ],
)
def test_metadata_against_the_collector_format_is_named(tmp_path, capsys, meta, says):
    t = _dump().replace_schema_metadata({b"perfonto": json.dumps(meta).encode()})
    code, err = _analyze(tmp_path, t, capsys)
    assert code == 1 and "d.parquet" in err and says in err, err


def test_format_1_metadata_is_read(tmp_path, capsys):
    t = _dump().replace_schema_metadata(
        {b"perfonto": json.dumps({"collector_format": 1, "duration_ns": 3_000_000}).encode()}
    )
    code, err = _analyze(tmp_path, t, capsys)
    assert code == 0, err
