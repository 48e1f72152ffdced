"""Issue 29, point 3: a share of time over several devices rolls up as device-seconds over device-seconds.

A metric that divides a time each device measures by the window's wall-clock time (``busy / interval``,
declared in percent) is a per-device share. Summed over devices at server level it read C × its mean
(two chips at 50 % and 25 % gave 75 %); it is now Σ busy / (C × interval) at every level: chip, host,
rack and fleet, in the reference levels, the engine behind ``perfonto analyze`` and the generated
rollup SQL. A plain ratio (``[1]``, perf's "CPUs utilized") stays a total, as perf prints it.

Hand values: four chips on two hosts, every window 1 ms, busy 0.50 / 0.25 ms a window on h0's chips and
1.00 / 0.10 ms on h1's: chip shares 50, 25, 100, 10 %; host h0 (0.5 + 0.25) / 2 = 37.5 %, h1 55 %;
the fleet (0.5 + 0.25 + 1.0 + 0.1) / 4 = 46.25 % (the mean of the hosts, as both have two chips).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog

YAML = """generation: devs
description: Devices that count their busy time in nanoseconds.
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: "test"}}
blocks:
  dev:
    description: A device.
    clock: core
    signals:
      busy: {kind: counter, unit: ns, width: 64, description: Time the device was busy.}
"""
METRICS = """metric dev.busy_share [percent] = dev.busy / interval
  "Share of the wall-clock time the device was busy."
  bounds 0 .. 100

metric dev.busy_devices [1] = dev.busy / interval
  "Devices busy on average (a total over devices, like perf stat's CPUs utilized)."
"""
SHARES = {("h0", 0): 0.50, ("h0", 1): 0.25, ("h1", 0): 1.00, ("h1", 1): 0.10}
W, PERIOD = 10, 1_000_000


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("devsec")
    cat = d / "cat"
    cat.mkdir()
    (cat / "devs.yaml").write_text(YAML)
    (cat / "devs.metrics").write_text(METRICS)
    for host in ("h0", "h1"):
        part = d / "counters" / f"host={host}"
        part.mkdir(parents=True)
        rows = {"chip": [], "timestamp_ns": [], "dev.busy": []}
        for k in range(W + 1):
            for chip in (0, 1):
                rows["chip"].append(chip)
                rows["timestamp_ns"].append(k * PERIOD)
                rows["dev.busy"].append(round(k * PERIOD * SHARES[(host, chip)]))
        pq.write_table(
            pa.table(
                {
                    "chip": pa.array(rows["chip"], pa.int64()),
                    "timestamp_ns": pa.array(rows["timestamp_ns"], pa.int64()),
                    "dev.busy": pa.array(rows["dev.busy"], pa.uint64()),
                }
            ),
            part / "part-0.parquet",
        )
    (d / "topology.csv").write_text("host,rack\nh0,r0\nh1,r1\n")
    return d


def test_the_compiler_makes_a_share_a_mean_over_chips(capture):
    cat = load_catalog(capture / "cat", generation=None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    assert cat.graph.metrics["dev.busy_share"].ir.degree == 0  # a ratio of totals: device-seconds / device-seconds
    assert cat.graph.metrics["dev.busy_devices"].ir.degree == 1  # a total: adds across devices


def test_chip_host_rack_and_fleet_levels_are_device_seconds_shares(capture, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["analyze", str(capture / "counters"), "--catalog", str(capture / "cat"), "--generation", "devs"]
    assert main(args + ["--topology", str(capture / "topology.csv"), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    rep = json.loads((out / "report.json").read_text())
    chips = {(c["host"], c["chip"]): c["metrics"] for c in rep["per_chip"]}
    for key, share in SHARES.items():
        assert chips[key]["dev.busy_share"] == pytest.approx(share * 100, rel=1e-12)
        assert chips[key]["dev.busy_devices"] == pytest.approx(share, rel=1e-12)
    levels = {lv: {n["node"]: n["metrics"] for n in nodes} for lv, nodes in rep["fleet"]["levels"].items()}
    assert levels["host"]["h0"]["dev.busy_share"] == pytest.approx(37.5, rel=1e-12)
    assert levels["host"]["h1"]["dev.busy_share"] == pytest.approx(55.0, rel=1e-12)
    assert levels["rack"]["r1"]["dev.busy_share"] == pytest.approx(55.0, rel=1e-12)
    assert levels["fleet"]["fleet"]["dev.busy_share"] == pytest.approx(46.25, rel=1e-12)
    assert levels["fleet"]["fleet"]["dev.busy_devices"] == pytest.approx(1.85, rel=1e-12)  # 0.5+0.25+1+0.1 devices
    assert rep["metrics"]["dev.busy_share"]["value"] == pytest.approx(46.25, rel=1e-12)  # the report's server level


def test_the_rollup_sql_gives_the_same_shares(capture):
    duckdb = pytest.importorskip("duckdb")
    from perfonto.codegen.sql import SqlSource, dump_source
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    graph = load_catalog(capture / "cat", generation=None, cache=False).graph
    con = duckdb.connect()
    topo = {"host": ["h0", "h0", "h1", "h1"], "chip": [0, 1, 0, 1], "rack": ["r0", "r0", "r1", "r1"]}
    topo["pod"] = ["p0"] * 4
    con.register("topology", pa.table(topo))
    source, _ = dump_source(str(capture / "counters"))
    res = con.sql(generate_rollup_sql(graph, SqlSource(source), topology="topology")).df().set_index(["level", "node"])
    want = {("host", "h0"): 37.5, ("host", "h1"): 55.0, ("rack", "r1"): 55.0, ("fleet", "fleet"): 46.25}
    want |= {("chip", f"{h}/{c}"): s * 100 for (h, c), s in SHARES.items()}
    for key, v in want.items():
        assert res.loc[key, "dev.busy_share"] == pytest.approx(v, rel=1e-9), key
    assert np.isclose(res.loc[("fleet", "fleet"), "dev.busy_devices"], 1.85, rtol=1e-9)
