"""Issue 29, point 1: counter slots and the collection planner (metrics.plan_groups, `perfonto plan`)."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.compiler import compile_texts
from perfonto.metrics.plan_groups import PlanError, plan_groups, tree_slots
from perfonto.metrics.plan_pack import Rules, pack, union
from perfonto.ontology.loader import load_generation

from helpers import PMU_YAML

CAP32 = (
    (2**32 - 1) / 2e9 / 2
)  # a 32-bit seq cycle counter at max_rate 2e9 core_cycle/s: 4294967295 / 4e9 = 1.07374182375 s

TINY = (
    PMU_YAML
    + """\
      a: {{kind: counter, unit: event, width: 48, effective_width: 40, max_rate: 1e9 event/s, description: a}}
      b: {{kind: counter, unit: B, width: 32, scale: 64, max_rate: 64 GB/s, description: b}}
      c: {{kind: counter, unit: J, width: 32, scale: 0.001, wrap_range: 1000 J, max_rate: 500 W, description: c}}
      d: {{kind: counter, unit: event, width: 32, description: d}}
"""
)
METRICS = """\
metric r_ab [event/B] = pmu.a / pmu.b
metric r_ac [event/J] = pmu.a / pmu.c
metric r_cd [J/event] = pmu.c / pmu.d
metric per_cycle [event/core_cycle] = pmu.a / pmu.cycles
metric three [event/B] = (pmu.a + pmu.d) / pmu.b
"""
ALL = ["r_ab", "r_ac", "r_cd", "per_cycle", "three"]


def tiny(tmp_path, slots=2, constraints="[]"):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(slots=f"{{programmable: {slots}, fixed: [cycles]}}", constraints=constraints))
    gen, diags = load_generation(path)
    assert gen is not None, [d.render() for d in diags]
    graph = compile_texts(gen, {"t.metrics": METRICS})
    assert not graph.errors, [d.render() for d in graph.errors]
    return graph, path


def passes(plan):
    return [sorted(c for g in p.groups for c in g.counters) for p in plan.passes]


def test_sohu_topdown_tree_on_4_slots_per_block():
    cat = load_catalog(None, "sohu")
    plan = plan_groups(cat, ["topdown.*"], slots=4)
    # level 1 (5 cycle classes) is fixed on seq; level 2 is 9 programmable counters: ceil(9 / 4) = 3 passes.
    # The children of each level-1 node stay in one pass (they must add up to it in every window):
    # memory 3, interconnect 2, compute 2, host 2 counters; largest first, ties by name (`collective` < `compute`):
    # memory -> pass 1 (3/4); interconnect -> 3 + 2 > 4, pass 2; compute -> pass 2 (4/4); host -> pass 3
    assert passes(plan) == [
        ["seq.memory_activation_cycles", "seq.memory_kv_cycles", "seq.memory_weight_cycles"],
        [
            "seq.collective_transfer_cycles",
            "seq.collective_wait_cycles",
            "seq.compute_matrix_cycles",
            "seq.compute_vector_cycles",
        ],
        ["seq.host_launch_cycles", "seq.host_pcie_cycles"],
    ]
    assert plan.optimal and not plan.inconsistent
    assert plan.one_pass_slots == {"seq": 9}  # one pass needs all 9 level-2 counters at once
    fixed = [
        "seq.collective_cycles",
        "seq.compute_cycles",
        "seq.host_wait_cycles",
        "seq.idle_cycles",
        "seq.memory_cycles",
    ]
    assert all(list(p.groups[0].fixed) == fixed for p in plan.passes)
    assert plan.passes[0].metrics == (
        "topdown.cycles",
        "topdown.idle",
        "topdown.memory.activations",
        "topdown.memory.kv_cache",
        "topdown.memory.weights",
        "topdown.memory_bound",
    )
    assert plan.passes[2].metrics == ("topdown.host.launch", "topdown.host.pcie", "topdown.host_bound")
    assert sum(len(p.metrics) for p in plan.passes) == 15  # every metric of the tree consistent, once
    assert len(plan.caps) == 14  # 5 fixed + 9 programmable
    for name, cap in plan.caps.items():  # all 32-bit at 2e9 core_cycle/s
        assert cap.range_raw == 2**32 and cap.cap_s == pytest.approx(1.07374182375, rel=1e-12), name
    assert plan.read_interval_s == pytest.approx(CAP32, rel=1e-12)
    assert passes(plan_groups(cat, ["topdown.*"])) == passes(plan)  # sohu declares 4 programmable slots
    assert len(plan_groups(cat, ["topdown.*"], slots=9).passes) == 1  # the 9 the plan says one pass needs


def test_plan_command_json_and_collector_config(tmp_path, capsys):
    cfg = tmp_path / "collector.yaml"
    assert main(["plan", "--metrics", "topdown.*", "--slots", "4", "--json", "--collector-config", str(cfg)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [len(p["groups"][0]["counters"]) for p in doc["passes"]] == [3, 4, 2]
    assert doc["read_caps"]["seq.memory_kv_cycles"]["cap_s"] == pytest.approx(1.07374182375, rel=1e-12)
    written = yaml.safe_load(cfg.read_text())
    assert written["read_interval_s"] == pytest.approx(CAP32) and len(written["passes"]) == 3
    assert written["passes"][2]["groups"][0] == {
        "block": "seq",
        "slots": 4,
        "counters": ["seq.host_launch_cycles", "seq.host_pcie_cycles"],
        "fixed": [
            "seq.collective_cycles",
            "seq.compute_cycles",
            "seq.host_wait_cycles",
            "seq.idle_cycles",
            "seq.memory_cycles",
        ],
    }
    assert main(["plan", "--metrics", "topdown.memory_bound,topdown.memory.kv_cache"]) == 0
    out = capsys.readouterr().out
    assert "1 pass(es)" in out and "seq 1" in out


def test_read_caps_from_width_wrap_range_and_max_rate(tmp_path):
    graph, _ = tiny(tmp_path)
    caps = plan_groups(graph, ALL).caps
    # clock 1 GHz with rule 4's 1 % headroom for a fast clock: (2^32 − 1) / 1.01e9 / 2 = 2.1262214 s
    assert caps["pmu.cycles"].cap_s == pytest.approx((2**32 - 1) / 1.01e9 / 2)
    assert caps["pmu.a"].cap_s == pytest.approx(549.7558138875)  # effective 40 bits at 1e9/s: (2^40 - 1) / 1e9 / 2
    assert caps["pmu.b"].cap_s == pytest.approx(2.1474836475)  # 64 GB/s / 64 B per count = 1e9 counts/s
    assert caps["pmu.c"].range_raw == 1_000_000  # wrap_range 1000 J / 0.001 J
    assert caps["pmu.c"].cap_s == pytest.approx(0.999999)  # (1e6 - 1) / (500 W / 0.001 J) / 2
    assert caps["pmu.d"].cap_s is None and "no max_rate" in caps["pmu.d"].note
    assert plan_groups(graph, ALL).read_interval_s == pytest.approx(0.999999)


def test_ratio_inputs_share_a_pass_and_the_rest_is_named(tmp_path):
    graph, _ = tiny(tmp_path, slots=2)
    plan = plan_groups(graph, ALL)
    # needs {a,b} {a,c} {c,d}, {a} inside {a,b}; any two need 3 counters > 2 slots: 3 passes, proven
    assert passes(plan) == [["pmu.a", "pmu.b"], ["pmu.a", "pmu.c"], ["pmu.c", "pmu.d"]] and plan.optimal
    assert [list(p.metrics) for p in plan.passes] == [["r_ab", "per_cycle"], ["r_ac"], ["r_cd"]]
    [bad] = plan.inconsistent  # three reads a, b, d: 3 programmable counters on 2 slots
    assert bad.metric == "three" and "needs 3 programmable `pmu` counters at once, the block has 2 slots" in bad.reason
    assert bad.passes == (1, 2, 3)
    plan3 = plan_groups(graph, ALL, slots=3)
    # {a,b,d} then {a,c}: a,b,c,d is 4 > 3, new pass; {c,d} joins {a,c} (one new counter): 2 = ceil(4 / 3) passes
    assert passes(plan3) == [["pmu.a", "pmu.b", "pmu.d"], ["pmu.a", "pmu.c", "pmu.d"]]
    assert not plan3.inconsistent and plan3.one_pass_slots == {"pmu": 4}


def test_siblings_share_a_pass_unless_it_costs_one(tmp_path):
    graph, _ = tiny(tmp_path, slots=2)
    fam = METRICS + "metric whole [event] = pmu.a + pmu.d\nmetric kid_a [event] = pmu.a\n  parent whole\n"
    fam += "metric kid_d [event] = pmu.d\n  parent whole\nmetric r_db [event/B] = pmu.d / pmu.b\n"
    graph = compile_texts(graph.generation, {"t.metrics": fam})
    assert not graph.errors, [d.render() for d in graph.errors]
    asked = ["kid_a", "kid_d", "r_ac", "r_db"]
    # 2 slots: {a,c} and {b,d} take 2 passes; the family {a,d} would make a third (every union of two is 3
    # counters), so it is split: kid_a reads with r_ac, kid_d with r_db
    plan = plan_groups(graph, asked)
    assert passes(plan) == [["pmu.a", "pmu.c"], ["pmu.b", "pmu.d"]]
    assert [list(p.metrics) for p in plan.passes] == [["kid_a", "r_ac"], ["kid_d", "r_db"]]
    # 3 slots: {a,c}, {a,d} (the family), {b,d}: {a,c} + {a,d} = {a,c,d}; {b,d} would make 4: still 2 passes,
    # the family whole in pass 1
    plan = plan_groups(graph, asked, slots=3)
    assert passes(plan) == [["pmu.a", "pmu.c", "pmu.d"], ["pmu.b", "pmu.d"]]
    assert [list(p.metrics) for p in plan.passes] == [["kid_a", "kid_d", "r_ac"], ["r_db"]]


def test_apart_makes_a_ratio_inconsistent(tmp_path):
    graph, _ = tiny(tmp_path, slots=3, constraints="[{apart: [a, c], reason: one physical counter}]")
    plan = plan_groups(graph, ["r_ac", "r_ab"])
    assert [i.metric for i in plan.inconsistent] == ["r_ac"]
    assert "pmu.a, pmu.c at once, which must not share a group" in plan.inconsistent[0].reason
    assert plan_groups(graph, ["r_ac"]).one_pass_slots == {"pmu": None}


def test_impossible_constraints_are_a_clear_error(tmp_path, capsys):
    graph, path = tiny(tmp_path, slots=3, constraints="[{together: [a, b]}, {apart: [a, b]}]")
    with pytest.raises(PlanError, match=r"contradict each other") as e:
        plan_groups(graph, ["r_ab"])
    # line 10 holds the rules: `together: [a, b]` at column 36, `apart: [a, b]` at column 53
    assert str(e.value).startswith(f"{path}:10:53: `r_ab` needs pmu.a, pmu.b in one group (`together` at {path}:10:36)")
    graph, path = tiny(tmp_path, slots=3, constraints="[{together: [a, b, d]}]")
    with pytest.raises(PlanError, match=r"block `pmu` has 2 programmable slots \(--slots\): no grouping meets this"):
        plan_groups(graph, ["r_ab"], slots=2)
    child = tmp_path / "cat"
    child.mkdir()
    (child / "g.yaml").write_text(
        "generation: g\nextends: sohu\ndescription: contradicting rules\nblocks:\n  seq:\n    group_constraints:\n"
        "      - {together: [memory_kv_cycles, memory_weight_cycles]}\n"
        "      - {apart: [memory_kv_cycles, memory_weight_cycles]}\n"
    )
    assert main(["plan", "--catalog", str(child), "--metrics", "topdown.memory.kv_cache"]) == 1
    err = capsys.readouterr().err
    assert f"{child / 'g.yaml'}:8:" in err.replace("\n", "") and "contradict" in err


def test_unknown_metric_names_it_and_a_close_match(capsys):
    cat = load_catalog(None, "sohu")
    with pytest.raises(PlanError, match=r"no metric named `topdown.memory.kv_cach`.*`topdown.memory.kv_cache`"):
        plan_groups(cat, ["topdown.memory_bound", "topdown.memory.kv_cach"])
    assert main(["plan", "--metrics", "mfu,topdwn.idle", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert not doc["ok"] and "`topdwn.idle`" in doc["error"] and "`topdown.idle`" in doc["error"]


def test_a_fixed_name_that_is_not_a_counter_is_reported_where_written(tmp_path):
    (tmp_path / "g.yaml").write_text(
        "generation: g\nextends: sohu\ndescription: bad fixed\nblocks:\n  seq:\n"
        "    counter_slots: {programmable: 4, fixed: [batch_size]}\n"
    )
    gen, diags = load_generation(tmp_path / "g.yaml")
    [d] = [d for d in diags if d.code == "counter-slots"]
    assert "`batch_size` in `counter_slots.fixed` is a gauge" in d.message and d.span.line == 6


def _brute(needs, rules):
    """Fewest passes by trying every set partition of the needs."""

    def parts(xs):
        if not xs:
            yield []
            return
        first, rest = xs[0], xs[1:]
        for p in parts(rest):
            for i in range(len(p)):
                yield p[:i] + [[first, *p[i]]] + p[i + 1 :]
            yield [[first], *p]

    best = None
    for p in parts(needs):
        ok = True
        for part in p:
            u: dict = {}
            for n in part:
                u = union(u, n)
            ok = ok and rules.fits(u)
        if ok and (best is None or len(p) < best):
            best = len(p)
    return best


def test_pack_gives_the_fewest_passes_on_small_inputs():
    rng = random.Random(29)
    counters = {"x": [f"x.{i}" for i in range(5)], "y": [f"y.{i}" for i in range(4)]}
    for _ in range(60):
        slots = {"x": rng.randint(2, 4), "y": rng.randint(1, 3)}
        apart = {"x": (frozenset(rng.sample(counters["x"], 2)),)} if rng.random() < 0.4 else {}
        rules = Rules(slots, apart)
        needs = []
        while len(needs) < rng.randint(2, 7):
            n = {b: frozenset(rng.sample(cs, rng.randint(0, 2))) for b, cs in counters.items()}
            n = {b: v for b, v in n.items() if v}
            if n and rules.fits(n):
                needs.append(n)
        got, proven = pack(needs, rules)
        assert proven and len(got) == _brute(needs, rules), (needs, slots, apart)
        assert all(rules.fits(p) for p in got)
        assert all(any(all(v <= p.get(b, frozenset()) for b, v in n.items()) for p in got) for n in needs)


def test_coverage_row_and_a_tree_without_fixed_level_1(tmp_path):
    sohu = load_catalog(None, "sohu")
    row = tree_slots(sohu)
    assert row == {"group": "topdown", "metrics": 15, "passes": 3, "one_pass_slots": {"seq": 9}, "inconsistent": []}
    (tmp_path / "g.yaml").write_text(
        "generation: g\nextends: sohu\ndescription: no fixed top-down counters\nblocks:\n  seq:\n"
        "    counter_slots: {programmable: 4, fixed: [elapsed_cycles]}\n"
    )
    cat = load_catalog(tmp_path, None)
    assert not cat.errors
    row = tree_slots(cat)
    # every top-down ratio divides by the 5 level-1 classes: 5 (level 1) or 6 (level 2) programmable counters on 4
    # slots, so none is consistent; one pass needs 5 + 9 = 14 slots
    assert row["one_pass_slots"] == {"seq": 14} and len(row["inconsistent"]) == 15
    plan = plan_groups(cat, ["topdown.idle"])
    assert plan.inconsistent[0].reason == "needs 5 programmable `seq` counters at once, the block has 4 slots"
    assert passes(plan) == [  # split 4 + 1 in name order
        ["seq.collective_cycles", "seq.compute_cycles", "seq.host_wait_cycles", "seq.idle_cycles"],
        ["seq.memory_cycles"],
    ]
    assert plan.inconsistent[0].passes == (1, 2)
