"""Fixes from the SRE trial of `perfonto serve`: ring files and truncation, parts out of name order,
parts still being written, reading only new rows, and the serve CLI/health/shutdown findings."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from live_helpers import snapshot_series, close_enough, expected_series
from perfonto.analysis.follow import Follower
from perfonto.analysis.live import LiveMetrics


def _push_all(live, blocks):
    for b in blocks:
        live.push(b)


def _totals(live, name="hbm.bytes"):
    return live.snapshot().values[name]


def _atomic(table: pa.Table, path):
    tmp = path.with_name(".tmp-" + path.name)
    pq.write_table(table, str(tmp))
    os.replace(tmp, path)


def ring_followed(graph, evaluator, tables: list, path):
    """A ring file written with ``tables`` (atomically), followed, its first poll pushed into a new
    ``LiveMetrics``: (the follower, the live state)."""
    _atomic(pa.concat_tables(tables), path)
    f = Follower(path, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    _push_all(live, f.poll()[0])
    return f, live


def test_ring_file_rewritten_with_its_latest_samples_counts_each_sample_once(graph, evaluator, ref, tmp_path):
    table, ev, (p0, p1, p2) = ref
    ring = tmp_path / "ring.parquet"
    f, live = ring_followed(graph, evaluator, [p0, p1], ring)
    _atomic(pa.concat_tables([p1, p2]), ring)  # the ring keeps its latest samples only
    blocks, msgs = f.poll()
    assert msgs == [] and [b.new_baseline for b in blocks] == [False]
    _push_all(live, blocks)
    W = ev.windows.interval.shape[0]
    assert live.snapshot().windows == W and live.snapshot().baselines == 1
    assert close_enough(_series(live), expected_series(graph, ev, "h0")) == []


def test_truncated_file_adds_nothing_and_says_so(graph, evaluator, ref, tmp_path):
    _, _, (p0, p1, _) = ref
    path = tmp_path / "c.parquet"
    _atomic(pa.concat_tables([p0, p1]), path)
    f = Follower(path, graph.generation)
    f.poll()
    _atomic(p0, path)
    blocks, msgs = f.poll()
    assert blocks == [] and len(msgs) == 1 and "nothing new" in msgs[0] and "baseline" not in msgs[0]


def test_part_named_before_the_last_one_is_still_read_in_time_order(graph, evaluator, ref, tmp_path):
    _, ev, (p0, p1, p2) = ref
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(p0, str(d / "part-8.parquet"))
    f = Follower(d, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    _push_all(live, f.poll()[0])
    pq.write_table(p1, str(d / "part-9.parquet"))
    _push_all(live, f.poll()[0])
    pq.write_table(p2, str(d / "part-10.parquet"))  # sorts before part-9 by name
    blocks, msgs = f.poll()
    assert len(blocks) == 1 and msgs == []
    _push_all(live, blocks)
    assert f.parts == 3 and live.snapshot().windows == ev.windows.interval.shape[0]
    assert close_enough(_series(live), expected_series(graph, ev, "h0")) == []


def test_parts_found_together_are_taken_in_time_order_and_late_samples_are_named(graph, evaluator, ref, tmp_path):
    _, ev, (p0, p1, p2) = ref
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(p2, str(d / "a.parquet"))
    pq.write_table(p1, str(d / "b.parquet"))
    pq.write_table(p0, str(d / "c.parquet"))
    f = Follower(d, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    blocks, msgs = f.poll()
    assert [b.source.rsplit("/", 1)[1] for b in blocks] == ["c.parquet", "b.parquet", "a.parquet"] and msgs == []
    _push_all(live, blocks)
    assert close_enough(_series(live), expected_series(graph, ev, "h0")) == []
    pq.write_table(p1, str(d / "d.parquet"))  # samples already counted
    blocks, msgs = f.poll()
    assert blocks == [] and len(msgs) == 1 and msgs[0].startswith("d.parquet: ") and "skipped" in msgs[0]


def _wide_csv(table: pa.Table) -> bytes:
    cols, names = [], []
    for name, col in zip(table.column_names, table.columns):
        col = col.combine_chunks()
        if pa.types.is_fixed_size_list(col.type):
            for i in range(col.type.list_size):
                cols.append(pc.list_element(col, i))  # a null register stays an empty cell
                names.append(f"{name}[{i}]")
        else:
            cols.append(col)
            names.append(name)
    sink = pa.BufferOutputStream()
    pcsv.write_csv(pa.table(cols, names=names), sink, pcsv.WriteOptions(quoting_style="none"))
    return sink.getvalue().to_pybytes()


def test_csv_part_still_being_written_has_its_later_rows_read(graph, evaluator, ref, tmp_path):
    table, ev, _ = ref
    data = _wide_csv(table)
    lines = data.splitlines(keepends=True)
    half = sum(len(x) for x in lines[: len(lines) // 2]) + 7  # and part of the next line
    d = tmp_path / "parts"
    d.mkdir()
    part = d / "part-0.csv"
    part.write_bytes(data[:half])
    f = Follower(d, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    blocks, msgs = f.poll()
    assert len(blocks) == 1 and msgs == []
    _push_all(live, blocks)
    with open(part, "ab") as out:
        out.write(data[half:])
    os.utime(part, ns=(part.stat().st_mtime_ns + 10**6,) * 2)
    blocks, msgs = f.poll()
    assert len(blocks) == 1 and msgs == []
    _push_all(live, blocks)
    assert live.snapshot().windows == ev.windows.interval.shape[0]
    got = _series(live)
    want = expected_series(graph, ev, "h0")
    assert (
        close_enough(
            {k: v for k, v in got.items() if k[0].endswith("_total")},
            {k: v for k, v in want.items() if k[0].endswith("_total")},
            rel=1e-6,
        )
        == []
    )


def test_growing_csv_file_reads_only_the_bytes_past_what_was_taken(graph, evaluator, ref, tmp_path, monkeypatch):
    table, ev, _ = ref
    data = _wide_csv(table)
    lines = data.splitlines(keepends=True)
    cut = sum(len(x) for x in lines[: 1 + 2 * 150])
    path = tmp_path / "c.csv"
    path.write_bytes(data[:cut])
    f = Follower(path, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    _push_all(live, f.poll()[0])
    import perfonto.analysis.follow_parts as follow

    seen = []
    real = follow._parse_csv
    monkeypatch.setattr(follow, "_parse_csv", lambda p, b, t: seen.append(len(b)) or real(p, b, t))
    with open(path, "ab") as out:
        out.write(data[cut:])
    blocks, _ = f.poll()
    _push_all(live, blocks)
    assert seen == [len(lines[0]) + len(data) - cut]  # the header and the new lines only
    assert live.snapshot().windows == ev.windows.interval.shape[0]


def test_growing_parquet_file_reads_only_the_row_groups_with_new_rows(graph, evaluator, ref, tmp_path, monkeypatch):
    table, ev, _ = ref
    path = tmp_path / "c.parquet"
    n = table.num_rows
    tmp = tmp_path / ".t.parquet"
    pq.write_table(table.slice(0, n // 2), str(tmp), row_group_size=100)
    os.replace(tmp, path)
    f = Follower(path, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h0")
    _push_all(live, f.poll()[0])
    pq.write_table(table, str(tmp), row_group_size=100)
    os.replace(tmp, path)
    asked = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(
        pq.ParquetFile, "read_row_groups", lambda self, g, **kw: asked.append(list(g)) or real(self, g, **kw)
    )
    _push_all(live, f.poll()[0])
    assert asked and min(asked[0]) >= (n // 2) // 100 - 1
    assert live.snapshot().windows == ev.windows.interval.shape[0]
    assert close_enough(_series(live), expected_series(graph, ev, "h0")) == []


def test_empty_file_at_start_is_waited_for(graph, ref, tmp_path):
    _, _, (p0, _, _) = ref
    path = tmp_path / "empty.parquet"
    path.write_bytes(b"")
    f = Follower(path, graph.generation)
    assert f.poll() == ([], [])
    _atomic(p0, path)
    blocks, _ = f.poll()
    assert len(blocks) == 1


_series = snapshot_series


# -- the server, the CLI -----------------------------------------------------------------------------


def test_idle_connections_do_not_hold_the_workers():
    import socket
    import threading
    import time
    import urllib.request
    from http.server import BaseHTTPRequestHandler

    from perfonto.serve import PooledHTTPServer

    class Ok(BaseHTTPRequestHandler):
        timeout = 5.0

        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    srv = PooledHTTPServer(("127.0.0.1", 0), Ok, workers=4)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    port = srv.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]  # 5x the workers, silent
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read() == b"ok"
        assert time.monotonic() - t0 < 1.0  # was the idle timeout (5 s) x 20 / 4
    finally:
        srv.shutdown()
        srv.server_close()
        for c in idle:
            c.close()


def test_signal_during_startup_is_a_clean_stop(monkeypatch, capsys):
    import signal

    from perfonto.cli import main
    from perfonto.live_emulate import EmulatedSource

    made = []

    def start(self):
        made.append(self._dir)
        os.kill(os.getpid(), signal.SIGTERM)  # as the first chunk is being emulated
        raise AssertionError("the signal did not stop the start-up")

    monkeypatch.setattr(EmulatedSource, "start", start)
    guard = signal.signal(signal.SIGTERM, lambda *a: None)  # a SIGTERM the command does not catch kills no test run
    try:
        before = signal.getsignal(signal.SIGTERM)
        assert main(["serve", "--emulate", "--chips", "1", "--port", "0"]) == 0
        assert "stopped by SIGTERM during start-up" in capsys.readouterr().err
        assert made and not made[0].exists()  # its scratch folder removed
        assert signal.getsignal(signal.SIGTERM) == before
    finally:
        signal.signal(signal.SIGTERM, guard)


def test_options_of_the_other_mode_and_negative_duration_are_usage_errors(tmp_path, capsys):
    from perfonto.cli import main

    assert main(["serve", "--follow", str(tmp_path), "--chips", "8", "--duration", "1s", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--chips, --duration: options of `perfonto serve --emulate`, not of --follow" in err
    assert main(["serve", "--emulate", "--poll", "1s", "--port", "0"]) == 2
    assert "--poll: an option of `perfonto serve --follow`, not of --emulate" in capsys.readouterr().err
    assert main(["serve", "--emulate", "--duration", "-1s"]) == 2
    err = capsys.readouterr().err
    assert "expected one argument" not in err and "not '-1s'" in err


def test_empty_file_given_to_serve_is_waited_for(tmp_path):
    from live_helpers import ServeProcess

    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with ServeProcess(["--follow", str(path)]) as s:
        assert s.health()["status"] == "starting"


def _server(graph, source, log, **kw):
    from perfonto.serve import Server

    return Server(graph, source, port=0, host="h0", log=log, **kw)


def test_health_is_degraded_while_the_followed_folder_is_gone_and_says_it_once(graph, ref, tmp_path):
    import shutil
    import threading
    import time

    from perfonto.analysis.follow import FollowSource

    _, _, (p0, _, _) = ref
    d = tmp_path / "parts"
    d.mkdir()
    pq.write_table(p0, str(d / "part-0.parquet"))
    lines: list[str] = []
    src = FollowSource(Follower(d, graph.generation), poll_s=0.02, log=lines.append)
    server = _server(graph, src, lines.append)
    stop = threading.Event()
    t = threading.Thread(target=server.run, args=(stop,), daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while server.health()[1]["status"] != "ok" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.health()[1]["status"] == "ok"
        shutil.rmtree(d)
        time.sleep(0.3)  # several polls
        code, body = server.health()
        assert (code, body["status"]) == (200, "degraded") and "cannot list the folder" in body["problems"][0]
        assert sum("cannot list the folder" in x for x in lines) == 1
    finally:
        stop.set()
        t.join(10)


def test_emulation_falling_behind_is_a_problem(graph):
    from perfonto.live_emulate import EmulatedSource

    src = EmulatedSource(graph.generation, seed=0, duration_s=None, model="llama3-8b", chips=1, sample_period_s=1e-3)
    try:
        assert src.status()["problem"] is None
        src.lag_s = 5.5
        assert "behind the wall clock" in src.status()["problem"]
    finally:
        src.close()


def test_otlp_warnings_deduplicated_by_their_stable_part_and_shutdown_is_prompt(graph, evaluator):
    import logging
    import socket
    import time

    from perfonto.analysis.otlp import OtlpExport
    from perfonto.serve import _OneLine

    lines: list[str] = []
    h = _OneLine(lines.append)
    for backoff in ("0.89", "1.73", "3.41"):
        h.emit(
            logging.LogRecord("opentelemetry", logging.WARNING, "", 0, f"error, retrying in {backoff}s.", None, None)
        )
    assert len(lines) == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    live = LiveMetrics(graph, evaluator, host="h0")
    exp = OtlpExport(live, f"http://127.0.0.1:{port}/v1/metrics", 60.0, {}, timeout_s=5.0)
    t0 = time.monotonic()
    exp.shutdown()
    assert time.monotonic() - t0 < 2.5
