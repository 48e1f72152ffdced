"""``perfonto serve``: a live source through the streaming evaluator, exposed as OpenMetrics.

``Server`` generates the catalog's evaluator (``codegen.python_evaluator``), keeps the live state
(``analysis.live.LiveMetrics``) fed from a source (``perfonto.live_emulate.EmulatedSource`` or
``analysis.follow.FollowSource``: anything with ``start()``, ``blocks(stop)``, ``status()``,
``close()``), and answers on ``bind:port``:

- ``GET /metrics``: OpenMetrics text (``application/openmetrics-text; version=1.0.0``), or the classic
  Prometheus text format when the client asks for ``text/plain`` only (``analysis.openmetrics``);
- ``GET /healthz``: JSON ``{"status": "starting"|"ok"|"finished"|"failed", …}`` (with the samples and
  windows pushed, the source's state and the scrapes served per format), 200 unless failed (503);
- with an OTLP endpoint, also pushes over OTLP/HTTP (``analysis.otlp``).

Connections are served by a bounded pool of ``WORKERS`` threads. An accepted connection is handed to
a worker only once its request has started to arrive: until then it waits in one selector thread
(at most ``MAX_QUEUED`` connections wait; past that a new one is closed at once), and one that sends
nothing for ``CONNECTION_TIMEOUT_S`` is closed there, so idle sockets never hold a worker (200 idle
connections stalled scrapes for 15 s). A worker's socket has the same timeout, so a half-sent
request is dropped; a scraper that disconnects mid-response costs nothing and prints nothing.

``run(stop)`` serves until ``stop`` is set (the CLI sets it on SIGINT or SIGTERM), then stops the
source, the HTTP server and the OTLP exporter (a last export) and returns a summary.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import selectors
import socket
import tempfile
import threading
import time
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Callable

from perfonto.analysis.evaluate import load_evaluator
from perfonto.analysis.live import LiveMetrics
from perfonto.analysis.openmetrics import LiveCollector, registry_for
from perfonto.codegen.python_evaluator import generate
from perfonto.metrics.graph import MetricGraph


WORKERS = 64  # threads answering connections
MAX_QUEUED = 1024  # accepted connections waiting for a worker; more are closed at once
CONNECTION_TIMEOUT_S = 5.0  # a connection that sends nothing (or half a request) for this long is closed
_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)  # the client went away or stalled


class PooledHTTPServer(HTTPServer):
    """An ``HTTPServer`` whose connections are handled by a bounded thread pool (module docstring);
    ``log`` receives one line per unexpected handler error (no traceback)."""

    request_queue_size = 512  # the listen backlog: 200 scrapers connecting at once are not refused

    def __init__(self, address, handler, log: Callable[[str], None] = lambda s: None, workers: int = WORKERS):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET  # --bind ::1
        super().__init__(address, handler)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="perfonto-http")
        self._queued = 0
        self._lock = threading.Lock()
        self._log = log
        self.refused = 0
        self._sel = selectors.DefaultSelector()
        self._idle: dict = {}  # connection -> (client address, when it is closed unless it sent something)
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._closing = False
        self._waiter = threading.Thread(target=self._wait_for_requests, name="perfonto-http-idle", daemon=True)
        self._waiter.start()

    def process_request(self, request, client_address):
        with self._lock:
            if self._queued >= MAX_QUEUED or self._closing:
                self.refused += 1
                self.shutdown_request(request)
                return
            self._queued += 1
            self._idle[request] = (client_address, time.monotonic() + CONNECTION_TIMEOUT_S)
            self._sel.register(request, selectors.EVENT_READ)
        self._wake_w.send(b"x")

    def _wait_for_requests(self) -> None:
        """Hand a connection to a worker once it has something to read; close the idle ones."""
        while not self._closing:
            try:
                ready = [k.fileobj for k, _ in self._sel.select(timeout=0.5)]
            except (OSError, ValueError):  # closed under us: the server is closing
                return
            now = time.monotonic()
            with self._lock:
                if self._wake_r in ready:
                    self._wake_r.recv(4096)
                expired = [s for s, (_, deadline) in self._idle.items() if deadline <= now]
                go = [(s, self._idle[s][0]) for s in ready if s in self._idle]
                for s in expired + [s for s, _ in go]:
                    if s in self._idle:
                        self._sel.unregister(s)
                        del self._idle[s]
            for s in expired:
                self._done(s)
            for s, addr in go:
                try:
                    self._pool.submit(self._work, s, addr)
                except RuntimeError:  # the pool is shut down: the server is closing
                    self._done(s)

    def _done(self, request) -> None:
        self.shutdown_request(request)
        with self._lock:
            self._queued -= 1

    def _work(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - one line at most, never a traceback
            self.handle_error(request, client_address)
        finally:
            self._done(request)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if not isinstance(exc, _GONE):
            self._log(f"error: answering {client_address[0]}: {type(exc).__name__}: {exc}")

    def server_close(self):
        super().server_close()
        pool = getattr(self, "_pool", None)  # absent when binding failed inside HTTPServer.__init__
        if pool is None:
            return
        pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._closing = True
            idle, self._idle = list(self._idle), {}
        self._wake_w.send(b"x")
        self._waiter.join(timeout=2)
        for s in idle:
            self.shutdown_request(s)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("perfonto")
    except Exception:  # running from a checkout that is not installed
        return "unknown"


_VARYING = re.compile(r"\d+(\.\d+)?")


class _OneLine(logging.Handler):
    """OpenTelemetry SDK log records as one line each on ``log`` (no tracebacks); a message already
    said in the last minute (an endpoint that stays down) is not repeated — compared by its stable
    part, numbers left out ("retrying in 0.89s" and "retrying in 1.73s" are one message).
    ``last_s``: when the SDK last warned (an export failing), for the health."""

    def __init__(self, log: Callable[[str], None]):
        super().__init__(logging.WARNING)
        self.log = log
        self._said: dict[str, float] = {}
        self.last_s: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg, now = record.getMessage(), time.monotonic()
        if "already shutdown" in msg:  # the exporter stopped early by a bounded shutdown (analysis.otlp)
            return
        self.last_s = now
        key = _VARYING.sub("#", msg)
        if now - self._said.get(key, -1e9) < 60.0:
            return
        if len(self._said) > 100:
            self._said.clear()
        self._said[key] = now
        self.log(f"warning: OTLP export: {msg}")


class Server:
    """The serving process (module docstring). Raises ``OSError`` when ``bind:port`` cannot be
    listened on, ``ValueError`` when the catalog's names collide (``metrics.telemetry.expositions``)."""

    def __init__(
        self,
        graph: MetricGraph,
        source,
        *,
        bind: str = "127.0.0.1",
        port: int = 9464,
        host: str = "localhost",
        otlp: str | None = None,
        otlp_interval_s: float = 10.0,
        log: Callable[[str], None] = lambda s: None,
        window_s: float | None = None,
    ):
        self.graph, self.source, self.log = graph, source, log
        self._tmp = tempfile.TemporaryDirectory(prefix="perfonto-serve-eval-")
        path = Path(self._tmp.name) / f"{graph.generation.name}_evaluator.py"
        path.write_text(generate(graph), encoding="utf-8")
        self.live = LiveMetrics(graph, load_evaluator(path), host, window_s=window_s)
        self.info = {"generation": graph.generation.name, "catalog_hash": graph.content_hash, "version": _version()}
        self.registry = registry_for(LiveCollector(self.live, self.info, self._status))
        self.messages: collections.deque[str] = collections.deque(maxlen=20)
        self.push_errors = 0
        self.scrapes = {"openmetrics": 0, "text": 0}
        self.started_s = time.time()
        self._serving = False  # serve_forever started (``run``)
        try:
            self.httpd = PooledHTTPServer((bind, port), _handler(self), log=log)
        except BaseException:
            self._tmp.cleanup()
            raise
        self.url = f"http://{'[' + bind + ']' if ':' in bind else bind}:{self.httpd.server_address[1]}"
        self.otlp = None
        self.otlp_endpoint = otlp
        self.otlp_interval_s = otlp_interval_s
        self._otlp_log: _OneLine | None = None
        if otlp:
            from perfonto.analysis.otlp import OtlpExport

            logger = logging.getLogger("opentelemetry")
            self._otlp_log = _OneLine(log)
            logger.addHandler(self._otlp_log)
            logger.propagate = False
            self.otlp = OtlpExport(
                self.live,
                otlp,
                otlp_interval_s,
                {"perfonto.generation": self.info["generation"], "perfonto.catalog_hash": self.info["catalog_hash"]},
                version=self.info["version"],
            )

    def _note(self, msg: str) -> None:
        self.messages.append(msg)
        self.log(msg)

    def _status(self) -> dict:
        st = dict(self.source.status())
        st["errors"] = st.get("errors", 0) + self.push_errors
        return st

    def _problems(self, st: dict) -> list[str]:
        """What degrades the service now: the source's ``problem`` (a followed path gone, an emulation
        falling behind) and an OTLP export that failed within its last two periods."""
        out = [st["problem"]] if st.get("problem") else []
        said = None if self._otlp_log is None else self._otlp_log.last_s
        if said is not None and time.monotonic() - said < 2 * self.otlp_interval_s + 5.0:
            out.append(f"OTLP export to {self.otlp_endpoint} is failing (see the log)")
        return out

    def health(self) -> tuple[int, dict]:
        """(HTTP status, body) of ``/healthz``: ``status`` is ``failed`` (503) when the source failed,
        ``finished`` when a bounded source is done (its last values stay served), ``degraded`` (200,
        with ``problems``) when the source or the OTLP export is in trouble now, ``starting`` before the
        first window, else ``ok``."""
        st = self._status()
        snap = self.live.snapshot()
        problems = self._problems(st)
        if st.get("error"):
            status = "failed"
        elif st.get("finished"):
            status = "finished"
        elif problems:
            status = "degraded"
        elif snap.windows == 0:
            status = "starting"
        else:
            status = "ok"
        body = {
            "status": status,
            "problems": problems,
            "source": st,
            "samples": snap.samples,
            "windows": snap.windows,
            "window_s": snap.window_s,
            "chips": [int(c) for _, c in snap.series],
            "metrics": len(self.live.expositions),
            "scrapes": dict(self.scrapes),
            "uptime_s": round(time.time() - self.started_s, 3),
            "messages": list(self.messages),
            **self.info,
        }
        return (503 if status == "failed" else 200), body

    def run(self, stop: threading.Event) -> dict:
        """Serve until ``stop`` is set; returns the summary (``ok``, ``url``, samples, windows, source)."""
        http = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="perfonto-http", daemon=True
        )
        self._serving = True
        http.start()
        try:
            for block in self.source.blocks(stop):
                try:
                    self.live.push(block)
                except ValueError as exc:
                    self.push_errors += 1
                    self._note(f"error: {exc}")
            st = self._status()
            if st.get("error"):
                self._note(f"error: {st['error']}")
            elif not stop.is_set():
                self._note("the source is done; serving its last values until stopped")
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            self.close()
        snap = self.live.snapshot()
        return {
            "ok": True,
            "url": self.url + "/metrics",
            "samples": snap.samples,
            "windows": snap.windows,
            "chips": [int(c) for _, c in snap.series],
            "source": self._status(),
            "otlp": self.otlp_endpoint,
            **self.info,
        }

    def close(self) -> None:
        """Stop the source, the HTTP server and the OTLP exporter (idempotent; also before ``run``)."""
        self.source.close()
        if self._serving:  # shutdown() waits for serve_forever: forever when it never ran
            self.httpd.shutdown()
            self._serving = False
        self.httpd.server_close()
        if self.otlp is not None:
            self.otlp.shutdown()
            self.otlp = None
        self._tmp.cleanup()


def _handler(server: Server):
    from prometheus_client import exposition, openmetrics

    class Handler(BaseHTTPRequestHandler):
        server_version = "perfonto"
        timeout = CONNECTION_TIMEOUT_S  # the socket's timeout: an idle or stalled connection is closed

        def log_message(self, format, *args):  # no access log on stderr
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                accept = self.headers.get("Accept", "")
                if "text/plain" in accept and "application/openmetrics-text" not in accept:
                    server.scrapes["text"] += 1
                    self._send(200, exposition.generate_latest(server.registry), exposition.CONTENT_TYPE_LATEST)
                else:
                    server.scrapes["openmetrics"] += 1
                    self._send(
                        200,
                        openmetrics.exposition.generate_latest(server.registry),
                        openmetrics.exposition.CONTENT_TYPE_LATEST,
                    )
            elif path in ("/healthz", "/health"):
                code, body = server.health()
                self._send(code, json.dumps(body).encode(), "application/json")
            elif path == "/":
                self._send(
                    200, b"perfonto serve: /metrics (OpenMetrics), /healthz (JSON)\n", "text/plain; charset=utf-8"
                )
            else:
                self._send(404, b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8")

    return Handler
