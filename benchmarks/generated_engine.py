"""The generated evaluator's engine for ``bench_eval.py``: the capture in the collector format's flat
layout as an uncompressed Arrow IPC file (``make_flat``), memory-mapped and read in place as one
(columns, rows) register view per batch, evaluated by the compiled kernel (``Stream.push_flat``) and
written as Arrow IPC with the kernel's validity bitmaps.
"""
from __future__ import annotations

import ctypes
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from direct_sink import DirectSink


def _catalog():
    from bench_eval import _catalog as catalog  # bench_eval imports this module: import it back lazily

    return catalog()


def _column_array(col, n):
    from bench_eval import _column_array as column_array

    return column_array(col, n)

def _madvise(addr: int, length: int, advice: int) -> int:
    """``madvise(2)`` through ctypes, which releases the GIL for the call (``mmap.madvise`` holds it:
    populating a 145 MB batch then stalls every other thread); 0 on success, -1 on failure."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _LIBC.madvise.restype = ctypes.c_int
    return _LIBC.madvise(addr, length, advice)


_LIBC = None
AHEAD = 2  # batches mapped ahead of the kernel: one more than needed on average, to absorb jitter on the other core


def flat_path(path: Path) -> Path:
    return path.with_name(path.stem + "-flat.arrow")


def make_flat(path: Path) -> None:
    """The same capture in the collector format's flat layout (``name[i]`` columns) as an uncompressed
    Arrow IPC file, one record batch per Parquet row group: the key columns first, then every register
    column, so that a batch's register buffers lie back to back and read as one (columns, rows) view
    of the memory-mapped file, without a copy."""
    pf = pq.ParquetFile(str(path))
    gen = _catalog().generation
    tmp = flat_path(path).with_suffix(".tmp")
    writer = None
    for i in range(pf.num_row_groups):
        t = pf.read_row_group(i)
        cols, names = [t.column("chip").combine_chunks(), t.column("timestamp_ns").combine_chunks()], ["chip", "timestamp_ns"]
        for name, sig in gen.signals.items():
            c = t.column(name).combine_chunks()
            if sig.axes:
                flat = _column_array(c, sig.instances)
                for k in range(sig.instances):
                    cols.append(pa.array(np.ascontiguousarray(flat[:, k])))
                    names.append(f"{name}[{k}]")
            else:
                cols.append(c)
                names.append(name)
        batch = pa.RecordBatch.from_arrays(cols, names=names)
        if writer is None:
            writer = pa.ipc.new_file(str(tmp), batch.schema.with_metadata(pf.schema_arrow.metadata))
        writer.write_batch(batch)
    writer.close()
    tmp.rename(flat_path(path))


def _register_view(batch: pa.RecordBatch, file_buf: pa.Buffer, base: int, names: list[str]):
    """(columns, rows) uint64 view of the register columns ``names`` of a memory-mapped IPC batch and
    the row of each name in it: zero-copy when their buffers lie at equal strides (as ``make_flat``
    writes them), else one copy of those columns."""
    idx = [batch.schema.get_field_index(n) for n in names]
    arrs = [batch.column(k) for k in idx]
    rows = batch.num_rows
    addr = [a.buffers()[1].address + a.offset * 8 for a in arrs]
    lo, hi = min(addr), max(addr)
    order = sorted(range(len(addr)), key=addr.__getitem__)
    if all(a.null_count == 0 and pa.types.is_uint64(a.type) for a in arrs) and len(addr) > 1:
        stride = addr[order[1]] - addr[order[0]]
        if stride >= rows * 8 and stride % 8 == 0 and (hi - lo) % stride == 0 and len(set(addr)) == len(addr) \
                and all((x - lo) % stride == 0 for x in addr) and lo - base >= 0:
            n = (hi - lo) // stride + 1
            X = np.ndarray((n, rows), np.uint64, buffer=file_buf, offset=lo - base, strides=(stride, 8))
            return X, np.array([(x - lo) // stride for x in addr], np.int64), True
    X = np.stack([a.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False) for a in arrs])
    return X, np.arange(len(names), dtype=np.int64), False


def _arrow_metrics(C, start, interval, res, names) -> pa.RecordBatch:
    """The metric batch from the kernel's buffers: values and validity bitmaps as they are (Arrow's own
    null handling; no pass over the values to find the nulls)."""
    cols = [pa.array(np.tile(np.arange(C, dtype=np.int32), len(start) // C)), pa.array(start), pa.array(interval)]
    for n in names:
        v, bits = res[n]
        flat = v.reshape(-1)
        arr = pa.Array.from_buffers(pa.float64(), flat.size, [pa.py_buffer(bits), pa.py_buffer(flat)])
        if v.ndim > 2:
            arr = pa.FixedSizeListArray.from_arrays(arr, int(np.prod(v.shape[2:])))
        cols.append(arr)
    return pa.RecordBatch.from_arrays(cols, names=["chip", "start_ns", "interval_s"] + list(names))


def engine_generated(data: Path, out: Path, direct: bool = True, repeat: int = 1) -> dict:
    """The generated evaluator's compiled kernel (``Stream.push_flat``) over the flat-layout Arrow IPC
    copy of the capture, memory-mapped: each batch's registers are read in place as a (columns, rows)
    view; metrics are written to an Arrow IPC file with their validity bitmaps as the kernel set them
    (a writer thread; the kernel releases the GIL), through ``O_DIRECT`` unless ``direct`` is False
    (``direct_sink.py``: a buffered first write of fresh page-cache pages ran at 0.5–0.9 GB/s here).
    The next ``AHEAD`` batches' pages are mapped (``MADV_POPULATE_READ``, through ctypes so that the GIL is
    free) on a second thread while batch ``i`` is computed. The JIT compilation happens before the
    clock starts and is reported as ``jit_s``; the other figures split the time. With ``repeat`` > 1
    the file is evaluated that many times after the one compilation and the run of median time is
    reported (``runs_s`` lists them all): this machine's runs of the same code spread by ±20 %."""
    from concurrent.futures import ThreadPoolExecutor

    from perfonto.codegen.python_evaluator import generate, load

    graph = _catalog()
    t0 = time.perf_counter()
    mod = load(generate(graph))
    import mmap

    fh = open(flat_path(data), "rb")
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    file_buf = pa.py_buffer(mm)
    reader = pa.ipc.open_file(pa.BufferReader(file_buf))  # batches are slices of the mapping: no copy
    base = file_buf.address

    state: dict = {}  # one run's writer, counts and time split (``once`` resets it)

    def populate(i):
        """Map the pages of batch ``i``'s columns the kernel reads (the keys and the metrics' register
        columns; the file has more) ahead of the kernel, on the other core: MADV_POPULATE_READ per run
        of adjacent columns, else WILLNEED. Returns the page ranges mapped."""
        b = reader.get_batch(i)
        spans = sorted((buf.address - base, buf.address - base + buf.size) for k in read_cols
                       for buf in b.column(k).buffers() if buf is not None and buf.size)
        ranges: list[list[int]] = []
        for a, z in spans:
            a -= a % mmap.PAGESIZE
            z = min(len(mm), z + (-z) % mmap.PAGESIZE)
            if ranges and a <= ranges[-1][1]:
                ranges[-1][1] = max(ranges[-1][1], z)
            else:
                ranges.append([a, z])
        t_ = time.perf_counter()
        for lo, hi in ranges:
            if _madvise(base + lo, hi - lo, 22) != 0:  # MADV_POPULATE_READ (Linux 5.14)
                _madvise(base + lo, hi - lo, mmap.MADV_WILLNEED)
        state["populate_s"] = state.get("populate_s", 0.0) + time.perf_counter() - t_
        return ranges

    def drop(ranges):
        """Unmap a batch the kernel is done with (its pages stay in the page cache; the process's
        resident memory stops growing with the file)."""
        t_ = time.perf_counter()
        for lo, hi in ranges:
            _madvise(base + lo, hi - lo, mmap.MADV_DONTNEED)
        state["drop_s"] = state.get("drop_s", 0.0) + time.perf_counter() - t_
    names = list(mod.FLAT_COLUMNS)
    schema0 = reader.get_batch(0).schema
    read_cols = [schema0.get_field_index(n) for n in ["chip", "timestamp_ns"] + names]
    warmup = mod.Stream()  # compile the kernel for the batches' array types before the clock starts
    b0 = reader.get_batch(0)
    X, colmap, _ = _register_view(b0, file_buf, base, names)
    C0 = int(b0.column("chip").to_numpy().max()) + 1
    warmup.push_flat(b0.column("timestamp_ns").to_numpy().reshape(-1, C0), X, colmap)  # the same array types as every batch
    jit_s = time.perf_counter() - t0
    def once() -> dict:
        """One evaluation of the whole file, timed (a fresh Stream; the output file rewritten)."""
        stream = mod.Stream()
        state.clear()
        state.update({"writer": None, "rows": 0, "views": 0})
        out.unlink(missing_ok=True)
        prev_ts = None
        t_start = time.perf_counter()

        def write(C, start, interval, res):
            batch = _arrow_metrics(C, start, interval, res, list(mod.METRICS))
            if state["writer"] is None:
                state["sink"] = DirectSink(out) if direct else None
                state["writer"] = pa.ipc.new_file(pa.PythonFile(state["sink"], mode="w") if direct else str(out), batch.schema)
            state["writer"].write_batch(batch)
            state["rows"] += batch.num_rows

        try:
            with ThreadPoolExecutor(1) as writer, ThreadPoolExecutor(1) as pager:
                written = None
                nb = reader.num_record_batches
                paged = [pager.submit(populate, k) for k in range(min(AHEAD, nb))]
                for i in range(nb):
                    tp = time.perf_counter()
                    span = paged.pop(0).result()
                    state["pages_s"] = state.get("pages_s", 0.0) + time.perf_counter() - tp
                    if i + AHEAD < nb:
                        paged.append(pager.submit(populate, i + AHEAD))
                    tv = time.perf_counter()
                    b = reader.get_batch(i)
                    chip = b.column("chip").to_numpy()
                    C = int(chip.max()) + 1
                    S = len(chip) // C
                    ts = b.column("timestamp_ns").to_numpy().reshape(S, C)
                    X, colmap, view = _register_view(b, file_buf, base, names)
                    state["views"] += view
                    tk = time.perf_counter()
                    state["view_s"] = state.get("view_s", 0.0) + tk - tv
                    res = stream.push_flat(ts, X, colmap, reuse=True)
                    state["kernel_s"] = state.get("kernel_s", 0.0) + time.perf_counter() - tk
                    del X
                    pager.submit(drop, span)
                    if res is not None:
                        full = np.concatenate([prev_ts[None], ts]) if prev_ts is not None else ts
                        W = S if prev_ts is not None else S - 1
                        start, end = full[:-1][-W:], full[1:][-W:]
                        if written is not None:
                            tw = time.perf_counter()
                            written.result()
                            state["wait_s"] = state.get("wait_s", 0.0) + time.perf_counter() - tw
                        written = writer.submit(write, C, start.reshape(-1), ((end - start).astype(np.float64) * 1e-9).reshape(-1), res)
                    prev_ts = ts[-1]
                if written is not None:
                    tw = time.perf_counter()
                    written.result()
                    state["last_write_s"] = time.perf_counter() - tw
        except BaseException:
            if state.get("sink") is not None:  # no half-written file left open (its descriptor, its staging buffer)
                state["sink"].close()
            raise
        tc = time.perf_counter()
        state["writer"].close()
        if state.get("sink") is not None:
            state["sink"].close()
        del b
        return {"rows": state["rows"], "seconds": time.perf_counter() - t_start, "close_s": round(time.perf_counter() - tc, 3),
                "pages_wait_s": round(state.get("pages_s", 0.0), 3),
                "kernel_s": round(state.get("kernel_s", 0.0), 3), "batch_views_s": round(state.get("view_s", 0.0), 3),
                "last_write_s": round(state.get("last_write_s", 0.0), 3), "populate_s": round(state.get("populate_s", 0.0), 3),
                "drop_s": round(state.get("drop_s", 0.0), 3), "writer_wait_s": round(state.get("wait_s", 0.0), 3),
                "zero_copy_batches": f"{state['views']}/{reader.num_record_batches}",
                "output": ("O_DIRECT" if state["sink"].direct else "buffered (no O_DIRECT here)") if state.get("sink") else "buffered"}

    from page_cache import warm as read_in

    runs = []
    for _ in range(max(1, repeat)):
        cache = read_in(flat_path(data))  # pages reclaimed since the parent's read-in (during the JIT) read back in
        runs.append({**once(), "input_resident": cache["resident_before"], "input_read_mb": cache["read_mb"]})
    med = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    return {**med, "jit_s": jit_s, "runs_s": [round(r["seconds"], 3) for r in runs],
            "runs_input_resident": [r["input_resident"] for r in runs], "runs_input_read_mb": [r["input_read_mb"] for r in runs]}


