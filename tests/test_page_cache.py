"""The benchmark's page-cache helpers (``benchmarks/page_cache.py``): ``residency`` agrees with what
was just written or dropped, and ``warm`` brings a dropped file back in."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from page_cache import residency, warm  # noqa: E402

SIZE = 4 << 20  # 1,024 pages of 4 KB


def _write(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.write(os.urandom(SIZE))
        fh.flush()
        os.fsync(fh.fileno())


def _drop(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_a_file_just_written_is_resident(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    assert residency(path) == 1.0


def test_dropped_then_warmed(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    dropped = residency(path)
    if dropped > 0.5:
        pytest.skip(f"this file system keeps dropped pages ({dropped:.0%} resident after FADV_DONTNEED; tmpfs does)")
    got = warm(path, chunk=1 << 20)
    assert got["resident_before"] == pytest.approx(dropped, abs=1e-4)
    assert got["resident_after"] == 1.0
    assert residency(path) == 1.0


def test_half_read_is_half_resident(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    if residency(path) > 0.01:
        pytest.skip("this file system keeps dropped pages (tmpfs does)")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead past what is read
        os.pread(fd, SIZE // 2, 0)
    finally:
        os.close(fd)
    assert residency(path) == pytest.approx(0.5, abs=0.02)


def test_empty_file_and_missing_file(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.touch()
    assert residency(empty) == 1.0
    with pytest.raises(OSError):
        residency(tmp_path / "absent.bin")


def test_warm_reads_only_what_is_missing(tmp_path):
    path = tmp_path / "f.bin"
    _write(path)
    _drop(path)
    if residency(path) > 0.01:
        pytest.skip("this file system keeps dropped pages (tmpfs does)")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(fd, SIZE // 4, SIZE // 4)  # the second quarter in; three holes' worth out
    finally:
        os.close(fd)
    got = warm(path, chunk=1 << 18)
    assert got["read_mb"] == pytest.approx(0.75 * SIZE / 1e6, rel=0.02)
    assert got["resident_after"] == 1.0
    assert warm(path)["read_mb"] == 0.0
