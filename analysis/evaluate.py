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

from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import evaluate_levels, null_reasons
from perfonto.metrics.windows import DumpError, Windows, prepare, read_counters


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
    hosts: np.ndarray | None = None  # host of each chip column, when the dump names hosts
    mismeasured: dict[str, np.ndarray] | None = None  # metric -> (W, C) inputs never counted together (multiplexed)
    quiet: object = None  # metrics.levels.LeaderCounts: chips counting no leader-counted amount, or None


def chip_names(ev) -> list[str]:
    """Each chip column's name in messages: ``host/chip`` when the capture names hosts (a fleet numbers
    its chips from 0 on every host, so a bare number is ambiguous), else the chip number."""
    chips = [str(int(c)) for c in ev.chips]
    hosts = getattr(ev, "hosts", None)
    if hosts is None or not any(str(h) for h in hosts):
        return chips
    return [f"{h}/{c}" for h, c in zip(hosts, chips)]


def leader_note(ev) -> list[str]:
    """The report's note on the per-chip values of leader-counted metrics (``Evaluation.quiet``,
    ``metrics.levels.leader_counts``) that read 0 on the chips that count none of those amounts, naming
    the metrics and the chips; empty when there are none."""
    q = getattr(ev, "quiet", None)
    if q is None or not q.metrics or not q.quiet:
        return []
    names = chip_names(ev)
    chips = [names[i] for i in q.quiet if i < len(names)]
    shown = ", ".join(q.metrics[:6]) + (f" and {len(q.metrics) - 6} more" if len(q.metrics) > 6 else "")
    where = ", ".join(chips[:8]) + (f" and {len(chips) - 8} more" if len(chips) > 8 else "")
    return [
        f"{shown}: tokens, steps and requests are counted once per group, by its leader chip; per chip, "
        f"{'chip' if len(chips) == 1 else 'chips'} {where} counted none over the run and read 0 or no value "
        "there — not their group's leader (the leader's value covers the group), or idle"
    ]


def load_evaluator(path: str | Path):
    """Import a generated evaluator module from its file."""
    spec = importlib.util.spec_from_file_location(f"perfonto_evaluator_{abs(hash(str(path)))}", str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def evaluate_dump(graph: MetricGraph, evaluator, counters_path: str | Path) -> Evaluation:
    """Read the dump, prepare windows and evaluate every metric at the three levels (every signal
    the metrics read must be in the dump; ``analysis.capture`` handles partial dumps)."""
    gen = graph.generation
    dump = read_counters(counters_path, gen)
    return evaluate_windows(graph, evaluator, prepare(dump, gen), dump)


def evaluate_windows(graph: MetricGraph, evaluator, w: Windows, dump) -> Evaluation:
    """Evaluate every metric of ``graph`` over prepared windows ``w`` (of ``dump``) at the three levels.

    Raises:
        DumpError: a signal the metrics read is not in the dump.
    """
    lacking = sorted(set(getattr(evaluator, "INPUTS", ())) - set(w.values))
    if lacking:
        raise DumpError(
            f"{dump.path}: the dump has no {', '.join(lacking[:6])}, which the metrics read; "
            "evaluate the metrics it can feed (perfonto analyze does)"
        )
    window = evaluator.evaluate(w.values, w.interval, w.chips)
    levels = evaluate_levels(graph, w, evaluator.evaluate, window)
    return Evaluation(
        w,
        window,
        levels.per_chip,
        levels.server,
        dump.chips,
        null_reasons(graph, w, window),
        levels.coverage,
        dump.hosts,
        quiet=levels.quiet,
    )


def write_metrics_parquet(ev: Evaluation, graph: MetricGraph, path: str | Path) -> None:
    """``metrics_table`` as Parquet, with the generation and catalog hash in the metadata."""
    table = metrics_table(ev, graph)
    meta = {b"perfonto": json.dumps({"generation": graph.generation.name, "catalog_hash": graph.content_hash}).encode()}
    write_table(table.replace_schema_metadata(meta), path)


def write_table(table: pa.Table, path: str | Path) -> None:
    """A metric table as Parquet: Snappy, dictionary encoding for the string columns only (floats do not
    repeat: trying a dictionary for each of them made writing 3x slower here, 0.21 vs 0.07 s for a
    32,768-row part of 91 columns, and the file 13 % larger)."""
    strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_list(f.type)]
    pq.write_table(table, str(path), compression="snappy", use_dictionary=strings)


def metrics_table(ev: Evaluation, graph: MetricGraph, first_window: int = 0) -> pa.Table:
    """One row per window and chip: ``window`` (numbered from ``first_window``), (``host``), ``chip``,
    ``start_ns``, ``interval_s``, one column per metric (null where the metric could not be computed;
    per-instance metrics as fixed-size lists), and ``out_of_bounds``: the metrics whose value in that
    window and chip lies outside their declared bounds (any instance), so a reader of the table sees
    the flag beside the value (``OUT_OF_BOUNDS`` names the column); for a multiplexed capture,
    ``mismeasured``: the metrics whose inputs were never counted together in that row
    (``analysis.multiplexed``)."""
    W, C = ev.windows.interval.shape
    cols = {"window": pa.array(np.repeat(np.arange(first_window, first_window + W, dtype=np.int64), C))}
    if ev.hosts is not None:
        cols["host"] = pa.array(np.tile(np.asarray(ev.hosts, dtype=object), W), pa.string())
    cols |= {
        "chip": pa.array(np.tile(np.asarray(ev.chips).astype(np.int64), W)),
        "start_ns": pa.array(np.asarray(ev.windows.start_ns).reshape(-1).astype(np.int64)),
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
    cols[OUT_OF_BOUNDS] = _name_lists(out_of_bounds(ev, graph), W * C)
    if ev.mismeasured is not None:  # a multiplexed capture: the metrics whose inputs ran in different groups
        cols[MISMEASURED] = _name_lists(ev.mismeasured, W * C)
    return pa.table(cols)


def _name_lists(flags: dict[str, np.ndarray], rows: int) -> pa.Array:
    """A list<string> column: per row, the names whose flag (bool, ``rows`` values) is set, in the
    order of ``flags``."""
    names = list(flags)
    if not names:
        return pa.ListArray.from_arrays(pa.array(np.zeros(rows + 1, np.int32)), pa.array([], pa.string()))
    m = np.stack([flags[n].reshape(-1) for n in names], axis=1)  # (rows, metrics)
    r, k = np.nonzero(m)  # row-major: each row's names in metric order
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(np.bincount(r, minlength=rows), out=offsets[1:])
    # the names taken by index in Arrow (no Python string per flag: a synthetic 2M-row dump flags ~13
    # metrics a row, and building 27M str objects was a third of the writer thread's time)
    values = pa.array(names, pa.string()).take(pa.array(k.astype(np.int32, copy=False)))
    return pa.ListArray.from_arrays(pa.array(offsets), values)


OUT_OF_BOUNDS = "out_of_bounds"
MISMEASURED = "mismeasured"


def out_of_bounds(ev: Evaluation, graph: MetricGraph) -> dict[str, np.ndarray]:
    """``{metric: bool (W, C)}`` for the metrics with declared bounds that some window breaks: True
    where the value (any instance) is outside ``bounds`` (a relative tolerance of 1e-9 of the
    bounds' size)."""
    out = {}
    for name, m in graph.metrics.items():
        if not m.bounds:
            continue
        lo, hi = m.bounds
        tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
        v = ev.window[name]
        with np.errstate(invalid="ignore"):
            bad = (v < lo - tol) | (v > hi + tol)
        bad = bad.reshape(bad.shape[0], bad.shape[1], -1).any(axis=2)
        if bad.any():
            out[name] = bad
    return out
