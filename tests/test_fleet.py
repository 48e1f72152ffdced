"""Fleet scale (issue 14): the embedded engine in pieces equals the in-memory path; a partitioned fleet
with chips numbered per host gives one row per (host, chip, window), rollups equal to the generator's
ground truth and the injected slow chips among the top outliers; topology and fleet errors are clear."""

import json
import shutil
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fleet_data import PERIOD_NS, dirty_fleet
from perfonto.analysis.bottleneck import analyse
from perfonto.analysis.engine import evaluate_capture
from perfonto.analysis.evaluate import evaluate_windows
from perfonto.analysis.fleet import TOP_OUTLIERS
from perfonto.analysis.validate import truth_table
from perfonto.cli import main
from perfonto.codegen.python_evaluator import generate, load
from perfonto.emulator.fleet import FleetSpec, generate_fleet, parse_fleet
from perfonto.emulator.partition import node_truth
from perfonto.capture.dump_scan import plan_dump
from perfonto.capture.topology import TopologyError, read_topology
from perfonto.metrics.windows import DumpError, prepare, read_counters


@pytest.fixture(scope="module")
def evaluator(library):
    return load(generate(library))


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    m = ~np.isnan(b)
    return float(np.max(np.abs(a[m] - b[m]) / np.maximum(np.abs(b[m]), 1e-300))) if m.any() else 0.0


def test_pieces_equal_the_in_memory_path(tmp_path, library, evaluator):
    src = dirty_fleet(tmp_path, library.generation)
    dump = read_counters(src, library.generation, sample_period_ns=PERIOD_NS)
    ev = evaluate_windows(library, evaluator, prepare(dump, library.generation), dump)
    res = evaluate_capture(
        library,
        evaluator,
        plan_dump(src, library.generation, sample_period_ns=PERIOD_NS),
        tmp_path / "metrics",
        chunk_rows=64,
    )  # 32 samples a piece: pieces cross row groups
    got = res.evaluation
    assert list(got.hosts) == list(ev.hosts) and list(got.chips) == list(ev.chips) == [0, 1, 0, 1, 0, 1]
    t = pq.read_table(tmp_path / "metrics").to_pandas().sort_values(["window", "host", "chip"])
    W, C = ev.windows.interval.shape
    for name in library.metrics:  # window values: bit for bit
        if library.metrics[name].axes:
            continue
        col = np.array([np.nan if v is None else v for v in t[name]], float).reshape(W, C)
        assert np.array_equal(col, ev.window[name], equal_nan=True), name
    worst = max(max(_rel(got.per_chip[n], ev.per_chip[n]), _rel(got.server[n], ev.server[n])) for n in library.metrics)
    assert worst <= 1e-12  # only the order of the floating-point sums differs
    assert got.nulls == ev.nulls and set(got.nulls) >= {"mxu.utilization", "power.temperature_mean", "dma.bandwidth"}
    assert all(abs(got.coverage[k] - ev.coverage[k]) < 1e-12 for k in ev.coverage) and min(ev.coverage.values()) < 1
    a, b = analyse(library, ev), analyse(library, got, checks=res.checks)
    assert (a.violation_counts, a.tree_violations, a.bottleneck) == (
        b.violation_counts,
        b.tree_violations,
        b.bottleneck,
    )
    assert [vars(v) for v in a.violations] == [vars(v) for v in b.violations]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("fleet")
    truth = generate_fleet(sohu, FleetSpec(8, 4), out / "data", duration_s=0.4, sample_period_s=2e-3, warmup_steps=100)
    assert (
        main(
            [
                "analyze",
                str(out / "data" / "counters"),
                "--topology",
                str(out / "data" / "topology.csv"),
                "--out",
                str(out / "run"),
                "--json",
            ]
        )
        == 0
    )
    return out, truth, json.loads((out / "run" / "report.json").read_text())


def _rollups_checked_against_truth(f: dict, truth: dict, generation) -> int:
    """How many (level, node, metric) rollups of the report's fleet section ``f`` equal the emulator's
    truth over that node's chips (rel 2e-4); a metric whose truth is undefined or 0 there is skipped."""
    checked = 0
    for level in ("host", "rack", "pod", "fleet"):
        for node in f["levels"][level]:
            chips = [(c["host"], c["chip"]) for c in f["chips"] if level == "fleet" or c[level] == node["node"]]
            for metric, fn in truth_table(generation, node_truth(truth, chips)).items():
                value = node["metrics"].get(metric)
                try:
                    want = fn()
                except (KeyError, ZeroDivisionError):
                    continue
                if value is None or not np.isfinite(want) or want == 0:
                    continue
                assert value == pytest.approx(want, rel=2e-4), (level, node["node"], metric)
                checked += 1
    return checked


def test_fleet_rows_and_rollups(fleet, library):
    out, truth, rep = fleet
    t = pq.read_table(out / "run" / "metrics").to_pandas()
    W = 200
    assert len(t) == 8 * 4 * W and not t.duplicated(["host", "chip", "window"]).any()  # chips 0..3 on every host
    assert sorted(t["chip"].unique()) == [0, 1, 2, 3] and t["host"].nunique() == 8
    f = rep["fleet"]
    assert [n["node"] for n in f["levels"]["rack"]] == ["r00", "r01"] and f["levels"]["fleet"][0]["chips"] == 32
    assert _rollups_checked_against_truth(f, truth, library.generation) > 8 * 30
    assert (
        rep["engine"] == "embedded" and f["spread"]["mxu.utilization"]["max"] >= f["spread"]["mxu.utilization"]["p99"]
    )


def test_fleet_outliers_name_the_slow_chips_the_hot_rack_and_the_throttled_host(fleet):
    _, truth, rep = fleet
    f = rep["fleet"]
    slow = {tuple(s) for s in truth["slow_chips"]}
    assert len(slow) == 2
    for metric in ("mxu.utilization", "topdown.compute_bound"):
        top = {(o["host"], o["chip"]) for o in f["outliers"][metric]["high"][: len(slow)]}
        assert top == slow, (metric, top)
        assert all(o["rack"] for o in f["outliers"][metric]["high"])
    hot = set(truth["hot_racks"])
    assert hot and {o["rack"] for o in f["outliers"]["power.temperature_mean"]["high"]} <= hot
    # half the fleet is hot here, so no chip stands out by score: the racks' rollups show it (the emulator
    # runs the hot rack's hosts 15 degC above the others' ambient)
    temp = {n["node"]: n["metrics"]["power.temperature_mean"] for n in f["levels"]["rack"]}
    assert min(temp[r] for r in hot) - max(t for r, t in temp.items() if r not in hot) > 10
    # ... and the rack rule names it (analysis.fleet_nodes); the slow chips and the throttled host, faults
    # of one chip or one host, name no rack
    (named,) = f["nodes_out"]["power.temperature_mean"]["rack"]
    assert named["node"] in hot and named["relative"] > 0.3 and named["chips"] == 16
    assert set(f["nodes_out"]) <= {"power.temperature_mean", "power.temperature_peak"}
    low = f["outliers"]["c2c.bandwidth_utilization"]["low"]
    assert {o["host"] for o in low[:4]} == {truth["throttled_links"][0][0]}  # the whole host waits on its slow ring
    # the lists hold the farthest TOP_OUTLIERS (every one here); the spread says how many stand out in all (a
    # new user saw 3 of ~12 in the terminal, and only 5 in report.json)
    counts = f["spread"]["c2c.bandwidth_utilization"]["stand_out"]
    assert counts["low"] >= 6 and len(low) == min(TOP_OUTLIERS, counts["low"])


def test_leader_counted_tokens_spread_over_the_hosts(fleet):
    """Tokens are counted by each tensor-parallel group's leader chip only: spread over the hosts'
    rollups, not over 32 chips of which 24 count none (a p50 of 0 tok/s before). The throttled host
    finished no step in this 0.4 s run: it counted no tokens, is named in a note and left out of that
    spread."""
    _, truth, rep = fleet
    f = rep["fleet"]
    throttled = truth["throttled_links"][0][0]
    tps = f["spread"]["tokens_per_second"]
    assert (tps["chips"], tps["over"], f["spread"]["mfu"]["chips"]) == (7, "hosts", 32) and tps["p50"] > 0
    others = [n["metrics"]["tokens_per_second"] for n in f["levels"]["host"] if n["node"] != throttled]
    assert tps["p50"] == pytest.approx(float(np.median(others)))
    assert any("counted no tokens, steps or requests over the run" in n and throttled in n for n in rep["notes"])


def test_rollups_of_rollups_are_exact(fleet):
    _, _, rep = fleet
    f = rep["fleet"]["levels"]
    racks = {n["node"]: n["metrics"]["tokens_per_second"] for n in f["rack"]}
    hosts = {n["node"]: n["metrics"]["tokens_per_second"] for n in f["host"]}
    place = {c["host"]: c["rack"] for c in rep["fleet"]["chips"]}
    for rack, v in racks.items():
        assert v == pytest.approx(sum(x for h, x in hosts.items() if place[h] == rack), rel=1e-12)
    assert f["fleet"][0]["metrics"]["tokens_per_second"] == pytest.approx(sum(racks.values()), rel=1e-12)


@pytest.mark.parametrize(
    "text, error",
    [
        ("host,rack\nh0,\n", "row 1: column `rack` is empty"),
        ("host,rack,zone\nh0,r0,z\n", "row 1: column `zone` is not a topology column"),
        ("host,chip,rack\nh0,x,r0\n", "row 1: column `chip` is 'x'"),
        ("host,rack\nh0,r0\nh0,r1\n", "row 2: column `host`: host `h0` is placed twice"),
    ],
)
def test_bad_topology_files_name_row_and_column(tmp_path, text, error):
    p = tmp_path / "topo.csv"
    p.write_text(text)
    with pytest.raises(TopologyError) as e:
        read_topology(p)
    assert str(e.value).startswith(f"{p}: ") and error in str(e.value)


def test_a_placed_host_missing_one_chip_is_named_with_the_chips_it_has(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("host,chip,rack\nh001,0,r0\nh001,2,r0\n")
    with pytest.raises(TopologyError, match=r"no row places host `h001` chip 1 .*the file places chips 0, 2 of it"):
        read_topology(p).of("h001", 1)


def test_yaml_topology_and_unknown_host(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("h000: {rack: r0, pod: p0}\nh001: {rack: r0}\n")
    topo = read_topology(p)
    assert topo.of("h000", 3) == ("r0", "p0") and topo.of("h001", 0) == ("r0", None)
    with pytest.raises(TopologyError, match=r"column `host`: no row places host `h002` chip 1.*did you mean"):
        topo.of("h002", 1)


def test_cli_unknown_host_and_mixed_generations_are_one_json_error(fleet, tmp_path, capsys):
    out, _, _ = fleet
    topo = tmp_path / "t.csv"
    topo.write_text("host,rack\nh000,r0\n")
    code = main(
        ["analyze", str(out / "data" / "counters"), "--topology", str(topo), "--out", str(tmp_path / "o"), "--json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert (
        code == 1 and doc["ok"] is False and "no row places host `h001`" in doc["error"] and str(topo) in doc["error"]
    )
    mixed = tmp_path / "mixed"
    for host, gen in (("a", "sohu"), ("b", "caelius")):
        t = pq.read_table(out / "data" / "counters" / "host=h001" / "part-0.parquet")
        meta = json.loads(t.schema.metadata[b"perfonto"]) | {"generation": gen}
        (mixed / f"host={host}").mkdir(parents=True)
        pq.write_table(
            t.replace_schema_metadata({b"perfonto": json.dumps(meta)}), mixed / f"host={host}" / "part-0.parquet"
        )
    with pytest.raises(
        DumpError, match=r"host=b/part-0.parquet: written for generation `caelius`, but .*host=a/part-0.parquet"
    ):
        plan_dump(mixed, library_generation(out))
    assert main(["analyze", str(mixed), "--engine", "embedded", "--out", str(tmp_path / "o2"), "--json"]) == 1
    assert "a dump holds one generation" in json.loads(capsys.readouterr().out)["error"]


def library_generation(out):
    from perfonto.ontology import load_generation

    return load_generation("sohu")[0]


def test_parse_fleet():
    assert parse_fleet("16x8") == (16, 8)
    for bad in ("16", "0x8", "ax8", "4x"):
        with pytest.raises(ValueError, match="HOSTSxCHIPS"):
            parse_fleet(bad)
    assert main(["emulate", "--fleet", "4by8", "--out", "x", "--json"]) == 2


def test_rollup_sql_equals_the_report(fleet, library):
    """The generated rollup query (DuckDB) gives the report's rollups at every level."""
    import pyarrow as pa

    from perfonto.codegen.sql import SqlSource, dump_source
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    duckdb = pytest.importorskip("duckdb")
    out, _, rep = fleet
    chips = rep["fleet"]["chips"]
    con = duckdb.connect()
    con.register("topology", pa.table({k: [c[k] for c in chips] for k in ("host", "chip", "rack", "pod")}))
    source, host = dump_source(str(out / "data" / "counters"))
    res = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topology")).df()
    # the emulator's own topology.csv (one row per host, its chip empty): a data engineer's DuckDB load of
    # it failed ("Table t does not have a column named chip") while the guide calls the chip optional
    con.sql(f"CREATE TABLE topo AS SELECT * FROM read_csv('{out / 'data' / 'topology.csv'}')")
    own = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topo")).df()
    key = ["level", "node"]
    import pandas.testing as pdt

    pdt.assert_frame_equal(  # the same rows, up to DuckDB's parallel summation order
        own.sort_values(key).reset_index(drop=True), res.sort_values(key).reset_index(drop=True), rtol=1e-12
    )
    assert sorted(res.level.unique()) == ["chip", "fleet", "host", "pod", "rack"] and len(res) == 32 + 8 + 2 + 1 + 1
    compared = 0
    for level in ("host", "rack", "pod", "fleet"):
        for node in rep["fleet"]["levels"][level]:
            row = res[(res.level == level) & (res.node == node["node"])].iloc[0]
            assert row.chips == node["chips"]
            for m, v in node["metrics"].items():
                if m in res.columns and v is not None:
                    assert row[m] == pytest.approx(v, rel=1e-9, abs=1e-12), (level, node["node"], m)
                    compared += 1
    assert compared > 4 * 60
    chip_rows = res[res.level == "chip"].set_index("node")
    for c in rep["per_chip"]:
        for m, v in c["metrics"].items():
            if m in chip_rows.columns and v is not None:
                assert chip_rows.loc[f"{c['host']}/{c['chip']}", m] == pytest.approx(v, rel=1e-9, abs=1e-12), m


def test_the_fleet_folder_itself_is_a_capture(fleet, tmp_path, capsys):
    """``perfonto analyze F`` on the folder ``perfonto emulate --fleet`` writes reads ``F/counters`` with
    ``F/topology.csv`` (said on stderr) and gives the report of the explicit form; ``--topology`` still
    wins. It read ``topology.csv`` as a counter part before ("no `chip` column")."""
    out, _, rep = fleet
    assert main(["analyze", str(out / "data"), "--out", str(tmp_path / "f"), "--json"]) == 0
    got = capsys.readouterr()
    doc = json.loads(got.out)
    assert f"the fleet's topology {out / 'data' / 'topology.csv'} is used" in got.err
    for key in ("fleet", "per_chip", "headline", "null_windows", "bounds_violations", "engine"):
        assert doc[key] == rep[key], key
    topo = tmp_path / "t.csv"
    topo.write_text("host,rack\nh000,r0\n")
    assert main(["analyze", str(out / "data"), "--topology", str(topo), "--out", str(tmp_path / "g"), "--json"]) == 1
    assert "no row places host `h001`" in json.loads(capsys.readouterr().out)["error"]


def test_a_part_without_a_column_the_others_have_is_named(fleet, tmp_path, capsys):
    """A host whose part lacks a register column the other parts hold is refused up front, naming the
    part, the column and a part that has it; it failed mid-read with pyarrow's KeyError (exit 2, no file
    named; a Python traceback under --engine spark)."""
    import shutil

    out, _, _ = fleet
    d = tmp_path / "d"
    shutil.copytree(out / "data" / "counters", d)
    part = d / "host=h001" / "part-0.parquet"
    t = pq.read_table(part)
    pq.write_table(t.drop_columns(["mxu.busy_cycles"]), part)
    with pytest.raises(DumpError, match=r"host=h001/part-0.parquet: no column `mxu.busy_cycles`, which .*host=h000"):
        plan_dump(d, library_generation(out))
    assert main(["analyze", str(d), "--out", str(tmp_path / "o"), "--json"]) == 1
    assert "every part of a dump holds the same signal columns" in json.loads(capsys.readouterr().out)["error"]


def _fleet_copy(fleet, tmp_path, name="F"):
    import shutil

    out, _, _ = fleet
    f = tmp_path / name
    shutil.copytree(out / "data", f)
    return f


def _analyze_error(args, capsys) -> str:
    assert main(["analyze", *args, "--json"]) == 1
    return json.loads(capsys.readouterr().out)["error"]


def test_broken_fleet_folders_are_named_not_read_as_something_else(fleet, tmp_path, capsys):
    """A fleet folder whose topology.csv is a folder or a dangling link, whose counters/ is missing, or
    that also holds a run's counters.parquet: one clear error each (they were read as a plain dump
    without the topology, with topology.csv as a counter part, or as a run folder)."""
    import shutil

    f = _fleet_copy(fleet, tmp_path, "dir")
    (f / "topology.csv").unlink()
    (f / "topology.csv").mkdir()
    err = _analyze_error([str(f), "--out", str(tmp_path / "o1")], capsys)
    assert err == f"{f / 'topology.csv'}: is a folder; a topology is a file (.csv, .parquet or .yaml)"
    f = _fleet_copy(fleet, tmp_path, "link")
    (f / "topology.csv").unlink()
    (f / "topology.csv").symlink_to(tmp_path / "nowhere.csv")
    assert "a link that leads to no file" in _analyze_error([str(f), "--out", str(tmp_path / "o2")], capsys)
    f = _fleet_copy(fleet, tmp_path, "nocounters")
    shutil.rmtree(f / "counters")
    err = _analyze_error([str(f), "--out", str(tmp_path / "o3")], capsys)
    assert err.endswith("these are a topology's columns: give that file with --topology and point at the counter dump")
    f = _fleet_copy(fleet, tmp_path, "countersfile")
    shutil.rmtree(f / "counters")
    (f / "counters").write_text("not a folder\n")
    err = _analyze_error([str(f), "--out", str(tmp_path / "o5")], capsys)
    assert err.startswith(f"{f / 'counters'}: is not a folder; a fleet folder holds its dump as counters/host=")
    d = tmp_path / "dumpdir"  # a topology kept among a dump's parts is named, not read as a part lacking 59 columns
    shutil.copytree(fleet[0] / "data" / "counters", d)
    shutil.copy(fleet[0] / "data" / "topology.csv", d)
    err = _analyze_error([str(d), "--out", str(tmp_path / "o6")], capsys)
    assert err.startswith(f"{d / 'topology.csv'}: holds no signal column (its columns: chip, host, pod, rack)")
    f = _fleet_copy(fleet, tmp_path, "both")
    shutil.copy(next((f / "counters").rglob("*.parquet")), f / "counters.parquet")
    err = _analyze_error([str(f), "--out", str(tmp_path / "o4")], capsys)
    assert "holds both a run's counters.parquet and a fleet's counters/" in err


def test_hosts_the_topology_places_without_rows_and_engine_memory_are_noted(fleet, tmp_path, capsys):
    import shutil

    f = _fleet_copy(fleet, tmp_path)
    shutil.rmtree(f / "counters" / "host=h001")
    rows = (f / "topology.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "host,chip,rack,pod"  # chip 7 of h002, placed on its own, has no rows (h002 has chips 0-3)
    text = "\n".join(rows + ["h999,,r09,p9", "h002,7,r00,p0"])
    (f / "topology.csv").write_text(text + "\n", encoding="utf-8")
    assert main(["analyze", str(f), "--engine", "memory", "--out", str(tmp_path / "o"), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    want = "places 2 host(s) and 1 chip(s) the dump has no rows for: h001, h999, h002/7"
    assert any(want in n for n in notes), notes
    assert any(
        n.startswith("--engine memory: the topology's fleet rollups are evaluated by the embedded") for n in notes
    )


def test_a_binary_topology_is_refused_in_printable_text(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(TopologyError) as exc:
        read_topology(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: not a readable topology file (") and "write a header `host,rack,pod`" in msg
    assert all(" " <= ch <= "~" for ch in msg.replace(str(p), ""))


def test_a_damaged_page_names_the_part(fleet, tmp_path, capsys):
    """A part whose footer reads but one of whose pages does not decode (bytes zeroed in a zstd frame) is
    refused naming the part and what to do; it said only the dump's folder (and --engine spark printed
    the executor's Python traceback)."""
    f = _fleet_copy(fleet, tmp_path)
    part = f / "counters" / "host=h003" / "part-0.parquet"
    md = pq.ParquetFile(part).metadata
    col = next(
        md.row_group(0).column(c)
        for c in range(md.num_columns)
        if md.row_group(0).column(c).path_in_schema.startswith("mxu.busy_cycles")
    )
    raw = bytearray(part.read_bytes())
    raw[col.data_page_offset + 20 : col.data_page_offset + 200] = bytes(180)
    part.write_bytes(bytes(raw))
    err = _analyze_error([str(f), "--out", str(tmp_path / "o")], capsys)
    assert err.startswith(f"{part}: cannot be read (") and err.endswith(
        "the file is damaged: copy or write it again, or leave it out"
    )


def test_fleet_text_report_sits_before_the_outputs_line_and_marks_extremes(
    fleet, tmp_path, capsys, library, monkeypatch
):
    """The text report of a fleet: its fleet tables print before the ``outputs:`` line that closes every
    report, and a column whose node value is an extreme of its chips' says so (the tables are otherwise
    ratios of totals, which an extreme is not): ``power.temperature_mean`` (a gauge combined across chips
    by max) in the shipped layout, and ``power.temperature_peak`` (``rollup max``) added to it."""
    from rich.console import Console

    import perfonto.commands.analyze as analyze_cmd
    import perfonto.report as text_report

    # the console a pipe gets (no colour, 120 columns), whatever FORCE_COLOR or COLUMNS say here
    monkeypatch.setattr(analyze_cmd, "stdout", lambda: Console(highlight=False, width=120, color_system=None))
    out, _, _ = fleet
    argv = ["analyze", str(out / "data" / "counters"), "--topology", str(out / "data" / "topology.csv")]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 0
    text = capsys.readouterr().out
    assert "Fleet — per rack" in text and "outputs:" in text
    assert text.index("Fleet — per rack") < text.index("Spread across chips") < text.rindex("outputs:")
    rack = text[text.index("Fleet — per rack") : text.index("Spread across chips")]
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    first = (doc.get("drilldown") or [{}])[0].get("metric")
    # the largest level-1 stall and the drill-down past the thresholds differ here: the text says which is which
    assert first and first != doc["bottleneck"] and "the largest level-1 stall" in " ".join(text.split())
    nodes = text[text.index("Racks and pods that stand out") :]
    line = next(ln for ln in nodes.splitlines() if "power.temperature_mean" in ln)
    assert "degC (+15.0" in line and "%" not in line  # a difference in degC: a percent of a Celsius reading is not
    more = [ln for ln in text[text.index("Spread across chips") :].splitlines() if "more" in ln]
    assert more  # the spread table says how many chips it does not list
    # power.temperature_mean reads a gauge combined across chips by max: its rack value is the hottest chip's
    assert "(max) and (min) columns: the extreme over those chips" in " ".join(rack.split())
    assert "(max)" in "".join(rack.split())
    assert "(max)" not in text[: text.index("Fleet — per")]  # the tables before the fleet's are as they were
    hosts = text[text.index("Fleet — per host") : text.index("Spread across chips")]
    for c in doc["fleet"]["chips"]:  # each host row says its rack and pod (a new user had only report.json)
        assert re.search(rf"│ {c['host']}\s+│ {c['rack']}\s+│ {c['pod']}\s+│", hosts), c
    assert "% (>" in text[text.index("Spread across chips") :]  # the share past a threshold names the threshold

    layout = text_report.report_layout

    def with_peak(graph, ev):
        model = layout(graph, ev)
        model.fleet = [*model.fleet, "power.temperature_peak"]
        return model

    monkeypatch.setattr(text_report, "report_layout", with_peak)
    assert library.metrics["power.temperature_peak"].rollup == "max"
    assert main([*argv, "--out", str(tmp_path / "r2")]) == 0
    text = capsys.readouterr().out
    rack = text[text.index("Fleet — per rack") : text.index("Spread across chips")]
    assert "(max) and (min) columns: the extreme over those chips" in " ".join(rack.split())
    assert "(max)" in rack.replace("┃", "").replace(" ", "")


def test_topology_cells_are_names(tmp_path):
    """A Parquet float column names rack ``1``, not ``1.0``, and a NaN is an empty cell (a breaker got a
    rack named ``nan``); a YAML list or flag where a name belongs is refused by row and column."""
    import pyarrow as pa

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"host": ["h0", "h1"], "rack": [1.0, 2.0], "pod": [float("nan"), 3.0]}), p)
    assert read_topology(p).place == {("h0", None): ("1", None), ("h1", None): ("2", "3")}
    pq.write_table(pa.table({"host": ["h0"], "rack": [float("nan")]}), p)
    with pytest.raises(TopologyError, match="row 1: column `rack` is empty"):
        read_topology(p)
    for text, col in (("h0: {rack: [1, 2]}\n", "rack"), ("h0: {rack: r0, pod: true}\n", "pod")):
        y = tmp_path / "t.yaml"
        y.write_text(text)
        with pytest.raises(TopologyError, match=f"row 1: column `{col}` is .*; a {col} is one name"):
            read_topology(y)


@pytest.mark.parametrize("col, label", [("rack", "(no rack)"), ("pod", "(no pod)")])
def test_a_rack_or_pod_named_as_the_unplaced_chips_is_refused(tmp_path, col, label):
    """The reports call the chips a topology places in no pod ``(no pod)``: a pod named so would merge with
    them in every table (left alone last stop), so it is refused by row and column."""
    row = {"host": "h0", "rack": "r0", "pod": "p0"} | {col: label}
    t = tmp_path / "t.csv"
    t.write_text("host,rack,pod\n" + ",".join(f'"{row[k]}"' for k in ("host", "rack", "pod")) + "\n")
    with pytest.raises(
        TopologyError, match=rf"row 1: column `{col}` is '{re.escape(label)}'.*name the {col} otherwise"
    ):
        read_topology(t)


BAD_TOPOLOGIES = {  # file name: (its text, what the refusal says)
    "inf.csv": ("host,chip,rack\nh0,inf,r0\n", "row 1: column `chip` is inf; a chip is a non-negative integer"),
    "dup.csv": ("host,rack,rack\nh0,r0,r1\n", "column `rack` appears twice in the header"),
    "twice.yaml": ("h0: {rack: r0}\nh0: {rack: r9}\n", "twice.yaml:2: `h0` is given twice in one mapping"),
    "inner.yaml": ("h0: {rack: r0, host: h1}\n", "host `h0`: its mapping names another host `h1`"),
    "intkey.yaml": ("- {host: h0, rack: r0, 1: a}\n", "row 1: column `1` is not a topology column"),
    "space.csv": ('host,rack,pod\nh0,r0,"(No pod) "\n', "column `pod` is '(No pod) ', which reads as '(no pod)'"),
}


@pytest.mark.parametrize("name", BAD_TOPOLOGIES)
def test_topology_that_would_be_read_wrong_is_refused(tmp_path, name):
    """A breaker's topology files: a chip of inf crashed; a column or host given twice, a host that its
    mapping renames, and a pod that prints as the unplaced chips' label were read silently."""
    text, message = BAD_TOPOLOGIES[name]
    t = tmp_path / name
    t.write_text(text)
    with pytest.raises(TopologyError, match=re.escape(message)):
        read_topology(t)


def test_a_pod_named_na_is_named_so(tmp_path):
    """Only an empty cell is no pod: `NA`, `null` or `N/A` are names (a CSV reader's null words made them none)."""
    t = tmp_path / "t.csv"
    t.write_text("host,rack,pod\nh0,r0,NA\nh1,null,N/A\n")
    assert read_topology(t).place == {("h0", None): ("r0", "NA"), ("h1", None): ("null", "N/A")}


def test_a_rack_in_two_pods_is_noted(fleet, tmp_path):
    """A topology that puts one rack in two pods (a typo in the pod column?) is analysed, with a note."""
    out, _, _ = fleet
    topo = tmp_path / "t.csv"
    rows = ["host,rack,pod"] + [f"h{h:03d},r{h // 4:02d},p{0 if h in (0, 1, 4, 5) else 1}" for h in range(8)]
    topo.write_text("\n".join(rows) + "\n")
    assert main(["analyze", str(out / "data" / "counters"), "--topology", str(topo), "--out", str(tmp_path / "o")]) == 0
    notes = json.loads((tmp_path / "o" / "report.json").read_text())["notes"]
    assert any("puts 2 rack(s) in more than one pod: r00 in p0, p1; r01 in p0, p1" in n for n in notes), notes


def test_a_fleet_of_few_steps_says_its_token_figures_are_step_quantised(fleet, tmp_path, capsys):
    """A data engineer's 3x4 fleet of 1 s: one host finished 1 forward pass and the others 2, so the rack
    table showed tokens/s −50 % for it (MFU −37 %) with no word; the emulated fleet's ground truth says how
    many steps each host finished, and the report says what that does to its token figures."""
    from perfonto.analysis.capture import fleet_steps

    out, truth, _ = fleet
    steps = {h: v["truth"]["steps"] for h, v in truth["hosts"].items()}
    assert fleet_steps(truth) == {"fleet_steps": steps} and max(steps.values()) < 20
    assert main(["analyze", str(out / "data"), "--out", str(tmp_path / "f")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "note: the hosts finished few forward passes (" in text
    notes = json.loads((tmp_path / "f" / "report.json").read_text())["notes"]  # in report.json too (a review)
    assert any(n.startswith("the hosts finished few forward passes") for n in notes)
    low = min(steps.values())
    assert f"uncertain by up to {f'about {100 / low:.0f} %' if low else 'entirely'}," in text
    assert fleet_steps({"hosts": {"h0": {"truth": {"steps": True}}}}) is None  # not a count


def test_fleet_messages_name_the_host_of_a_chip(fleet, tmp_path, capsys):
    """Every host numbers its chips from 0: a data engineer's fleet report said "waiting for chip 1", tied
    findings "alike on chips 0, 0–2, 2–3", and a bound violation "on chip 2" (report.json without a host)
    for one of three chip 2s. Each now names the host."""
    from types import SimpleNamespace

    from perfonto.analysis.findings import _tied_text
    from perfonto.analysis.headline import PEER_WAIT, headline
    from perfonto.metrics.catalog import load_catalog

    graph = load_catalog().graph
    hosts = np.array(["h000"] * 4 + ["h001"] * 4, object)
    wait = np.array([20.0, 2.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0])  # everyone waits for h000's chip 1
    ev = SimpleNamespace(
        chips=np.array([0, 1, 2, 3] * 2), hosts=hosts, per_chip={PEER_WAIT: wait}, server={PEER_WAIT: np.float64(18.0)}
    )
    head = headline(graph, ev, SimpleNamespace(drilldown=[], bottleneck=None))
    assert head["chip"] == 1 and head["host"] == "h000"
    assert head["message"].startswith("waiting for chip h000/1 at collectives")
    ev.per_chip = {PEER_WAIT: np.array([20.0, 2.0, 20.0, 20.0, 20.0, 20.0, 20.0, 3.0])}  # a slow chip on each host
    head = headline(graph, ev, SimpleNamespace(drilldown=[], bottleneck=None))
    assert head["message"].startswith("waiting for chip h000/1, h001/3 at collectives")  # a new user's fleet: one named
    assert head["waited_on"] == ["h000/1", "h001/3"]
    assert _tied_text(ev, [0, 2, 3, 4, 5, 6]) == "h000/0, h000/2–3, h001/0–2"
    assert _tied_text(SimpleNamespace(chips=ev.chips[:4], hosts=None), [0, 2, 3]) == "0, 2–3"
    out, truth, rep = fleet
    d = tmp_path / "c"
    shutil.copytree(out / "data" / "counters", d)
    part = sorted(d.glob("host=*/*.parquet"))[1]
    host = part.parent.name.removeprefix("host=")
    t = pq.read_table(part)
    chip = np.asarray(t["chip"])
    occ = t.column("sram.occupancy").combine_chunks()
    vals = occ.values.to_numpy(zero_copy_only=False).reshape(len(t), -1).copy()
    vals[chip == 2] = vals[chip == 2] * 10 + 10**6  # past the SRAM's capacity: sram.occupancy_ratio > 100 %
    new = pa.FixedSizeListArray.from_arrays(pa.array(vals.reshape(-1), occ.type.value_type), occ.type.list_size)
    pq.write_table(t.set_column(t.column_names.index("sram.occupancy"), "sram.occupancy", new), part)
    assert main(["analyze", str(d), "--out", str(tmp_path / "o")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "sram.occupancy_ratio = " in text and f"on chip {host}/2, window" in text
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    assert {v["host"] for v in doc["bounds_violations"]["first"]} == {host}


def test_emulate_defaults_fit_a_small_fleet_and_a_bad_split_names_the_fleet_option(tmp_path, capsys):
    """`emulate --fleet 1x1` was refused for the default --slow-chips 2; `--fleet 2x3` suggested `--tp with
    --dp or --pp`, which emulate does not have (a data engineer's trial)."""
    assert main(["emulate", "--fleet", "1x1", "--duration", "50ms", "--out", str(tmp_path / "a"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slow_chips"] == [["h000", 0]]
    assert main(["emulate", "--fleet", "2x3", "--out", str(tmp_path / "b"), "--json"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert "possible tp: 1, 2, 4, 8" in err and "give --fleet 2xN with N one of those" in err and "--dp" not in err
    assert main(["emulate", "--fleet", "1x2", "--slow-chips", "2", "--out", str(tmp_path / "c"), "--json"]) == 2


def test_every_unknown_metric_of_a_list_is_named_at_once(capsys):
    """`--metrics mfuu,hbm.bandwith` named only the first typo."""
    from perfonto.metrics.catalog import UnknownMetric, load_catalog, select_metrics

    graph = load_catalog().graph
    with pytest.raises(UnknownMetric) as e:
        select_metrics(graph, ["mfuu", "mfu", "hbm.bandwith"])
    msg = str(e.value)
    assert msg.startswith("2 names: no metric `mfuu`") and "did you mean `mfu`" in msg and "`hbm.bandwith`" in msg


def test_a_damaged_fleet_ground_truth_does_not_stop_the_analysis(fleet, tmp_path, capsys):
    """The fleet's ground truth is read for its step counts only (a review: a damaged one stopped analyze)."""
    f = _fleet_copy(fleet, tmp_path)
    (f / "ground_truth.json").write_text("{not json")
    assert main(["analyze", str(f), "--out", str(tmp_path / "o"), "--json"]) == 0
    assert not any("few forward passes" in n for n in json.loads(capsys.readouterr().out)["notes"])


def test_rollup_sql_places_a_chip_by_its_own_row_and_reads_a_topology_without_chips(fleet, library):
    """A review: a host's row beside one chip's own row joined twice, doubling that chip in its host's,
    rack's and fleet's totals; '' is an empty chip; DuckDB's query reads a topology without a chip column."""
    import pyarrow as pa

    from perfonto.codegen.sql import SqlSource, dump_source
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    duckdb = pytest.importorskip("duckdb")
    out, _, rep = fleet
    chips = rep["fleet"]["chips"]
    con = duckdb.connect()
    source, host = dump_source(str(out / "data" / "counters"))
    con.register("topology", pa.table({k: [c[k] for c in chips] for k in ("host", "chip", "rack", "pod")}))
    res = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topology")).df()
    first = chips[0]
    hosts = {c["host"]: c for c in chips if c["host"] != first["host"]}  # one row per host, its chip empty
    rows = {k: [c[k] for c in hosts.values()] for k in ("host", "rack", "pod")}
    rows["chip"] = [""] * len(rows["host"])
    for k, v in (("host", first["host"]), ("chip", ""), ("rack", first["rack"]), ("pod", first["pod"])):
        rows[k].append(v)
    for k, v in (("host", first["host"]), ("chip", str(first["chip"])), ("rack", "r-own"), ("pod", first["pod"])):
        rows[k].append(v)
    con.register("topo2", pa.table(rows))
    two = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topo2")).df()
    assert two[two.level == "fleet"].chips.iloc[0] == 32 and two[two.node == "r-own"].chips.iloc[0] == 1
    con.register(
        "topo3", pa.table({k: [c[k] for c in {c["host"]: c for c in chips}.values()] for k in ("host", "rack", "pod")})
    )
    three = con.sql(generate_rollup_sql(library, SqlSource(source, host=host), topology="topo3")).df()
    assert sorted(three.level.unique()) == sorted(res.level.unique()) and len(three) == len(res)
