"""`perfonto import arm`: the real Neoverse N1 telemetry specification (events, units as text, groups,
the top-down decision tree), and equivalence with a reference evaluation of each formula."""

import json

import pytest

from ref_pyexpr import evaluate as ref_eval
from ref_windows import import_real, perfonto_values, random_windows, same

ARM = "arm_telemetry_neoverse-n1.json"


@pytest.fixture(scope="module")
def arm_import(tmp_path_factory):
    return import_real("arm", ARM, tmp_path_factory.mktemp("arm"))


def test_real_file_imports(arm_import):
    _, report = arm_import
    assert report.ok and report.total == 31 and report.imported == 31 and report.with_unit == 31
    built = report.generations[0]
    g = built.graph
    assert len(built.gen.signals) == 110  # every event of the specification is a counter
    assert g.metrics["backend_stalled_cycles"].unit_text == "percent"
    assert g.metrics["branch_mpki"].unit_text == "event/kevent"
    assert g.metrics["ipc"].unit_text == "event/event"
    # decision tree: next groups' metrics under the root. N1's roots are frontend- and backend-stalled cycles in
    # percent of cycles, two stall counts that do not partition the cycles (the rest is not stalled): not
    # perfonto's top-down level 1, whose shares the analysis sums to 100 % (every capture reported "level-1
    # top-down shares … do not add up"), and the import says so
    assert "topdown" not in g.metrics["frontend_stalled_cycles"].groups
    assert "topdown" not in g.metrics["backend_stalled_cycles"].groups
    assert any(f.code == "topdown-not-partition" for _, f in report.findings())
    assert g.metrics["branch_mpki"].parent == "frontend_stalled_cycles"
    assert g.metrics["dtlb_mpki"].parent == "backend_stalled_cycles"
    assert "MPKI" in g.metrics["branch_mpki"].groups
    assert any(f.code == "second-parent" for _, f in report.findings())


def test_equivalence_with_arm_reference(arm_import):
    path, report = arm_import
    built = report.generations[0]
    spec = json.loads(path.read_text())["metrics"]
    trials = 12
    w = random_windows(built.gen, trials, seed=2)
    ours = perfonto_values(built.graph, w)
    n = 0
    for t in range(trials):
        env = {k: float(w.values[s][t, 0]) for k, s in built.signals.items()}
        for key, o in built.outcomes.items():
            expected = ref_eval(spec[key]["formula"], env)  # Arm's value in its own unit (percent, MPKI …)
            got = ours[built.names[key]][t, 0]
            assert same(got, expected), f"{key}: {got!r} != {expected!r}"
            n += 1
    assert n == trials * 31


def test_a_constant_given_on_the_command_line_says_so(tmp_path):
    """A `--constant num_slots=…` replaces the product configuration's value, and its note names the
    command line and the specification's own value (it used to credit the specification)."""
    from perfonto.interop import arm

    spec = {
        "product_configuration": {"product_name": "toy", "num_slots": 8, "num_bus_slots": 2},
        "events": {"CPU_CYCLES": {"code": "0x11", "title": "cycles", "description": "Counts cycles."}},
        "metrics": {},
    }
    p = tmp_path / "toy.json"
    p.write_text(json.dumps(spec))
    cat = arm.read(p, "toy", {"num_slots": 6})
    given, spec_own = cat.constants["num_slots"], cat.constants["num_bus_slots"]
    assert given.value == 6.0 and "--constant" in given.source and "specification's 8" in given.source
    assert spec_own.value == 2.0 and spec_own.source == "given by the specification's product_configuration"


def test_events_name_their_perf_alias(tmp_path):
    """An Arm event's perf name is its architecture name in lower case (INST_RETIRED → inst_retired), so a
    `perf stat` capture reads against the imported catalog."""
    import yaml

    from ref_windows import import_real

    import_real("arm", "arm_telemetry_neoverse-n1.json", tmp_path)
    doc = yaml.safe_load(next(tmp_path.glob("*.yaml")).read_text())
    sigs = {n: s for b in doc["blocks"].values() for n, s in b["signals"].items()}
    assert sigs["inst_retired"]["sources"] == {"perf": "inst_retired"}
    assert all(s["sources"]["perf"] == n for n, s in sigs.items())


def test_n1_stall_cycles_are_no_partition_to_sum(tmp_path, capsys):
    """A perf stat capture on Neoverse N1 (two 1 s intervals): by hand, backend stalled = 500 / 2000 = 25 %,
    frontend stalled = 300 / 2000 = 15 %. Their sum, 40 %, is no violation: the rest of the cycles are not
    stalled; the analysis reported one on every capture when the roots were top-down level 1."""
    from perf_lines import write_perf_csv

    from perfonto.cli import main

    import_real("arm", ARM, tmp_path / "cat")
    events = [("2000", "", "cpu_cycles"), ("300", "", "stall_frontend"), ("500", "", "stall_backend")]
    csv = write_perf_csv(tmp_path / "n1.csv", 1.0, events, intervals=3)
    capsys.readouterr()
    argv = ["analyze", str(csv), "--catalog", str(tmp_path / "cat"), "--out", str(tmp_path / "o"), "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["backend_stalled_cycles"]["value"] == pytest.approx(25.0, rel=1e-12)
    assert doc["metrics"]["frontend_stalled_cycles"]["value"] == pytest.approx(15.0, rel=1e-12)
    assert doc["topdown_tree_violations"] == []


def test_roots_in_percent_of_slots_are_topdown_level_1(tmp_path):
    """Arm's Topdown L1 (Neoverse V1 and N2 specifications: frontend bound, bad speculation, retiring,
    backend bound, in percent of slots) partitions the slots: those roots are perfonto's level 1."""
    from perfonto.analysis.bottleneck import topdown_level1
    from perfonto.interop import import_file

    events = {e: {"code": "0x1", "title": e} for e in ("CPU_CYCLES", "STALL_SLOT_FRONTEND", "STALL_SLOT_BACKEND")}
    metrics = {
        "frontend_bound": {"formula": "STALL_SLOT_FRONTEND / (5 * CPU_CYCLES) * 100", "units": "percent of slots"},
        "backend_bound": {"formula": "STALL_SLOT_BACKEND / (5 * CPU_CYCLES) * 100", "units": "percent of slots"},
        "ipc_like": {"formula": "STALL_SLOT_FRONTEND / CPU_CYCLES", "units": "per cycle"},
    }
    tree = {
        "root_nodes": ["frontend_bound", "backend_bound"],
        "metrics": [{"name": "frontend_bound", "next_items": ["FE"]}, {"name": "backend_bound", "next_items": []}],
    }
    spec = {
        "events": events,
        "metrics": metrics,
        "groups": {"metrics": {"FE": {"metrics": ["ipc_like"]}}},
        "methodologies": {"topdown_methodology": {"decision_tree": tree}},
    }
    p = tmp_path / "v.json"
    p.write_text(json.dumps(spec))
    report = import_file("arm", p, tmp_path / "o", "v")
    assert report.ok, report.render()
    g = report.generations[0].graph
    assert set(topdown_level1(g)) == {"frontend_bound", "backend_bound"}
    assert g.metrics["ipc_like"].parent == "frontend_bound"
    assert not any(f.code == "topdown-not-partition" for _, f in report.findings())
