"""``--engine spark``: the embedded engine's pass — the generated kernel, its window rules and formulas in
one pass — run on Spark executors, one host at a time, through Spark's Arrow batch API (``mapInArrow``).

Spark reads the planned dump's Parquet parts (Hive partitions as columns, registers declared ``LONG`` as
in ``analysis.spark_engine``) with each row's file and row number (``_metadata``); the rows are
range-partitioned by host (a host is one group: the embedded engine evaluates a host's chips on the
host's grid, a missing sample or a gap being a grid point without that chip). On the executor a
partition's Arrow batches are split by host, put back in file order (registers viewed as ``uint64``
again), planned as one host (``capture.dump_scan.plan_dump``) and read in the same pieces as the
embedded engine reads them (``capture.pieces``: the previous sample carried from piece to piece), each
evaluated by ``analysis.engine._Pass`` with the same generated evaluator: window values written as the
embedded engine writes them (``metrics/host=<host>/part-<n>.parquet``, from Arrow batches, so the files
are the same), and the host's run-level sums and checks returned as one small row
(``analysis.spark_state``). The driver merges the rows into one pass and builds the chip, server, host,
rack, pod and fleet levels with the embedded engine's own code (``engine_levels``, ``level_sums``,
``fleet``); the server level's windows valid on every chip, when some window was null somewhere, are
summed by ``engine_levels._second_pass`` on the driver, over just the pieces that hold such windows.

The kernel is compiled once: the driver imports the evaluator from perfonto's cache
(``codegen.evaluator_cache``: a content-hashed folder holding ``evaluator.py`` and numba's on-disk cache
of its compiled kernel) and compiles it there; executors are given that file's path and load the
compiled kernel from numba's cache beside it (once per Python worker, which Spark reuses across
tasks), never compiling it per task. The compiled catalog is shipped once as a broadcast. Executors
must see the cache folder, the dump and the output folder at the same paths as the driver (one
machine, or a shared file system).
"""

from __future__ import annotations

import os
import pickle
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa

from perfonto.capture.dump_io import DumpError
from perfonto.capture.dump_scan import CHUNK_ROWS, DumpPlan
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


def _is_register(name: str, gen) -> bool:
    return name in gen.signals or (name.endswith("]") and name.rpartition("[")[0] in gen.signals)


def spark_frame(spark, plan: DumpPlan):
    """The plan's Parquet parts as a Spark DataFrame: registers declared ``LONG`` (or arrays of it),
    Hive partitions as string columns, ``_file`` and ``_row`` (each row's file and row number), ``_g``
    (the host's group number in the plan). Returns (DataFrame, column names in order)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    files = [str(p) for p in _parquet_parts(plan)]
    root = Path(plan.label)
    reader = spark.read.option("basePath", str(root)) if root.is_dir() else spark.read
    df = reader.parquet(*files)
    fields = []
    for f in df.schema.fields:
        if _is_register(f.name, plan.gen):
            fields.append(
                StructField(f.name, ArrayType(LongType()) if isinstance(f.dataType, ArrayType) else LongType())
            )
        else:
            fields.append(f)
    reader = spark.read.schema(StructType(fields))
    df = (reader.option("basePath", str(root)) if root.is_dir() else reader).parquet(*files)
    hosts = [h for h in plan.groups]
    if hosts == [None]:
        g = F.lit(0)
    else:
        g = F.create_map(*[x for i, h in enumerate(hosts) for x in (F.lit(h), F.lit(i))])[F.col("host").cast("string")]
    df = df.select(
        "*", F.col("_metadata.file_path").alias("_file"), F.col("_metadata.row_index").alias("_row"), g.alias("_g")
    )
    names = df.columns
    return df.toDF(*[f"c{i}" if n != "_g" else n for i, n in enumerate(names)]), names  # Arrow UDFs refuse dotted names


def _host_table(batches: list, names: list[str], ship: dict, gen) -> pa.Table:
    """One host's rows as the capture layer reads them: columns named back, rows in file order (the plan's
    parts, then row number), registers as ``uint64`` again (the 64 bits Spark carried as ``LONG``), the
    first part's schema metadata (generation, period, units)."""
    t = pa.Table.from_batches(batches).rename_columns(names)
    order = {p: i for i, p in enumerate(ship["files"])}
    import pyarrow.compute as pc

    urls = pc.unique(t.column("_file"))  # a few files: their names mapped once, not row by row
    try:
        rank = np.array([order[str(Path(unquote(urlparse(u).path)))] for u in urls.to_pylist()], np.int64)
    except KeyError as exc:
        raise DumpError(f"Spark read {exc.args[0]}, which is not a part of the planned dump") from None
    part = pa.array(rank[pc.index_in(t.column("_file"), value_set=urls).to_numpy(zero_copy_only=False)])
    t = t.append_column("_part", part).sort_by([("_part", "ascending"), ("_row", "ascending")])
    t = t.drop_columns(["_file", "_row", "_g", "_part"])
    fields = []
    for f in t.schema:
        typ = f.type
        if _is_register(f.name, gen):
            typ = pa.list_(pa.uint64()) if pa.types.is_list(typ) else pa.uint64()
        fields.append(pa.field(f.name, typ, f.nullable))
    return t.cast(pa.schema(fields, metadata=ship["metadata"]), safe=False)


def _worker(ship: dict, graph_bytes: bytes):
    """(graph, evaluator) in this Python worker: the catalog unpickled once, the evaluator imported once
    from the cache file the driver compiled (its kernel loaded from numba's cache there), or from the
    source shipped when the cache is off."""
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
            else:
                from perfonto.codegen.python_evaluator import load

                mod = load(ship["source"])
        _WORKER[key] = (graph, mod)
    return _WORKER[key]


def run_host(table: pa.Table, ship: dict, graph_bytes: bytes) -> bytes:
    """The embedded engine's pass over one host's rows ``table`` (``_host_table``): window values written
    under ``ship['out']``; returns ``spark_state.host_state``.

    Raises:
        DumpError: the rows cannot be read (as the embedded engine would say)."""
    from perfonto.capture.dump_scan import plan_dump
    from perfonto.capture.pieces import iter_chunks

    from .engine import _Pass, _write

    graph, ev = _worker(ship, graph_bytes)
    plan = plan_dump(table, graph.generation, timestamp_unit=ship["unit"], sample_period_ns=ship["period"] or None)
    plan.label = ship["label"]
    for host, parts in plan.groups.items():  # placed by grid point: in the plan's pieces, as the embedded engine
        if not plan.grids[host].regular:  # reads a Parquet part (the table read whole, as one row group)
            for part in parts:
                if part.table is not None and part.row_group_ends is None:
                    part.row_group_ends = np.array([part.table.num_rows], np.int64)
    st = _Pass(graph, ev, plan, keep=False)
    if ship["hosts"] > 1:  # the dump's server level is summed on the driver: keep the clean pieces' sums
        st.server = None
    host = list(plan.groups)[0] if plan.groups else None
    out = Path(ship["out"]) if ship["out"] else None
    files: list[str] = []
    rows = 0
    part_no: dict = {}
    spans: dict[int, int] = {}
    with ThreadPoolExecutor(1, thread_name_prefix="perfonto-write") as writer:  # writing overlaps the next piece
        pending = []
        for ch in iter_chunks(plan, [n for n, _ in st.layout], ship["chunk_rows"], columns=list(st.layout)):
            w, values = st.add(ch)
            spans[ch.first] = w.interval.shape[0]
            if out is not None:
                while len(pending) >= 2:
                    files.append(pending.pop(0).result())
                pending.append(writer.submit(_write, graph, w, values, ch, out, part_no, ship["meta"]))
            rows += w.interval.size
        files += [f.result() for f in pending]
    notes = st.held.finish()  # gaps that never close: their windows added without them
    return host_state(st, host, files, rows, spans, notes)


def _partition_fn(ship: dict, graph_bc):
    """The ``mapInArrow`` function: a partition's batches, split by host (``_g``), each host evaluated
    by ``run_host``; yields one row (host number, state bytes, error) per host."""

    def fn(batches):
        by_host: dict[int, list] = {}
        gi = ship["names"].index("_g")
        for b in batches:
            if b.num_rows == 0:
                continue
            g = b.column(gi).to_numpy(zero_copy_only=False)
            for k in np.unique(g):
                by_host.setdefault(int(k), []).append(b.filter(pa.array(g == k)) if (g != k).any() else b)
        for k, bs in sorted(by_host.items()):
            state, error = b"", ""
            try:
                graph, _ = _worker(ship, graph_bc.value)
                state = run_host(_host_table(bs, ship["names"], ship, graph.generation), ship, graph_bc.value)
            except DumpError as exc:
                error = str(exc)
            yield pa.RecordBatch.from_pydict(
                {"g": [k], "state": [state], "error": [error]},
                schema=pa.schema([("g", pa.int32()), ("state", pa.binary()), ("error", pa.string())]),
            )

    return fn


def _compiled(graph: MetricGraph, evaluator):
    """(file path, module name, source) of the evaluator executors load: the cache file when
    ``evaluator`` came from the cache (its kernel compiled here first, so that numba's cache holds it),
    else the source (each Python worker then compiles it once)."""
    path = getattr(evaluator, "__file__", None)
    if getattr(evaluator, "_KCACHE", False) and path and Path(path).is_file():
        if hasattr(evaluator, "_jit"):
            evaluator._jit()
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
    import pyarrow.parquet as pq

    from perfonto.metrics.catalog_cache import dumps

    from .engine import EngineResult, _Pass
    from .engine_levels import _levels

    files = _parquet_parts(plan)
    df, names = spark_frame(spark, plan)
    path, module, source = _compiled(graph, evaluator)
    graph_bytes = dumps(graph)
    ship = {
        "digest": f"{graph.content_hash}:{module or hash(source)}:{len(graph_bytes)}",
        "names": names,
        "files": [str(p) for p in files],
        "metadata": pq.read_schema(str(files[0])).metadata,
        "unit": plan.unit,
        "period": plan.period,
        "label": plan.label,
        "hosts": len(plan.groups),
        "out": str(out) if out is not None else None,
        "chunk_rows": chunk_rows,
        "meta": write_meta,
        "path": path,
        "module": module,
        "source": source,
        "env": {k: os.environ[k] for k in _ENV if k in os.environ},
    }
    bc = spark.sparkContext.broadcast(graph_bytes)
    try:
        fn = _partition_fn(ship, bc)
        rows = (
            df.repartitionByRange(max(1, len(plan.groups)), "_g")
            .mapInArrow(fn, "g int, state binary, error string")
            .collect()
        )
    finally:
        bc.unpersist()
    errors = [r.error for r in rows if r.error]
    if errors:
        raise DumpError(errors[0])
    st = _Pass(graph, evaluator, plan, keep=False)
    st.chunk_rows = chunk_rows  # the plan's pieces, for the host's pieces with a null (``spark_state``)
    deps = st.sums[0].deps if st.sums else None
    from perfonto.metrics.levels import signal_deps

    deps = deps or signal_deps(graph)
    written: list[str] = []
    done = 0
    for r in sorted(rows, key=lambda r: r.g):
        f, n = merge_state(st, r.g, r.state, deps)
        written += f
        done += n
    for gi in range(len(plan.groups)):  # a host without rows in Spark's read (none on the grid) keeps empty sums
        while len(st.sums) <= gi:
            from .level_sums import ChipSums

            st.sums.append(ChipSums(graph))
    ev = _levels(graph, evaluator, st, chunk_rows, progress)
    ev.n_windows = st.W
    ev.windows = Windows(st.chip_time[None, :], {}, 1.0, "run", None, {})
    return EngineResult(
        ev,
        st.sums,
        st.checks,
        written,
        done,
        st.extremes,
        {"start_ns": st.first_start, "end_ns": st.last_end},
        None,
        st.stats,
    )


__all__ = ["evaluate_on_spark", "run_host", "spark_frame"]
