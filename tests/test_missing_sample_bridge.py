"""A missing sample changes no run total (issue 27, metrics/bridge.py): a counter's running total missing at
samples k … k+m−1 nulls the windows around it (reason "missing sample": their split is unknown), but the
running totals on either side give the increase over the gap, v(k+m) − v(k−1), modulo the counter's width,
so the chip, server and run totals — sums of counts and ratios of totals — equal those of the same dump
without the gap, on every engine: the reference (metrics.levels over metrics.windows.prepare), the memory
engine (`perfonto analyze --engine memory`) and the embedded engine in pieces (`--chunk-rows`), including a
gap that straddles a piece boundary. A gap the running totals cannot bridge (a wrap that may have happened
more than once over it, the end of the run) stays out of the totals, and a note says so.

The dump (hand-built, 2 chips, 13 samples 100 ms apart, so 12 windows over 1.2 s):
  b.busy (64-bit, ns): chip 0 +40 ms a window, chip 1 +60 ms;
  b.ops (16-bit, wraps at 65,536): chip 0 = 1,000·k (+1,000 a window); chip 1 = (42,000 + 2,000·k) mod 65,536
  (+2,000 a window; it wraps between samples 11 (64,000) and 12 (66,000 − 65,536 = 464)).
Gaps (empty cells of b.ops): chip 0 at sample 5 (windows 4, 5 null); chip 1 at samples 9, 10, 11 (windows 8–11
null), bridged from sample 8 (58,000) to sample 12 (464): (464 − 58,000) mod 65,536 = 8,000 = 4 × 2,000, across
the wrap.
Hand-computed run totals (with or without the gaps):
  ops_total: chip 0 12 × 1,000 = 12,000; chip 1 12 × 2,000 = 24,000; server 36,000 events
  ops_rate = ops / busy: chip 0 12,000 / 0.48 s = 25,000 /s; chip 1 24,000 / 0.72 s = 33,333.3 /s;
             server 36,000 / 1.2 s = 30,000 /s
  busy_share = busy / interval: chip 0 0.48 / 1.2 = 0.4; chip 1 0.72 / 1.2 = 0.6; server 1.2 / 1.2 = 1.0
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfonto.analysis.engine import evaluate_capture
from perfonto.analysis.evaluate import evaluate_dump
from perfonto.capture.dump_scan import plan_dump
from perfonto.cli import main
from perfonto.codegen.python_evaluator import generate, load
from perfonto.metrics.catalog import load_catalog

YAML = """\
generation: gap
description: a test generation for missing samples
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: test}}
blocks:
  b:
    description: a block
    clock: core
    signals:
      busy: {kind: counter, unit: s, scale: 1.0e-9, width: 64, description: time the block was busy (raw counts in ns)}
      ops: {kind: counter, unit: event, width: 16OPS_RATE, description: operations completed by the block}
"""
METRICS = """\
metric busy_share [1] = b.busy / interval
  "Busy time over the wall-clock time."
metric ops_total [event] = b.ops
  "Operations completed."
metric ops_rate [event/s] = b.ops / b.busy
  "Operations per second of busy time."
"""
S = 13
OPS = {0: [1000 * k for k in range(S)], 1: [(42_000 + 2000 * k) % 65_536 for k in range(S)]}
BUSY = {0: [40_000_000 * k for k in range(S)], 1: [60_000_000 * k for k in range(S)]}
GAPS = {(0, 5), (1, 9), (1, 10), (1, 11)}
WANT_CHIP = {"ops_total": [12_000, 24_000], "ops_rate": [25_000, 24_000 / 0.72], "busy_share": [0.4, 0.6]}
WANT_SERVER = {"ops_total": 36_000, "ops_rate": 30_000, "busy_share": 1.0}


def _catalog(tmp_path: Path, max_rate: str = "") -> Path:
    d = tmp_path / "cat"
    d.mkdir()
    (d / "gap.yaml").write_text(YAML.replace("OPS_RATE", max_rate))
    (d / "gap.metrics").write_text(METRICS)
    return d


def _dump(tmp_path: Path, name: str, gaps=frozenset()) -> Path:
    p = tmp_path / name
    rows = [
        f"{c},{100_000_000 * k},{BUSY[c][k]},{'' if (c, k) in gaps else OPS[c][k]}" for k in range(S) for c in (0, 1)
    ]
    p.write_text("chip,timestamp_ns,b.busy,b.ops\n" + "\n".join(rows) + "\n")
    return p


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bridge")
    cat = _catalog(tmp)
    graph = load_catalog(cat, None, library=False, cache=False).graph
    return tmp, cat, graph, load(generate(graph))


def _levels(ev) -> tuple[dict, dict]:
    return (
        {m: np.asarray(ev.per_chip[m], dtype=float).tolist() for m in WANT_CHIP},
        {m: float(ev.server[m]) for m in WANT_SERVER},
    )


def _check(chip: dict, server: dict) -> None:
    for m, want in WANT_CHIP.items():
        assert chip[m] == pytest.approx(want, rel=1e-12), m
        assert server[m] == pytest.approx(WANT_SERVER[m], rel=1e-12), m


def test_the_reference_bridges_one_and_several_missing_samples_across_a_wrap(setup):
    tmp, _, graph, ev = setup
    for p in (_dump(tmp, "full.csv"), _dump(tmp, "gaps.csv", GAPS)):
        r = evaluate_dump(graph, ev, p)
        _check(*_levels(r))
    # the windows around the gaps stay null, by reason: chip 0 windows 4 and 5, chip 1 windows 8 to 11
    w = r.window["ops_total"]
    assert np.isnan(w[:, 0]).nonzero()[0].tolist() == [4, 5]
    assert np.isnan(w[:, 1]).nonzero()[0].tolist() == [8, 9, 10, 11]
    assert w[3, 0] == 1000 and w[12 - 1, 0] == 1000 and w[7, 1] == 2000  # the others as they were
    assert r.nulls["ops_total"] == {"missing sample": 6} and r.nulls["ops_rate"] == {"missing sample": 6}
    assert "busy_share" not in r.nulls and r.windows.notes == []


@pytest.mark.parametrize("chunk_rows", [2, 6, 10_000])
def test_the_embedded_engine_bridges_gaps_across_pieces(setup, chunk_rows):
    # 2 chips: chunk_rows 2 -> one window a piece (every gap straddles a piece boundary); 6 -> three windows a
    # piece, boundaries at samples 3, 6, 9, 12, so chip 1's gap (samples 9-11) opens in the piece of windows
    # 6-8 and closes in the one of windows 9-11; 10,000 -> one piece
    tmp, _, graph, ev = setup
    p = _dump(tmp, f"gaps{chunk_rows}.csv", GAPS)
    res = evaluate_capture(graph, ev, plan_dump(str(p), graph.generation), None, chunk_rows=chunk_rows)
    assert res.stats["pieces"] == {2: 12, 6: 4, 10_000: 1}[chunk_rows]
    _check(*_levels(res.evaluation))
    assert res.evaluation.nulls["ops_total"] == {"missing sample": 6}


def _cli(capsys, p, cat, out, *extra) -> dict:
    capsys.readouterr()
    args = ["analyze", str(p), "--catalog", str(cat), "--no-library", "--out", str(out), "--json", *extra]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("engine", [["--engine", "memory"], ["--engine", "embedded", "--chunk-rows", "6"]])
def test_the_cli_engines_give_the_totals_of_the_dump_without_gaps(setup, capsys, engine):
    tmp, cat, _, _ = setup
    doc = _cli(capsys, _dump(tmp, "cli.csv", GAPS), cat, tmp / ("o" + engine[1]), *engine)
    chip = {m: [c["metrics"][m] for c in doc["per_chip"]] for m in WANT_CHIP}
    _check(chip, {m: doc["metrics"][m]["value"] for m in WANT_SERVER})
    assert doc["null_windows"]["ops_total"] == {"missing sample": 6}


def test_a_gap_that_may_hide_several_wraps_or_never_closes_stays_out_and_is_noted(tmp_path, capsys):
    # ops at most 300,000 /s: over one window (0.1 s) at most 30,001 counts, less than the 65,536 of the
    # register; over chip 1's 4-window gap (0.4 s) 120,001: it may have wrapped twice, so it is not bridged.
    # Chip 0's 2-window gap (0.2 s, 60,001 < 65,536) is. And chip 0's last sample is missing too: window 11
    # never closes. Chip 0: windows 0-10 -> 11,000; chip 1: windows 0-7 -> 8 x 2,000 = 16,000 (rate over its
    # busy time there, 8 x 60 ms); the server level: the windows valid on both chips, 0-7 -> 8,000 + 16,000.
    cat = _catalog(tmp_path, ", max_rate: 300000 event/s")
    doc = _cli(capsys, _dump(tmp_path, "amb.csv", GAPS | {(0, 12)}), cat, tmp_path / "o")
    chip = {m: [c["metrics"][m] for c in doc["per_chip"]] for m in ("ops_total", "ops_rate")}
    assert chip["ops_total"] == pytest.approx([11_000, 16_000], rel=1e-12)
    assert chip["ops_rate"] == pytest.approx([11_000 / 0.44, 16_000 / 0.48], rel=1e-12)
    assert doc["metrics"]["ops_total"]["value"] == pytest.approx(24_000, rel=1e-12)
    notes = [n for n in doc["notes"] if n.startswith("b.ops:")]
    assert len(notes) == 2
    assert "window longer than the counter's wrap period over the gap (first: chip 1, closing at sample 12)" in notes[1]
    assert "at the end of the run (it never closes) (first: chip 0, from sample 12)" in notes[0]


def test_a_missing_increment_of_perf_stat_loses_its_window_only(tmp_path, capsys):
    # perf stat -I prints increments; the reader sums them into running totals, skipping a `<not counted>`
    # line's, so the total after it lacks that interval's count: the difference across the gap is the next
    # interval's own count (26 switches at 0.3 s), never the two intervals'. Window 1 (0.1-0.2 s, the lost
    # 43) stays out of the run totals; window 2 counts with its own 26 switches and 99.80 ms of task-clock
    # (it was left out too, which moved the run's rate by what that window held: a new user's perf capture
    # read 273.03/s where the intervals perf printed give 265.08). Over the other 13 intervals:
    # (329 - 43) = 286 switches in (1,649.93 - 84.30) ms of task-clock.
    fix = Path(__file__).parent / "fixtures" / "perf" / "perf-stat-interval.csv"
    p = tmp_path / "nc.csv"
    p.write_text(
        fix.read_text().replace("0.200508350,43,,context-switches", "0.200508350,<not counted>,,context-switches")
    )
    doc = _cli_default(capsys, p, tmp_path / "o", "--format", "perf-stat")
    assert doc["metrics"]["context_switches.per_second"]["value"] == pytest.approx(286 / 1.56563, rel=1e-9)
    note = [n for n in doc["notes"] if n.startswith("task.context_switches")]
    assert len(note) == 1 and "per-interval increments" in note[0] and "counted in the run totals" in note[0]


def _cli_default(capsys, p, out, *extra) -> dict:
    capsys.readouterr()
    assert main(["analyze", str(p), "--out", str(out), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("layout", ["csv", "parquet"])
def test_a_fleet_of_two_hosts_bridges_in_pieces_and_in_the_second_pass(setup, layout):
    # chip 0 on host h0, chip 1 on host h1; the gaps above plus chip 0's last sample, which never closes:
    # chip 0 counts windows 0-10, 11 x 1,000 = 11,000; chip 1 all 12 (its gap bridged), 24,000. The server
    # level takes the windows valid on both chips: window 11 is null on chip 0, and it holds chip 1's bridged
    # 8,000 (windows 8-10 hold 0), so chip 1's bridged run 8-11 is left out whole (a part of it would lose
    # the increase): windows 0-7, 8 x 1,000 + 8 x 2,000 = 24,000, over 8 x (0.04 + 0.06) s = 0.8 s of busy
    # time -> 30,000 /s. The fleet's second pass reads again the pieces holding those windows (the CSV: one
    # piece per host, read whole; the Parquet: row groups of 2 rows, so pieces of 2 windows and chip 1's gap,
    # samples 9-11, across pieces).
    import pyarrow as pa
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    tmp, _, graph, ev = setup
    p = _dump(tmp, f"fleet-{layout}.csv", GAPS | {(0, 12)})
    p.write_text(
        "host,"
        + p.read_text().replace("\n0,", "\nh0,0,").replace("\n1,", "\nh1,1,").split("\n", 1)[0]
        + "\n"
        + p.read_text().replace("\n0,", "\nh0,0,").replace("\n1,", "\nh1,1,").split("\n", 1)[1]
    )
    if layout == "parquet":
        types = {"b.busy": pa.uint64(), "b.ops": pa.uint64(), "chip": pa.int32(), "timestamp_ns": pa.int64()}
        t = pc.read_csv(p, convert_options=pc.ConvertOptions(column_types=types))
        t = t.sort_by([("host", "ascending"), ("timestamp_ns", "ascending")])
        p = p.with_suffix(".parquet")
        pq.write_table(t, p, row_group_size=2)
    ref = evaluate_dump(graph, ev, p)
    for r in (ref, evaluate_capture(graph, ev, plan_dump(str(p), graph.generation), None, chunk_rows=2).evaluation):
        assert np.asarray(r.per_chip["ops_total"]).tolist() == [11_000, 24_000]
        assert float(r.server["ops_total"]) == pytest.approx(24_000, rel=1e-12)
        assert float(r.server["ops_rate"]) == pytest.approx(30_000, rel=1e-12)
