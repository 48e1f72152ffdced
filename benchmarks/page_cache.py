"""How much of a file the page cache holds (``mincore(2)``) and reading it in before a timed run.

Why the benchmark needs it, measured on this VM: a 4.2 GB input left idle for 13 minutes was 2.2 GB
resident (``fincore``), because the kernel reclaims idle file pages (kswapd; a DAMON ``pageout`` scheme
runs here for pages idle over 60 s). An engine's first pass then reads half its input from the disk,
which is not what the memory floor measures. ``bench_eval.py`` reads each engine's input in before
starting it and reports the residency it found and left.
"""
from __future__ import annotations

import ctypes
import mmap
import os
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


def _mincore(path: Path) -> np.ndarray:
    """Per-page residency of ``path`` (bool array, one entry per page) by ``mincore(2)`` over a
    read-only mapping (mapping does not read the file). Raises OSError naming the path if the file
    cannot be opened or mapped."""
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    if size == 0:
        return np.ones(0, bool)
    lib = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
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
    file. Raises OSError (with the path) if the file cannot be opened or mapped."""
    res = _mincore(path)
    return float(res.mean()) if res.size else 1.0


def warm(path: Path, chunk: int = 16 << 20) -> dict:
    """Read the pages of ``path`` that are not in the page cache (runs of them, ``chunk`` bytes at a
    time into one reused buffer) so that a timed run that follows finds the whole file in memory; a
    resident file costs one ``mincore``. Returns ``{"resident_before", "resident_after", "read_mb",
    "warm_s"}``."""
    t0 = time.perf_counter()
    res = _mincore(path)
    before = float(res.mean()) if res.size else 1.0
    buf = bytearray(chunk)
    read = 0
    if res.size and not res.all():
        edges = np.flatnonzero(np.diff(np.concatenate([[1], res.astype(np.int8), [1]])))  # starts, ends of holes
        fd = os.open(path, os.O_RDONLY)
        try:
            for a, z in zip(edges[0::2] * mmap.PAGESIZE, edges[1::2] * mmap.PAGESIZE):
                for off in range(int(a), int(z), chunk):
                    n = os.preadv(fd, [memoryview(buf)[:min(chunk, int(z) - off)]], off)
                    read += n
                    if n == 0:
                        break
        finally:
            os.close(fd)
    return {"resident_before": round(before, 4), "resident_after": round(residency(path), 4),
            "read_mb": round(read / 1e6, 1), "warm_s": round(time.perf_counter() - t0, 3)}
