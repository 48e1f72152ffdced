"""Serving figures of a run that come from event records rather than counter windows: latency
metrics over request records (``metrics.population``), and the compute / communication / idle
time split from the device trace (``metrics.timesplit``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from perfonto.metrics.compiler import MetricGraph
from perfonto.metrics.population import evaluate_records, read_records
from perfonto.metrics.timesplit import time_split


def record_metrics(graph: MetricGraph, requests_path: str | Path) -> dict[str, np.ndarray | float]:
    """Every record metric of the catalog over the run's ``requests.parquet``."""
    return evaluate_records(graph, read_records(requests_path, graph.generation))


def trace_time_split(trace_path: str | Path, windows) -> dict:
    """Shares of chip time (summed over chips) that are compute only, communication only, both at
    once, and idle, from the device spans of ``trace.parquet``: ``op`` spans are compute (matrix,
    vector or memory work), ``collective`` spans communication; each chip's window is its first to
    last counter sample on its own clock. Unions, so overlapping streams count once."""
    t = pq.read_table(trace_path, columns=["kind", "chip", "start_ns", "end_ns", "clock"]).to_pydict()
    kind = np.array([str(k) for k in t["kind"]])
    chip = np.asarray(t["chip"])
    start = np.asarray(t["start_ns"], dtype=np.float64)
    end = np.asarray(t["end_ns"], dtype=np.float64)
    device = np.array([str(c) != "host" for c in t["clock"]], dtype=bool)
    totals = {"compute_only": 0.0, "communication_only": 0.0, "overlap": 0.0, "idle": 0.0}
    window_total = 0.0
    starts = windows.start_ns
    for ci in range(windows.interval.shape[1]):
        lo = float(starts[0, ci])
        hi = float(starts[-1, ci] + windows.interval[-1, ci] * 1e9)
        on = device & (chip == ci)
        comp = np.stack([start[on & (kind == "op")], end[on & (kind == "op")]], axis=1)
        comm = np.stack([start[on & (kind == "collective")], end[on & (kind == "collective")]], axis=1)
        ts = time_split(comp, comm, lo, hi)
        for k, v in ts.shares.items():
            totals[k] += v * ts.window
        window_total += ts.window
    return {k: v / window_total for k, v in totals.items()} if window_total > 0 else {k: None for k in totals}
