"""The saved fuzz corpus as regression tests: every input that once crashed or hung a reader
(``fuzz/corpus/<target>/``) must now end in a result or the reader's clean refusal, in time."""
from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.run import CORPUS, mutate, run_one
from fuzz.targets import TARGETS

CASES = sorted(p for p in CORPUS.glob("*/*") if p.is_file() and p.parent.name in TARGETS)


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_saved_input(path: Path):
    kind, detail = run_one(path.parent.name, path.read_bytes(), hang_s=20.0)
    assert kind == "ok", detail


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_seed_and_a_few_mutants(target):
    import random

    seeds_fn, _ = TARGETS[target]
    seeds = seeds_fn()
    assert seeds, target
    rng = random.Random(target)
    for data in seeds[:5] + [mutate(rng, seeds) for _ in range(20)]:
        kind, detail = run_one(target, data, hang_s=20.0)
        assert kind == "ok", detail
