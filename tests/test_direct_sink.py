"""The benchmark's direct-I/O sink (``benchmarks/direct_sink.py``) writes exactly the bytes it is
given, through ``O_DIRECT`` or, where the file system refuses it, through the page cache."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from direct_sink import DirectSink  # noqa: E402


def _pieces(rng, total):
    out, n = [], 0
    while n < total:
        k = int(rng.integers(0, 9000))  # pieces smaller and larger than the 8 KB chunk, and empty ones
        out.append(rng.integers(0, 256, size=k, dtype=np.uint8).tobytes())
        n += k
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_bytes_round_trip_across_chunk_boundaries(tmp_path, seed):
    rng = np.random.default_rng(seed)
    pieces = _pieces(rng, 100_000)
    path = tmp_path / "out.bin"
    with DirectSink(path, chunk=8192) as sink:
        for p in pieces:
            assert sink.write(p) == len(p)
        assert sink.tell() == sum(map(len, pieces))
    assert path.read_bytes() == b"".join(pieces)  # the padded last block is cut back


def test_exact_multiple_of_the_chunk_and_empty_file(tmp_path):
    data = bytes(range(256)) * 64  # 16 KB = two chunks exactly
    with DirectSink(tmp_path / "a", chunk=8192) as s:
        s.write(data)
    assert (tmp_path / "a").read_bytes() == data
    DirectSink(tmp_path / "b", chunk=8192).close()
    assert (tmp_path / "b").read_bytes() == b""


def test_arrow_ipc_file_written_through_it_reads_back(tmp_path):
    rng = np.random.default_rng(3)
    vals = rng.random(10_001)
    vals[::7] = np.nan
    batch = pa.RecordBatch.from_arrays([pa.array(vals, from_pandas=True), pa.array(np.arange(10_001))], names=["m", "k"])
    path = tmp_path / "metrics.arrow"
    sink = DirectSink(path, chunk=1 << 16)
    with pa.ipc.new_file(pa.PythonFile(sink, mode="w"), batch.schema) as w:
        for _ in range(3):
            w.write_batch(batch)
    sink.close()
    with pa.memory_map(str(path)) as src:
        t = pa.ipc.open_file(src).read_all()
    assert t.num_rows == 30_003
    assert t.column("m").null_count == 3 * batch.column("m").null_count
    assert t.slice(10_001, 10_001).column("m").equals(pa.chunked_array([batch.column("m")]))


def test_falls_back_to_buffered_writes_where_direct_io_is_refused(tmp_path, monkeypatch):
    real_open = os.open

    def refuse_direct(path, flags, mode=0o777):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(22, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refuse_direct)
    data = b"x" * 5000 + b"y" * 7
    with DirectSink(tmp_path / "f", chunk=4096) as s:
        assert not s.direct
        s.write(data)
    assert (tmp_path / "f").read_bytes() == data


def test_chunk_must_be_block_aligned(tmp_path):
    with pytest.raises(ValueError, match="multiple of 4096"):
        DirectSink(tmp_path / "x", chunk=1000)


def test_strided_and_reversed_arrays_are_written_as_their_values(tmp_path):
    a = np.arange(64, dtype=np.uint8)
    f = np.linspace(0, 1, 50)
    with DirectSink(tmp_path / "s", chunk=4096) as s:
        s.write(a[::2])
        s.write(a[::-1])
        s.write(f[::3])
    assert (tmp_path / "s").read_bytes() == a[::2].tobytes() + a[::-1].tobytes() + f[::3].tobytes()


def test_write_after_close_is_refused(tmp_path):
    s = DirectSink(tmp_path / "c", chunk=4096)
    s.close()
    s.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        s.write(b"x")
    with pytest.raises(ValueError, match="closed"):
        s.write(b"")
