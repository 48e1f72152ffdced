"""The claim comparison's nine projections (~1 s of every `perfonto run` report) are kept in perfonto's
cache: a second process reads them; a changed emulator data file or `PERFONTO_NO_CACHE` makes them again."""

from __future__ import annotations

import json

import pytest

import perfonto.emulator.claim as claim


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    claim._claim_comparison.cache_clear()  # as a new process starts
    made = []
    real = claim._compare
    monkeypatch.setattr(claim, "_compare", lambda g, p: made.append((g, p)) or real(g, p))
    yield tmp_path / "cache", made
    claim._claim_comparison.cache_clear()


def test_a_second_process_reads_the_comparison_from_the_cache(fresh):
    cache, made = fresh
    first = claim.claim_comparison("sohu", "conservative")
    claim._claim_comparison.cache_clear()
    second = claim.claim_comparison("sohu", "conservative")
    assert made == [("sohu", "conservative")]  # made once, then read
    assert second == first and first["changes"] and first["tokens_per_second"] > 0
    (entry,) = (cache / "claims").iterdir()
    assert json.loads(entry.read_text())["preset"] == "conservative"
    second["changes"].clear()  # a caller's edit never reaches the next one
    assert claim.claim_comparison("sohu", "conservative")["changes"]


def test_another_preset_or_no_cache_makes_it_again(fresh, monkeypatch):
    cache, made = fresh
    claim.claim_comparison("sohu", "conservative")
    claim.claim_comparison("sohu", "claim")
    assert made == [("sohu", "conservative"), ("sohu", "claim")]
    claim._claim_comparison.cache_clear()
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    claim.claim_comparison("sohu", "conservative")
    assert made[-1] == ("sohu", "conservative") and len(made) == 3


def test_the_key_follows_the_emulator_data(fresh, monkeypatch, tmp_path):
    assert claim._key("sohu", "claim") != claim._key("sohu", "conservative")
    data = tmp_path / "data"  # the emulator's data files, copied where the key reads them
    data.mkdir()
    for p in (claim.Path(claim.__file__).parent / "data").glob("*.yaml"):
        (data / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(claim, "__file__", str(tmp_path / "claim.py"))
    before = claim._key("sohu", "conservative")
    assert claim._key("sohu", "conservative") == before
    (data / "presets.yaml").write_text((data / "presets.yaml").read_text() + "\n# edited\n")
    assert claim._key("sohu", "conservative") != before
