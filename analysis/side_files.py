"""The files beside a counter dump — request records, trace, sync reads, op-boundary snapshots —
checked before anything is evaluated, so that a wrong path or a file of the wrong format is one
clear error naming that file, not a failure after the whole evaluation ran, a pyarrow message or
an error naming the counter dump instead. Request records, trace and sync reads are Parquet files
(the collector-format guide, "Request records, trace, sync reads"); snapshots are a counter dump
in the collector format (a file, a folder or a glob, read by ``capture.dump``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.capture.dump_io import DumpError, is_glob, parts_of
from perfonto.ontology.files import describe_os_error, exists, is_dir

GUIDE = 'see the collector-format guide, "Request records, trace, sync reads" (perfonto docs)'
PARQUET_MAGIC = b"PAR1"
SYNC_COLUMNS = ("chip", "host_before_ns", "device_ns", "host_after_ns")  # analysis.crosschip.fit_clocks


def check_side_files(capture) -> None:
    """Check the side files of ``capture`` (an ``analysis.capture.Capture``); tables in memory and
    None are not checked.

    Raises:
        DumpError: ``FILE: no such file`` (with the option that named it), ``FILE: not a Parquet
            file (…)``, a Parquet file whose footer cannot be read, or a snapshots path that holds no
            dump file.
    """
    from .spans import REQUIRED

    for flag, what, source, columns in (
        ("--requests", "request records", capture.requests, ()),
        ("--trace", "trace", capture.trace, REQUIRED),
        ("--sync", "sync reads", capture.sync, SYNC_COLUMNS),
    ):
        if isinstance(source, (str, Path)):
            check_parquet(source, flag, what, columns)
    snaps = capture.snapshots
    if isinstance(snaps, (str, Path)):
        if not is_glob(str(snaps)) and not exists(snaps):
            raise DumpError(f"{snaps}: no such file; check the path given to --snapshots (the op-boundary snapshots)")
        parts_of(snaps, "op-boundary snapshots")


def check_parquet(path: str | Path, flag: str, what: str, columns=()) -> None:
    """``path`` is a Parquet file (or a folder of them, read as one dataset) whose footer reads and
    whose schema has ``columns``.

    Raises:
        DumpError: naming ``path``, what is wrong and — ``flag``, ``what`` — where it came from.
    """
    p = Path(path)
    if not exists(p):
        raise DumpError(f"{p}: no such file; check the path given to {flag} (the {what})")
    if is_dir(p):
        return
    try:
        with open(p, "rb") as f:
            head = f.read(8)
            size = f.seek(0, 2)
            f.seek(max(size - 4, 0))
            tail = f.read(4)
    except OSError as exc:
        raise DumpError(f"{describe_os_error(exc, p)} (the {what}, {flag})") from None
    if size < 12 or head[:4] != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        raise DumpError(
            f"{p}: not a Parquet file ({_looks_like(head, size)}); {flag} takes the {what} as a Parquet file — {GUIDE}"
        )
    try:
        names = pq.ParquetFile(str(p)).schema_arrow.names
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(
            f"{p}: not a readable Parquet file ({' '.join(str(exc).split())[:200]}); the {what} ({flag}) "
            "may be truncated or still being written — write it again"
        ) from None
    missing = [c for c in columns if c not in names]
    if missing:
        raise DumpError(
            f"{p}: no column {', '.join(f'`{c}`' for c in missing)}; the wrong file? {flag} takes a "
            f"table with {', '.join(columns)} (this file has {', '.join(names[:8])}{' …' if len(names) > 8 else ''})"
            f" — {GUIDE}"
        )


def _looks_like(head: bytes, size: int) -> str:
    """What a file that is not Parquet seems to be, from its first bytes."""
    if size == 0:
        return "the file is empty"
    if head.startswith(b"ARROW1"):
        return "it is an Arrow IPC file"
    if head[:1] in (b"{", b"["):
        return "it starts like JSON"
    text = head.decode("utf-8", errors="replace")
    if "\ufffd" not in text and all(c.isprintable() or c in "\r\n\t" for c in text):
        return f"it starts with {text!r}: text, a CSV?"
    return "no Parquet magic bytes PAR1 at its start and end"


__all__ = ["check_parquet", "check_side_files"]
