"""How much of a file the page cache holds (``mincore(2)``) and reading it in before a timed run.

Why the benchmark needs it, measured on this VM: a 4.2 GB input left idle for 13 minutes was 2.2 GB
resident (``fincore``), because the kernel reclaims idle file pages (kswapd; a DAMON ``pageout`` scheme
runs here for pages idle over 60 s). An engine's first pass then reads half its input from the disk,
which is not what the memory floor measures. ``bench_eval.py`` reads each engine's input in just
before the engine's clock starts and reports the residency it found, left, and found again after
the run.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import stat
import time
from pathlib import Path

import numpy as np

__all__ = ["residency", "warm"]

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        lib.mmap.restype = ctypes.c_void_p
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        _LIBC = lib
    return _LIBC


def _mincore(path: Path) -> np.ndarray | None:
    """Per-page residency of ``path`` (bool array, one entry per page) by ``mincore(2)`` over a
    read-only mapping (mapping does not read the file); None where mincore cannot see it: since
    Linux 5.0 it reports every page of a file the caller neither owns nor may write as resident.

    Raises OSError naming the path if the file is missing, unreadable or not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file: its page-cache residency has no meaning")
        if st.st_uid != os.geteuid() and os.geteuid() != 0 and not os.access(path, os.W_OK):
            return None
        size = st.st_size
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        if size == 0:
            return np.ones(0, bool)
        lib = _libc()
        addr = lib.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, f"cannot map {path}: {os.strerror(err)}")
        try:
            vec = ctypes.create_string_buffer(pages)
            if lib.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore on {path}: {os.strerror(err)}")
            return (np.frombuffer(vec.raw, np.uint8)[:pages] & 1).astype(bool)
        finally:
            lib.munmap(addr, size)
    finally:
        os.close(fd)


def residency(path: Path) -> float:
    """Fraction (0..1) of ``path``'s pages in the page cache, by ``mincore(2)``; 1.0 for an empty
    file; NaN where mincore cannot see it (a file the caller neither owns nor may write).
    Raises OSError (with the path) if the file is missing, unreadable or not a regular file."""
    res = _mincore(path)
    if res is None:
        return float("nan")
    return float(res.mean()) if res.size else 1.0


def warm(path: Path, chunk: int = 16 << 20) -> dict:
    """Read the pages of ``path`` that are not in the page cache (runs of them, ``chunk`` bytes at a
    time into one reused buffer) so that a timed run that follows finds the whole file in memory; a
    resident file costs one ``mincore``, a file mincore cannot see is read whole. Returns
    ``{"resident_before", "resident_after", "read_mb", "read_bytes", "warm_s"}`` (residencies NaN where unknown).
    Raises OSError as ``residency`` does."""
    t0 = time.perf_counter()
    res = _mincore(path)
    if res is None:
        res = np.zeros((os.path.getsize(path) + mmap.PAGESIZE - 1) // mmap.PAGESIZE, bool)
        before = float("nan")
    else:
        before = float(res.mean()) if res.size else 1.0
    buf = bytearray(chunk)
    read = 0
    if res.size and not res.all():
        edges = np.flatnonzero(np.diff(np.concatenate([[1], res.astype(np.int8), [1]])))  # starts, ends of holes
        fd = os.open(path, os.O_RDONLY)
        try:
            for a, z in zip(edges[0::2] * mmap.PAGESIZE, edges[1::2] * mmap.PAGESIZE):
                for off in range(int(a), int(z), chunk):
                    n = os.preadv(fd, [memoryview(buf)[: min(chunk, int(z) - off)]], off)
                    read += n
                    if n == 0:
                        break
        finally:
            os.close(fd)
    return {
        "resident_before": round(before, 4),
        "resident_after": round(residency(path), 4),
        "read_mb": round(read / 1e6, 1),
        "read_bytes": read,
        "warm_s": round(time.perf_counter() - t0, 3),
    }
