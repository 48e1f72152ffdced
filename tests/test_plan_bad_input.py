"""Issue 29, point 1, hostile input: `perfonto plan` on odd catalogs and options gives a clear error
(naming the YAML place and what to do, exit 1 or 2) or a plan that keeps every declared rule, and its
JSON is strict JSON."""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.metrics.compiler import compile_texts
from perfonto.metrics.plan_groups import PlanError, plan_groups
from perfonto.ontology.loader import load_generation

from helpers import PMU_YAML

GEN = (
    PMU_YAML
    + """\
      a: {{kind: counter, unit: event, width: 48, max_rate: 1e9 event/s, description: a}}
      b: {{kind: counter, unit: B, width: 32, max_rate: {b_rate}, description: b}}
      g: {{kind: gauge, unit: B, description: g}}
"""
)
METRICS = """\
metric r_ab [event/B] = pmu.a / pmu.b
metric per_cycle [event/core_cycle] = pmu.a / pmu.cycles
metric gauge_only [B] = pmu.g
"""


def folder(tmp_path, slots="{programmable: 2, fixed: [cycles]}", constraints="[]", b_rate="64 GB/s"):
    d = tmp_path / "cat"
    d.mkdir(exist_ok=True)
    (d / "tiny.yaml").write_text(GEN.format(slots=slots, constraints=constraints, b_rate=b_rate))
    (d / "t.metrics").write_text(METRICS)
    return d


def graph(d):
    return load_generation(d / "tiny.yaml")


def _strict(text: str) -> dict:
    def no(c):
        raise ValueError(f"not JSON: {c}")

    return json.loads(text, parse_constant=no)


@pytest.mark.parametrize("constraint", ["[{apart: [cycles, a]}]", "[{apart: [a, cycles]}]"])
def test_apart_from_a_fixed_counter_is_an_error_where_written(tmp_path, constraint):
    """A fixed counter counts in every group: no programmable counter can be kept apart from it (the planner
    read `a` with `cycles` regardless)."""
    gen, diags = graph(folder(tmp_path, constraints=constraint))
    [d] = [d for d in diags if d.code == "counter-slots"]
    assert "`cycles` in `group_constraints[0].apart` is a fixed counter" in d.message and d.span.line == 10


def test_neither_rule_reads_as_english(tmp_path):
    gen, diags = graph(folder(tmp_path, constraints="[{}]"))
    [d] = [d for d in diags if d.code == "counter-slots"]
    assert "holds neither `together` nor `apart`" in d.message


def test_a_counter_on_a_block_without_programmable_slots(tmp_path):
    d = folder(tmp_path, slots="{programmable: 0, fixed: [cycles]}")
    gen, diags = graph(d)
    assert gen is not None, [x.render() for x in diags]
    g = compile_texts(gen, {"t.metrics": METRICS})
    with pytest.raises(PlanError) as e:
        plan_groups(g, ["r_ab"])
    msg = str(e.value)  # no `together` rule is involved: the message must not send the user to one
    assert msg.startswith(f"{d / 'tiny.yaml'}:9:20: `r_ab` reads pmu.a, pmu.b, which block `pmu` cannot count")
    assert "together" not in msg and "make the counters fixed or give the block programmable slots" in msg


def test_a_cap_beyond_any_float_is_strict_json(tmp_path, capsys):
    """b: 32 bits at 1e-300 B/s wraps after 4.3e309 s, past float64: the cap is unknown with a note, and
    the JSON stays JSON (it printed `Infinity`)."""
    d = folder(tmp_path, b_rate="1e-300 B/s")
    cfg = tmp_path / "c.json"
    assert main(["plan", "--catalog", str(d), "--metrics", "r_ab", "--json", "--collector-config", str(cfg)]) == 0
    doc = _strict(capsys.readouterr().out)
    cap = doc["read_caps"]["pmu.b"]
    assert cap["cap_s"] is None and "never wraps" in cap["note"]
    assert _strict(cfg.read_text())["read_caps"]["pmu.b"]["cap_s"] is None


def test_empty_collector_config_path_is_a_usage_error(capsys):
    assert main(["plan", "--metrics", "topdown.idle", "--collector-config", ""]) == 2
    assert "--collector-config" in capsys.readouterr().err


def test_gauge_only_plan_says_nothing_is_read_through_a_slot(tmp_path, capsys):
    d = folder(tmp_path, slots="{programmable: 1, fixed: [cycles]}")
    assert main(["plan", "--catalog", str(d), "--metrics", "gauge_only"]) == 0
    out = capsys.readouterr().out
    assert "read every unknown" not in out and "no read-interval cap" in out
    assert main(["plan", "--catalog", str(d), "--metrics", "r_ab"]) == 0
    assert "the block has 1 slot" in capsys.readouterr().out.replace("1 slots", "?")


def test_group_constraints_without_counter_slots_are_an_error(tmp_path):
    """Without counter_slots a block reads every counter at once and the planner skipped its rules: an
    `apart` pair was planned in one group (r_ab 'consistent')."""
    d = folder(tmp_path, constraints="[{apart: [a, b]}]")
    text = (d / "tiny.yaml").read_text().replace("    counter_slots: {programmable: 2, fixed: [cycles]}\n", "")
    (d / "tiny.yaml").write_text(text)
    gen, diags = graph(d)
    [e] = [x for x in diags if x.code == "counter-slots"]
    assert "group_constraints without counter_slots" in e.message and e.span.line == 9
    assert "counter_slots: {programmable: N}" in e.hint


def test_collector_config_replaces_a_link_never_writes_through_it(tmp_path):
    """--collector-config at a symbolic link to an input (here the catalog's YAML) replaces the link, as
    every perfonto output does; it wrote the plan into the catalog file."""
    d = folder(tmp_path)
    before = (d / "tiny.yaml").read_text()
    link = tmp_path / "plan.yaml"
    link.symlink_to(d / "tiny.yaml")
    assert main(["plan", "--catalog", str(d), "--metrics", "r_ab", "--collector-config", str(link)]) == 0
    assert (d / "tiny.yaml").read_text() == before and not link.is_symlink()
    assert "perfonto_collector_plan" in link.read_text()
