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


def residency(path: Path) -> float:
    """Fraction (0..1) of ``path``'s pages in the page cache, by ``mincore(2)`` over a read-only
    mapping (mapping does not read the file). 1.0 for an empty file.

    Raises OSError (with the path) if the file cannot be opened or mapped."""
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    lib = _libc()
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
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
            resident = int((np.frombuffer(vec.raw, np.uint8) & 1).sum())
        finally:
            lib.munmap(addr, size)
    finally:
        os.close(fd)
    return resident / pages


def warm(path: Path, chunk: int = 16 << 20) -> dict:
    """Read ``path`` once through the page cache (``chunk`` bytes at a time into one reused buffer) so
    that a timed run that follows finds it in memory. Returns the residency before and after and the
    seconds taken: ``{"resident_before", "resident_after", "warm_s"}``."""
    before = residency(path)
    t0 = time.perf_counter()
    buf = bytearray(chunk)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(view):
            pass
    return {"resident_before": round(before, 4), "resident_after": round(residency(path), 4),
            "warm_s": round(time.perf_counter() - t0, 3)}
