"""`perfonto import intel`: the real Haswell file (TMA tree, percent, thresholds, constants), and
equivalence of every imported metric with a reference evaluation of Intel's formula (tests/ref_pyexpr.py)."""

import json

import pytest

from perfonto.interop import import_file
from ref_pyexpr import evaluate as ref_eval
from ref_windows import import_real, perfonto_values, random_windows, same

INTEL = "intel_perfmon_HSW_haswell_metrics.json"


@pytest.fixture(scope="module")
def intel_import(tmp_path_factory):
    return import_real("intel", INTEL, tmp_path_factory.mktemp("intel"))


def check_equivalence(report, path, trials=12) -> int:
    (built,) = report.generations
    gen = built.gen
    metrics = {m["MetricName"]: m for m in json.loads(path.read_text())["Metrics"]}
    w = random_windows(gen, trials, seed=1)
    ours = perfonto_values(built.graph, w)
    checked = 0
    for t in range(trials):
        interval = float(w.interval[t, 0])
        for key, o in built.outcomes.items():
            if o.status == "rejected":
                continue
            m = metrics[key]
            env = {e["Alias"]: float(w.values[built.signals[e["Name"].upper()]][t, 0]) for e in m["Events"]}
            for c in m["Constants"]:
                name = c["Name"]
                if name.upper() == "DURATIONTIMEINMILLISECONDS":
                    env[c["Alias"]] = interval * 1000.0
                elif name.upper() == "SYSTEM_TSC_FREQ":  # the TSC's ticks in the window (BaseFormula `tsc`)
                    env[c["Alias"]] = gen.spec[built.constants[name]].value * interval
                else:
                    env[c["Alias"]] = gen.spec[built.constants[name]].value
            expected = ref_eval(m["Formula"], env)  # Intel's value: percent metrics in percent
            got = ours[built.names[key]][t, 0]
            assert same(got, expected), f"{key}: perfonto {got!r} != Intel {expected!r} (trial {t}): {m['Formula']}"
            checked += 1
    return checked


def test_real_file_imports(intel_import):
    _, report = intel_import
    assert report.ok and report.total == 112 and report.imported == 112
    # 61 percent + 2 "per instruction" + 11 whose description states the unit (7 GB/s, GHz, W, s, core cycles)
    assert (report.with_unit, report.without_unit) == (74, 38)
    g = report.generations[0].graph
    fe = g.metrics["frontend_bound"]
    assert fe.unit_text == "percent" and fe.threshold[:2] == (">", 15.0) and "topdown" in fe.groups
    assert "100 *" not in fe.formula  # Intel's percent factor is the declared unit's conversion
    fl = g.metrics["fetch_latency"]
    assert fl.parent == "frontend_bound" and fl.threshold[:2] == (">", 10.0)  # `& b > 15` is the parent's
    assert g.metrics["icache_misses"].parent == "fetch_latency"
    assert g.metrics["info_thread_cpi"].unit_text == "event/event"
    # level-1 TMA nodes are perfonto's top-down level 1
    from perfonto.analysis.bottleneck import topdown_level1

    assert set(topdown_level1(g)) == {"frontend_bound", "bad_speculation", "backend_bound", "retiring"}
    not_done = {t["metric"] for t in report.thresholds_not_translated()}
    assert not_done == {"Retiring", "Info_Frontend_DSB_Coverage", "Info_System_MUX"}


@pytest.mark.parametrize("smt", [1.0, 0.0])
def test_equivalence_with_intel_reference(tmp_path, smt):
    """Both sides of every `if smt_on`: Hyper-Threading on and off."""
    path, report = import_real("intel", INTEL, tmp_path, constants={"hyperthreading_on": smt})
    assert check_equivalence(report, path) == 12 * 112


def test_unbound_alias_is_rejected(tmp_path):
    doc = {
        "Metrics": [
            {
                "MetricName": "Good",
                "Formula": "100 * a / b",
                "UnitOfMeasure": "percent",
                "Level": 1,
                "Events": [{"Name": "X.Y", "Alias": "a"}, {"Name": "Z", "Alias": "b"}],
                "Constants": [],
            },
            {
                "MetricName": "Bad",
                "Formula": "a / q",
                "UnitOfMeasure": "",
                "Level": 1,
                "Events": [{"Name": "X.Y", "Alias": "a"}],
                "Constants": [],
            },
        ]
    }
    p = tmp_path / "i.json"
    p.write_text(json.dumps(doc))
    report = import_file("intel", p, tmp_path / "o")
    (r,) = report.rejected()
    assert r["metric"] == "Bad" and "`q`" in r["reason"]
    assert report.generations[0].graph.metrics["good"].unit_text == "percent"


def test_percent_compared_with_a_fraction_is_flagged(tmp_path):
    doc = {
        "Metrics": [
            {
                "MetricName": "Stalls",
                "Formula": "100 * a / b",
                "UnitOfMeasure": "percent",
                "Level": 1,
                "LegacyName": "m_S(%)",
                "Events": [{"Name": "A", "Alias": "a"}, {"Name": "B", "Alias": "b"}],
                "Constants": [],
                "Threshold": {"Formula": "a > 0.5", "ThresholdMetrics": [{"Alias": "a", "Value": "m_S(%)"}]},
            },
        ]
    }
    p = tmp_path / "i.json"
    p.write_text(json.dumps(doc))
    report = import_file("intel", p, tmp_path / "o")
    assert report.generations[0].graph.metrics["stalls"].threshold[:2] == (">", 0.5)
    assert any(f.code == "percent-vs-fraction" and f.metric == "Stalls" for _, f in report.findings())


def test_the_tsc_constant_counts_the_windows_ticks(tmp_path):
    """Intel's formulas read SYSTEM_TSC_FREQ as the TSC's ticks over the interval (their BaseFormula:
    `cpu_clk_unhalted.ref_tsc / tsc`; Linux perf's version reads msr@tsc@, a count). It was a fixed
    2.5e9, right only for 1 s windows: a migrator's one core busy at 3 GHz, TSC 2.5 GHz, sampled every
    100 ms read 0.1 CPUs utilized and 9.99 GHz. By hand: REF_TSC counts 2.5e8 a window, THREAD 3.0e8;
    CPUs utilized = 2.5e8 / (2.5e9 × 0.1) = 1; core frequency = 3.0e8 / 2.5e8 × 2.5e8 / 1e9 / 0.1 = 3 GHz."""
    import numpy as np

    import perfonto

    path, report = import_real("intel", INTEL, tmp_path)
    (built,) = report.generations
    rates = {"CPU_CLK_UNHALTED.REF_TSC": 2.5e9, "CPU_CLK_UNHALTED.THREAD": 3.0e9}
    cols = {"chip": np.zeros(4, np.int64), "timestamp_ns": np.arange(4, dtype=np.int64) * 100_000_000}
    for event, sig in built.signals.items():
        cols[sig] = (np.arange(4) * rates.get(event, 1e9) * 0.1).astype(np.uint64)
    import pyarrow as pa

    res = perfonto.evaluate(perfonto.load_catalog(tmp_path), pa.table(cols), sample_period="100ms")
    assert res.value("info_system_cpus_utilized") == pytest.approx(1.0, rel=1e-12)
    assert res.value("info_system_core_frequency") == pytest.approx(3.0, rel=1e-12)


def test_an_imported_catalog_reads_a_perf_capture(tmp_path, capsys):
    """Imported Intel (and Arm) catalogs recorded no `sources: {perf: …}`, so `perfonto analyze perf.csv
    --catalog <import>` refused a perf capture ("names no perf event"). Each event now names its perf
    alias (the name in lower case, as perf's pmu-events spell it): 2e8 instructions over 1e8 cycles a
    100 ms interval is an IPC of 2 and a CPI of 0.5."""
    import json

    from perfonto.cli import main

    import_real("intel", INTEL, tmp_path / "cat")
    from perf_lines import write_perf_csv

    events = [("200000000", "", "inst_retired.any"), ("100000000", "", "cpu_clk_unhalted.thread")]
    p = write_perf_csv(tmp_path / "perf.csv", 0.1, events)
    args = [
        "analyze",
        str(p),
        "--format",
        "perf-stat",
        "--catalog",
        str(tmp_path / "cat"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main([*args, "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["info_thread_ipc"]["value"] == pytest.approx(2.0) and m["info_thread_cpi"]["value"] == pytest.approx(0.5)


def test_an_emon_style_frequency_reads_the_tsc_in_hz(tmp_path):
    """A review: EMON-style metrics (newer perfmon files, PerfSpect) read SYSTEM_TSC_FREQ in Hz —
    `cpu_operating_frequency = (a / b * c) / 1e9` with no duration —, where the TMA metrics whose
    BaseFormula reads `tsc` take it as ticks. By hand at 100 ms windows, THREAD 3.0e8 and REF_TSC 2.5e8 a
    window, TSC 2.5 GHz: 3.0e8 / 2.5e8 × 2.5e9 / 1e9 = 3 GHz either way the metric is written."""
    import numpy as np
    import pyarrow as pa

    import perfonto

    events = [{"Name": "CPU_CLK_UNHALTED.THREAD", "Alias": "a"}, {"Name": "CPU_CLK_UNHALTED.REF_TSC", "Alias": "b"}]
    doc = {
        "Metrics": [
            {
                "MetricName": "cpu_operating_frequency",
                "Formula": "(a / b * c) / 1000000000",
                "BaseFormula": "(cpu_clk_unhalted.thread / cpu_clk_unhalted.ref_tsc * #system_tsc_freq) / 1000000000",
                "UnitOfMeasure": "",
                "Events": events,
                "Constants": [{"Name": "SYSTEM_TSC_FREQ", "Alias": "c"}],
            }
        ]
    }
    p = tmp_path / "emon.json"
    p.write_text(json.dumps(doc))
    report = import_file("intel", p, tmp_path / "o")
    assert report.ok, report.render()
    (built,) = report.generations
    rates = {"CPU_CLK_UNHALTED.REF_TSC": 2.5e9, "CPU_CLK_UNHALTED.THREAD": 3.0e9}
    cols = {"chip": np.zeros(4, np.int64), "timestamp_ns": np.arange(4, dtype=np.int64) * 100_000_000}
    for event, sig in built.signals.items():
        cols[sig] = (np.arange(4) * rates[event] * 0.1).astype(np.uint64)
    res = perfonto.evaluate(perfonto.load_catalog(tmp_path / "o"), pa.table(cols), sample_period="100ms")
    assert res.value("cpu_operating_frequency") == pytest.approx(3.0, rel=1e-12)
