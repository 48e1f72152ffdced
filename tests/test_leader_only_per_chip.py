"""Per chip, a metric that reads an amount only a group's leader chip counts (tokens, steps, requests:
``counted_by: leader``) has a value on the leaders only (``metrics.levels.leader_only``): a non-leader chip's
``tokens_per_second`` read 0.0 — a chip that served nothing — though it served every token of its group. Its
server-level value, and the per-chip values of the metrics every chip counts, are unchanged; a note names them.
Both engines (memory: window values kept; embedded: in pieces) agree."""

from __future__ import annotations

import json
import math

import pytest

from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec, generate_fleet

LEADER = ("tokens_per_second", "steps_per_second", "requests_per_second", "step_time", "energy_per_token")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("leader_only")
    generate_fleet(sohu, FleetSpec(2, 4), out / "data", duration_s=0.8, sample_period_s=2e-3, warmup_steps=100)
    return out / "data"


def _per_chip(doc) -> dict:
    return {(p.get("host"), p["chip"]): p["metrics"] for p in doc["per_chip"]}


@pytest.mark.parametrize("engine", ["memory", "embedded"])
def test_one_host_leader_only(fleet, tmp_path, engine):
    host = next(p for p in (fleet / "counters").iterdir() if p.name.startswith("host="))
    out = tmp_path / "o"
    assert main(["analyze", str(host), "--out", str(out), "--engine", engine, "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    chips = _per_chip(doc)
    assert len(chips) == 4
    leader = [k for k, m in chips.items() if m["tokens_per_second"] is not None]
    assert len(leader) == 1  # one group of 4 chips in tensor parallel: its leader counts the tokens
    lead = chips[leader[0]]
    for name in LEADER[:4]:  # the leader's rate is the group's: the server's (over the chips' mean time: within 0.1 %)
        assert lead[name] == pytest.approx(doc["metrics"][name]["value"], rel=1e-3)
    for k, m in chips.items():
        if k != leader[0]:
            assert all(m[name] is None for name in LEADER), (k, {n: m[n] for n in LEADER})  # was 0.0 for the rates
            # every chip counts its FLOPs: its MFU has a value, as the leader's
            assert math.isfinite(m["mfu"]) and m["mfu"] == pytest.approx(lead["mfu"], rel=0.05)
    (note,) = [n for n in doc["notes"] if "leader chip" in n]
    assert "tokens_per_second" in note and "counted once per group" in note


def test_fleet_one_leader_per_host(fleet, tmp_path):
    out = tmp_path / "o"
    assert main(["analyze", str(fleet), "--out", str(out), "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    chips = _per_chip(doc)
    assert len(chips) == 8
    leaders = {k: m["tokens_per_second"] for k, m in chips.items() if m["tokens_per_second"] is not None}
    assert len(leaders) == 2 and len({h for h, _ in leaders}) == 2  # one per host
    assert all(v > 0 for v in leaders.values())
    assert sum(leaders.values()) == pytest.approx(doc["metrics"]["tokens_per_second"]["value"], rel=1e-6)
