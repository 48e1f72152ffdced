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
    mod = SimpleNamespace(_jit=object())
    monkeypatch.setattr(ec, "evaluator", lambda graph: (mod, "src"))
    monkeypatch.setattr(ec, "kernel_cached", lambda graph: cached)
    monkeypatch.setattr(cache, "enabled", lambda: enabled)
    monkeypatch.setattr(job, "_numba_installed", lambda: True)
    said: list[str] = []
    job.evaluator_for(SimpleNamespace(content_hash="abc"), said.append)
    assert bool(said) == says
    if says and not enabled:
        assert "--no-cache: not kept" in said[0]
