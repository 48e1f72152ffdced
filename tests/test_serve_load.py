"""Issue 28, defect 6: `perfonto serve` under load on 127.0.0.1 — 200 concurrent scrapers, 50 that
disconnect mid-response and 50 idle connections at once: every complete scrape is served with the
batch evaluator's values, nothing prints a traceback, idle connections are closed by a timeout, the
worker threads stay bounded, and memory holds over 5,000 scrapes."""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from live_helpers import (
    ServeProcess,
    close_enough,
    expected_series,
    get,
    parse_openmetrics,
    published_reference,
)
from perfonto.metrics.catalog import load_catalog

pytestmark = pytest.mark.slow
HOST = "node-a"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    graph = load_catalog(None, "sohu").graph
    d = tmp_path_factory.mktemp("serve-load")
    return graph, *published_reference(graph, d)


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if k in ("VmRSS", "Threads"):
            out[k] = int(v.split()[0])
    return out


def _half_read_then_reset(host: str, port: int) -> None:
    """A scraper that asks for /metrics, reads a few bytes and goes away with a TCP reset."""
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(64)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def test_200_scrapers_50_quitters_50_idlers(served):
    graph, folder, ev = served
    W = ev.windows.interval.shape[0]
    want = expected_series(graph, ev, HOST)
    with ServeProcess(["--follow", str(folder), "--host", HOST, "--poll", "0.1s"]) as s:
        s.wait_for(lambda h: h["windows"] == W, what="all windows")
        host, port = s.url.removeprefix("http://").split(":")
        port = int(port)
        idle = [socket.create_connection((host, port), timeout=30) for _ in range(50)]  # connect, say nothing
        for c in idle[:25]:
            c.sendall(b"GET /metr")  # half a request line, then silence
        results: list = []
        errors: list = []

        def scrape():
            try:
                results.append(get(s.url + "/metrics", timeout=10))
            except Exception as exc:  # noqa: BLE001 - counted and shown
                errors.append(repr(exc))

        def quit_early():
            try:
                _half_read_then_reset(host, port)
            except OSError:
                pass

        threads = [threading.Thread(target=scrape) for _ in range(200)] + [
            threading.Thread(target=quit_early) for _ in range(50)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors and len(results) == 200, (len(errors), errors[:3])
        bodies = {text for code, text in results if code == 200}
        assert len([r for r in results if r[0] == 200]) == 200
        for text in bodies:  # every complete scrape: the batch evaluator's values
            assert close_enough(parse_openmetrics(text, graph), want) == []
        peak_threads = _status(s.proc.pid)["Threads"]
        assert peak_threads < 80, peak_threads  # a bounded pool, not a thread per connection
        time.sleep(12)  # past the per-connection timeout: the idle ones are closed by the server
        closed = 0
        for c in idle:
            c.settimeout(1)
            try:
                closed += c.recv(1) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 0
            c.close()
        assert closed >= 45, closed

        rss0 = None
        for k in range(5000):  # memory holds over 5,000 scrapes
            code, _ = get(s.url + "/metrics", timeout=10)
            assert code == 200
            if k == 500:
                rss0 = _status(s.proc.pid)["VmRSS"]
        rss1 = _status(s.proc.pid)["VmRSS"]
        assert rss1 - rss0 < 20_000, (rss0, rss1)  # kB
        code, out, err = s.stop()
    assert code == 0 and "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err[
        -3000:
    ]
