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
    """Header + the whole lines past what was taken (the whole file when it was replaced)."""
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
    tr.header, tr.offset = header, start + len(body)
    tr.tail = body[body.rfind(b"\n", 0, len(body) - 1) + 1 :]
    table = _parse_csv(p, header + body, types)
    if tr.carry is not None and start > len(header):
        table = pa.concat_tables([tr.carry, table], promote_options="default")
    tr.carry = None
    return table


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


__all__ = ["PartError", "Tracked", "block_of", "csv_rows", "natural", "parquet_rows", "read_part", "stat"]
