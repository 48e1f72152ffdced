"""`perfonto export perf-json`: the shipped Sohu catalog as perf pmu-events metrics JSON. Checked twice:
perf's own semantics (tests/ref_perf.py evaluates every exported MetricExpr × ScaleUnit scale on the
same windows), and the round trip (importing the JSON back gives the same metrics)."""
import json
import re

import numpy as np
import pytest

from perfonto.interop.perf_export import export
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import Windows
from perfonto.metrics.catalog import load_catalog
from perfonto.cli import main
from perfonto.interop import import_file
from ref_perf import PerfEval
from ref_windows import random_windows, same

NOT_EXPRESSIBLE = {  # metric -> what the reason names
    "c2c.link_imbalance": "max()", "hbm.stack_imbalance": "max()",
    "power.temperature_mean": "offset unit", "power.temperature_peak": "offset unit",
    # a per-chip constant used per chip (idle power x time): perf's constants cannot say so
    "dynamic_energy_per_token": "adds up across chips",
}


@pytest.fixture(scope="module")
def sohu_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "sohu.json"
    assert main(["export", "perf-json", "--out", str(out)]) == 0
    graph = load_catalog(None, "sohu").graph
    return graph, json.loads(out.read_text()), out


def _scale(su: str) -> float:
    return float(re.match(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", su).group(1))


def test_every_metric_is_exported_or_listed_with_a_reason(sohu_export):
    graph, entries, _ = sohu_export
    names = {e["MetricName"] for e in entries}
    metrics = {n for n in names if not n.startswith("spec.")}
    skipped = export(graph).skipped
    assert metrics | set(skipped) == set(graph.metrics) | set(graph.record_metrics)
    assert not metrics & set(skipped)
    for name, word in NOT_EXPRESSIBLE.items():
        assert word in skipped[name]
    assert set(skipped) - set(NOT_EXPRESSIBLE) == set(graph.record_metrics)  # percentiles over request records
    for e in entries:
        assert set(e) <= {"MetricName", "MetricExpr", "ScaleUnit", "MetricGroup", "BriefDescription", "MetricThreshold"}
    mu = next(e for e in entries if e["MetricName"] == "mxu.utilization")
    assert mu["ScaleUnit"] == "100%" and mu["MetricThreshold"] == "mxu.utilization > 0.8"
    assert "source_count(mxu.busy_cycles)" in mu["MetricExpr"] and "topdown.compute_bound_group" in mu["MetricGroup"]
    bw = next(e for e in entries if e["MetricName"] == "hbm.read_bandwidth")
    assert bw == {**bw, "MetricExpr": "hbm.read_bytes / duration_time", "ScaleUnit": "1e-09GB/s"}


def test_perf_semantics_of_the_export(sohu_export):
    """perf's evaluation of each exported expression (events summed over PMU instances, in base units;
    metric references unscaled) × ScaleUnit equals perfonto's value."""
    graph, entries, _ = sohu_export
    gen, reg = graph.generation, graph.generation.registry
    trials = 8
    w = random_windows(gen, trials, seed=5)
    ours = evaluate(graph, w)
    exprs = {e["MetricName"]: e["MetricExpr"] for e in entries}
    counts = {n: s.instances for n, s in gen.signals.items()}
    for t in range(trials):
        events = {}
        for n, s in gen.signals.items():
            base = float(reg.Quantity(1.0, s.unit).to_base_units().magnitude)
            events[n] = float(np.sum(w.values[n][t, 0])) * base
        ref = PerfEval(exprs, events, {}, float(w.interval[t, 0]), counts)
        for e in entries:
            if e["MetricName"].startswith("spec."):
                continue
            want = ref.metric(e["MetricName"]) * _scale(e["ScaleUnit"])
            got = ours[e["MetricName"]][t, 0]
            assert same(got, want), f"{e['MetricName']}: perfonto {got!r} != perf {want!r} ({e['MetricExpr']})"


def test_round_trip_is_lossless_for_what_perf_expresses(sohu_export, tmp_path):
    graph, entries, path = sohu_export
    report = import_file("perf", path, tmp_path / "back", extends="sohu")
    assert report.ok and report.rejected() == []
    back = report.generations[0].graph
    exported = [e["MetricName"] for e in entries if not e["MetricName"].startswith("spec.")]
    assert report.total == len(exported) and set(exported) <= set(back.metrics)
    assert not report.generations[0].gen.spec.keys() - graph.generation.spec.keys()  # constants resolved, not added
    trials = 8
    w = random_windows(graph.generation, trials, seed=6)
    server = Windows(w.interval, w.values, chips=8.0, level="server")  # per-chip spec constants scale with chips
    for win in (w, server):
        a, b = evaluate(graph, win), evaluate(back, win)
        for n in exported:
            assert same(a[n], b[n]), f"{n}: {a[n]!r} != {b[n]!r}"
    for n in exported:
        m1, m2 = graph.metrics[n], back.metrics[n]
        assert m1.unit == m2.unit, n
        assert set(m1.groups) == set(m2.groups), n
        assert m1.description == m2.description and m1.parent == m2.parent, n
        assert (m1.threshold is None) == (m2.threshold is None), n
        if m1.threshold:
            assert m1.threshold[0] == m2.threshold[0] and m1.threshold[1] == pytest.approx(m2.threshold[1], rel=1e-12), n


def test_export_cli_json_and_bad_generation(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["export", "perf-json", "--generation", "sohu", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["metrics"] > 50 and "hbm.stack_imbalance" in doc["skipped"]
    assert main(["export", "perf-json", "--generation", "nosuch", "--out", str(out)]) == 2  # an unknown generation is a usage error
    assert main(["export", "csv", "--out", str(out)]) == 2
