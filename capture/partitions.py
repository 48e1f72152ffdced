"""Names from data as Hive partition folders, and written paths kept under their output folder.

A host (or any key) read from a capture is data, not a path: ``../../x``, ``a/b``, a NUL byte or a
name of a thousand characters must never choose where a file lands. ``segment`` encodes a value as
one path component, ``key=<value>``, percent-escaping every byte outside ``[A-Za-z0-9._-]`` (the
escaping Hive, Spark, DuckDB and pyarrow all decode, so ``host=a%2Fb`` reads back as ``a/b``), with
``.`` and ``..`` escaped too; ``value`` decodes a component read back. ``inside`` checks that a path
about to be written resolves under its root (symbolic links followed), the last line of defence.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote

from .dump_io import DumpError

__all__ = ["PathEscapeError", "MAX_SEGMENT_BYTES", "segment", "value", "folder_keys", "inside"]

MAX_SEGMENT_BYTES = 200  # file systems allow 255 bytes per component; leave room for a temporary suffix


class PathEscapeError(DumpError):
    """A name from data that cannot name a file, or a path that would land outside its output folder."""


def segment(key: str, val: object, *, what: str = "") -> str:
    """``key=<val>`` as one safe path component (Hive partitioning).

    Args:
        key: the partition column (``host``); a plain identifier chosen by perfonto.
        val: the value from data (any text; ``str(val)`` is taken).
        what: where the value came from (file and column), for the error message.

    Raises:
        PathEscapeError: the encoded component is longer than ``MAX_SEGMENT_BYTES`` bytes.
    """
    text = quote(str(val), safe="")  # every byte outside A-Z a-z 0-9 _ . - ~ as %XX (UTF-8)
    text = text.replace("~", "%7E")
    if text in (".", ".."):
        text = text.replace(".", "%2E")
    out = f"{key}={text}"
    if len(out.encode()) > MAX_SEGMENT_BYTES:
        where = f"{what}: " if what else ""
        raise PathEscapeError(
            f"{where}the {key} `{str(val)[:60]}…` is {len(str(val))} characters long; a {key} names a "
            f"folder of the output and must encode to at most {MAX_SEGMENT_BYTES} bytes: shorten it"
        )
    return out


def value(text: str) -> str:
    """A partition value read from a folder name (``a%2Fb`` → ``a/b``); the inverse of ``segment``."""
    return unquote(text)


def folder_keys(folder: Path) -> dict[str, str]:
    """The ``key=value`` components of a folder's own path (``F/counters/host=h000`` → ``{"host": "h000"}``),
    decoded: a dump given as one partition's folder keeps the keys its files would have read from a
    folder above them, as a file given on its own does."""
    out = {}
    for part in Path(folder).parts:
        k, eq, v = part.partition("=")
        if eq and k:
            out[k] = value(v)
    return out


def inside(path: Path, root: Path) -> Path:
    """``path``, after checking that it resolves (symbolic links followed) inside ``root``.

    Raises:
        PathEscapeError: it does not: a name from data tried to leave the output folder.
    """
    real, base = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, base]) != base:
        raise PathEscapeError(
            f"{path}: would be written outside the output folder {root}; a name from the data "
            "(host, chip, op) tried to choose the path — report this as a bug"
        )
    return path
