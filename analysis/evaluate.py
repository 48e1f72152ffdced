"""Evaluate a compiled catalog over a counter dump with a generated evaluator, at three levels:
per window and chip, per chip over the run, and for the whole server (see ``metrics.windows``)."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.metrics.compiler import MetricGraph
from perfonto.metrics.levels import evaluate_levels, null_reasons
from perfonto.metrics.windows import Windows, prepare, read_counters


@dataclass
class Evaluation:
    """Metric values: ``window[name]`` (W, C, …), ``per_chip[name]`` (C, …), ``server[name]`` (…);
    ``nulls[name]``: {reason: count} of null window values; ``coverage[name]``: share of the run
    that the server-level value covers."""

    windows: Windows
    window: dict[str, np.ndarray]
    per_chip: dict[str, np.ndarray]
    server: dict[str, np.ndarray]
    chips: np.ndarray
    nulls: dict[str, dict[str, int]]
    coverage: dict[str, float]


def load_evaluator(path: str | Path):
    """Import a generated evaluator module from its file."""
    spec = importlib.util.spec_from_file_location(f"perfonto_evaluator_{abs(hash(str(path)))}", str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def evaluate_dump(graph: MetricGraph, evaluator, counters_path: str | Path) -> Evaluation:
    """Read the dump, prepare windows and evaluate every metric at the three levels."""
    gen = graph.generation
    dump = read_counters(counters_path, gen)
    w = prepare(dump, gen)
    window = evaluator.evaluate(w.values, w.interval, w.chips)
    levels = evaluate_levels(graph, w, evaluator.evaluate, window)
    return Evaluation(w, window, levels.per_chip, levels.server, dump.chips, null_reasons(graph, w, window), levels.coverage)


def write_metrics_parquet(ev: Evaluation, graph: MetricGraph, path: str | Path) -> None:
    """One row per window and chip: ``window``, ``chip``, ``start_ns``, ``interval_s`` and one column
    per metric (null where the metric could not be computed; per-instance metrics as fixed-size lists)."""
    W, C = ev.windows.interval.shape
    cols = {
        "window": pa.array(np.repeat(np.arange(W, dtype=np.int64), C)),
        "chip": pa.array(np.tile(ev.chips.astype(np.int64), W)),
        "start_ns": pa.array(ev.windows.start_ns.reshape(-1).astype(np.int64)),
        "interval_s": pa.array(ev.windows.interval.reshape(-1)),
    }
    for name, m in graph.metrics.items():
        v = ev.window[name]
        if m.axes:
            k = int(np.prod([s for _, s in m.axes]))
            flat = v.reshape(W * C * k)
            arr = pa.array(flat, mask=np.isnan(flat))
            cols[name] = pa.FixedSizeListArray.from_arrays(arr, k)
        else:
            flat = v.reshape(-1)
            cols[name] = pa.array(flat, mask=np.isnan(flat))
    table = pa.table(cols)
    meta = {b"perfonto": json.dumps({"generation": graph.generation.name, "catalog_hash": graph.content_hash}).encode()}
    pq.write_table(table.replace_schema_metadata(meta), str(path))
