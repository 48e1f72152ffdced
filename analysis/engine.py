"""The one engine behind ``perfonto analyze`` and ``perfonto run``: a capture of any size evaluated by
the generated evaluator's fused kernel, piece by piece, in one sequential pass over the input.

The dump is planned (``capture.dump_scan``: the key columns, read once) and read in pieces
(``capture.pieces``: per host, per time range, the last sample carried over; a regular host's register
columns in one sequential pass, laid out as the kernel reads them). Each piece goes through the
generated ``Stream`` (``codegen/runtime_kernel.py`` when numba is installed, its NumPy path otherwise):
window rules and formulas in one pass, and in the same pass each chip's run-level sums of every input
and the count of null window values per register. What the report needs is carried from piece to
piece: the run-level sums per chip (``analysis.level_sums``), the null reasons, the bound and top-down
checks, the extremes of ``rollup max|min`` metrics, and per window the signals null on some chip. The
window values go to a sink (``metrics/host=<host>/part-<n>.parquet``) or, for a capture small enough
to keep (``keep``), stay in memory for the analyses that read them (cross-chip, attribution, links).

A piece none of whose window values is null (the common case) needs nothing more. A piece with a
null — a reset, a wrap too long, a sentinel, a missing sample or register — gives its inputs' window
values (the generated NumPy rules) and, for the inputs with a null, the reason of each from the
reference rules (``metrics.windows.prepare`` of just those signals); that piece's sums are taken over
the windows valid for each class of metrics (``ChipSums``). The server level uses, as
``metrics.levels`` does, the windows valid on every chip: for a dump of one host those sums are
carried in the same pass; for a fleet, where a window was null on some chips only, a second pass
reads again only the pieces that hold such windows (clean pieces add the sums kept from the first
pass), never the whole dump. A counter's missing samples are bridged in the run totals by the running
totals on either side, across pieces (``analysis.engine_bridge``).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from perfonto.capture.dump import CounterDump
from perfonto.capture.dump_plan import DumpPlan
from perfonto.capture.dump_scan import CHUNK_ROWS
from perfonto.capture.partitions import inside, segment
from perfonto.capture.pieces import Chunk, iter_chunks
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import null_reasons
from perfonto.metrics.windows import Windows, prepare

from .checks import WindowChecks
from .evaluate import Evaluation, metrics_table, write_table
from .engine_bridge import Held
from .engine_levels import _levels, chip_values, with_nan_inputs
from .level_sums import ChipSums

Progress = Callable[[str, int, int], None]
FORMULA_NULL = "undefined (division by zero)"  # metrics.levels.null_reasons' label for a null with valid inputs


@dataclass
class EngineResult:
    """What the pass leaves: ``evaluation`` (per-chip and server values, null reasons, coverage; its
    ``window`` holds the window values when they were kept), ``sums`` (each host's ``ChipSums``, for
    the fleet rollups), ``checks`` (bound violations and top-down sums), ``files`` (the metric parts
    written), ``rows`` (window rows), ``dump`` (the whole capture, when kept), ``stats`` (pieces by how
    they were evaluated, and the pieces read again)."""

    evaluation: Evaluation
    sums: list[ChipSums]
    checks: WindowChecks
    files: list[str] = field(default_factory=list)
    rows: int = 0
    extremes: dict[str, np.ndarray] = field(default_factory=dict)
    span: dict[str, np.ndarray] = field(default_factory=dict)
    dump: CounterDump | None = None
    stats: dict[str, int] = field(default_factory=dict)


def _layout(evaluator) -> list[tuple[str, int]]:
    """The evaluator's register layout: (signal, instances) in ``_REGS`` order."""
    return [(name, b - a) for name, a, b in evaluator._REGS]


def _evaluate_piece(
    evaluator, ch: Chunk, layout, keep_values: bool = False
) -> tuple[dict[str, np.ndarray], np.ndarray, dict | None]:
    """The window values of a piece's metrics (``{metric: (W, C, …)}``), its run-level sums (ACC: NaN in
    a column that held a null) and, with ``keep_values`` and the kernel, its inputs' window values, from
    the generated stream (a fresh one: the piece's first sample is its baseline)."""
    st = evaluator.Stream()
    f = ch.flat
    if f is not None and f.missing is None:  # the layout's columns come first in X (then, when kept, the dump's others)
        res = st.push_flat(
            f.T, f.X, np.arange(sum(n for _, n in layout), dtype=np.int64), sums=True, keep_values=keep_values
        )
        return {k: v for k, (v, _) in (res or {}).items()}, st.sums, st.values
    d = ch.dump
    S, C = d.timestamps_ns.shape
    raw = {n: d.raw[n] if n in d.raw else np.zeros((S, C, k), np.uint64) for n, k in layout}  # the layout's only
    present = None if d.present.all() else d.present
    missing = {n: m for n, m in d.missing.items() if n in raw} or None
    res = st.push_block(d.timestamps_ns, raw, present, missing, sums=True)
    return res or {}, st.sums, None


def _formula_nulls(values: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Null window values of a piece whose inputs are all valid: each is the formula's own."""
    out = {}
    for name, v in values.items():
        with np.errstate(all="ignore"):  # a sum past the float range is inf, no warning
            if not np.isnan(np.sum(v)):  # no NaN (a sum is NaN with one, or with +inf and -inf: then counted below)
                continue
        n = int(np.isnan(v).reshape(v.shape[0], v.shape[1], -1).any(axis=2).sum())
        if n:
            out[name] = {FORMULA_NULL: n}
    return out


class _Pass:
    """State carried from piece to piece (module docstring)."""

    def __init__(self, graph: MetricGraph, evaluator, plan: DumpPlan, keep: bool):
        self.graph, self.evaluator, self.plan, self.keep = graph, evaluator, plan, keep
        self.gen = graph.generation
        self.layout = _layout(evaluator)
        self.C = sum(plan.chips.values())
        self.offsets = np.concatenate([[0], np.cumsum(list(plan.chips.values()))]).astype(np.int64)
        self.W = plan.n_grid - 1
        self.sums: list[ChipSums] = []
        # one host: the server level's sums (windows valid on every chip) carried in the same pass
        self.server = ChipSums(graph, server=True) if len(plan.groups) == 1 else None
        self.bad_any: dict[str, np.ndarray] = {}
        self.nulls: dict[str, dict[str, int]] = {}
        self.checks = WindowChecks(graph)
        self.rollup = {n: m.rollup for n, m in graph.metrics.items() if m.rollup}
        self.extremes = {
            n: np.full((self.C,) + tuple(s for _, s in graph.metrics[n].axes), np.nan) for n in self.rollup
        }
        self.first_start = np.zeros(self.C, np.int64)
        self.last_end = np.zeros(self.C, np.int64)
        self.chip_time = np.zeros(self.C)
        self.clean: dict[tuple[int, int], tuple[dict, np.ndarray]] = {}  # (group, first) -> a clean piece's full sums
        self.dirty_pieces: set[tuple[int, int]] = set()
        self.kept_values: dict[int, list[dict]] = {}  # host group -> its pieces' window values, in time order
        self.kept_dumps: dict[int, list[CounterDump]] = {}
        self.stats = {"pieces": 0, "kernel": 0, "numpy": 0, "prepared again": 0, "read again": 0}
        self.held = Held(self)  # missing samples bridged in the run totals, across pieces
        # hosts whose last piece held a null: their next piece keeps its inputs' window values from the one
        # kernel run (a null-heavy capture then runs the kernel once a piece, not twice; a clean one never pays)
        self.dirty_host: set[int] = set()

    def add(self, ch: Chunk) -> tuple[Windows, dict[str, np.ndarray]]:
        values, ACC, kept = _evaluate_piece(self.evaluator, ch, self.layout, keep_values=ch.group in self.dirty_host)
        T = ch.flat.T if ch.flat is not None else ch.dump.timestamps_ns
        Cc = T.shape[1]
        col0 = int(self.offsets[ch.group])
        while len(self.sums) <= ch.group:
            self.sums.append(ChipSums(self.graph))
        self.stats["pieces"] += 1
        self.stats[
            "kernel"
            if ch.flat is not None and ch.flat.missing is None and self.evaluator._jit() is not None and not _no_jit()
            else "numpy"
        ] += 1
        clean = ch.flat is not None and ch.flat.missing is None and not np.isnan(ACC).any()
        (self.dirty_host.discard if clean else self.dirty_host.add)(ch.group)
        if clean:
            full = self.evaluator.input_sums(ACC)
            dt = ACC[:, -1].copy()
            self.sums[ch.group].add_sums(full, dt)
            if self.server is not None:
                self.server.add_sums(full, dt)
            else:
                self.clean[(ch.group, ch.first)] = (full, dt)
            counts = _formula_nulls(values)
            interval = (np.diff(T, axis=0)).astype(np.float64) * 1e-9
            w = Windows(interval, {}, 1.0, "window", T[:-1], {})
        else:
            self.stats["prepared again"] += 1
            w = self._windows(ch, ACC, kept)
            self.held.add(ch, w)  # to the sums, missing samples bridged (held back while a gap is open)
            if self.server is None:
                self.dirty_pieces.add((ch.group, ch.first))
            dt = w.interval.sum(axis=0)
            counts = null_reasons(self.graph, w, values)
        for name, c in counts.items():
            into = self.nulls.setdefault(name, {})
            for k, v in c.items():
                into[k] = into.get(k, 0) + v
        self.chip_time[col0 : col0 + Cc] += dt
        chips = ch.chips if ch.chips is not None else ch.dump.chips
        hosts = (
            ch.hosts if ch.hosts is not None else (None if ch.host is None else np.full(len(chips), ch.host, object))
        )
        self.checks.add(values, ch.first, chips, col0, hosts)
        for n, how in self.rollup.items():  # ``rollup max|min`` metrics: the extreme window per chip
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an all-null column gives null
                ext = (np.nanmax if how == "max" else np.nanmin)(values[n], axis=0)
                cur = self.extremes[n][col0 : col0 + Cc]
                self.extremes[n][col0 : col0 + Cc] = (np.fmax if how == "max" else np.fmin)(cur, ext)
        if ch.first == 0:
            self.first_start[col0 : col0 + Cc] = T[0]
        self.last_end[col0 : col0 + Cc] = T[-1]
        if self.keep:
            self.kept_values.setdefault(ch.group, []).append(values)
            self.kept_dumps.setdefault(ch.group, []).append(ch.dump)
        return w, values

    def _windows(self, ch: Chunk, ACC: np.ndarray, kept: dict | None) -> Windows:
        """A piece with null values, as windows of its inputs: the generated evaluator's window values
        (the ones its metrics were evaluated over) and, for the inputs with a null, the reason of each
        from the reference rules (``metrics.windows.prepare`` of just those signals, their reset
        indicators and unit registers). A piece with null registers is prepared whole by the reference."""
        f = ch.flat
        if f is None or f.missing is not None:
            return prepare(ch.dump, self.gen)
        if kept is not None:
            values, interval = kept, (np.diff(f.T, axis=0)).astype(np.float64) * 1e-9
        else:
            colmap = np.arange(sum(n for _, n in self.layout), dtype=np.int64)
            values, interval = self.evaluator.window_values(f.T, f.X, colmap)
        sums = self.evaluator.input_sums(ACC)  # a column that held a null sums to NaN
        bad = [n for n in values if np.isnan(sums[n]).any()]
        gen, dump = self.gen, ch.dump
        need: set[str] = set()
        for n in bad:
            sig = gen.signals[gen.fields[n].register] if n in gen.fields else gen.signals[n]
            need.add(sig.name)
            if sig.reset_indicator:
                need.add(sig.reset_indicator)
            if sig.scale_field is not None:
                need.add(gen.fields[sig.scale_field[0]].register)
        sub = CounterDump(
            dump.path,
            dump.chips,
            dump.timestamps_ns,
            {k: v for k, v in dump.raw.items() if k in need},
            dump.present,
            {},
            dump.metadata,
            dump.hosts,
            dump.absent,
            dump.notes,
        )
        reasons = prepare(sub, gen).null
        return Windows(interval, values, 1.0, "window", f.T[:-1], {n: reasons[n] for n in bad})


@contextmanager
def _frozen_heap():
    """The objects alive before the pass (the catalog, the evaluator, the modules: hundreds of thousands)
    left out of the garbage collector's passes while it runs (``gc.freeze``), and given back after. The
    pass allocates enough container objects to set off full collections, each of which walked all of
    them: ~3 % of the CPU time of a 2M-row analyze. A caller that froze objects of its own keeps them so."""
    import gc

    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _no_jit() -> bool:
    import os

    return bool(os.environ.get("PERFONTO_NO_JIT"))


def evaluate_capture(
    graph: MetricGraph,
    evaluator,
    dump_plan: DumpPlan,
    out: str | Path | None,
    *,
    chunk_rows: int = CHUNK_ROWS,
    progress: Progress | None = None,
    write_meta: dict | None = None,
    keep: bool = False,
) -> EngineResult:
    """Evaluate ``graph`` over the dump of ``dump_plan`` (module docstring) with ``evaluator`` (its
    generated module), writing the window values under ``out/host=<host>/part-<n>.parquet`` (``out``
    None: not written). ``keep``: keep the window values (``evaluation.window``, (W, C, …) per metric)
    and the whole dump (``dump``) in memory, for a capture that fits.

    Raises:
        DumpError: a piece that cannot be read (as ``read_counters`` would say).
    """
    st = _Pass(graph, evaluator, dump_plan, keep)
    columns = list(st.layout)
    if keep:  # the analyses of a kept capture (attribution, cross-chip) read every signal of the dump
        have = {n for n, _ in columns}
        columns += [(n, graph.generation.signals[n].instances) for n in dump_plan.columns if n not in have]
    signals = [n for n, _ in columns]
    total_rows = st.W * st.C

    def piece_done(ch, w, done: int) -> None:
        if progress:
            progress("evaluate", done, total_rows)

    with _frozen_heap():
        files, done = run_pieces(
            st, iter_chunks(dump_plan, signals, chunk_rows, columns=columns), out, write_meta, piece_done
        )
    dump_plan.notes += [n for n in st.held.finish() if n not in dump_plan.notes]
    from .clock_check import clock_notes  # the time base against the clocks: a wrong --timestamp-unit

    dump_plan.notes += [n for n in clock_notes(graph.generation, st.sums, dump_plan.unit) if n not in dump_plan.notes]
    ev = _levels(graph, evaluator, st, chunk_rows, progress)
    ev.n_windows = st.W
    dump = None
    if keep:  # hosts side by side (chips on axis 1), each host's pieces one after the other
        groups = sorted(st.kept_values)
        ev.window = (
            {
                n: np.concatenate([np.concatenate([v[n] for v in st.kept_values[g]]) for g in groups], axis=1)
                for n in graph.metrics
            }
            if groups
            else {}
        )
        dump = _whole([_in_time(st.kept_dumps[g]) for g in groups])
        ev.windows = prepare(dump, graph.generation) if dump is not None else None
    else:
        ev.windows = Windows(st.chip_time[None, :], {}, 1.0, "run", None, {})  # the run per chip; windows written
    return pass_result(st, ev, files, done, dump)


def run_pieces(
    st: _Pass,
    chunks,
    out: str | Path | None,
    write_meta: dict | None,
    piece_done: Callable[[Chunk, Windows, int], None] | None = None,
) -> tuple[list[str], int]:
    """Each piece of ``chunks`` (``capture.pieces.Chunk``, in time order per host) through ``st.add``,
    its window values written under ``out/host=<host>/part-<n>.parquet`` by one writer thread, so that
    encoding a part overlaps the next piece (at most two pieces' values held for it; ``out`` None: not
    written). ``piece_done(chunk, windows, rows so far)`` after each piece. The embedded engine's pass and
    a Spark task's host (``spark_kernel.run_host``) alike. Returns (files written, window rows)."""
    from concurrent.futures import ThreadPoolExecutor

    files: list[str] = []
    part_no: dict[str | None, int] = {}
    done = 0
    with ThreadPoolExecutor(1, thread_name_prefix="perfonto-write") as writer:
        pending = []
        for ch in chunks:
            w, values = st.add(ch)
            if out is not None:
                while len(pending) >= 2:
                    files.append(pending.pop(0).result())
                pending.append(writer.submit(_write, st.graph, w, values, ch, Path(out), part_no, write_meta))
            done += w.interval.size
            if piece_done is not None:
                piece_done(ch, w, done)
        files += [f.result() for f in pending]
    return files, done


def pass_result(st: _Pass, ev: Evaluation, files: list[str], done: int, dump: CounterDump | None = None):
    """The ``EngineResult`` of a finished pass ``st`` whose levels are ``ev``."""
    return EngineResult(
        ev,
        st.sums,
        st.checks,
        files,
        done,
        st.extremes,
        {"start_ns": st.first_start, "end_ns": st.last_end},
        dump,
        st.stats,
    )


def _in_time(dumps: list[CounterDump]) -> CounterDump:
    """One host's ``CounterDump`` from its pieces in time order (each piece's carried first sample once)."""
    d0 = dumps[0]
    if len(dumps) == 1:
        return d0

    def cat(get):
        return np.concatenate([get(d) if i == 0 else get(d)[1:] for i, d in enumerate(dumps)])

    names = set().union(*[d.missing for d in dumps])
    return CounterDump(
        d0.path,
        d0.chips,
        cat(lambda d: d.timestamps_ns),
        {n: cat(lambda d, n=n: d.raw[n]) for n in d0.raw},
        cat(lambda d: d.present),
        {n: cat(lambda d, n=n: _missing(d, n)) for n in names},
        d0.metadata,
        d0.hosts,
        d0.absent,
        d0.notes,
    )


def _missing(d: CounterDump, name: str) -> np.ndarray:
    return d.missing[name] if name in d.missing else np.zeros(d.raw[name].shape, bool)


def _whole(hosts: list[CounterDump]) -> CounterDump | None:
    """The whole capture from each host's ``CounterDump`` (on the same grid), chips side by side."""
    if not hosts:
        return None
    d0 = hosts[0]
    if len(hosts) == 1:
        return d0

    def side(get):
        return np.concatenate([get(d) for d in hosts], axis=1)

    names = set().union(*[d.missing for d in hosts])
    return CounterDump(
        d0.path,
        side(lambda d: d.chips[None])[0],
        side(lambda d: d.timestamps_ns),
        {n: side(lambda d, n=n: d.raw[n]) for n in d0.raw},
        side(lambda d: d.present),
        {n: side(lambda d, n=n: _missing(d, n)) for n in names},
        d0.metadata,
        None if d0.hosts is None else side(lambda d: np.asarray(d.hosts, dtype=object)[None])[0],
        d0.absent,
        d0.notes,
    )


def _write(graph, w, values, ch, out: Path, part_no: dict, meta: dict | None) -> str:
    ev = Evaluation(w, values, {}, {}, ch.chips, {}, {}, ch.hosts)
    t = metrics_table(ev, graph, first_window=ch.first)
    if ch.host is not None:  # the folder names it (Hive partitioning)
        t = t.drop_columns(["host"])
    folder = out / (segment("host", ch.host) if ch.host is not None else ".")  # a host from data, escaped: never a path
    n = part_no.get(ch.host, 0)
    part_no[ch.host] = n + 1
    path = inside(folder / f"part-{n:05d}.parquet", out)
    folder.mkdir(parents=True, exist_ok=True)
    if meta:
        import json

        t = t.replace_schema_metadata({b"perfonto": json.dumps(meta).encode()})
    write_table(t, path)
    return str(path)


__all__ = ["EngineResult", "chip_values", "evaluate_capture", "with_nan_inputs"]
