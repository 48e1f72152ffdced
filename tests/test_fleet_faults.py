"""An SRE's fleet trial with injected faults (findings 4–8 and 10): what a report says about a chip that
stops early, a chip with no rows at all, a gap that cuts every counter at once, and one host's folder
analysed on its own.

The fleet: ``generate_fleet`` of 3 hosts × 2 chips, 0.8 s sampled every 2 ms (401 samples, 400 windows of
2 ms per chip), hosts h000, h001, h002, each host's chip 0 its group's leader."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from helpers import SHORT_STEPS
from perfonto import emulator
from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec, generate_fleet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("faulty_fleet")
    generate_fleet(sohu, FleetSpec(3, 2, hosts_per_rack=2), out / "data", duration_s=0.8, sample_period_s=2e-3,
                   warmup_steps=100)  # fmt: skip
    return out


def _variant(fleet, tmp_path, name: str, keep) -> tuple:
    """A copy of the fleet whose host h001 keeps the rows ``keep(table)`` selects; (folder, rows dropped)."""
    f = tmp_path / name
    shutil.copytree(fleet / "data", f)
    part = next((f / "counters" / "host=h001").glob("*.parquet"))
    t = pq.read_table(part)
    kept = t.filter(keep(t))
    pq.write_table(kept, part)
    return f, t.num_rows - kept.num_rows


def _first_half_of_chip_1(t):
    ts = t.column("timestamp_ns").to_numpy()
    half = ts.min() + (ts.max() - ts.min()) // 2
    return pc.or_(pc.not_equal(t.column("chip"), 1), pc.less_equal(t.column("timestamp_ns"), half))


def _analyze(capsys, folder, out, *extra) -> tuple[dict, str]:
    capsys.readouterr()
    assert main(["analyze", str(folder), "--out", str(out), "--json", *extra]) == 0
    err = capsys.readouterr().err
    return json.loads((out / "report.json").read_text()), err


def test_a_chip_that_stops_half_way_is_named_once_by_host_and_the_server_levels_cut_is_explained(
    fleet, tmp_path, capsys
):
    folder, dropped = _variant(fleet, tmp_path, "cut", _first_half_of_chip_1)
    assert dropped == 200  # h001/1 keeps samples 0 … 200 (0 … 0.4 s) of 401
    rep, err = _analyze(capsys, folder, tmp_path / "a")
    # finding 8: the log counts the rows the dump holds, 6 × 401 − 200 = 2,206, beside the grid's 2,406 slots
    assert "2,206 sample rows: 6 chips on 3 host(s), on a grid of 401 samples (200 of its 2,406 chip slots" in err
    # finding 6: one note for the gap (it never closes), naming host and chip, not one per signal (49 of them)
    gaps = [n for n in rep["notes"] if "missing samples" in n]
    assert len(gaps) == 1, gaps
    assert gaps[0].startswith("49 signals (c2c.busy_cycles, ") and "on chip h001/1 not bridged" in gaps[0]
    assert "(first: chip h001/1, from sample 201)" in gaps[0]
    # finding 4: the server level is over the 200 windows valid on every chip: 0.4 s of the chips' mean
    # (5 × 0.8 + 0.4) / 6 = 0.7333 s, 54.5 %; h001/1's own windows are 50.0 % of the longest chip's
    cut = [n for n in rep["notes"] if n.startswith("the server level")]
    assert len(cut) == 1 and rep["notes"][0] == cut[0]  # the first note
    assert "every one of the 6 chips: 54.5 % of the run" in cut[0] and "because h001/1 (50.0 %)" in cut[0]
    # … and sends the reader to the fleet row: the three leaders' tokens/s added up there
    leaders = [c["metrics"]["tokens_per_second"] for c in rep["per_chip"] if c["chip"] == 0]
    fleet_row = rep["fleet"]["levels"]["fleet"][0]["metrics"]["tokens_per_second"]
    assert fleet_row == pytest.approx(sum(leaders), rel=1e-12)
    assert f"tokens_per_second: {fleet_row:,.1f} tok/s there" in cut[0]
    assert f"{rep['metrics']['tokens_per_second']['value']:,.1f} tok/s at the server level" in cut[0]


def test_the_fault_free_fleet_has_no_such_notes(fleet, tmp_path, capsys):
    rep, err = _analyze(capsys, fleet / "data", tmp_path / "a")
    assert "2,406 sample rows: 6 chips on 3 host(s), 401 samples each" in err
    said = ("the server level", "missing samples", "fewer chips")
    assert not [n for n in rep["notes"] if any(s in n for s in said)]


def test_a_host_missing_a_chip_is_named_with_the_metadatas_count(fleet, tmp_path, capsys):
    folder, dropped = _variant(fleet, tmp_path, "nochip", lambda t: pc.not_equal(t.column("chip"), 1))
    assert dropped == 401
    rep, _ = _analyze(capsys, folder, tmp_path / "a")  # finding 7: was rolled up over 1 chip without a word
    note = [n for n in rep["notes"] if "fewer chips" in n]
    assert len(note) == 1
    assert (
        "1 host(s) have fewer chips than the others (the dump's metadata says `chips: 2`): h001 (no rows for chip 1)"
        in note[0]
    )
    assert [n["chips"] for n in rep["fleet"]["levels"]["host"]] == [2, 1, 2]


def test_one_host_folder_analysed_on_its_own_is_that_host(fleet, tmp_path, capsys):
    # finding 10: `host=h000` given as the dump was read with host '' (only folders below it were keys)
    topo = tmp_path / "t.csv"
    topo.write_text("host,chip,rack,pod\nh000,,r00,p0\n")
    rep, _ = _analyze(capsys, fleet / "data" / "counters" / "host=h000", tmp_path / "a", "--topology", str(topo))
    assert {c["host"] for c in rep["per_chip"]} == {"h000"}
    assert [n["node"] for n in rep["fleet"]["levels"]["host"]] == ["h000"]


def test_a_dump_without_hosts_against_a_topology_says_it_names_no_host(fleet, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(next((fleet / "data" / "counters" / "host=h000").glob("*.parquet")), bare / "part-0.parquet")
    topo = tmp_path / "t.csv"
    topo.write_text("host,chip,rack,pod\nh000,,r00,p0\n")
    capsys.readouterr()
    rc = main(["analyze", str(bare), "--out", str(tmp_path / "a"), "--topology", str(topo), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and "names no host (no `host` column, no host=… folder" in doc["error"]
    assert "``" not in doc["error"]  # the empty host it showed


@pytest.fixture(scope="module")
def run_without_chip_2(tmp_path_factory):
    """A TP4 run folder (counters, sync reads, trace, requests) whose chip 2 has no rows anywhere."""
    base = tmp_path_factory.mktemp("no_chip_2")
    emulator.run("sohu", chips=4, duration_s=0.5, sample_period_s=0.002, warmup_steps=50, slow_chip=(2, 1.3),
                 out_dir=base / "full", **SHORT_STEPS)  # fmt: skip
    run = base / "run"
    run.mkdir()
    for name in ("counters", "sync", "trace"):
        t = pq.read_table(base / "full" / f"{name}.parquet")
        pq.write_table(t.filter(pc.not_equal(t.column("chip"), 2)), run / f"{name}.parquet")
    shutil.copy(base / "full" / "requests.parquet", run / "requests.parquet")
    return run


def test_a_run_folder_missing_a_chip_is_analysed_with_the_multichip_analysis_skipped(
    run_without_chip_2, tmp_path, capsys
):
    # finding 5: evaluated everything, then exited 1 advising to renumber the chips or "leave out --sync"
    rep, _ = _analyze(capsys, run_without_chip_2, tmp_path / "a")
    assert rep.get("multichip") is None
    skipped = [n for n in rep["notes"] if "multi-chip analysis" in n]
    assert len(skipped) == 1 and "numbered 0, 1, 3" in skipped[0]
    assert "chip(s) 2 have no sync reads or counter rows" in skipped[0] and "it is skipped" in skipped[0]
    assert "--sync" not in skipped[0]
    # … and the counters say it themselves: the metadata's `chips: 4` against chips 0, 1, 3
    assert any("chip 2 of 4 has no rows (the dump's metadata says `chips: 4`; chips with rows: 0, 1, 3)" in n
               for n in rep["notes"])  # fmt: skip


def test_the_counters_alone_note_the_missing_chip(run_without_chip_2, tmp_path, capsys):
    rep, _ = _analyze(capsys, run_without_chip_2 / "counters.parquet", tmp_path / "a")
    assert len(rep["per_chip"]) == 3
    note = [n for n in rep["notes"] if "has no rows" in n]
    assert len(note) == 1 and "chip 2 of 4 has no rows" in note[0]
    assert np.isfinite(rep["metrics"]["mfu"]["value"])  # the rest is read over the chips with rows
