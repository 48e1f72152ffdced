"""The one engine behind ``perfonto analyze`` (issue 26): each input byte read once, the same values
over any piece size and through both paths (regular rows read in order, others placed by grid point),
and the second process on a catalog reads the compiled catalog and kernel from the cache."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from perfonto.analysis.engine import evaluate_capture
from perfonto.capture import pieces
from perfonto.capture.dump_scan import plan_dump
from perfonto.codegen.python_evaluator import generate, load


@pytest.fixture(scope="module")
def dump(tmp_path_factory, sohu):
    """An emulated 8-chip capture rewritten with row groups of 240 rows (30 samples), so pieces cross them."""
    d = tmp_path_factory.mktemp("engine")
    res = emulator.run(
        sohu,
        model="llama-3.1-8b",
        chips=8,
        duration_s=0.3,
        sample_period_s=1e-3,
        isl=128,
        osl=16,
        warmup_steps=20,
        out_dir=d / "run",
    )
    t = pq.read_table(res.counters_path)
    path = d / "counters.parquet"
    pq.write_table(t, path, row_group_size=240)
    return path


@pytest.fixture(scope="module")
def evaluator(library):
    return load(generate(library))


class _Counting(io.RawIOBase):
    """A file that records the byte ranges read from it."""

    def __init__(self, path: Path, log: list):
        self.f, self.log = open(path, "rb"), log

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def tell(self):
        return self.f.tell()

    def readinto(self, b):
        pos = self.f.tell()
        n = self.f.readinto(b)
        self.log.append((pos, n))
        return n

    def close(self):
        self.f.close()
        super().close()


def test_each_column_chunk_is_read_once(dump, library, evaluator, monkeypatch):
    reads: list[tuple[int, int]] = []
    monkeypatch.setattr(pieces, "open_parquet", lambda p: pq.ParquetFile(_Counting(Path(p), reads), pre_buffer=False))
    plan = plan_dump(dump, library.generation)
    res = evaluate_capture(library, evaluator, plan, None, chunk_rows=400)  # 50 samples a piece: across row groups
    assert res.stats["pieces"] >= 5 and res.stats["read again"] == 0
    md = pq.ParquetFile(dump).metadata
    count = np.zeros(dump.stat().st_size, np.int32)
    for pos, n in reads:
        count[pos : pos + n] += 1
    names = md.schema.to_arrow_schema().names
    needed = set(plan.columns) & {n for n, _, _ in evaluator._REGS} | {"chip", "timestamp_ns"}
    seen_twice, unread = [], []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            span = count[start : start + col.total_compressed_size]
            top = names[c] if c < len(names) else col.path_in_schema
            base = col.path_in_schema.split(".list.")[0] if ".list." in col.path_in_schema else col.path_in_schema
            if span.max() > 1:
                seen_twice.append((g, col.path_in_schema))
            if (base in needed or top in needed) and span.min() < 1:
                unread.append((g, col.path_in_schema))
    assert not seen_twice, seen_twice[:5]
    assert not unread, unread[:5]


def test_piece_size_and_path_do_not_change_values(dump, library, evaluator):
    plan = plan_dump(dump, library.generation)
    a = evaluate_capture(library, evaluator, plan, None, chunk_rows=10_000, keep=True)
    b = evaluate_capture(library, evaluator, plan_dump(dump, library.generation), None, chunk_rows=136, keep=True)
    # the same rows with every fifth sample's chips in reverse order: no longer regular, placed by grid point
    t = pq.read_table(dump)
    order = np.arange(t.num_rows).reshape(-1, 8)
    order[::5] = order[::5, ::-1]
    shuffled = dump.with_name("shuffled.parquet")
    pq.write_table(t.take(pa.array(order.reshape(-1))), shuffled, row_group_size=240)
    c = evaluate_capture(library, evaluator, plan_dump(shuffled, library.generation), None, chunk_rows=136, keep=True)
    assert a.stats["kernel"] + a.stats["numpy"] == a.stats["pieces"] == 1 and b.stats["pieces"] > 5
    for name in library.metrics:
        assert np.array_equal(a.evaluation.window[name], b.evaluation.window[name], equal_nan=True), name
        assert np.array_equal(a.evaluation.window[name], c.evaluation.window[name], equal_nan=True), name
        for lv in ("per_chip", "server"):
            x, y = getattr(a.evaluation, lv)[name], getattr(c.evaluation, lv)[name]
            assert np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True), (name, lv)


def test_a_piece_with_a_reset_is_prepared_again_and_named(dump, library, evaluator, tmp_path):
    t = pq.read_table(dump)
    boot = t.column("seq.boot_count").to_numpy().copy()
    boot[8 * 120 :] += 1  # every chip reboots at sample 120
    t = t.set_column(t.column_names.index("seq.boot_count"), "seq.boot_count", pa.array(boot, pa.uint64()))
    path = tmp_path / "reset.parquet"
    pq.write_table(t, path, row_group_size=240)
    res = evaluate_capture(library, evaluator, plan_dump(path, library.generation), None, chunk_rows=400)
    assert res.stats["prepared again"] == 1  # only the piece that holds the reset
    assert any("reset (indicator)" in reasons for reasons in res.evaluation.nulls.values())


@pytest.mark.parametrize("jit", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_pieces_with_nulls_run_the_kernel_once_each(dump, library, tmp_path, monkeypatch, jit):
    """A capture with a null in every piece: after the first such piece of a host, each piece keeps its
    inputs' window values from its one kernel run instead of running the kernel again for them, with the
    same values as one piece over the whole capture (with numba: the kernel; without: the NumPy path)."""
    if jit:
        pytest.importorskip("numba")
        monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)
    evaluator = load(generate(library))  # a fresh module: whether it jits is decided at its first call
    t = pq.read_table(dump)
    boot = t.column("seq.boot_count").to_numpy().copy()
    S = t.num_rows // 8
    boot += np.repeat(np.arange(S, dtype=np.uint64) // 40, 8)  # every chip reboots every 40 samples
    t = t.set_column(t.column_names.index("seq.boot_count"), "seq.boot_count", pa.array(boot, pa.uint64()))
    path = tmp_path / "resets.parquet"
    pq.write_table(t, path, row_group_size=240)
    whole = evaluate_capture(library, evaluator, plan_dump(path, library.generation), None, chunk_rows=10**6, keep=True)
    calls = []
    real = evaluator.window_values
    monkeypatch.setattr(evaluator, "window_values", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = evaluate_capture(library, evaluator, plan_dump(path, library.generation), None, chunk_rows=400, keep=True)
    assert res.stats["pieces"] >= 5 and res.stats["prepared again"] == res.stats["pieces"]
    assert res.stats["kernel" if jit else "numpy"] == res.stats["pieces"]
    assert len(calls) == (1 if jit else res.stats["pieces"])  # the kernel: only the first piece ran it twice
    for name in library.metrics:
        assert np.array_equal(whole.evaluation.window[name], res.evaluation.window[name], equal_nan=True), name
        for lv in ("per_chip", "server"):
            x, y = getattr(whole.evaluation, lv)[name], getattr(res.evaluation, lv)[name]
            assert np.allclose(x, y, rtol=1e-9, atol=0, equal_nan=True), (name, lv)
    assert whole.evaluation.nulls == res.evaluation.nulls


def _analyze(dump: Path, out: Path, cache: Path, catalog: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PERFONTO_NO_JIT"}
    env["PERFONTO_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "perfonto",
            "analyze",
            str(dump),
            "--out",
            str(out),
            "--catalog",
            str(catalog),
            "--no-library",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.mark.slow
def test_a_second_process_pays_no_kernel_compile(dump, tmp_path):
    pytest.importorskip("numba", reason="the compiled kernel needs numba (pip install -e '.[test]')")
    from perfonto.codegen.evaluator_cache import entry_folder
    from perfonto.metrics.catalog import load_catalog

    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "small.metrics").write_text(
        "metric busy [percent] = avg(mxu.busy_cycles) / seq.elapsed_cycles\n"
        '  "Share of the cycles the matrix engines were busy."\n',
        encoding="utf-8",
    )
    cache = tmp_path / "cache"
    first = _analyze(dump, tmp_path / "a", cache, cat)
    assert first.returncode == 0, first.stderr
    assert "compiling the evaluator's kernel" in first.stderr
    saved = os.environ.get("PERFONTO_CACHE_DIR")
    os.environ["PERFONTO_CACHE_DIR"] = str(cache)
    try:
        graph = load_catalog(cat, None, library=False).graph
        folder = entry_folder(graph) / "__pycache__"
    finally:
        os.environ["PERFONTO_CACHE_DIR"] = saved or ""
    assert sorted(folder.glob("evaluator._kernel_call-*.nbi")), (
        "numba's cache holds no compiled kernel after the first process"
    )
    stamps = {p: p.stat().st_mtime_ns for p in folder.iterdir()}
    second = _analyze(dump, tmp_path / "b", cache, cat)
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr  # the catalog and the kernel came from the cache
    after = {p: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert after == stamps  # numba wrote nothing: it loaded the kernel it had
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a["metrics"] == b["metrics"]
