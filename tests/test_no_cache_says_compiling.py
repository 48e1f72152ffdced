"""`--no-cache` compiles the kernel in memory in every process, so it says so even when the cache folder
holds a compiled kernel from an earlier cached run (a new user saw 51 s with no word on why)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import perfonto.codegen.evaluator_cache as ec
import perfonto.job as job
from perfonto.ontology import cache


@pytest.mark.parametrize("enabled, cached, says", [(False, True, True), (True, True, False), (True, False, True)])
def test_the_compile_line_follows_the_cache_switch(monkeypatch, enabled, cached, says):
    pytest.importorskip("numba")
    mod = SimpleNamespace(_jit=object())
    monkeypatch.setattr(ec, "_evaluator", lambda graph, use: (mod, "src"))
    monkeypatch.setattr(ec, "kernel_cached", lambda graph: cached)
    monkeypatch.setattr(cache, "enabled", lambda: enabled)
    monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)
    said: list[str] = []
    monkeypatch.setattr(ec, "_SAID", set())
    graph = SimpleNamespace(
        content_hash="abc", metrics={"m": None}, record_metrics={}, generation=SimpleNamespace(content_hash="g")
    )
    job.evaluator_for(graph, said.append)
    assert bool(said) == says
    if says and not enabled:
        assert "--no-cache: not kept" in said[0]


def test_every_path_to_a_kernel_says_when_it_compiles(tmp_path, monkeypatch):
    """A catalog cut to ``--metrics`` gets an evaluator of its own (``analysis.capture.evaluable``): its
    first compile says so too (a new user waited 21 s on `--metrics mfu` with no word), and the API's
    ``Catalog.evaluator`` takes the cached evaluator, not one compiled in every process."""
    import perfonto
    from perfonto.analysis.capture import evaluable

    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    monkeypatch.setattr(ec, "compiling_notice", lambda graph, mod, use=None: f"compiling {graph.content_hash}")
    monkeypatch.setattr(ec, "_SAID", set())
    cat = perfonto.load_catalog()
    said: list[str] = []
    evaluated, _, _, _ = evaluable(cat.graph, set(), ["mfu"], cat.evaluator(), said.append)
    assert said == [f"compiling {evaluated.content_hash}"] and "mfu" in evaluated.metrics
    assert cat.evaluator() is ec.evaluator(cat.graph)[0]  # the cache entry's module, imported once


def test_an_unwritable_cache_folder_is_said_not_claimed(tmp_path, monkeypatch):
    """A PERFONTO_CACHE_DIR that cannot be written (a file here) keeps nothing: the compile line says so and
    names the variable, instead of "cached in" the folder (a breaker saw every run compile again, silently)."""
    pytest.importorskip("numba")
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(not_a_folder))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)
    monkeypatch.setattr(ec, "_SAID", set())
    import perfonto

    said: list[str] = []
    ec.evaluator(perfonto.load_catalog().graph, log=said.append)
    assert len(said) == 1 and f"the cache folder {not_a_folder} cannot be written" in said[0]
    assert "PERFONTO_CACHE_DIR" in said[0] and "cached in" not in said[0]


def test_analyze_warms_only_the_kernel_that_runs(tmp_path, monkeypatch, capsys):
    """The kernel loaded (or compiled) ahead is the one that runs: the whole catalog's, or with --metrics
    or on a dump that lacks a signal, the cut catalog's (``analysis.capture.evaluable``); its compile is
    announced once. Warming the whole catalog's compiled a kernel that never ran (a review measured 35 s
    against 20 s on a cold cache, and two "compiling" lines)."""
    import pyarrow.parquet as pq

    import perfonto
    from perfonto.analysis.capture import evaluable
    from perfonto.cli import main
    from perfonto.metrics.catalog import select_metrics

    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    emu = perfonto.emulate(model="llama-3.1-8b", chips=1, duration=0.02, isl=128, osl=16, out=tmp_path / "run")
    lacking = tmp_path / "lacking.parquet"
    pq.write_table(pq.read_table(emu.counters).drop_columns(["power.temperature"]), lacking)
    warmed = []
    monkeypatch.setattr("perfonto.codegen.evaluator_cache.warm_kernel", lambda mod: warmed.append(mod))
    said = []
    monkeypatch.setattr(ec, "compiling_notice", lambda graph, mod, use=None: said.append(ec.key(graph)) or "x")
    monkeypatch.setattr(ec, "_SAID", set())
    graph = perfonto.load_catalog().graph
    runs = ((emu.counters, []), (emu.counters, ["--metrics", "mfu"]), (lacking, []))
    for n, (dump, extra) in enumerate(runs):
        assert main(["analyze", str(dump), *extra, "--out", str(tmp_path / f"o{n}")]) == 0
    cut = evaluable(graph, {"power.temperature"}, None)[1]
    assert warmed[1:] == [ec.evaluator(select_metrics(graph, ["mfu"]))[0], cut] and warmed[2] is not warmed[0]
    assert len(said) == len(set(said)) == 3  # each kernel announced once
