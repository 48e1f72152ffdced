"""A host's tokens/s, steps/s and step time are its leader chip's, whatever its other chips' samples cover.

Only a group's leader chip counts steps, tokens and requests (``counted_by: leader``). The host and fleet
rollups divided those counts by the mean of all the host's chips' times, so a fleet trial's non-leader chip
that stopped reporting half-way made its host read 74,392 tok/s instead of the 65,130 its leader counted
(+14 %: 130,260 tokens ÷ mean(2.000, 2.000, 1.004, 2.000 s)), ranked it the fleet's fastest, and cut the
leader's own stop to −43 %. The generated rollup SQL did the same. Now a leader-counted counter rolls up as
the sum of its leaders' rates × the node's interval: the host's tokens/s is its leader's count over the
leader's own time, in ``perfonto analyze`` and in the SQL alike."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec, generate_fleet

LEADER_FIGURES = ("tokens_per_second", "steps_per_second", "requests_per_second", "step_time")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("leader_fleet")
    generate_fleet(sohu, FleetSpec(2, 4), out / "data", duration_s=1.2, sample_period_s=2e-3, warmup_steps=100)
    return out


def _analyze(folder, out) -> dict:
    assert main(["analyze", str(folder), "--out", str(out), "--json"]) == 0
    return json.loads((out / "report.json").read_text())


def _cut(fleet, tmp_path, chip: int) -> tuple:
    """A copy of the fleet with host h001's ``chip`` reporting only the first half of the run."""
    f = tmp_path / f"cut{chip}"
    shutil.copytree(fleet / "data", f)
    part = next((f / "counters" / "host=h001").glob("*.parquet"))
    t = pq.read_table(part)
    ts = t.column("timestamp_ns").to_numpy()
    half = ts.min() + (ts.max() - ts.min()) // 2
    keep = pc.or_(pc.not_equal(t.column("chip"), chip), pc.less_equal(t.column("timestamp_ns"), half))
    pq.write_table(t.filter(keep), part)
    return f, t.num_rows - t.filter(keep).num_rows


def _host(rep: dict, host: str) -> dict:
    return next(n["metrics"] for n in rep["fleet"]["levels"]["host"] if n["node"] == host)


def _leader(rep: dict, host: str) -> dict:
    chips = [c for c in rep["per_chip"] if c["host"] == host and (c["metrics"]["tokens_per_second"] or 0) > 0]
    assert len(chips) == 1, "one leader chip per host"
    return chips[0]


def test_a_non_leader_chip_that_stops_early_leaves_its_host_figures_alone(fleet, tmp_path, capsys):
    healthy = _analyze(fleet / "data", tmp_path / "a")
    leader = _leader(healthy, "h001")["chip"]
    other = 3 if leader != 3 else 2
    cut, dropped = _cut(fleet, tmp_path, other)
    assert dropped > 200  # a real cut: ~300 of the chip's 600 samples
    rep = _analyze(cut, tmp_path / "b")
    capsys.readouterr()
    before, after = _host(healthy, "h001"), _host(rep, "h001")
    for m in LEADER_FIGURES:
        assert after[m] == pytest.approx(before[m], rel=1e-4), m  # step_time: the chips' mean cycles, 1e-5 apart
        assert after[m] == pytest.approx(_leader(rep, "h001")["metrics"][m], rel=2e-3), m
    # the fleet's tokens/s: the two hosts' leaders' figures added up
    fleet_row = rep["fleet"]["levels"]["fleet"][0]["metrics"]
    assert fleet_row["tokens_per_second"] == pytest.approx(
        _host(rep, "h000")["tokens_per_second"] + after["tokens_per_second"], rel=1e-12
    )
    # every chip counts the energy, chip 3 over half the run: read against the tokens of the same mean time, the
    # host's energy per token stays near the healthy one (within the power's swing between the halves, 2 % here)
    # — over all the tokens it was 7/8 of it (12.5 % low)
    assert after["energy_per_token"] == pytest.approx(before["energy_per_token"], rel=0.05)


def test_a_leader_that_stops_early_gives_its_rate_not_half_of_it(fleet, tmp_path, capsys):
    healthy = _analyze(fleet / "data", tmp_path / "a")
    cut, _ = _cut(fleet, tmp_path, _leader(healthy, "h001")["chip"])
    rep = _analyze(cut, tmp_path / "b")
    capsys.readouterr()
    lead = _leader(rep, "h001")["metrics"]
    host = _host(rep, "h001")
    # by hand: the leader's own count over its own (half) time — the per-chip row — not over the host's mean
    # time, which three full chips stretch to 7/8 of the run (the figure fell to 4/7 of the leader's)
    for m in ("tokens_per_second", "steps_per_second"):
        assert host[m] == pytest.approx(lead[m], rel=2e-3), m


def test_rollup_sql_reads_leader_counts_as_analyze_does(fleet, tmp_path, library, capsys):
    import pyarrow as pa

    from perfonto.codegen.sql import SqlSource, dump_source
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    duckdb = pytest.importorskip("duckdb")
    healthy = _analyze(fleet / "data", tmp_path / "a")
    cut, _ = _cut(fleet, tmp_path, 3 if _leader(healthy, "h001")["chip"] != 3 else 2)
    rep = _analyze(cut, tmp_path / "b")
    capsys.readouterr()
    con = duckdb.connect()
    chips = rep["fleet"]["chips"]
    con.register("topology", pa.table({k: [c[k] for c in chips] for k in ("host", "chip", "rack", "pod")}))
    source, host = dump_source(str(cut / "counters"))
    res = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topology")).df()
    for level, node in (("host", "h001"), ("host", "h000"), ("fleet", "fleet")):
        row = res[(res.level == level) & (res.node == node)].iloc[0]
        want = next(n["metrics"] for n in rep["fleet"]["levels"][level] if n["node"] == node)
        for m in (*LEADER_FIGURES, "energy_per_token", "mfu"):
            assert float(row[m]) == pytest.approx(want[m], rel=1e-9), (level, node, m)
    assert np.isclose(
        float(res[(res.level == "host") & (res.node == "h001")].iloc[0]["tokens_per_second"]),
        _host(healthy, "h001")["tokens_per_second"],
        rtol=1e-9,
    )
