"""`perfonto import rocprof`: rocprofiler-sdk counter definitions for every architecture (base
counters per block with an instance axis, derived expressions with reduce/accumulate), and
equivalence with a reference evaluator of rocprofiler's expressions (tests/ref_rocprof.py)."""

import numpy as np
import pytest
import yaml

from perfonto.interop import import_file
from ref_rocprof import RocprofEval
from ref_windows import import_real, perfonto_values, random_windows, same

ROCPROF = "rocprofiler-sdk_counter_defs.yaml"


@pytest.fixture(scope="module")
def rocprof_import(tmp_path_factory):
    return import_real("rocprof", ROCPROF, tmp_path_factory.mktemp("rocprof"))


def _defs(path, arch):
    out = {}
    for name, body in yaml.safe_load(path.read_text()).items():
        for key, d in body["architectures"].items():
            if arch in key.split("/"):
                out[name] = d
    return out


def test_real_file_imports(rocprof_import):
    _, report = rocprof_import
    assert report.ok and report.total == 1205 and report.ratio >= 0.95
    archs = sorted(a for g in report.generations for a in g.archs)
    assert len(archs) == 17 and len(report.generations) == 8  # identical architectures share a generation
    rejected = {r["metric"] for r in report.rejected()}
    assert rejected == {"ALUStalledByLDS"}  # 400*A/B/C scales as chips^-1: perfonto's chip-degree rule
    assert all("chip-degree" in r["reason"] for r in report.rejected())
    g90a = next(g for g in report.generations if g.generation.endswith("gfx90a"))
    assert g90a.gen.blocks["sq"]["axes"] == (("instance", 4),)
    m = g90a.graph.metrics
    assert "avg(ta.ta_ta_busy)" in m["ta_busy_avr"].formula
    assert m["gpu_util"].unit_text == "percent" and "100" not in m["gpu_util"].formula
    assert "sq.sq_ifetch_level_accum_high_res" in m["instr_fetch_latency"].formula
    assert "if" in m["cu_num"].formula  # rocprofiler's `/` gives 0 on a zero divisor: guarded explicitly


def test_equivalence_with_rocprof_reference(rocprof_import):
    path, report = rocprof_import
    trials, n = 6, 0
    for built in report.generations:
        defs = _defs(path, built.archs[0])
        derived = {k: str(d["expression"]) for k, d in defs.items() if "expression" in d}
        w = random_windows(built.gen, trials, seed=3)
        ours = perfonto_values(built.graph, w)
        props = {k: built.gen.spec[s].value for k, s in built.constants.items()}
        for t in range(trials):
            counters = {k: w.values[s][t, 0] for k, s in built.signals.items()}
            ref = RocprofEval(derived, counters, props)
            for key, o in built.outcomes.items():
                if o.status == "rejected":
                    continue
                expected = ref.counter(key)
                got = np.asarray(ours[built.names[key]][t, 0])
                if expected.size == 1:
                    expected = expected[0]
                assert same(got, expected), f"{built.generation} {key}: {got!r} != {expected!r}"
                n += 1
    assert n == trials * sum(1 for g in report.generations for o in g.outcomes.values() if o.status != "rejected")


def test_division_by_zero_gives_zero_and_select_is_rejected(tmp_path):
    doc = {
        "A": {"architectures": {"gfxT": {"block": "SQ", "event": 1}}, "description": "a"},
        "B": {"architectures": {"gfxT": {"block": "SQ", "event": 2}}, "description": "b"},
        "R": {"architectures": {"gfxT": {"expression": "reduce(A,sum)/reduce(B,sum)"}}, "description": "Unit: percent"},
        "S": {"architectures": {"gfxT": {"expression": "select(A,[DIMENSION_XCC=[0]])"}}, "description": "s"},
        "P": {"architectures": {"gfxT": {"expression": "reduce(A,sum,[DIMENSION_XCC])"}}, "description": "p"},
    }
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(doc))
    report = import_file("rocprof", p, tmp_path / "o")
    rej = {r["metric"]: r["reason"] for r in report.rejected()}
    assert set(rej) == {"S", "P"} and "select" in rej["S"] and "DIMENSION_XCC" in rej["P"]
    built = report.generations[0]
    w = random_windows(built.gen, 1)
    w.values[built.signals["B"]][...] = 0.0
    assert ours_is_zero(built, w)


def ours_is_zero(built, w) -> bool:
    v = perfonto_values(built.graph, w)[built.names["R"]]
    return bool(np.all(v == 0.0))
