"""A dump written for another generation says how to evaluate it: `--generation NAME` where NAME is shipped,
`--catalog DIR` where it is not (a new user followed "evaluate it with --generation sohu_next" for a run
made with `--catalog` and got "no generation named `sohu_next`")."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main


@pytest.mark.parametrize(
    "written_for, says",
    [
        ("h100", "evaluate it with --generation h100"),
        ("sohu_next", "`sohu_next` is not shipped: evaluate it with --catalog DIR"),
    ],
)
def test_a_dump_of_another_generation_says_what_to_give(tmp_path, capsys, written_for, says):
    n = 4
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "seq.elapsed_cycles": pa.array((np.arange(n) * 1000).astype(np.uint64)),
        }
    ).replace_schema_metadata({b"perfonto": json.dumps({"generation": written_for}).encode()})
    pq.write_table(t, tmp_path / "d.parquet")
    assert main(["analyze", str(tmp_path / "d.parquet"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"the dump was written for generation `{written_for}`, not `sohu`; {says}" in err, err


def test_extending_a_shipped_tool_catalog_says_to_copy_it(tmp_path, capsys):
    """`extends: linux` was told "did you mean `mylinux`" (the file's own name); the shipped tool catalogs
    (perfonto/catalogs/linux, node, dcgm, ncu, rocprof) are not generations a folder extends."""
    (tmp_path / "mylinux.yaml").write_text("generation: mylinux\nextends: linux\ndescription: mine\n")
    assert main(["check", "--catalog", str(tmp_path)]) == 1
    err = capsys.readouterr()
    text = err.out + err.err
    assert "`extends: linux`: `linux` is a shipped tool catalog (" in text and "copy " in text, text
    assert "mylinux`?" not in text
