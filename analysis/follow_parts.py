"""The parts ``analysis.follow`` reads: one part file as a ``SampleBlock`` through the collector-format
reader (``read_part``), and the new rows of a file that grows — of a CSV file the whole lines past the
bytes taken (``csv_rows``), of a Parquet file the row groups that hold a new row (``parquet_rows``) — so
that memory follows the new rows, not the file; ``Tracked`` is what was taken of one file.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from perfonto.metrics.windows import DumpError, read_counters
from perfonto.ontology.errors import PerfontoError
from perfonto.ontology.resolved import Generation

from .live import SampleBlock


class PartError(PerfontoError, ValueError):
    """A part that cannot be read as the generation's counters (the message says which and why)."""


def block_of(dump, source: str, gen: Generation) -> SampleBlock:
    """A dump read by ``read_counters`` as a ``SampleBlock``: a signal it lacks is a null register."""
    raw, missing = dict(dump.raw), dict(dump.missing)
    S, C = dump.timestamps_ns.shape
    for name in dump.absent:
        n = gen.signals[name].instances
        raw[name] = np.zeros((S, C, n), dtype=np.uint64)
        missing[name] = np.ones((S, C, n), dtype=bool)
    present = None if dump.present.all() else dump.present
    hosts = None if dump.hosts is None else tuple(str(h) for h in dump.hosts)
    return SampleBlock(dump.timestamps_ns, raw, dump.chips, present, missing, hosts, False, source)


def read_part(path: str | Path, gen: Generation) -> SampleBlock:
    """Read one part (or a whole dump) as a ``SampleBlock`` through the collector-format reader
    (``capture.dump.read_counters``: wide or long layout, Parquet, Arrow or CSV, host + chip keys; its
    grid, null and sentinel handling apply). A signal the part does not hold is read as a null
    register, so the metrics that need it have null windows (their series are left out).

    Raises:
        PartError: the reader's ``DumpError``, or an ``OSError`` reading the file.
    """
    try:
        dump = read_counters(path, gen)
    except (DumpError, OSError) as exc:
        raise PartError(str(exc)) from None
    return block_of(dump, str(path), gen)


@dataclass
class Tracked:
    """What was taken of one file: its stat when last read, and for a CSV file the bytes taken."""

    sig: tuple[int, int, int] | None = None  # size, mtime_ns, inode
    since: float = 0.0  # clock when ``sig`` was last seen to change
    offset: int = 0  # CSV: bytes taken (whole lines)
    header: bytes = b""  # CSV: the header line
    tail: bytes = b""  # CSV: the last line taken (tells a file appended to from one replaced)
    carry: pa.Table | None = None  # CSV rows read but not taken (a sample some chip has not written yet)
    read: pa.Table | None = None  # CSV: the rows of the last read (to find those held back)
    keys: frozenset = frozenset()  # CSV: the (host, chip) keys seen in the file
    staged: tuple | None = None  # CSV: (header, offset, tail, keys, held) of a read, kept once it reads

    def commit(self, skip: bool = False) -> None:
        """Keep the position of the last read (after its rows were read as counters, or ``skip``: its
        bytes do not read and are skipped); its rows held back are read again with the next lines."""
        if self.staged is not None:
            self.header, self.offset, self.tail, keys, held = self.staged
            self.keys, self.carry = self.keys | keys, None if skip else held
        self.staged = None


def natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def stat(p: Path) -> tuple[int, int, int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def parquet_rows(p: Path, new_mask, everything: bool) -> tuple[pa.Table | None, int]:
    """(the rows of the Parquet file ``p`` that ``new_mask(keys, label)`` keeps — every row when
    ``everything`` or the file has no chip column —, rows dropped): the key columns are read first,
    then only the row groups that hold a kept row.

    Raises:
        DumpError: not a readable Parquet counter dump (names the file).
    """
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(str(p))
        names = pf.schema_arrow.names
        if everything or "chip" not in names:
            return pf.read(), 0
        keys = [n for n in names if n in ("chip", "host", "timestamp") or n.startswith("timestamp_")]
        mask = new_mask(pf.read(columns=keys), str(p))
        dropped = int((~mask).sum())
        if not mask.any():
            return None, dropped
        bounds = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)])
        groups = [i for i in range(pf.num_row_groups) if mask[bounds[i] : bounds[i + 1]].any()]
        rows = np.concatenate([mask[bounds[i] : bounds[i + 1]] for i in groups])
        table = pf.read_row_groups(groups)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        msg = " ".join(str(exc).split())[:400]
        raise DumpError(
            f"{p}: not a readable Parquet counter dump ({msg}); check the file, or write it again"
        ) from None
    return (table if rows.all() else table.filter(pa.array(rows))), dropped


def csv_rows(p: Path, tr: Tracked, types) -> pa.Table | None:
    """Header + the whole lines past what was taken (the whole file when it was replaced), after the
    rows held back last time. The position moves only when ``tr.commit()`` is called (once the rows
    read as counters): a read that fails is read again from the same place."""
    tr.staged = None
    with open(p, "rb") as f:
        header = f.readline()
        if not header.endswith(b"\n"):
            return None  # the header is still being written
        start = len(header)
        if tr.offset and header == tr.header and os.fstat(f.fileno()).st_size >= tr.offset:
            f.seek(tr.offset - len(tr.tail))
            if f.read(len(tr.tail)) == tr.tail:  # appended to: read on from there
                start = tr.offset
        f.seek(start)
        body = f.read()
    body = body[: body.rfind(b"\n") + 1]  # a half-written last line waits
    if not body:
        return None
    tail = body[body.rfind(b"\n", 0, len(body) - 1) + 1 :]
    table = _parse_csv(p, header + body, types)
    if tr.carry is not None and start > len(header):
        table = pa.concat_tables([tr.carry, table], promote_options="default")
    tr.staged = (header, start + len(body), tail, frozenset(), None)
    return table


def hold_incomplete(table: pa.Table, tr: Tracked, label: str) -> pa.Table:
    """``table`` less the trailing rows of samples that some chip (of the file's, ``tr.keys``, or the
    table's) has not written yet: a chip's n-th sample is complete when every chip has n samples (or,
    with a ``sample`` column, a sample number every chip has reached). The rows held back are staged
    to be read again with the next lines (``Tracked.commit``).

    Raises:
        DumpError: a key column that does not read.
    """
    from perfonto.capture.dump import _keys
    from perfonto.capture.dump_io import _meta

    if tr.staged is None or table.num_rows == 0:
        return table
    chip, host, ts = _keys(table, label, _meta(table, label).get("timestamp_unit"))
    ids, names = key_ids(chip, host)
    if not tr.keys <= names:
        keep = np.zeros(len(ids), dtype=bool)  # a chip of the file has no row here yet
    elif "sample" in table.column_names:
        stamp = table.column("sample").to_numpy(zero_copy_only=False).astype(np.int64)
        top = np.full(len(names), np.iinfo(np.int64).min)
        np.maximum.at(top, ids, stamp)
        keep = stamp <= top.min()
    else:  # the rank of each row's time among its chip's times
        uniq, inv = np.unique(np.stack([ids, ts]), axis=1, return_inverse=True)
        counts = np.bincount(uniq[0], minlength=len(names))
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(uniq.shape[1]) - first[uniq[0]]
        keep = rank[np.ravel(inv)] < counts.min()
    held = None if keep.all() else table.filter(pa.array(~keep))
    tr.staged = (*tr.staged[:3], names, held)
    return table if held is None else table.filter(pa.array(keep))


def key_ids(chip: np.ndarray, host: np.ndarray | None) -> tuple[np.ndarray, frozenset]:
    """Each row's key as a number (0, 1, …) and the keys, (host or None, chip), that the rows hold."""
    if host is None:
        uniq, ids = np.unique(chip, return_inverse=True)
        return np.ravel(ids), frozenset((None, int(c)) for c in uniq)
    hosts, h = np.unique(host.astype(str), return_inverse=True)
    uniq, ids = np.unique(np.stack([np.ravel(h), chip]), axis=1, return_inverse=True)
    return np.ravel(ids), frozenset((str(hosts[a]), int(c)) for a, c in uniq.T)


def after_restart(chip: np.ndarray, host: np.ndarray | None, ts: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Where time restarts (a row before ``first``, the first sample counted of its chip since the last
    baseline): the rows of each chip after its last jump back in time in file order (all its rows when
    they all come after the restart or it has none counted; none when it has no row from after the
    restart yet)."""
    keep = np.zeros(len(chip), dtype=bool)
    ids, _ = key_ids(chip, host)
    for k in np.unique(ids):
        idx = np.flatnonzero(ids == k)
        back = np.flatnonzero(np.diff(ts[idx]) < 0)
        if back.size:
            keep[idx[back[-1] + 1 :]] = True
        elif first[idx[0]] == np.iinfo(np.int64).min or ts[idx[0]] < first[idx[0]]:
            keep[idx] = True
    return keep


def eras(blocks: list[SampleBlock]) -> list[int]:
    """The era of each of the new parts found in one poll, given in name order: a part whose samples go
    back in time from the part named before it (a chip's first sample before its last one there) starts
    a new era (a restarted collector or device reset: its parts have earlier stamps than those written
    before it), unless it ends where that part begins (parts named out of time order: each chip's last
    sample within two sample intervals of its first one there)."""
    out: list[int] = []
    for i, b in enumerate(blocks):
        era = out[-1] if out else 0
        if i:
            a, ka = blocks[i - 1], _ends(blocks[i - 1])
            kb = _ends(b)
            common = ka.keys() & kb.keys()
            gap = 2 * max(_step(a), _step(b))
            back = any(kb[k][0] < ka[k][1] for k in common)
            before = all(kb[k][1] < ka[k][0] and ka[k][0] - kb[k][1] <= gap for k in common)
            era += back and not before
        out.append(era)
    return out


def _ends(b: SampleBlock) -> dict[tuple, tuple[int, int]]:
    """(host or None, chip) → (first, last) time stamp of ``b``."""
    hosts = b.hosts if b.hosts is not None else (None,) * len(b.chips)
    ts = b.timestamps_ns
    return {(h, int(c)): (int(ts[0, i]), int(ts[-1, i])) for i, (h, c) in enumerate(zip(hosts, b.chips))}


def _step(b: SampleBlock) -> int:
    """The median interval between samples of ``b`` (0 for a single sample)."""
    ts = b.timestamps_ns
    return int(np.median(np.diff(ts, axis=0))) if len(ts) > 1 else 0


def tool_capture(path: Path) -> str | None:
    """The format (``capture.formats``) of another tool's capture at ``path`` — a perf stat file, a scrape
    file, or a folder of scrapes and no collector parts — which --follow does not read (it waited
    silently on a folder of scrapes, its health saying "starting"); None for the collector format or an
    empty folder (its parts are still to come)."""
    from perfonto.capture.formats import detect

    try:
        if path.is_file():
            if path.stat().st_size == 0:
                return None  # still to be written: waited for, as a missing part is
            fmt = detect(path)
            return None if fmt == "collector" else fmt
        files = sorted(e for e in path.iterdir() if e.is_file() and not e.name.startswith((".", "_")))
    except OSError:
        return None  # the poll names what it cannot read
    if any(f.suffix in (".parquet", ".arrow", ".csv") for f in files):
        return None
    for f in files[:8]:
        fmt = detect(f)
        if fmt != "collector":
            return fmt
    return None


def _parse_csv(p: Path, data: bytes, types) -> pa.Table:
    """CSV bytes (header + whole lines) as ``capture.dump_io.read_one`` reads a CSV file.

    Raises:
        DumpError: a value that does not convert, or bytes that are not CSV.
    """
    import pyarrow.csv as pcsv

    opts = pcsv.ConvertOptions(column_types=types or {}, strings_can_be_null=True, null_values=[""])
    try:
        return pcsv.read_csv(io.BytesIO(data), convert_options=opts)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        msg = " ".join(str(exc).split())[:400]
        raise DumpError(f"{p}: not a readable CSV counter dump ({msg}); check the file, or write it again") from None


__all__ = [
    "PartError",
    "Tracked",
    "after_restart",
    "block_of",
    "csv_rows",
    "eras",
    "hold_incomplete",
    "key_ids",
    "natural",
    "parquet_rows",
    "read_part",
    "stat",
    "tool_capture",
]
