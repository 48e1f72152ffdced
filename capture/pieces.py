"""A planned dump (``capture.dump_scan.plan_dump``) read in pieces, host by host and in time order within
a host, each input byte read once.

The plan read the key columns (chip, host, timestamp, sample) and placed every row on the sampling
grid; ``iter_chunks`` reads the register columns. A host whose rows are **regular** — every grid point
holds every chip, rows sample by sample with the chips in order, in Parquet or Arrow IPC parts (what
the emulator, ``perfonto emulate --fleet`` and most collectors write) — is read in one sequential pass
over its parts' record batches (Parquet: ``iter_batches`` with only the register columns; Arrow IPC:
memory-mapped, zero-copy): rows are already in grid order, so a piece is a run of consecutive rows.
Any other host (gaps, rows out of order, chip-major files, the long layout, CSV) has its rows placed
by grid point from its parts, re-reading row groups where pieces share them: the data shows that
such a dump needs it.

Each piece holds grid points ``first`` … ``first + S − 1`` of one host, the previous piece's last
sample carried over as its first (kept in memory, not read again), so a counter's delta across a piece
boundary is the same modular delta as in one piece. With ``columns`` (signal, instances) given, a
regular piece comes as ``flat``: the registers laid out as one (columns, rows) uint64 matrix in that
order, rows sample-major, chip-minor — the layout the generated kernel reads in place — built with
one copy from the Arrow buffers; ``Chunk.dump`` gives the same piece as a ``CounterDump`` (views).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .dump import CounterDump
from .dump_io import ARROW, damaged, read_one
from .dump_plan import DumpPlan, Part, host_grid
from .dump_scan import CHUNK_ROWS
from .pieces_placed import placed_pieces


@dataclass
class Flat:
    """A regular piece's registers: ``T`` int64 (S, C) timestamps, ``X`` uint64 (columns, S × C) in
    the order of ``columns`` ((signal, instances), the instances of a signal consecutive), rows
    sample-major, chip-minor; ``missing``: None, or bool like ``X``, True where the register was null
    (its ``X`` value is 0)."""

    T: np.ndarray
    X: np.ndarray
    columns: tuple[tuple[str, int], ...]
    missing: np.ndarray | None = None


@dataclass
class Chunk:
    """One piece: grid points ``first`` … of host ``host`` (its windows are windows ``first`` … of the
    whole dump); ``group``: index of the host in the plan. Either ``flat`` (a regular piece, when
    columns were asked for) or ``raw_dump`` is set; ``dump`` gives the piece as a ``CounterDump``."""

    group: int
    host: str | None
    first: int
    raw_dump: CounterDump | None
    flat: Flat | None = None
    chips: np.ndarray | None = None
    hosts: np.ndarray | None = None
    plan: DumpPlan | None = None

    @property
    def dump(self) -> CounterDump:
        """The piece as a ``CounterDump`` (for a flat piece: views of its matrix, no copy)."""
        if self.raw_dump is None:
            f, p = self.flat, self.plan
            S, C = f.T.shape
            raw, missing, a = {}, {}, 0
            for name, n in f.columns:
                raw[name] = f.X[a : a + n].T.reshape(S, C, n)
                if f.missing is not None and f.missing[a : a + n].any():
                    missing[name] = f.missing[a : a + n].T.reshape(S, C, n)
                a += n
            self.raw_dump = CounterDump(
                p.label,
                self.chips,
                f.T,
                raw,
                np.ones((S, C), bool),
                missing,
                dict(p.meta),
                hosts=self.hosts,
                absent=p.absent,
                notes=p.notes,
            )
        return self.raw_dump


def iter_chunks(
    plan: DumpPlan,
    signals: list[str] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    columns: list[tuple[str, int]] | None = None,
    select=None,
    readers: int | None = None,
) -> Iterator[Chunk]:
    """The pieces of the dump (module docstring), host by host in sorted order, in time order within a
    host; ``signals``: the signals to read (default: every signal in the dump); ``columns``: the
    register layout of flat pieces (default: none, every piece a ``CounterDump``); ``select(group,
    first)``: read only the pieces it is true for (the same pieces as without it; only the row groups
    that hold their rows are read); ``readers``: hosts read at the same time, each on a thread of its
    own (default: two on a machine of four cores or more, else one); the pieces and their order are
    the same whatever it is.

    Raises:
        DumpError: a register column that contradicts the ontology (as ``read_counters`` says it).
    """
    want = [s for s in (signals if signals is not None else plan.columns) if s in plan.columns]
    hosts = [
        lambda gi=gi, host=host, parts=parts: _host_chunks(plan, gi, host, parts, want, chunk_rows, columns, select)
        for gi, (host, parts) in enumerate(plan.groups.items())
    ]
    return _prefetch(hosts, readers if readers is not None else _default_readers())


def _default_readers() -> int:
    """Hosts read at once by default: two where reading is the longest of the engine's three stages
    (read, evaluate, write) and the machine has the cores to overlap them, else one."""
    import os

    return 2 if (os.cpu_count() or 1) >= 4 else 1


def _prefetch(hosts: list, readers: int = 1, depth: int = 2) -> Iterator:
    """The items of ``hosts`` (one generator factory per host), all of the first host's, then all of the
    second's …, produced ahead on ``readers`` background threads: thread ``k`` reads hosts ``k``,
    ``k + readers`` … in turn into a queue of its own, at most ``depth`` items ahead, so reading and
    decoding the next pieces (pyarrow and NumPy copies release the GIL) overlaps the caller's work on
    this one (the kernel releases it too) and, with several readers, the next host is read while this
    one is. An exception in a host's generator is raised here, at the item where it happened (that
    thread reads no further host); a caller that stops early stops the threads."""
    import queue
    import threading

    R = max(1, min(readers, len(hosts)))
    qs: list[queue.Queue] = [queue.Queue(maxsize=depth) for _ in range(R)]
    stop = threading.Event()
    end = object()

    def put(q: queue.Queue, item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(k: int) -> None:
        for i in range(k, len(hosts), R):
            try:
                for item in hosts[i]():
                    if not put(qs[k], (item, None)):
                        return
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                put(qs[k], (end, exc))
                return
            if not put(qs[k], (end, None)):
                return

    threads = [threading.Thread(target=run, args=(k,), name=f"perfonto-read-{k}", daemon=True) for k in range(R)]
    for th in threads:
        th.start()
    try:
        for i in range(len(hosts)):
            q = qs[i % R]
            while True:
                item, exc = q.get()
                if item is end:
                    if exc is not None:
                        raise exc
                    break
                yield item
    finally:
        stop.set()
        for q, th in zip(qs, threads):
            while th.is_alive():  # let a blocked put see the stop
                try:
                    q.get_nowait()
                except queue.Empty:
                    th.join(0.05)


def _host_chunks(plan: DumpPlan, gi: int, host, parts, want, chunk_rows: int, columns, select) -> Iterator[Chunk]:
    """The pieces of host ``host`` (the plan's ``gi``-th, in time order: ``iter_chunks``): as flat matrices
    when it is regular and columns are asked for (``_regular``), else placed by grid point
    (``capture.pieces_placed``); about ``chunk_rows`` rows a piece."""
    hg = host_grid(plan, host)
    g = hg.grid
    C = len(g.keys)
    chips_ = g.keys[:, 1].astype(np.int64)
    hosts_ = None if g.host_names is None else g.host_names[g.keys[:, 0]]
    step = max(1, chunk_rows // max(C, 1))
    if hg.regular and columns is not None and not plan.long and select is None:
        for first, T, X, M in _regular(plan, parts, tuple(columns), g, step):
            yield Chunk(gi, host, first, None, Flat(T, X, tuple(columns), M), chips_, hosts_, plan)
        return
    for first, dump in placed_pieces(plan, gi, parts, want, hg, step, select, chips_, hosts_):
        yield Chunk(gi, host, first, dump, None, chips_, hosts_, plan)


def open_parquet(path) -> pq.ParquetFile:
    """A Parquet part opened for reading (one place, so that a test can count what is read)."""
    return pq.ParquetFile(str(path), pre_buffer=False)  # no coalesced reads: each column chunk read alone, once


def _batches(plan: DumpPlan, part: Part, cols: list[str], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The record batches of a regular part's register columns, in file order, each read once."""
    if part.row_group_ends is not None:
        pf = open_parquet(part.path)
        have = set(pf.schema_arrow.names)
        batches = pf.iter_batches(batch_size=batch_rows, columns=[c for c in cols if c in have], use_threads=True)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (OSError, pa.ArrowException) as exc:  # a page that does not decode: name the part
                raise damaged(part.path, exc) from None
            yield batch
    if part.path.name.lower().endswith(ARROW):
        mapped = _mapped_batches(part.path, cols, batch_rows)
        if mapped is not None:
            yield from mapped
            return
    t = part.table if part.table is not None else read_one(part.path, "counter dump", _csv_types(plan))
    yield from t.select([c for c in cols if c in t.column_names]).to_batches(max_chunksize=batch_rows)


def _mapped_batches(path, cols: list[str], batch_rows: int):
    """An Arrow IPC file's record batches read in place from a memory map (zero-copy), each batch's
    pages unmapped once the next is asked for (they stay in the page cache: the process's resident
    memory does not grow with the file); None when it is not an IPC file (the stream format)."""
    import mmap

    try:
        fh = open(path, "rb")
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = pa.py_buffer(mm)
        reader = pa.ipc.open_file(pa.BufferReader(buf))
    except (OSError, ValueError, pa.ArrowInvalid):
        return None

    def gen():
        try:
            names = [c for c in cols if c in reader.schema.names]
            for i in range(reader.num_record_batches):
                b = reader.get_batch(i).select(names)
                yield from (b.slice(k, batch_rows) for k in range(0, b.num_rows, batch_rows))
                spans = [
                    (x.address, x.address + x.size)
                    for col in b.columns
                    for x in col.buffers()
                    if x is not None and x.size
                ]
                if spans:
                    lo = min(a for a, _ in spans) - buf.address
                    hi = max(z for _, z in spans) - buf.address
                    lo -= lo % mmap.PAGESIZE
                    mm.madvise(mmap.MADV_DONTNEED, lo, min(len(mm), hi) - lo)
                del b
        finally:
            fh.close()

    return gen()


def _csv_types(plan: DumpPlan):
    from .dump import csv_types

    return csv_types(plan.gen)


def _regular(plan: DumpPlan, parts: list[Part], layout, g, step: int):
    """(first grid point, T (S, C), X (columns, S × C), missing or None) of each piece of a regular host:
    ``step`` windows a piece, the previous piece's last sample first. Each batch's register columns
    are checked as ``read_counters`` checks them and copied once, transposed, into the piece's matrix."""
    C = len(g.keys)
    cols = [c for s, _ in layout if s in plan.columns for c in plan.columns[s]]
    ncol = sum(n for _, n in layout)
    pos = {}
    a = 0
    for s, n in layout:
        pos[s] = (a, a + n)
        a += n
    rows_per = step * C
    absent = [pos[s] for s, _ in layout if s not in plan.columns]

    made: list[np.ndarray] = []  # this host's matrices, each reused once nothing else refers to it

    def new_matrix():
        m = _unreferenced(made)
        if m is not None:  # its absent registers are still 0: only present ones are ever written
            return m
        m = np.empty((ncol, C + rows_per), np.uint64)
        for lo, hi in absent:  # registers the dump lacks read as 0: no reset, no unit change (as the reference rules)
            m[lo:hi] = 0
        if len(made) < SPARE_MATRICES:
            made.append(m)
        return m

    X = new_matrix()
    M = None  # null registers of the piece (allocated when a batch has one)
    fill = 0  # rows of X filled (the carried sample included)
    first = 0  # grid point of X's first sample
    have_carry = False
    for part in parts:
        for batch in _batches(plan, part, cols, rows_per):
            t = pa.Table.from_batches([batch])
            done = 0
            while done < t.num_rows:
                k = min(t.num_rows - done, X.shape[1] - fill)
                piece = t.slice(done, k)
                for name, lo, vals, nulls in _registers(plan, piece, str(part.path), pos):
                    X[lo : lo + vals.shape[1], fill : fill + k] = vals.T
                    if _any(nulls):
                        if M is None:
                            M = np.zeros(X.shape, bool)
                        M[lo : lo + vals.shape[1], fill : fill + k] = nulls.T
                fill += k
                done += k
                if fill == X.shape[1]:
                    S = fill // C
                    yield first, g.stamps[first : first + S], X, M
                    last = X[:, fill - C : fill].copy()
                    last_m = None if M is None else M[:, fill - C : fill].copy()
                    X = new_matrix()
                    X[:, :C] = last
                    M = None
                    if last_m is not None and last_m.any():
                        M = np.zeros(X.shape, bool)
                        M[:, :C] = last_m
                    first += S - 1
                    fill, have_carry = C, True
    if fill > (C if have_carry else 0) and fill >= 2 * C:
        S = fill // C
        yield (
            first,
            g.stamps[first : first + S],
            np.ascontiguousarray(X[:, :fill]),  # contiguous, as every piece
            None if M is None else np.ascontiguousarray(M[:, :fill]),
        )


#: matrices a host's reader keeps for reuse: the ones in the prefetch queue, the one being evaluated, the
#: one being filled and one spare. A fresh matrix costs the kernel's zeroing of every page at its first
#: write (a 2M-row, 280-register dump: 4.5 GB of pages, ~9 % of the CPU time of `perfonto analyze`)
SPARE_MATRICES = 5


def _unreferenced(made: list[np.ndarray]) -> np.ndarray | None:
    """A matrix of ``made`` that nothing but ``made`` refers to any more, or None. A NumPy view holds a
    reference to the array that owns the memory (its ``base`` is always the owner), so a matrix whose
    reference count is the list's own is referred to by no piece, view, table or thread: writing into it
    cannot change what anyone reads."""
    import sys

    for i in range(len(made)):
        if sys.getrefcount(made[i]) == 2:  # the list's reference and getrefcount's argument
            return made[i]
    return None


def _any(nulls: np.ndarray) -> bool:
    """Whether a register's nulls hold a True; a broadcast of one value (no null: ``_wide_one`` gives a
    broadcast False) is answered from that value, not by a pass over every row."""
    if nulls.size and not any(nulls.strides):
        return bool(nulls.flat[0])
    return bool(nulls.any())


def _registers(plan: DumpPlan, t: pa.Table, p: str, pos: dict):
    """(signal, first row in the piece's matrix, values (rows, n) uint64, nulls (rows, n)) of each
    register column of a batch, checked as ``read_counters`` checks them (``capture.dump._wide_one``):
    a fixed-size list column as one (rows, instances) view, a ``name[i]`` column as one instance."""
    from .dump import _flat_order, _wide_one

    for name, cols in plan.columns.items():
        if name not in pos:
            continue
        sig = plan.gen.signals[name]
        lo = pos[name][0]
        if len(cols) == 1 and cols[0] == name:
            vals, nulls = _wide_one(t, p, name, sig)
            yield name, lo, vals, nulls
            continue
        by_index = {int(c[:-1].rpartition("[")[2]): c for c in cols}
        for k, i in enumerate(_flat_order(p, name, sig, by_index)):
            vals, nulls = _wide_one(t, p, by_index[i], sig, scalar=True)
            yield name, lo + k, vals, nulls


__all__ = ["Chunk", "Flat", "iter_chunks", "open_parquet"]
