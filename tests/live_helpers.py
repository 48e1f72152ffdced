"""Test-only helpers for `perfonto serve`: an emulated dump cut into part files, the batch evaluator's
expected series, scraping and parsing /metrics, and starting/stopping a server subprocess safely."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto import emulator
from perfonto.analysis.evaluate import evaluate_dump, load_evaluator
from perfonto.codegen.python_evaluator import generate
from perfonto.metrics.telemetry import expositions

NULLED_SIGNAL = "hbm.read_bytes"  # nulled in chip 1's last sample: its last windows are null, series omitted


def emulate(out: Path, gen, chips: int = 2, duration_s: float = 0.3, seed: int = 0) -> Path:
    """A short emulated dump (llama-3.1-8b, 1 ms samples); returns counters.parquet."""
    r = emulator.run(
        gen,
        model="llama-3.1-8b",
        chips=chips,
        duration_s=duration_s,
        sample_period_s=1e-3,
        seed=seed,
        warmup_steps=50,
        out_dir=out,
    )
    return r.counters_path


def null_last_sample(table: pa.Table, signal: str, chip: int) -> pa.Table:
    """``table`` with ``signal`` null in ``chip``'s last sample (a register the collector could not read)."""
    chip_col = table.column("chip").to_numpy()
    ts = table.column("timestamp_ns").to_numpy()
    rows = np.nonzero(chip_col == chip)[0]
    row = rows[np.argmax(ts[rows])]
    col = table.column(signal).combine_chunks()
    mask = np.zeros(len(col), dtype=bool)
    mask[row] = True
    if pa.types.is_fixed_size_list(col.type):
        new = pa.FixedSizeListArray.from_arrays(
            col.values.slice(col.offset * col.type.list_size), col.type.list_size, mask=pa.array(mask)
        )
    else:
        new = pa.array(col.to_numpy(zero_copy_only=False), mask=mask, type=col.type)
    return table.set_column(table.column_names.index(signal), signal, new)


def write_parts(table: pa.Table, folder: Path, n: int) -> list[Path]:
    """Cut ``table`` (a wide counter dump) into ``n`` parts of whole samples (every chip), in time
    order, keeping its metadata: ``folder/part-00000.parquet`` … (not yet visible: ``.tmp-`` names are
    renamed by ``publish``)."""
    chip = table.column("chip").to_numpy()
    ts = table.column("timestamp_ns").to_numpy()
    order = np.lexsort((ts, chip))
    rank = np.empty(len(chip), dtype=np.int64)
    for c in np.unique(chip):
        rows = order[chip[order] == c]
        rank[rows] = np.arange(len(rows))
    S = int(rank.max()) + 1
    bounds = np.linspace(0, S, n + 1).astype(int)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n):
        sel = np.nonzero((rank >= bounds[k]) & (rank < bounds[k + 1]))[0]
        sel = sel[np.lexsort((chip[sel], rank[sel]))]
        p = folder / f".tmp-part-{k:05d}.parquet"
        pq.write_table(table.take(pa.array(sel)), str(p))
        paths.append(p)
    return paths


def reference_dump(graph, d: Path) -> tuple[pa.Table, Path, object]:
    """An emulated dump into ``d`` with ``NULLED_SIGNAL``'s last sample on chip 1 nulled, written whole to
    ``d/full.parquet``: (the table, that file, the batch evaluator's Evaluation of it)."""
    table = null_last_sample(pq.ParquetFile(str(emulate(d, graph.generation))).read(), NULLED_SIGNAL, chip=1)
    full = d / "full.parquet"
    pq.write_table(table, str(full))
    return table, full, batch(graph, full, d)


def published_reference(graph, d: Path, n: int = 3):
    """``reference_dump`` into ``d``, cut into ``n`` parts published under ``d/parts``: (that folder, the
    batch evaluator's Evaluation of the whole dump)."""
    table, _, ev = reference_dump(graph, d)
    for p in write_parts(table, d / "parts", n):
        publish(p)
    return d / "parts", ev


def end_process(proc: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 20.0) -> None:
    """Send ``sig`` to ``proc`` if it still runs and wait for it to end; kill it if it outlives ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def publish(tmp_part: Path) -> Path:
    """Rename a ``.tmp-`` part to its final name (as a collector does once the file is complete)."""
    final = tmp_part.with_name(tmp_part.name.removeprefix(".tmp-"))
    os.replace(tmp_part, final)
    return final


def batch(graph, counters: Path, workdir: Path):
    """The batch evaluator's Evaluation of the whole dump (the reference the live values must equal)."""
    p = workdir / "batch_evaluator.py"
    p.write_text(generate(graph), encoding="utf-8")
    return evaluate_dump(graph, load_evaluator(p), counters)


def expected_series(graph, ev, host: str) -> dict[tuple, float]:
    """{(sample name, (("chip", c), ("host", h), axis labels…)): value}: for a gauge the last window's
    value, for a counter (``…_total``) the sum of the valid windows, both in the exported unit; null
    series left out."""
    out = {}
    for name, e in expositions(graph).items():
        v = ev.window[name]  # (W, C, *sizes)
        val = v[-1] if e.instrument == "gauge" else np.where(np.isnan(v), 0.0, v).sum(axis=0)
        valid = ~np.isnan(v[-1]) if e.instrument == "gauge" else (~np.isnan(v)).any(axis=0)
        sample = e.prom_name if e.instrument == "gauge" else e.prom_name + "_total"
        for ci, chip in enumerate(ev.chips):
            for idx in np.ndindex(val.shape[1:]):
                if valid[(ci,) + idx]:
                    labels = (("chip", str(int(chip))), ("host", host)) + tuple(zip(e.labels, map(str, idx)))
                    out[(sample, tuple(sorted(labels)))] = float(val[(ci,) + idx]) * e.unit.factor
    return out


def parse_openmetrics(text: str, graph) -> dict[tuple, float]:
    """Catalog series of an OpenMetrics exposition, parsed by prometheus_client's strict parser."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    wanted = {e.prom_name for e in expositions(graph).values()}
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name not in wanted:
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def close_enough(got: dict, want: dict, rel: float = 1e-9) -> list[str]:
    """Differences between two series maps (missing, extra, or values off by more than ``rel``)."""
    bad = [f"missing {k}" for k in want if k not in got] + [f"unexpected {k}" for k in got if k not in want]
    for k, w in want.items():
        if k in got and not abs(got[k] - w) <= rel * max(abs(w), 1e-300):
            bad.append(f"{k}: got {got[k]!r}, batch {w!r}")
    return bad


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, accept: str | None = None, timeout: float = 5.0) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class ServeProcess:
    """``perfonto serve ARGS --port 0`` as a subprocess; ``url`` once it listens. Always ``stop()`` it
    (a context manager does): SIGTERM, then SIGKILL after ``timeout``. Its output is read by threads,
    so nothing here can block on a silent process."""

    def __init__(self, args: list[str], timeout: float = 60.0):
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "perfonto", "serve", *args, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err_lines: list[str] = []
        self.out_lines: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err_lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out_lines), daemon=True),
        ]
        for t in self._threads:
            t.start()
        deadline = time.monotonic() + timeout
        self.url = None
        while time.monotonic() < deadline and self.url is None:
            m = re.search(r"(http://127\.0\.0\.1:\d+)/metrics", "".join(self.err_lines))
            if m:
                self.url = m.group(1)
            elif self.proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if self.url is None:
            code, _, err = self.stop()
            raise AssertionError(f"perfonto serve did not start (exit {code}): {err}")

    @staticmethod
    def _pump(stream, lines):
        for line in stream:
            lines.append(line)

    def health(self) -> dict:
        import json

        return json.loads(get(self.url + "/healthz")[1])

    def wait_for(self, pred, timeout: float = 30.0, what: str = "condition") -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            h = self.health()
            if pred(h):
                return h
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: {self.health()}")

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> tuple[int, str, str]:
        """Signal the process, wait (then kill); returns (exit code, stdout, stderr)."""
        end_process(self.proc, sig, timeout)
        for t in self._threads:
            t.join(timeout=5)
        return self.proc.returncode, "".join(self.out_lines), "".join(self.err_lines)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def snapshot_series(live) -> dict:
    """{(sample name, sorted labels): value} of a ``LiveMetrics`` snapshot, as a scrape would show them
    (null values left out)."""
    snap = live.snapshot()
    out = {}
    for name, e in live.expositions.items():
        sample = e.prom_name if e.instrument == "gauge" else e.prom_name + "_total"
        for ci, (host, chip) in enumerate(snap.series):
            v = snap.values[name][ci]
            for idx in np.ndindex(v.shape):
                if not np.isnan(v[idx]):
                    labels = (("chip", chip), ("host", host)) + tuple(zip(e.labels, map(str, idx)))
                    out[(sample, tuple(sorted(labels)))] = float(v[idx])
    return out
