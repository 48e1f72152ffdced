"""Timestamps that go backwards within one file and chip are sorted, as parts of a dump may
legitimately interleave in time — but the report says where (file, chip, first row), so that a
counter that "resets" after the re-sort is seen as the clock problem it is."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfonto.cli import main
from perfonto.capture.dump_scan import plan_dump
from perfonto.metrics.windows import RESET_INFERRED, prepare, read_counters
from perfonto.ontology import load_generation

NOTE = (
    "the timestamps of chip 0 go backwards at row 3 (500000 ns, after 1000000 ns in row 2); samples were "
    "sorted by timestamp"
)


@pytest.fixture(scope="module")
def sohu():
    return load_generation("sohu")[0]


def _wide(path, chip0_ms=(0, 1, 0.5, 3, 4)):
    rows = [f"0,{t},{1000 * (i + 1)}" for i, t in enumerate(chip0_ms)] + [f"1,{i},{1000 * (i + 1)}" for i in range(5)]
    path.write_text("chip,timestamp_ms,seq.elapsed_cycles\n" + "\n".join(rows) + "\n")
    return path


def test_time_going_backwards_is_noted_with_file_chip_and_row(tmp_path, sohu, capsys):
    p = _wide(tmp_path / "d.csv")
    dump = read_counters(p, sohu)
    assert [n for n in dump.notes if "backwards" in n] == [
        f"{p}: {NOTE} — check the collector's clock (windows across the reordered samples may read as resets)"
    ]
    assert dump.raw["seq.elapsed_cycles"][:, 0, 0].tolist() == [1000, 3000, 2000, 4000, 5000]  # sorted, as before
    assert dump.timestamps_ns[:, 0].tolist() == [0, 500_000, 1_000_000, 3_000_000, 4_000_000]
    w = prepare(dump, sohu)
    assert w.null["seq.elapsed_cycles"][:, 0].tolist() == [0, RESET_INFERRED, 0, 0]  # what the note explains
    assert plan_dump(p, sohu).notes == [n for n in dump.notes if "backwards" in n]  # the embedded engine says it too
    assert main(["analyze", str(p), "--out", str(tmp_path / "o"), "--json"]) == 0
    assert any(NOTE in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_rows_in_order_per_chip_signal_and_file_are_not_noted(tmp_path, sohu):
    # long rows written signal by signal: each signal's rows rise in time
    lines = ["chip,timestamp_ns,signal,instance,value"]
    for name in ("seq.elapsed_cycles", "seq.idle_cycles"):
        lines += [f"0,{s * 1000},{name},,{s}" for s in range(4)]
    (tmp_path / "long.csv").write_text("\n".join(lines) + "\n")
    assert not [n for n in read_counters(tmp_path / "long.csv", sohu).notes if "backwards" in n]
    # two parts that interleave in time: the later samples in the first file
    d = tmp_path / "parts"
    d.mkdir()
    (d / "a.csv").write_text("chip,timestamp_ns,seq.elapsed_cycles\n0,2000,3\n0,3000,4\n")
    (d / "b.csv").write_text("chip,timestamp_ns,seq.elapsed_cycles\n0,0,1\n0,1000,2\n")
    dump = read_counters(d, sohu)
    assert not [n for n in dump.notes if "backwards" in n]
    assert dump.raw["seq.elapsed_cycles"][:, 0, 0].tolist() == [1, 2, 3, 4]


def test_the_second_file_and_a_long_dump_name_their_own_rows(tmp_path, sohu):
    d = tmp_path / "parts"
    d.mkdir()
    (d / "b.csv").write_text(
        "chip,timestamp_ns,signal,instance,value\n"
        "0,2000,seq.elapsed_cycles,,3\n0,2000,seq.idle_cycles,,0\n"
        "0,4000,seq.elapsed_cycles,,5\n0,4000,seq.idle_cycles,,0\n"
        "0,3000,seq.elapsed_cycles,,4\n0,3000,seq.idle_cycles,,0\n"
    )
    (d / "a.csv").write_text(
        "chip,timestamp_ns,signal,instance,value\n0,0,seq.elapsed_cycles,,1\n0,0,seq.idle_cycles,,0\n"
        "0,1000,seq.elapsed_cycles,,2\n0,1000,seq.idle_cycles,,0\n"
    )
    dump = read_counters(d, sohu)
    notes = [n for n in dump.notes if "backwards" in n]
    assert len(notes) == 1 and notes[0].startswith(
        f"{d / 'b.csv'}: the timestamps of chip 0 go backwards at row 5 (3000 ns, after 4000 ns in row 3)"
    )
    assert np.array_equal(dump.raw["seq.elapsed_cycles"][:, 0, 0], [1, 2, 3, 4, 5])
