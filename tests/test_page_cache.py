"""The benchmark's page-cache helpers (``benchmarks/page_cache.py``): ``residency`` agrees with an
independent probe of the page cache (``preadv`` with ``RWF_NOWAIT`` fails with EAGAIN on a page that
is not cached), and ``warm`` reads exactly the pages that are missing."""

from __future__ import annotations

import errno
import mmap
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from page_cache import residency, warm  # noqa: E402

PAGE = mmap.PAGESIZE
SIZE = 1024 * PAGE + 123  # 1,025 pages, the last one partial


def _write(path: Path, size: int = SIZE) -> None:
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))
        fh.flush()
        os.fsync(fh.fileno())


def _cached(path: Path, page: int) -> bool:
    """The independent probe: is ``page`` of ``path`` in the page cache (a read that must not block)?
    A miss starts the read of that one page (no readahead: ``FADV_RANDOM``), so probe a page last."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.preadv(fd, [bytearray(1)], page * PAGE, os.RWF_NOWAIT)
        return True
    except OSError as e:
        if e.errno == errno.EAGAIN:
            return False
        raise
    finally:
        os.close(fd)


def _fadvise(path: Path, advice: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, advice)
    finally:
        os.close(fd)


def _drop(path: Path) -> None:
    """Drop ``path`` from the page cache, or skip where the file system keeps its pages (tmpfs), as
    the probe — not the code under test — says (then drop again the one page the probe read)."""
    if not hasattr(os, "RWF_NOWAIT"):
        pytest.skip("no RWF_NOWAIT on this platform: nothing independent to check residency with")
    _fadvise(path, os.POSIX_FADV_DONTNEED)
    if _cached(path, SIZE // PAGE):
        pytest.skip("this file system keeps dropped pages (tmpfs does): nothing to read back")
    time.sleep(0.05)  # the probe's one-page read completes
    _fadvise(path, os.POSIX_FADV_DONTNEED)


def _read(path: Path, offset: int, length: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead past what is read
        os.pread(fd, length, offset)
    finally:
        os.close(fd)


def test_a_file_just_written_is_resident(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    assert residency(path) == 1.0


def test_dropped_is_not_resident_and_warm_brings_it_back(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    assert residency(path) < 0.01
    got = warm(path, chunk=1 << 20)
    assert got["resident_before"] < 0.01
    assert got["read_bytes"] == SIZE
    assert got["resident_after"] == 1.0 and residency(path) == 1.0
    assert all(_cached(path, p) for p in (0, 511, 1024))  # the probe agrees


def test_half_read_is_half_resident(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    _read(path, 0, 512 * PAGE)
    assert residency(path) == pytest.approx(512 / 1025, abs=2 / 1025)
    assert _cached(path, 10) and not _cached(path, 900)  # the probe agrees (page 900 probed last)


def test_warm_reads_exactly_the_holes(tmp_path):
    """Holes that do not line up with the read chunk (3 pages): only their bytes are read."""
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    _read(path, 100 * PAGE, 300 * PAGE)  # pages 100..399 in
    _read(path, 700 * PAGE, 7 * PAGE)  # pages 700..706 in
    holes = 1025 - 300 - 7
    got = warm(path, chunk=3 * PAGE)
    want = (holes - 1) * PAGE + (SIZE - 1024 * PAGE)  # the last page is partial
    assert got["read_bytes"] == want, (got, want)
    assert got["resident_after"] == 1.0
    assert warm(path)["read_bytes"] == 0


def test_odd_paths_are_clear_errors(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.touch()
    assert residency(empty) == 1.0
    with pytest.raises(FileNotFoundError):
        residency(tmp_path / "absent.bin")
    with pytest.raises(OSError, match="not a regular file"):
        residency(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        residency(fifo)  # without a writer: must not block in open
    with pytest.raises(OSError, match="not a regular file"):
        warm(fifo)
