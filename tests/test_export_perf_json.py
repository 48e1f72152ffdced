"""`perfonto export perf-json`: the shipped Sohu catalog as perf pmu-events metrics JSON. Checked twice:
perf's own semantics (tests/ref_perf.py evaluates every exported MetricExpr × ScaleUnit scale on the
same windows, fed the events' *raw* counts as perf does: it reverses an event's ScaleUnit before a
metric reads it), and the round trip (`perfonto import perf FILE`, with no flag, gives the same
signals and metrics: the export carries the event definitions with their scales and units)."""

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
    "c2c.link_imbalance": "max()",
    "hbm.stack_imbalance": "max()",
    "power.temperature_mean": "offset unit",
    "power.temperature_peak": "offset unit",
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
    names = {e["MetricName"] for e in entries if "MetricName" in e}
    metrics = {n for n in names if not n.startswith("spec.")}
    skipped = export(graph).skipped
    assert metrics | set(skipped) == set(graph.metrics) | set(graph.record_metrics)
    assert not metrics & set(skipped)
    for name, word in NOT_EXPRESSIBLE.items():
        assert word in skipped[name]
    assert set(skipped) - set(NOT_EXPRESSIBLE) == set(graph.record_metrics)  # percentiles over request records
    for e in entries:
        if "EventName" in e:
            assert (
                set(e) == {"EventName", "Unit", "ScaleUnit", "BriefDescription"}
                and "[perfonto: kind=" in e["BriefDescription"]
            )
            continue
        assert set(e) <= {"MetricName", "MetricExpr", "ScaleUnit", "MetricGroup", "BriefDescription", "MetricThreshold"}
    mu = next(e for e in entries if e.get("MetricName") == "mxu.utilization")
    assert mu["ScaleUnit"] == "100%" and mu["MetricThreshold"] == "mxu.utilization > 0.8"
    assert "source_count(mxu.busy_cycles)" in mu["MetricExpr"] and "topdown.compute_bound_group" in mu["MetricGroup"]
    bw = next(e for e in entries if e.get("MetricName") == "hbm.read_bandwidth")
    assert bw == {
        **bw,
        "MetricExpr": "(hbm.read_bytes * 64) / duration_time",
        "ScaleUnit": "1e-09GB/s",
    }  # 64-byte bursts
    ev = next(e for e in entries if e.get("EventName") == "hbm.read_bytes")
    assert ev["ScaleUnit"] == "64B" and ev["Unit"] == "hbm" and "instances=stack:6" in ev["BriefDescription"]


def test_perf_semantics_of_the_export(sohu_export):
    """perf's evaluation of each exported expression (events summed over PMU instances, in base units;
    metric references unscaled) × ScaleUnit equals perfonto's value."""
    graph, entries, _ = sohu_export
    gen = graph.generation
    trials = 8
    w = random_windows(gen, trials, seed=5)
    ours = evaluate(graph, w)
    exprs = {e["MetricName"]: e["MetricExpr"] for e in entries if "MetricName" in e}
    counts = {n: s.instances for n, s in gen.signals.items()}
    for t in range(trials):
        events = {}
        for n, s in gen.signals.items():  # perf gives a metric the raw count: the value / scale
            events[n] = float(np.sum(w.values[n][t, 0])) / s.scale
        ref = PerfEval(exprs, events, {}, float(w.interval[t, 0]), counts)
        for e in entries:
            if "MetricName" not in e or e["MetricName"].startswith("spec."):
                continue
            want = ref.metric(e["MetricName"]) * _scale(e["ScaleUnit"])
            got = ours[e["MetricName"]][t, 0]
            assert same(got, want), f"{e['MetricName']}: perfonto {got!r} != perf {want!r} ({e['MetricExpr']})"


@pytest.mark.parametrize("extends", [None, "sohu"])
def test_round_trip_is_lossless_for_what_perf_expresses(sohu_export, tmp_path, extends):
    graph, entries, path = sohu_export
    report = import_file(
        "perf", path, tmp_path / "back", extends=extends
    )  # no flag needed: the file defines its events
    assert report.ok and report.rejected() == []
    back = report.generations[0].graph
    exported = [e["MetricName"] for e in entries if "MetricName" in e and not e["MetricName"].startswith("spec.")]
    assert report.total == len(exported) and set(exported) <= set(back.metrics)
    bgen, gen = report.generations[0].gen, graph.generation
    assert (
        not {k for k in bgen.spec if not k.startswith("spec.clock.")} - gen.spec.keys()
    )  # constants resolved, not added
    for e in entries:  # every exported event is the same signal again: unit, scale, instances, kind, chip rule
        if "EventName" in e:
            a, b = gen.signals[e["EventName"]], bgen.signals[e["EventName"]]
            assert (a.unit, a.scale, a.axes, a.kind, a.counted_by, a.width) == (
                b.unit,
                b.scale,
                b.axes,
                b.kind,
                b.counted_by,
                b.width,
            )
            # the window rules' limits too (a new user's round trip lost seq.elapsed_cycles' 2e9/s, and
            # its windows were called resets against the bare clock)
            assert (a.wrap_width, a.max_rate) == (b.wrap_width, pytest.approx(b.max_rate) if b.max_rate else None)
    for c in ("spec.hbm.peak_bandwidth", "spec.clock.hbm"):
        assert (
            bgen.spec[c].value == pytest.approx(gen.spec[c].value, rel=1e-12)
            and bgen.spec[c].scope == gen.spec[c].scope
        )
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
            assert m1.threshold[0] == m2.threshold[0] and m1.threshold[1] == pytest.approx(
                m2.threshold[1], rel=1e-12
            ), n


def test_export_cli_json_and_bad_generation(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert main(["export", "perf-json", "--generation", "sohu", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["metrics"] > 50 and "hbm.stack_imbalance" in doc["skipped"]
    assert (
        main(["export", "perf-json", "--generation", "nosuch", "--out", str(out)]) == 2
    )  # an unknown generation is a usage error
    assert main(["export", "csv", "--out", str(out)]) == 2


def test_export_then_import_on_the_command_line_needs_no_flag(tmp_path, capsys):
    out = tmp_path / "sohu.json"
    assert main(["export", "perf-json", "--out", str(out), "--json"]) == 0
    n = json.loads(capsys.readouterr().out)["metrics"]
    assert main(["import", "perf", str(out), "--out", str(tmp_path / "back"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["imported"] == doc["with_unit"] == n and doc["rejected_count"] == 0


def test_export_is_written_from_the_compiled_ir_not_the_formula():
    """Issue 32: the expressions come from each metric's compiled IR (its Consts say which number is a spec
    constant, a literal with its unit, a unit conversion or a chip factor), so the parse tree's formulas
    are not read: blanking them changes nothing. A signal renamed by a child generation is read under its
    new name (caelius renames c2c.retries to c2c.replays; the formula still says the old name)."""
    import dataclasses

    graph = load_catalog(None, "caelius").graph
    before = export(graph)
    graph.declarations = {n: dataclasses.replace(d, expr=None) for n, d in graph.declarations.items()}
    after = export(graph)
    assert after.entries == before.entries and after.skipped == before.skipped
    rate = next(e for e in after.entries if e.get("MetricName") == "c2c.retry_rate")
    assert (
        rate["MetricExpr"] == "c2c.replays / duration_time" and "c2c.retries" in graph.metrics["c2c.retry_rate"].formula
    )


def test_a_plain_number_metric_keeps_its_scale_through_the_round_trip(tmp_path):
    """A migrator's round trip: every dimensionless metric and constant of an imported Neoverse N2 catalog
    was exported with `"ScaleUnit": "11"` (scale 1, unit label "1"), which perf and perfonto's importer read
    as ×11: ipc 2.0 came back 22.0 and `spec.slots` 5 came back 55."""
    from perfonto.interop.perf_export import scale_unit
    from perfonto.interop.units import split_scale_unit

    assert scale_unit(1.0, "1") == "1" and split_scale_unit(scale_unit(1.0, "1")) == (1.0, "")
    assert split_scale_unit(scale_unit(1.0, "1/s")) == (1.0, "1/s")  # a label that starts like a number
    assert split_scale_unit(scale_unit(100.0, "percent")) == (100.0, "%")
    d = tmp_path / "cat"
    d.mkdir()
    (d / "g.yaml").write_text(
        "generation: tiny\ndescription: t.\nclock_domains: {core: {frequency: {value: 1, unit: GHz, "
        "provenance: assumed, source: x}}}\nspec:\n  slots: {value: 5, unit: '1', provenance: assumed, source: x, "
        "description: issue slots per cycle.}\nblocks:\n  cpu:\n    clock: core\n    description: the core.\n"
        "    signals:\n      instructions: {kind: counter, unit: event, width: 64, description: instructions done.}\n"
        "      cycles: {kind: counter, unit: event, width: 64, description: core clock cycles.}\n"
    )
    (d / "m.metrics").write_text(
        'metric ipc [1] = cpu.instructions / cpu.cycles\n  "Instructions per cycle."\n'
        'metric slot_use [1] = ipc / spec.slots\n  "Share of the issue slots used."\n'
    )
    out = tmp_path / "t.json"
    assert main(["export", "perf-json", "--catalog", str(d), "--out", str(out)]) == 0
    entries = {e.get("MetricName") or e.get("EventName"): e for e in json.loads(out.read_text())}
    assert {entries[n]["ScaleUnit"] for n in ("ipc", "slot_use", "spec.slots")} == {"1"}
    back = tmp_path / "back"
    assert main(["import", "perf", str(out), "--out", str(back)]) == 0
    text = "".join(p.read_text() for p in back.iterdir() if p.suffix in (".yaml", ".metrics"))
    assert "value: 5.0" in text and "value: 55" not in text
    assert re.search(r"metric ipc \[1\] = cpu\.instructions / cpu\.cycles\n", text)
