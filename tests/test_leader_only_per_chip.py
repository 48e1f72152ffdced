"""Per chip, a metric that reads an amount only a group's leader chip counts (tokens, steps, requests:
``counted_by: leader``) reads 0 on a chip that counts none of them — a chip that is not its group's leader,
or a leader that did nothing: the capture cannot tell which, so the values stay (an idle group's 0 is true)
and a note names the metrics and the chips (``metrics.levels.leader_counts``). The default run's chips 1-7
read 0 tok/s with no word, as if they had served nothing. Both engines (memory, embedded) and a fleet."""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec, generate_fleet

LEADER = ("tokens_per_second", "steps_per_second")  # requests: none complete in 0.8 s


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("leader_counts")
    generate_fleet(sohu, FleetSpec(2, 4), out / "data", duration_s=0.8, sample_period_s=2e-3, warmup_steps=100)
    return out / "data"


def _note(doc) -> str:
    (note,) = [n for n in doc.get("notes", []) if "counted once per group" in n]
    return note


@pytest.mark.parametrize("engine", ["memory", "embedded"])
def test_one_host_names_the_chips_that_count_none(fleet, tmp_path, engine):
    host = next(p for p in (fleet / "counters").iterdir() if p.name.startswith("host="))
    out = tmp_path / "o"
    assert main(["analyze", str(host), "--out", str(out), "--engine", engine, "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    chips = {p["chip"]: p["metrics"] for p in doc["per_chip"]}
    leader = [c for c, m in chips.items() if m["tokens_per_second"] > 0]
    assert len(chips) == 4 and len(leader) == 1  # one group of 4 chips in tensor parallel
    for c, m in chips.items():  # the values stay: 0 on the chips that count none
        assert all((m[n] > 0) == (c in leader) for n in LEADER), (c, {n: m[n] for n in LEADER})
    note = _note(doc)
    named = note.split("per chip, chips ")[1].split(" counted none")[0].split(", ")  # `1` or `h000/1`
    assert sorted(int(n.rsplit("/", 1)[-1]) for n in named) == sorted(c for c in chips if c not in leader)
    assert "tokens_per_second" in note


def test_fleet_names_each_hosts_quiet_chips(fleet, tmp_path):
    out = tmp_path / "o"
    assert main(["analyze", str(fleet), "--out", str(out), "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    leaders = [p for p in doc["per_chip"] if p["metrics"]["tokens_per_second"] > 0]
    assert len(leaders) == 2  # one per host
    assert sum(p["metrics"]["tokens_per_second"] for p in leaders) == pytest.approx(
        doc["metrics"]["tokens_per_second"]["value"], rel=1e-6
    )
    note = _note(doc)
    assert note.count("/") == 6  # the six host/chip names of the chips that count none


def test_no_note_when_every_chip_counts(tmp_path):
    """One chip: its own group's leader; nothing to say."""
    out = tmp_path / "run"
    assert main(["run", "--duration", "100ms", "--chips", "1", "--out", str(out), "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    assert not [n for n in doc.get("notes", []) if "counted once per group" in n]


def test_a_null_window_of_another_signal_hides_no_leader(fleet, sohu):
    """The chips that count none are found over every window: an HBM counter null exactly in the windows where
    the leader's tokens advanced (one metric class's windows) left it counting none in a first version."""
    import copy

    import numpy as np

    from perfonto.capture.dump import read_counters
    from perfonto.codegen.evaluator_cache import evaluator as cached
    from perfonto.metrics.catalog import load_catalog
    from perfonto.metrics.levels import evaluate_levels
    from perfonto.metrics.windows import prepare

    graph = load_catalog(None, "sohu").graph
    host = next(p for p in (fleet / "counters").iterdir() if p.name.startswith("host="))
    w = prepare(read_counters(str(host), graph.generation), graph.generation)
    tok = w.values["seq.output_tokens"]
    adv = np.nan_to_num(tok).reshape(tok.shape[0], tok.shape[1], -1).sum(axis=2) > 0
    (lead,) = np.flatnonzero(adv.any(axis=0))
    w2 = copy.copy(w)
    w2.values, w2.null = dict(w.values), dict(w.null)
    v = w.values["hbm.read_bytes"].copy()
    n = w.null.get("hbm.read_bytes", np.zeros(v.shape, np.uint8)).copy()
    v[adv[:, lead], lead], n[adv[:, lead], lead] = np.nan, 1
    w2.values["hbm.read_bytes"], w2.null["hbm.read_bytes"] = v, n
    levels = evaluate_levels(graph, w2, cached(graph)[0].evaluate)
    assert levels.quiet is not None and lead not in levels.quiet.quiet and len(levels.quiet.quiet) == 3
