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
    # decision tree: roots in group topdown, next groups' metrics under the root
    assert "topdown" in g.metrics["frontend_stalled_cycles"].groups
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
