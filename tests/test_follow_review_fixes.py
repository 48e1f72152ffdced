"""Fixes from the review of `perfonto serve --follow`: a CSV read cut between two chips' rows of one
sample, a ring file that spans a device reset, a folder that spans a collector restart, Ctrl-C during
start-up, and the final OTLP export on shutdown."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from live_helpers import close_enough, expected_series
from perfonto.analysis.follow import Follower
from perfonto.analysis.follow_parts import block_of
from perfonto.analysis.live import LiveMetrics
from perfonto.metrics.windows import read_counters
from test_serve_trial_fixes import _atomic, _series, _wide_csv, ring_followed


def _counters(got: dict) -> dict:
    return {k: v for k, v in got.items() if k[0].endswith("_total")}


# -- 1: a read that stops between two chips' rows of one sample --------------------------------------


class _Writer:
    """A CSV file written line by line: ``to(n)`` has it hold the header and the first ``n`` rows (a
    later stamp each time, so that a poll sees the change)."""

    def __init__(self, path, data: bytes):
        self.path, self.lines = path, data.splitlines(keepends=True)
        path.write_bytes(b"")

    def to(self, n: int) -> None:
        size = self.path.stat().st_size
        with open(self.path, "ab") as out:
            out.write(b"".join(self.lines[: 1 + n])[size:])
        os.utime(self.path, ns=(self.path.stat().st_mtime_ns + 10**6,) * 2)


@pytest.mark.parametrize("folder", [False, True])
def test_csv_read_cut_between_two_chips_rows_of_a_sample_serves_every_window(graph, evaluator, ref, tmp_path, folder):
    table, ev, _ = ref
    d = tmp_path / "parts"
    d.mkdir()
    w = _Writer(d / "part-0.csv", _wide_csv(table))  # rows: chip 0, chip 1 of sample 0, then of sample 1, …
    t = [0.0]
    f = Follower(d if folder else w.path, graph.generation, clock=lambda: t[0])
    live = LiveMetrics(graph, evaluator, host="h0")
    for n in (2 * 50, 2 * 60 + 1, 2 * 61, 2 * 200 + 1, 2 * 201 + 1, len(w.lines) - 1):
        w.to(n)  # odd: chip 0 has written the next sample, chip 1 not yet
        t[0] += 0.5
        blocks, msgs = f.poll()
        assert msgs == []
        for b in blocks:
            live.push(b)
        # the complete samples, and no other (one new sample alone waits for the next: a window needs two)
        assert live.snapshot().windows in (n // 2 - 2, n // 2 - 1)
    t[0] += 5
    assert f.poll() == ([], []) and live.snapshot().windows == ev.windows.interval.shape[0]
    assert close_enough(_counters(_series(live)), _counters(expected_series(graph, ev, "h0")), rel=1e-6) == []


@pytest.mark.parametrize("folder", [False, True])
def test_csv_read_that_does_not_read_yet_is_read_again_from_the_same_place(graph, evaluator, ref, tmp_path, folder):
    """A single new sample does not read on its own (a window needs two): the read is tried again with
    the next lines, from where the last one that read ended; a watched part is not dropped meanwhile."""
    table, ev, _ = ref
    d = tmp_path / "parts"
    d.mkdir()
    w = _Writer(d / "part-0.csv", _wide_csv(table))
    t = [0.0]
    f = Follower(d if folder else w.path, graph.generation, clock=lambda: t[0])
    live = LiveMetrics(graph, evaluator, host="h0")
    for n in (2 * 50, 2 * 51, len(w.lines) - 1):
        w.to(n)
        t[0] += 0.5
        blocks, msgs = f.poll()
        assert msgs == []
        for b in blocks:
            live.push(b)
    assert live.snapshot().windows == ev.windows.interval.shape[0]
    assert close_enough(_counters(_series(live)), _counters(expected_series(graph, ev, "h0")), rel=1e-6) == []


# -- 2: a ring file with samples from both sides of a device reset ------------------------------------


def _reference(graph, evaluator, *runs: pa.Table) -> LiveMetrics:
    """The runs fed as they should be: each one from a new baseline."""
    live = LiveMetrics(graph, evaluator, host="h0")
    for i, t in enumerate(runs):
        b = block_of(read_counters(t, graph.generation), f"run{i}", graph.generation)
        b.new_baseline = i > 0
        live.push(b)
    return live


def test_ring_file_across_a_device_reset_counts_only_the_samples_after_it(graph, evaluator, ref, tmp_path):
    _, _, (p0, p1, p2) = ref
    ring = tmp_path / "ring.parquet"
    f, live = ring_followed(graph, evaluator, [p1, p2], ring)
    _atomic(pa.concat_tables([p2, p0]), ring)  # the ring's old tail (counted), then the reset's samples
    blocks, msgs = f.poll()
    assert [(b.samples, b.new_baseline) for b in blocks] == [(p0.num_rows // 2, True)]
    assert len(msgs) == 1 and "new baseline" in msgs[0]
    for b in blocks:
        live.push(b)
    want = _reference(graph, evaluator, pa.concat_tables([p1, p2]), p0)
    assert live.snapshot().windows == want.snapshot().windows == (p1.num_rows + p2.num_rows + p0.num_rows) // 2 - 2
    assert close_enough(_series(live), _series(want)) == []


# -- 9: a folder that spans a collector restart, found in one poll ------------------------------------


def test_folder_spanning_a_restart_found_at_start_takes_a_new_baseline_at_the_restart(graph, evaluator, ref, tmp_path):
    _, _, (p0, p1, p2) = ref
    d = tmp_path / "parts"
    d.mkdir()
    for i, t in enumerate((p1, p2, p0)):  # p0: after the restart, with earlier stamps
        pq.write_table(t, str(d / f"part-{i}.parquet"))
    f = Follower(d, graph.generation)
    blocks, msgs = f.poll()
    assert [(b.source.rsplit("/", 1)[1], b.new_baseline) for b in blocks] == [
        ("part-0.parquet", False),
        ("part-1.parquet", False),
        ("part-2.parquet", True),
    ]
    assert len(msgs) == 1 and "part-2.parquet" in msgs[0] and "new baseline" in msgs[0]
    live = LiveMetrics(graph, evaluator, host="h0")
    for b in blocks:
        live.push(b)
    want = _reference(graph, evaluator, pa.concat_tables([p1, p2]), p0)
    assert live.snapshot().windows == want.snapshot().windows and live.snapshot().baselines == 2
    assert close_enough(_series(live), _series(want)) == []
    assert np.isfinite(live.snapshot().values["hbm.bytes"]).all()


# -- 7: a signal while the server is being built ------------------------------------------------------


def test_signal_while_the_server_is_built_closes_it(monkeypatch, tmp_path, capsys):
    import signal

    import perfonto.serve as serve
    from perfonto.cli import main

    made = []

    class Built(serve.Server):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)
            os.kill(os.getpid(), signal.SIGTERM)  # after the server is built, before serving began

    monkeypatch.setattr(serve, "Server", Built)
    (tmp_path / "c.csv").write_bytes(b"")
    guard = signal.signal(signal.SIGTERM, lambda *a: None)  # a SIGTERM the command does not catch kills no test run
    try:
        assert main(["serve", "--follow", str(tmp_path / "c.csv"), "--port", "0"]) == 0
        err = capsys.readouterr().err
        # the signal is handled in the main thread at its next bytecode: before the stop flag is read (a stop
        # during start-up) or just after serving began (an ordinary stop); either way a clean one
        assert "stopped by SIGTERM during start-up" in err or "stopped: 0 samples" in err, err
        assert len(made) == 1
        s = made[0]
        assert s.httpd.socket.fileno() == -1 and not s.httpd._waiter.is_alive()  # the socket, the waiter
        assert not os.path.exists(s._tmp.name)  # the evaluator's folder
    finally:
        signal.signal(signal.SIGTERM, guard)


# -- 8: the last OTLP export on shutdown -------------------------------------------------------------


def test_last_otlp_export_to_a_slow_collector_that_answers_goes_through(graph, evaluator, ref):
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from perfonto.analysis.otlp import OtlpExport
    from perfonto.metrics.windows import read_counters

    got = []

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(1.6)  # past the 1 s that ends the retries, within the exporter's 5 s
            got.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    httpd = HTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        table, _, _ = ref
        live = LiveMetrics(graph, evaluator, host="h0")
        live.push(block_of(read_counters(table, graph.generation), "t", graph.generation))
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1/metrics"
        exp = OtlpExport(live, url, 60.0, {}, timeout_s=5.0)
        results = []
        real = exp.exporter.export
        exp.exporter.export = lambda *a, **kw: results.append(real(*a, **kw)) or results[-1]
        exp.shutdown()
        assert got == ["/v1/metrics"] and [r.name for r in results] == ["SUCCESS"]
    finally:
        httpd.shutdown()
        httpd.server_close()
