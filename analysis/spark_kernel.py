"""``--engine spark``: the embedded engine's pass — the generated kernel, its window rules and formulas in
one pass — run on Spark executors, one task per host (a host is one group: the embedded engine evaluates
a host's chips on the host's grid, a missing sample or a gap being a grid point without that chip).

The driver plans the dump as the embedded engine does (``capture.dump_scan.plan_dump``: the key columns
read once, every host placed on the dump's grid) and gives each task its host's share of that plan
(``_host_plan``: the host's Parquet parts, chips and placement). The task reads the host's registers
itself, with the capture layer, in the embedded engine's own pieces (``capture.pieces``: the previous
sample carried from piece to piece), each evaluated by ``analysis.engine._Pass`` with the same
generated evaluator: window values written as the embedded engine writes them
(``metrics/host=<host>/part-<n>.parquet``), and the host's run-level sums and checks returned as one
small row (``analysis.spark_state``). The driver merges the rows into one pass and builds the chip,
server, host, rack, pod and fleet levels with the embedded engine's own code (``engine_levels``,
``level_sums``, ``fleet``); the server level's windows valid on every chip, when some window was null
somewhere, are summed by ``engine_levels._second_pass`` on the driver, over just the pieces that hold
such windows.

Spark schedules the tasks and carries the states; it does not move the counters. Reading them with
Spark's Parquet reader (registers declared ``LONG``, the row-based reader: the vectorized one refuses
a dictionary-encoded ``uint64`` read as ``LONG``), converting its rows to Arrow for ``mapInArrow`` and
range-partitioning them by host (a sampling job and a shuffle of every row) cost far more than the
evaluation itself (issue 33: 41.7 s for 576k rows on ``local[2]``, 0.076 × the embedded engine), for
rows that the task then had to sort back into file order.

The kernel is compiled once: the driver imports the evaluator from perfonto's cache
(``codegen.evaluator_cache``: a content-hashed folder holding ``evaluator.py`` and numba's on-disk cache
of its compiled kernel) and compiles it there; executors are given that file's path and load the
compiled kernel from numba's cache beside it (once per Python worker, which Spark reuses across
tasks), never compiling it per task. The compiled catalog is shipped once as a broadcast. Where the
driver is perfonto's command line, which keeps pandas unloaded (``capture.no_pandas``), its session's
Python workers do too: pyarrow would load it at their first read only to ask whether it was given a
pandas object (0.5-1.2 s of each worker's first host). Executors
must see the cache folder, the dump and the output folder at the same paths as the driver (one
machine, or a shared file system); the dump's parts must be Parquet (the plan of a CSV or Arrow IPC
part holds its rows in the driver's memory).
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from pathlib import Path
from typing import Callable

from perfonto.capture.dump_io import DumpError
from perfonto.capture.dump_plan import DumpPlan
from perfonto.capture.dump_scan import CHUNK_ROWS
from perfonto.capture.no_pandas import pandas_blocked
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.windows import Windows

from .spark_state import host_state, merge_state

_WORKER: dict[str, tuple] = {}  # in an executor's Python worker: graph digest -> (graph, evaluator)
_ENV = ("PERFONTO_NO_JIT", "PERFONTO_KERNEL_THREADS", "PERFONTO_CACHE_DIR", "PERFONTO_NO_CACHE")


def _parquet_parts(plan: DumpPlan) -> list[Path]:
    """The plan's files, each once, in plan order; all Parquet.

    Raises:
        DumpError: a part that is not Parquet (Spark reads Parquet; convert the capture first)."""
    files: list[Path] = []
    for parts in plan.groups.values():
        for part in parts:
            if part.row_group_ends is None:
                raise DumpError(
                    f"{part.path}: --engine spark reads Parquet counter dumps (a file or a folder of parts, Hive "
                    "partitions host=… allowed); write the capture as Parquet or use --engine embedded"
                )
            if part.path not in files:
                files.append(part.path)
    return files


def _host_plan(plan: DumpPlan, host) -> bytes:
    """The plan of one host — its parts, chips and placement on the whole dump's grid (``plan.grids``),
    the dump's grid length and first sample — pickled for the executor that evaluates it; the
    generation is left out (not picklable: the executor puts back its graph's). Each part's path is made
    absolute: an executor of a standalone cluster runs in its worker's own folder, where a path relative
    to the driver's names nothing (a relative dump ended in "internal error: FileNotFoundError")."""
    import copy
    import dataclasses

    p = copy.copy(plan)
    p.gen, p.multiplex, p.notes = None, None, []
    p.groups = {host: [dataclasses.replace(part, path=Path(part.path).absolute()) for part in plan.groups[host]]}
    p.chips = {host: plan.chips[host]}
    p.chip_numbers = {host: plan.chip_numbers[host]}
    p.grids = {host: plan.grids[host]} if host in plan.grids else {}
    return pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)


def _worker(ship: dict, graph_bytes: bytes):
    """(graph, evaluator) in this Python worker: the catalog unpickled once, the evaluator imported once
    from the cache file the driver compiled (its kernel loaded from numba's cache there), or from the
    source shipped when the cache is off. ``ship['no_pandas']``: keep pandas unloaded here, as the
    driver does (``capture.no_pandas``)."""
    if ship.get("no_pandas"):  # the driver is perfonto's CLI: this worker is its own session's
        from perfonto.capture.no_pandas import block_pandas

        block_pandas()
    key = ship["digest"]
    if key not in _WORKER:
        for k, v in ship["env"].items():
            os.environ[k] = v
        graph = pickle.loads(graph_bytes)
        mod = sys.modules.get(ship["module"])
        if mod is None:
            import importlib.util

            if ship["path"]:
                spec = importlib.util.spec_from_file_location(ship["module"], ship["path"])
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                mod._KCACHE = True  # numba's cache beside the file: the driver's compile is loaded, not redone
                sys.modules[ship["module"]] = mod
                from perfonto.codegen.evaluator_cache import warm_kernel

                warm_kernel(mod)  # loaded on a thread while the task reads its first pieces
            else:
                from perfonto.codegen.python_evaluator import load

                mod = load(ship["source"])
        _WORKER[key] = (graph, mod)
    return _WORKER[key]


def run_host(plan_bytes: bytes, ship: dict, graph_bytes: bytes) -> bytes:
    """The embedded engine's pass over one host (``_host_plan``'s bytes): its Parquet parts read in the
    plan's pieces, window values written under ``ship['out']``; returns ``spark_state.host_state``.

    Raises:
        DumpError: the rows cannot be read (as the embedded engine would say)."""
    from perfonto.capture.pieces import iter_chunks

    from .engine import _Pass, run_pieces

    graph, ev = _worker(ship, graph_bytes)
    plan = pickle.loads(plan_bytes)
    plan.gen = graph.generation
    st = _Pass(graph, ev, plan, keep=False)
    if ship["hosts"] > 1:  # the dump's server level is summed on the driver: keep the clean pieces' sums
        st.server = None
    host = list(plan.groups)[0] if plan.groups else None
    spans: dict[int, int] = {}

    def piece_done(ch, w, done: int) -> None:
        spans[ch.first] = w.interval.shape[0]

    chunks = iter_chunks(plan, [n for n, _ in st.layout], ship["chunk_rows"], columns=list(st.layout))
    files, rows = run_pieces(st, chunks, ship["out"] or None, ship["meta"], piece_done)
    notes = st.held.finish()  # gaps that never close: their windows added without them
    return host_state(st, host, files, rows, spans, notes)


def _loaded(digest: str) -> bool:
    """Whether this Python worker holds the graph and evaluator of ``digest`` (``_worker``)."""
    return digest in _WORKER


def _task_fn(ship: dict, graph_bc):
    """The function of a Spark task: its hosts (group number, ``_host_plan`` bytes), each evaluated by
    ``run_host``; yields (group number, state bytes, error, timing) per host. ``timing`` (seconds, this
    Python worker's clocks): ``start`` the task's start (epoch), ``setup`` and ``setup_cpu`` getting the
    graph and evaluator (``_worker``: zero once this Python worker has them), ``host`` and ``host_cpu``
    the host's pass (CPU: every thread of the process), ``fresh`` whether this Python worker ran no
    task before."""

    def fn(items):
        fresh = not _loaded(ship["digest"])  # this module's own table, not the copy pickled with ``fn``
        for g, plan_bytes in items:
            state, error = b"", ""
            t0, c0 = time.time(), time.process_time()
            try:
                graph_bytes = graph_bc.value
                _worker(ship, graph_bytes)
                t1, c1 = time.time(), time.process_time()
                state = run_host(plan_bytes, ship, graph_bytes)
            except DumpError as exc:
                error = str(exc)
                t1, c1 = time.time(), time.process_time()
            t2, c2 = time.time(), time.process_time()
            timing = {"start": t0, "setup": t1 - t0, "setup_cpu": c1 - c0, "host": t2 - t1, "host_cpu": c2 - c1}
            yield g, state, error, dict(timing, fresh=fresh)
            fresh = False

    return fn


def _job_stats(stats: dict, job_s: float, timings: list[dict]) -> None:
    """The Spark job's times (seconds) into the pass's ``stats``: ``spark seconds`` the job's wall time on
    the driver (tasks' scheduling, Python workers' start, the hosts' passes, the states' return);
    ``spark python workers`` the Python workers that ran their first task; ``spark setup seconds`` /
    ``spark setup cpu seconds`` their graph and evaluator loads (``_worker``); ``spark host seconds`` /
    ``spark host cpu seconds`` the hosts' passes (``run_host``), summed over tasks."""
    stats["spark seconds"] = job_s
    stats["spark python workers"] = sum(1 for t in timings if t.get("fresh"))
    for k in ("setup", "setup_cpu", "host", "host_cpu"):
        stats[f"spark {k.replace('_', ' ')} seconds"] = sum(t[k] for t in timings)


def _compiled(graph: MetricGraph, evaluator):
    """(file path, module name, source) of the evaluator executors load: the cache file when
    ``evaluator`` came from the cache, else the source (each Python worker then compiles it once). A
    cache without the compiled kernel (numba compiles at the first call) gets it here, before any task
    starts: else every Python worker would compile it at once (measured: 265 s each, two workers)."""
    path = getattr(evaluator, "__file__", None)
    if getattr(evaluator, "_KCACHE", False) and path and Path(path).is_file():
        pyc = Path(path).parent / "__pycache__"
        if not any(pyc.glob(f"{Path(path).stem}._kernel_call-*.nbi")):
            from perfonto.codegen.evaluator_cache import warm_kernel

            th = warm_kernel(evaluator)  # the kernel's first call: compiled, written to numba's cache
            if th is not None:
                th.join()
        return path, evaluator.__name__, None
    from perfonto.codegen.python_evaluator import generate

    return None, "", generate(graph)


def evaluate_on_spark(
    spark,
    graph: MetricGraph,
    evaluator,
    plan: DumpPlan,
    out: str | Path | None,
    *,
    chunk_rows: int = CHUNK_ROWS,
    write_meta: dict | None = None,
    progress: Callable[[str, int, int], None] | None = None,
):
    """Evaluate ``graph`` over the dump of ``plan`` on Spark (module docstring), window values under
    ``out/host=<host>/part-<n>.parquet`` (None: not written). Returns the ``engine.EngineResult`` the
    embedded engine gives (``evaluate_capture``; never ``keep``), with ``stats['spark seconds']``.

    Raises:
        DumpError: a part that is not Parquet, rows Spark cannot read, a host evaluated on another grid."""
    from perfonto.metrics.catalog_cache import dumps

    from .engine import _Pass, pass_result
    from .engine_levels import _levels

    _parquet_parts(plan)
    hosts = list(plan.groups)
    path, module, source = _compiled(graph, evaluator)
    graph_bytes = dumps(graph)
    ship = {
        "digest": f"{graph.content_hash}:{module or hash(source)}:{len(graph_bytes)}",
        "hosts": len(hosts),
        "out": str(out) if out is not None else None,
        "chunk_rows": chunk_rows,
        "meta": write_meta,
        "path": path,
        "module": module,
        "source": source,
        "env": {k: os.environ[k] for k in _ENV if k in os.environ},
        "no_pandas": pandas_blocked(),
    }
    # one task per host, the largest first (hosts of equal size spread evenly over the executors' cores)
    items = [(g, _host_plan(plan, hosts[g])) for g in sorted(range(len(hosts)), key=lambda g: -plan.chips[hosts[g]])]
    sc = spark.sparkContext
    bc = sc.broadcast(graph_bytes)
    t0 = time.perf_counter()
    try:
        rows = sc.parallelize(items, max(1, len(items))).mapPartitions(_task_fn(ship, bc)).collect()
    finally:
        bc.unpersist()
    job_s = time.perf_counter() - t0
    del items
    errors = [e for _, _, e, _ in rows if e]
    if errors:
        raise DumpError(errors[0])
    st = _Pass(graph, evaluator, plan, keep=False)
    st.chunk_rows = chunk_rows  # the plan's pieces, for the host's pieces with a null (``spark_state``)
    deps = st.sums[0].deps if st.sums else None
    from perfonto.metrics.levels import signal_deps

    deps = deps or signal_deps(graph)
    written: list[str] = []
    done = 0
    for g, state, _, _ in sorted(rows, key=lambda r: r[0]):
        f, n = merge_state(st, g, state, deps)
        written += f
        done += n
    _job_stats(st.stats, job_s, [r[3] for r in rows])
    for gi in range(len(plan.groups)):  # a host without rows in Spark's read (none on the grid) keeps empty sums
        while len(st.sums) <= gi:
            from .level_sums import ChipSums

            st.sums.append(ChipSums(graph))
    ev = _levels(graph, evaluator, st, chunk_rows, progress)
    ev.n_windows = st.W
    ev.windows = Windows(st.chip_time[None, :], {}, 1.0, "run", None, {})
    return pass_result(st, ev, written, done)


__all__ = ["evaluate_on_spark", "run_host"]
