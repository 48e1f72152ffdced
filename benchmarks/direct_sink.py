"""A file sink that writes around the page cache (``O_DIRECT``), for the benchmark engines' large
metric tables.

Why: a buffered write of a 1.5 GB table must find 1.5 GB of page-cache pages, and on a virtual
machine whose free memory the host has taken back, touching a fresh page costs a host fault — this
machine measured 0.5–0.9 GB/s for a first write, 3.8–4.9 GB/s for the same write once the pages were
warm, and 1.9–2.7 GB/s through ``O_DIRECT`` every time (``dd oflag=direct``, 1.6 GB). The direct write
copies the stream into one page-aligned staging buffer (allocated once, so warm after the first
chunk) and hands whole chunks to the disk; the thread waits on the device, not on the CPU. The copy
into the staging buffer is a ``ctypes.memmove``, which releases the GIL, so a writer thread does not
hold up the thread that computes.

``DirectSink(path)`` is a binary file object (``write``, ``tell``, ``flush``, ``close``) for
``pa.PythonFile``; where the file system refuses ``O_DIRECT`` (tmpfs, some overlay and network file
systems) it writes through the page cache as a plain file would. Either way the file on disk holds
exactly the bytes written (the last chunk is padded to the device's block and the file cut back).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

__all__ = ["DirectSink"]

_ALIGN = 4096  # O_DIRECT needs offsets, lengths and the buffer's address aligned to the logical block


class DirectSink:
    """Write-only binary file at ``path`` (created or truncated) through ``O_DIRECT`` when the file
    system allows it; ``direct`` says which. ``chunk`` bytes (a multiple of 4096) are staged per
    device write. Errors from the file system propagate as ``OSError`` naming the path."""

    def __init__(self, path: str | os.PathLike, chunk: int = 32 << 20):
        if chunk <= 0 or chunk % _ALIGN:
            raise ValueError(f"chunk must be a positive multiple of {_ALIGN} bytes, got {chunk}")
        self.path = os.fspath(path)
        raw = np.empty(chunk + _ALIGN, np.uint8)  # before the file is opened: a failure here leaks no descriptor
        skip = (-raw.ctypes.data) % _ALIGN
        self._buf = raw[skip:skip + chunk]  # page-aligned staging buffer
        self._addr = self._buf.ctypes.data
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        self.direct = hasattr(os, "O_DIRECT")
        try:
            self._fd = os.open(self.path, flags | (os.O_DIRECT if self.direct else 0), 0o644)
        except OSError:
            if not self.direct:
                raise
            self.direct = False  # EINVAL from a file system without direct I/O: plain writes
            self._fd = os.open(self.path, flags, 0o644)
        self._fill = 0
        self._size = 0
        self.closed = False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        """Append ``data`` (bytes-like); returns its length in bytes."""
        if self.closed:
            raise ValueError(f"write to a closed DirectSink ({self.path})")
        if isinstance(data, np.ndarray):
            src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)  # a strided view is copied, not read past
        else:
            src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        addr = src.ctypes.data
        n, pos = src.size, 0
        while pos < n:
            k = min(n - pos, len(self._buf) - self._fill)
            ctypes.memmove(self._addr + self._fill, addr + pos, k)  # releases the GIL
            self._fill += k
            pos += k
            if self._fill == len(self._buf):
                self._flush_full()
        self._size += n
        return n

    def _flush_full(self) -> None:
        done = 0
        while done < self._fill:  # a short write is legal; O_DIRECT ones stay block-aligned
            done += os.write(self._fd, self._buf[done:self._fill])
        self._fill = 0

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        """Nothing to do before ``close``: a partial chunk can only be written once, padded."""

    def close(self) -> None:
        """Write the last partial chunk (padded to the block size under ``O_DIRECT``, then the file
        is cut back to the bytes written) and close the file."""
        if self.closed:
            return
        try:
            tail = self._fill
            if tail:
                pad = (-tail) % _ALIGN if self.direct else 0
                self._buf[tail:tail + pad] = 0
                self._fill = tail + pad
                self._flush_full()
            if self.direct:
                os.ftruncate(self._fd, self._size)
        finally:
            os.close(self._fd)
            self._buf = None
            self.closed = True

    def __enter__(self) -> "DirectSink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
