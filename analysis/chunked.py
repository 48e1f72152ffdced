"""Evaluate a dump of any size in bounded memory: the embedded engine behind ``perfonto analyze``.

The dump is read in pieces (``metrics.dump_scan``: per host, per time range, the last sample carried
over), each piece's windows are prepared by ``metrics.windows.prepare`` and evaluated by the generated
evaluator, and written at once as ``metrics/host=<host>/part-<n>.parquet``; nothing of the window
values is kept. What the report needs is carried from piece to piece: run-level sums per chip
(``analysis.level_sums``), the null reasons, the bound violations and top-down checks, and per window
which signals were null on some chip. The result equals the in-memory path
(``analysis.evaluate.evaluate_windows``): the same window values bit for bit, the same per-chip and
server-level values up to the order of floating-point sums. The server level uses, as there, the
windows valid on every chip: when a signal was null on some chips only, a second pass over the dump
sums those metrics' inputs over the windows valid everywhere.

Why this engine is the default (``benchmarks/bench_fleet.py``, 125 hosts × 8 chips × 1 h at 100 ms =
36M rows, 2 shared cores): its peak memory stays flat — 0.93 GB over the whole fleet, 0.86 GB over
one host — while DuckDB on the generated SQL holds the window partitions (1.41 GB for one host's
288k rows, 6.2 GB for 1.28M rows in issue 14); DuckDB was 1.16× its rows/s on one host (and 5× slower
in ``benchmarks/bench_eval.py`` on uncompressed Parquet), and it carries the run-level sums, null
reasons and checks that DuckDB would need further queries for. DuckDB and Spark run the generated
SQL (``codegen.sql``, ``codegen.sql_rollup``, ``analysis.spark_engine``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.parquet as pq

from perfonto.codegen.plan import plan
from perfonto.metrics.compiler import MetricGraph
from perfonto.metrics.dump_scan import CHUNK_ROWS, DumpPlan, iter_chunks
from perfonto.metrics.levels import null_reasons
from perfonto.metrics.windows import VALID, Windows, prepare

from .checks import WindowChecks
from .evaluate import Evaluation, metrics_table
from .level_sums import ChipSums, combine, masked_sums, run_values

Progress = Callable[[str, int, int], None]


@dataclass
class ChunkedResult:
    """What the pieces leave: ``evaluation`` (per-chip and server values, null reasons, coverage;
    ``window`` is empty), ``sums`` (each host's ``ChipSums``, for the fleet rollups), ``checks``
    (bound violations and top-down sums), ``files`` (the metric parts written), ``rows`` (window rows)."""

    evaluation: Evaluation
    sums: list[ChipSums]
    checks: WindowChecks
    files: list[str] = field(default_factory=list)
    rows: int = 0
    extremes: dict[str, np.ndarray] = field(default_factory=dict)
    span: dict[str, np.ndarray] = field(default_factory=dict)


def _signals(graph: MetricGraph) -> list[str]:
    return list(plan(graph).registers) or list(graph.generation.signals)


def evaluate_chunked(graph: MetricGraph, evaluator, dump_plan: DumpPlan, out: str | Path | None, *,
                     chunk_rows: int = CHUNK_ROWS, progress: Progress | None = None, write_meta: dict | None = None
                     ) -> ChunkedResult:
    """Evaluate ``graph`` over the dump of ``dump_plan`` piece by piece (module docstring), writing the
    window values under ``out/host=<host>/part-<n>.parquet`` (``out`` None: not written).

    Raises:
        DumpError: a piece that cannot be read (as ``read_counters`` would say).
    """
    gen = graph.generation
    signals = _signals(graph)
    rollup = {n: m.rollup for n, m in graph.metrics.items() if m.rollup}
    W = dump_plan.n_grid - 1
    C = sum(dump_plan.chips.values())
    total_rows = W * C
    sums: list[ChipSums] = []
    bad_any: dict[str, np.ndarray] = {}
    nulls: dict[str, dict[str, int]] = {}
    checks = WindowChecks(graph)
    extremes = {n: np.full((C,) + tuple(s for _, s in graph.metrics[n].axes), np.nan) for n in rollup}
    first_start = np.zeros(C, np.int64)
    chip_time = np.zeros(C)
    last_end = np.zeros(C, np.int64)
    files: list[str] = []
    done = 0
    col0 = 0
    offsets = np.concatenate([[0], np.cumsum(list(dump_plan.chips.values()))])
    part_no: dict[str | None, int] = {}
    for ch in iter_chunks(dump_plan, signals, chunk_rows):
        while len(sums) <= ch.group:
            sums.append(ChipSums(graph))
        col0 = int(offsets[ch.group])
        w = prepare(ch.dump, gen)
        values = evaluator.evaluate(w.values, w.interval, w.chips)
        Wc, Cc = w.interval.shape
        sums[ch.group].add(w)
        chip_time[col0:col0 + Cc] += w.interval.sum(axis=0)
        for s, r in w.null.items():
            if r.any():
                flag = (r != VALID).reshape(Wc, Cc, -1).any(axis=(1, 2))
                bad_any.setdefault(s, np.zeros(W, bool))[ch.first:ch.first + Wc] |= flag
        for name, counts in null_reasons(graph, w, values).items():
            for k, v in counts.items():
                nulls.setdefault(name, {})[k] = nulls.setdefault(name, {}).get(k, 0) + v
        checks.add(values, ch.first, ch.dump.chips, col0)
        for n, how in rollup.items():  # ``rollup max|min`` metrics: the extreme window per chip
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an all-null column gives null
                ext = (np.nanmax if how == "max" else np.nanmin)(values[n], axis=0)
                cur = extremes[n][col0:col0 + Cc]
                extremes[n][col0:col0 + Cc] = (np.fmax if how == "max" else np.fmin)(cur, ext)
        if ch.first == 0:
            first_start[col0:col0 + Cc] = w.start_ns[0]
        last_end[col0:col0 + Cc] = ch.dump.timestamps_ns[-1]
        if out is not None:
            files.append(_write(graph, w, values, ch, Path(out), part_no, write_meta))
        done += Wc * Cc
        if progress:
            progress("evaluate", done, total_rows)
    ev = _levels(graph, evaluator, dump_plan, sums, bad_any, nulls, extremes, signals, chunk_rows, progress, chip_time)
    ev.windows = Windows(chip_time[None, :], {}, 1.0, "run", None, {})  # the run per chip; the windows were written
    ev.n_windows = W
    res = ChunkedResult(ev, sums, checks, files, done, extremes, {"start_ns": first_start, "end_ns": last_end})
    return res


def _write(graph, w, values, ch, out: Path, part_no: dict, meta: dict | None) -> str:
    d = ch.dump
    ev = Evaluation(w, values, {}, {}, d.chips, {}, {}, d.hosts)
    t = metrics_table(ev, graph)
    t = t.set_column(0, "window", pa_add(t.column("window"), ch.first))
    if ch.host is not None:  # the folder names it (Hive partitioning)
        t = t.drop_columns(["host"])
    folder = out / (f"host={ch.host}" if ch.host is not None else ".")
    folder.mkdir(parents=True, exist_ok=True)
    n = part_no.get(ch.host, 0)
    part_no[ch.host] = n + 1
    path = folder / f"part-{n:05d}.parquet"
    if meta:
        import json

        t = t.replace_schema_metadata({b"perfonto": json.dumps(meta).encode()})
    pq.write_table(t, str(path))
    return str(path)


def pa_add(col, k: int):
    """``col + k`` (an int64 column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.add(col, pa.scalar(int(k), pa.int64()))


def _levels(graph, evaluator, dump_plan, sums: list[ChipSums], bad_any, nulls, extremes, signals, chunk_rows, progress,
            chip_time: np.ndarray) -> Evaluation:
    """Per-chip and server-level values from the carried sums (and a second pass where needed)."""
    gen = graph.generation
    deps = ChipSums(graph).deps
    dirty = frozenset().union(*[s.dirty for s in sums]) if sums else frozenset()
    C = sum(dump_plan.chips.values())
    per_chip: dict[str, np.ndarray] = {}
    server: dict[str, np.ndarray] = {}
    coverage: dict[str, float] = {}
    keys: dict[frozenset, list[str]] = {}
    for m in graph.metrics:
        keys.setdefault(frozenset(deps[m] & dirty), []).append(m)
    masks = {}
    for key in keys:
        bad = np.zeros(max(dump_plan.n_grid - 1, 0), bool)
        for s in key:
            if s in bad_any:
                bad |= bad_any[s]
        if bad.any():
            masks[key] = ~bad
    need = {k: sorted(set().union(*[deps[m] for m in keys[k]])) for k in masks}
    srv_sums = _second_pass(graph, dump_plan, masks, need, signals, chunk_rows, progress) if masks else {}
    total_time = float(chip_time.mean()) if C else 0.0
    for key, names in keys.items():
        vals, dt = chip_values(sums, key)
        out = evaluator.evaluate(with_nan_inputs(gen, evaluator, {n: v[None] for n, v in vals.items()}, C), dt[None], 1.0)
        for n in names:
            v = np.array(out[n][0], dtype=np.float64)
            v[dt <= 0] = np.nan  # no valid window on that chip: nothing to report, not 0
            per_chip[n] = v
        if key in srv_sums:
            vals, dt = run_values(gen, *srv_sums[key]), srv_sums[key][1]
        rolled, interval, _ = combine(gen, vals, dt, np.zeros(C, np.int64), 1)
        out = evaluator.evaluate(with_nan_inputs(gen, evaluator, {n: v[None] for n, v in rolled.items()}, 1),
                                 interval.reshape(1, 1), float(C))
        kept = float(interval[0]) if C else 0.0
        for n in names:
            server[n] = np.full_like(np.asarray(out[n][0, 0], dtype=np.float64), np.nan) if kept <= 0 else out[n][0, 0]
            coverage[n] = kept / total_time if total_time > 0 else 0.0
    for n, how in {n: m.rollup for n, m in graph.metrics.items() if m.rollup}.items():
        per_chip[n] = extremes[n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            server[n] = (np.nanmax if how == "max" else np.nanmin)(extremes[n], axis=0)
        coverage[n] = 1.0
    chips = np.concatenate([dump_plan.chip_numbers[h] for h in dump_plan.groups]) if C else np.zeros(0, np.int64)
    hosts = None if list(dump_plan.groups) == [None] else np.array([h for h, c in dump_plan.chips.items() for _ in range(c)], dtype=object)
    return Evaluation(None, {}, per_chip, server, chips, nulls, coverage, hosts)


def with_nan_inputs(gen, evaluator, inputs: dict[str, np.ndarray], C: int) -> dict[str, np.ndarray]:
    """``inputs`` plus NaN arrays (1, C, …) for the evaluator inputs they lack (the metrics evaluated
    from them do not read those)."""
    out = dict(inputs)
    for name in getattr(evaluator, "INPUTS", ()):
        if name not in out:
            axes = gen.fields[name].axes if name in gen.fields else gen.signals[name].axes
            out[name] = np.full((1, C) + tuple(s for _, s in axes), np.nan)
    return out


def chip_values(sums: list[ChipSums], key: frozenset) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-chip run-level values (all chips, host by host) of the metrics of global class ``key``."""
    parts, dts = [], []
    for s in sums:
        k = frozenset(key & s.dirty)
        vals, dt = s.run_values(k)
        parts.append(vals)
        dts.append(dt)
    names = set(parts[0]).intersection(*parts[1:]) if parts else set()
    return {n: np.concatenate([p[n] for p in parts]) for n in names}, np.concatenate(dts)


def _second_pass(graph, dump_plan, masks: dict[frozenset, np.ndarray], need: dict, signals, chunk_rows, progress) -> dict:
    """Per-chip sums of the classes in ``masks`` (of the signals in ``need``) over the windows valid
    on every chip."""
    gen = graph.generation
    C = sum(dump_plan.chips.values())
    offsets = np.concatenate([[0], np.cumsum(list(dump_plan.chips.values()))])
    acc: dict[frozenset, tuple[dict, np.ndarray]] = {}
    done = 0
    total = (dump_plan.n_grid - 1) * C
    for ch in iter_chunks(dump_plan, signals, chunk_rows):
        w = prepare(ch.dump, gen)
        Wc, Cc = w.interval.shape
        c0 = int(offsets[ch.group])
        for key, good in masks.items():
            mask = np.broadcast_to(good[ch.first:ch.first + Wc, None], (Wc, Cc))
            s, dt = masked_sums(w, gen, need[key], mask)
            if key not in acc:
                acc[key] = ({n: np.zeros((C,) + v.shape[1:]) for n, v in s.items()}, np.zeros(C))
            for n, v in s.items():
                acc[key][0][n][c0:c0 + Cc] += v
            acc[key][1][c0:c0 + Cc] += dt
        done += Wc * Cc
        if progress:
            progress("server level (windows valid on every chip)", done, total)
    return acc


__all__ = ["ChunkedResult", "chip_values", "evaluate_chunked", "with_nan_inputs"]
