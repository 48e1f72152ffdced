"""`perfonto serve --window SPAN`: each gauge over the trailing span, as `analyze`'s per-chip run-level
value of exactly the span's windows (from run-level sums, not a mean of window values)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from live_helpers import NULLED_SIGNAL, emulate, null_last_sample

from perfonto.analysis.evaluate import evaluate_dump
from perfonto.analysis.follow import read_part
from perfonto.analysis.live import LiveMetrics
from perfonto.cli import build_parser, main
from perfonto.metrics.levels import signal_deps

SPAN_S = 0.1  # 100 windows of 1 ms


@pytest.fixture(scope="module")
def dump(graph, tmp_path_factory):
    """(the emulated dump's table, its counters file, the table with NULLED_SIGNAL null in chip 1's last sample)."""
    d = tmp_path_factory.mktemp("window")
    path = emulate(d, graph.generation)
    table = pq.ParquetFile(str(path)).read()
    nulled = d / "nulled.parquet"
    pq.write_table(null_last_sample(table, NULLED_SIGNAL, chip=1), str(nulled))
    return table, path, nulled


def _served(graph, evaluator, path, window_s=SPAN_S, step=37):
    live = LiveMetrics(graph, evaluator, "h0", window_s=window_s)
    block = read_part(path, graph.generation)
    for i in range(0, block.samples, step):
        live.push(block.slice(i, min(i + step, block.samples)))
    return live, block


def _reference(graph, evaluator, table: pa.Table, first: int, end: int, tmp_path):
    """`analyze`'s per-chip values over windows ``first .. end - 1`` (window i ends at sample i)."""
    chip = table.column("chip").to_numpy()
    ts = table.column("timestamp_ns").to_numpy()
    rank = np.empty(len(chip), dtype=np.int64)
    for c in np.unique(chip):
        rows = np.nonzero(chip == c)[0]
        rank[rows[np.argsort(ts[rows])]] = np.arange(len(rows))
    sel = np.nonzero((rank >= first - 1) & (rank < end))[0]
    p = tmp_path / f"slice-{first}-{end}.parquet"
    pq.write_table(table.take(pa.array(sel)), str(p))
    return evaluate_dump(graph, evaluator, p).per_chip


def _compare(live, ref, names, chips=slice(None)) -> list[str]:
    snap = live.snapshot()
    bad = []
    for name in names:
        e = live.expositions[name]
        got, want = snap.values[name][chips], np.asarray(ref[name], dtype=np.float64)[chips] * e.unit.factor
        if not np.allclose(got, want, rtol=1e-9, atol=1e-300, equal_nan=True):
            bad.append(f"{name}: served {got.ravel()[:4]}, analyze {want.ravel()[:4]}")
    return bad


def _gauges(live) -> list[str]:
    return [n for n, e in live.expositions.items() if e.instrument == "gauge"]


@pytest.mark.parametrize("step", [37, 1, 100_000])  # blocks of 37 samples, of one, the whole dump at once
def test_window_gauges_equal_analyze_over_the_spans_windows(graph, evaluator, dump, tmp_path, step):
    table, path, _ = dump
    live, block = _served(graph, evaluator, path, step=step)
    assert len(live._span.ring) <= 18
    n = live.snapshot().span_windows
    assert 100 <= n < 100 + 100 / 16 + 1  # SPAN rounded up to whole buckets of SPAN/16
    ref = _reference(graph, evaluator, table, block.samples - n, block.samples, tmp_path)
    gauges = _gauges(live)
    assert _compare(live, ref, gauges) == []
    snap = live.snapshot()
    assert snap.window_s == SPAN_S
    assert sum(np.isfinite(snap.values[g]).all() for g in gauges) > len(gauges) / 2  # not all null


def test_tokens_per_second_over_100_windows_is_the_tokens_counted_over_its_time(graph, evaluator, dump):
    _, path, _ = dump
    live, block = _served(graph, evaluator, path, step=50)
    snap = live.snapshot()
    n = snap.span_windows
    assert n >= 100
    T = block.timestamps_ns
    tokens = sum(
        block.raw[s][-1].astype(np.float64) - block.raw[s][-1 - n].astype(np.float64)
        for s in ("seq.input_tokens", "seq.output_tokens")
    ).reshape(len(block.chips))
    want = tokens / ((T[-1] - T[-1 - n]) * 1e-9)
    got = snap.values["tokens_per_second"]
    assert (got > 0).any()
    np.testing.assert_allclose(got, want, rtol=1e-9)
    latest = LiveMetrics(graph, live.evaluator, "h0")  # the default: the latest 1 ms window
    latest.push(block)
    assert latest.snapshot().span_windows == 0 and latest.snapshot().window_s is None


def test_a_null_window_leaves_out_its_bucket_for_the_metrics_reading_it(graph, evaluator, dump, tmp_path):
    table, _, nulled = dump
    live, block = _served(graph, evaluator, nulled)
    n = live.snapshot().span_windows
    last = live._span.ring[-1].windows  # the bucket holding the null window
    S = block.samples
    deps = signal_deps(graph)
    gauges = _gauges(live)
    reads = [g for g in gauges if NULLED_SIGNAL in deps[g] and not graph.metrics[g].rollup]
    others = [g for g in gauges if g not in reads]
    assert reads
    t = pq.ParquetFile(str(nulled)).read()
    full = _reference(graph, evaluator, t, S - n, S, tmp_path)
    assert _compare(live, full, others) == []
    assert _compare(live, full, reads, chips=slice(0, 1)) == []  # chip 0 has no null
    kept = _reference(graph, evaluator, t, S - n, S - last, tmp_path)
    assert _compare(live, kept, reads, chips=slice(1, 2)) == []
    assert np.isfinite(live.snapshot().values["hbm.read_bandwidth"][1]).all()


@pytest.mark.parametrize("span", ["0", "-1s", "fast", "0s"])
def test_window_that_is_not_a_positive_duration_is_a_usage_error(span, capsys):
    assert main(["serve", "--emulate", "--port", "0", "--window", span]) == 2
    assert "--window" in capsys.readouterr().err


def test_window_parses_a_duration():
    args = build_parser("serve").parse_args(["serve", "--emulate", "--window", "250ms"])
    assert args.window == pytest.approx(0.25)
    assert build_parser("serve").parse_args(["serve", "--emulate"]).window is None


def test_server_serves_the_span_over_http(graph, dump, tmp_path):
    import threading
    import time

    from live_helpers import get, parse_openmetrics

    from perfonto.analysis.follow import Follower, FollowSource
    from perfonto.serve import Server

    table, _, _ = dump
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(table, str(d / "part-0.parquet"))
    server = Server(graph, FollowSource(Follower(d, graph.generation), poll_s=0.02), port=0, host="h0", window_s=0.1)
    stop = threading.Event()
    t = threading.Thread(target=server.run, args=(stop,), daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while server.health()[1]["windows"] < table.num_rows // 2 - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        code, body = server.health()
        assert code == 200 and body["window_s"] == 0.1
        status, text = get(server.url + "/metrics", "application/openmetrics-text")
        got = parse_openmetrics(text, graph)
        tps = {dict(k[1])["chip"]: v for k, v in got.items() if k[0] == "perfonto_tokens_per_second"}
        snap = server.live.snapshot()
        assert status == 200 and snap.span_windows >= 100
        assert tps["0"] > 0 and tps["0"] == pytest.approx(float(snap.values["tokens_per_second"][0]), rel=1e-12)
    finally:
        stop.set()
        t.join(timeout=20)
    assert not t.is_alive()
