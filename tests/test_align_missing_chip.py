"""`perfonto align` on a run folder missing a chip (a dead chip, or its capture lost): the counters, the
sync reads and the trace hold chips 0, 1, 3 of a TP4 run. Each chip's clock fit stands alone, so the
chips present are aligned exactly as in the whole run, and the multi-chip analysis (indexed by chip
number) is skipped with a note naming chip 2, as `perfonto analyze` does. It used to refuse the run
("the chips are numbered 0, 1, 3 … renumber the chip column"), advice that would relabel chip 3's data
as chip 2's."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """`perfonto run --chips 4 --duration 0.3s` and its `perfonto align --json` document."""
    run = tmp_path_factory.mktemp("whole") / "R"
    assert main(["run", "--chips", "4", "--duration", "0.3s", "--out", str(run)]) == 0
    assert main(["align", str(run), "--json"]) == 0
    return run, json.loads((run / "alignment.json").read_text())


def _without(whole, tmp_path, chip: int):
    """The run without ``chip``'s rows in counters, sync and trace (as
    /tmp/s55/fleet/tools/make_missing_chip_run.py makes it), its requests and ground truth kept."""
    src, _ = whole
    run = tmp_path / "Rm"
    run.mkdir()
    for f in ("counters", "sync", "trace"):
        t = pq.read_table(src / f"{f}.parquet")
        pq.write_table(t.filter(pc.not_equal(t["chip"], chip)), run / f"{f}.parquet")
    for f in ("requests.parquet", "ground_truth.json"):
        shutil.copy(src / f, run / f)
    return run


def _align(run, capsys, *extra):
    rc = main(["align", str(run), *extra])
    out = "".join(capsys.readouterr())
    return rc, out


def test_the_chips_present_are_aligned_as_in_the_whole_run(whole, tmp_path, capsys):
    run = _without(whole, tmp_path, 2)
    rc, out = _align(run, capsys, "--json")
    assert rc == 0, out
    doc = json.loads(out)
    rows = doc["alignment"]["chips"]
    assert [r["chip"] for r in rows] == [0, 1, 3]
    full = {r["chip"]: r for r in whole[1]["alignment"]["chips"]}
    gt = json.loads((run / "ground_truth.json").read_text())
    for r in rows:  # the same sync reads of the chip: the same fit, to the last bit
        c = r["chip"]
        assert (r["offset_ns"], r["drift_ppm"], r["reads"]) == (full[c]["offset_ns"], full[c]["drift_ppm"], 60)
        assert r["true_offset_ns"] == gt["clock_offsets_ns"][c]  # chip 3 against chip 3's truth, not index 2's
    assert doc["alignment"]["within_bound"] == 1.0 and doc["alignment"]["unmappable"] == 0
    # one counter sample of chip 3 by hand: host = (device − offset) / (1 + drift)
    al = pq.read_table(run / "aligned_counters.parquet")
    assert set(al["chip"].to_pylist()) == {0, 1, 3} and np.isfinite(al["host_ns"].to_numpy()).all()
    i = al["chip"].to_pylist().index(3)
    r3 = rows[2]
    want = (al["timestamp_ns"][i].as_py() - r3["offset_ns"]) / (1 + r3["drift_ppm"] * 1e-6)
    assert al["host_ns"][i].as_py() == pytest.approx(want, abs=1e-3)
    # the multi-chip analysis is skipped, naming the chip without rows, and never advises renumbering
    assert doc["chips"] == 3 and "collective" not in doc
    assert "chip(s) 2 have no sync reads or counter rows" in doc["skipped"] and doc["notes"] == [doc["skipped"]]
    assert "renumber" not in out and json.loads((run / "alignment.json").read_text())["skipped"] == doc["skipped"]


def test_the_text_report_names_the_missing_chip(whole, tmp_path, capsys):
    rc, out = _align(_without(whole, tmp_path, 2), capsys)
    assert rc == 0 and "Traceback" not in out and "renumber" not in out
    flat = " ".join(out.split())
    assert "the chips are numbered 0, 1, 3" in flat and "chip(s) 2 have no sync reads or counter rows" in flat
    assert "Multi-chip" not in out  # no empty multi-chip section under the note


def test_a_last_chip_missing_is_named_from_the_metadata(whole, tmp_path, capsys):
    """Chips 0, 1, 2 of the 4 the counters' metadata counts: numbered without a gap, so the multi-chip
    analysis runs over the three; the note names chip 3."""
    rc, out = _align(_without(whole, tmp_path, 3), capsys, "--json")
    assert rc == 0, out
    doc = json.loads(out)
    assert [r["chip"] for r in doc["alignment"]["chips"]] == [0, 1, 2] and doc["chips"] == 3
    assert "collective" in doc and "skipped" not in doc
    (note,) = doc["notes"]
    assert "the run's metadata counts 4 chips, and chip(s) 3 have no sync reads" in note
