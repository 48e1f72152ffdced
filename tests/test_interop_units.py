"""Imported metrics carry the unit their source states (interop review, finding 10).

Every imported counter is an `event`, and Intel formulas read durations as plain numbers, so a formula's
dimension cannot give bytes, joules, a clock's cycles or a frequency. Values were right but labelled by
what the formula gave: GB/s, W and a CPU count as `event` (Intel's SYSTEM_TSC_FREQ was dimensionless),
3.0 GHz as a plain number, perf's AMD Zen 3 MiB totals as `event` — which `export semconv` then wrote as
`{event}` counters named `…_events` — and perf's `1Watts` and `1core clocks` as "no pint equivalent".
Now SYSTEM_TSC_FREQ is in Hz (its ticks are counted as events, as REF_TSC counts them), a unit pint
knows is mapped (`Watts`; `core clocks` are the imported clock's `core_cycle`), an Intel metric without
UnitOfMeasure takes the unit its description ends with, and a source unit that event counts cannot give
is declared as the source states it (`× 1 [MiB/event]`, an `unit-as-given` note)."""

import json

import pytest
import yaml

from perfonto.cli import main
from perfonto.interop import import_file
from perfonto.interop.semconv import export
from perfonto.interop.units import as_given, map_label
from perfonto.metrics.catalog import load_catalog
from perfonto.ontology.loader import load_generation
from perfonto.ontology.units import parse_unit, registry_for

# From intel/perfmon HSW/metrics/haswell_metrics.json (the fields the importer reads).
_MS = [{"Name": "DURATIONTIMEINMILLISECONDS", "Alias": "durationtimeinmilliseconds"}]
INTEL = [
    {
        "MetricName": "Info_System_CPUs_Utilized",
        "BriefDescription": "Average number of utilized CPUs",
        "UnitOfMeasure": "",
        "Events": [{"Name": "CPU_CLK_UNHALTED.REF_TSC", "Alias": "a"}],
        "Constants": [{"Name": "SYSTEM_TSC_FREQ", "Alias": "b"}],
        "Formula": "a / b",
        "BaseFormula": " cpu_clk_unhalted.ref_tsc / tsc",
    },
    {
        "MetricName": "Info_System_Core_Frequency",
        "BriefDescription": "Measured Average Core Frequency for unhalted processors [GHz]",
        "UnitOfMeasure": "",
        "Events": [
            {"Name": "CPU_CLK_UNHALTED.THREAD", "Alias": "a"},
            {"Name": "CPU_CLK_UNHALTED.REF_TSC", "Alias": "b"},
        ],
        "Constants": [{"Name": "SYSTEM_TSC_FREQ", "Alias": "c"}, *_MS],
        "Formula": "( ( a ) / b ) * c / ( 1000000000 ) / ( ( durationtimeinmilliseconds / 1000 ) )",
        "BaseFormula": " tma_info_system_turbo_utilization * tsc / ( 1000000000 ) / tma_info_system_time",
    },
    {
        "MetricName": "Info_System_DRAM_BW_Use",
        "BriefDescription": "Average external Memory Bandwidth Use for reads and writes [GB / sec]",
        "UnitOfMeasure": "",
        "Events": [
            {"Name": "UNC_ARB_TRK_REQUESTS.ALL", "Alias": "a"},
            {"Name": "UNC_ARB_COH_TRK_REQUESTS.ALL", "Alias": "b"},
        ],
        "Constants": _MS,
        "Formula": "64 * ( a + b ) / ( 1000000 ) / ( ( durationtimeinmilliseconds / 1000 ) ) / 1000",
    },
    {
        "MetricName": "Info_System_Power",
        "BriefDescription": "Total package Power in Watts",
        "UnitOfMeasure": "",
        "Events": [{"Name": "UNC_PKG_ENERGY_STATUS", "Alias": "a"}],
        "Constants": _MS,
        "Formula": "a * ( 61 ) / ( ( ( durationtimeinmilliseconds / 1000 ) ) * ( 1000000 ) )",
    },
    {
        "MetricName": "Info_System_CPU_Utilization",
        "BriefDescription": "Average CPU Utilization (percentage)",  # a fraction: no unit taken from it
        "UnitOfMeasure": "",
        "Events": [{"Name": "CPU_CLK_UNHALTED.REF_TSC", "Alias": "a"}],
        "Constants": [{"Name": "SYSTEM_TSC_FREQ", "Alias": "b"}],
        "Formula": "a / b",
        "BaseFormula": " tma_info_system_cpus_utilized",
    },
]

# Two 1 s intervals of `perf stat -I 1000 -x,` (the review's intel_bw.csv).
INTEL_CAPTURE = {
    "unc_arb_trk_requests.all": 100_000_000,
    "unc_arb_coh_trk_requests.all": 50_000_000,
    "unc_pkg_energy_status": 1_500_000,
    "cpu_clk_unhalted.ref_tsc": 2_000_000_000,
    "cpu_clk_unhalted.thread": 2_400_000_000,
}


def _perf_csv(path, rows: dict[str, int]):
    path.write_text("".join(f"{t}.000000000,{v},,{ev},1000000000,100.00,,\n" for t in (1, 2) for ev, v in rows.items()))
    return path


def _analyze(catalog, csv, out, capsys) -> dict:
    capsys.readouterr()
    assert main(["analyze", str(csv), "--catalog", str(catalog), "--out", str(out), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["metrics"]


def test_intel_rates_frequency_power_and_cpus_have_their_units(tmp_path, capsys):
    """By hand over the two 1 s intervals, TSC 2.5 GHz (assumed): CPUs utilized = REF_TSC 4e9 / (2.5e9 Hz ×
    2 s) = 0.8; core frequency = 4.8e9 / 4e9 × 2.5e9 × 2 / 1e9 / 2 = 3.0 GHz; DRAM bandwidth = 64 × 3e8 / 1e6
    / 2 / 1000 = 9.6 GB/s; power = 3e6 × 61 / (2 × 1e6) = 91.5 W."""
    src = tmp_path / "hsw.json"
    src.write_text(json.dumps({"Metrics": INTEL}))
    report = import_file("intel", src, tmp_path / "cat", "hsw")
    assert report.ok, report.render()
    gen, _ = load_generation(tmp_path / "cat" / "hsw.yaml")
    assert gen.spec["spec.system_tsc_freq"].unit_text == "Hz"
    m = _analyze(tmp_path / "cat", _perf_csv(tmp_path / "bw.csv", INTEL_CAPTURE), tmp_path / "o", capsys)
    got = {n: (pytest.approx(v["value"], rel=1e-12), v["unit"]) for n, v in m.items()}
    assert got == {
        "info_system_cpus_utilized": (0.8, "1"),
        "info_system_cpu_utilization": (0.8, "1"),
        "info_system_core_frequency": (3.0, "GHz"),
        "info_system_dram_bw_use": (9.6, "GB / sec"),
        "info_system_power": (91.5, "watts"),
    }
    notes = {f.metric for _, f in report.findings() if f.code == "unit-as-given"}
    assert notes == {"Info_System_Core_Frequency", "Info_System_DRAM_BW_Use", "Info_System_Power"}


# From tools/perf/pmu-events/arch/x86/amdzen3/recommended.json and the x86 TMA files, cut down.
PERF = [
    {
        "MetricName": "nps1_die_to_dram",
        "BriefDescription": "Approximate: Combined DRAM B/bytes of all channels on a NPS1 node (die)",
        "MetricExpr": "dram_channel_data_controller_0 + dram_channel_data_controller_1",
        "ScaleUnit": "6.1e-5MiB",
    },
    {
        "MetricName": "l3_read_miss_latency",
        "BriefDescription": "Average L3 Read Miss Latency (in core clocks)",
        "MetricExpr": "(xi_sys_fill_latency * 16) / xi_ccx_sdp_req1",
        "ScaleUnit": "1core clocks",
    },
    {
        "MetricName": "tma_info_system_power",
        "BriefDescription": "Power",
        "MetricExpr": "power@energy\\-pkg@ * 61 / (duration_time * 1e6)",
        "ScaleUnit": "1Watts",
    },
    {"MetricName": "bad_share", "MetricExpr": "inst_retired.any", "ScaleUnit": "100%"},  # a count is no share
]

PERF_CAPTURE = {
    "dram_channel_data_controller_0": 1_000_000,
    "dram_channel_data_controller_1": 600_000,
    "xi_sys_fill_latency": 3000,
    "xi_ccx_sdp_req1": 400,
    "power/energy-pkg/": 1_500_000,
    "inst_retired.any": 7,
}


@pytest.fixture(scope="module")
def perf_cat(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    src = d / "zen3.json"
    src.write_text(json.dumps(PERF))
    report = import_file("perf", src, d / "cat", "zen3")
    assert report.ok, report.render()
    return d, report


def test_perf_scale_units_pint_knows_and_mib_totals(perf_cat, tmp_path, capsys):
    """By hand, per 1 s interval: DRAM (1e6 + 6e5) × 6.1e-5 = 97.6 MiB a window, 195.2 MiB over the two;
    L3 read miss latency = 3000 × 16 / 400 = 120 core cycles; power = 1.5e6 × 61 / 1e6 = 91.5 W."""
    d, report = perf_cat
    g = report.generations[0].graph
    units = {n: g.metrics[n].unit_text for n in ("nps1_die_to_dram", "l3_read_miss_latency", "tma_info_system_power")}
    assert units == {"nps1_die_to_dram": "MiB", "l3_read_miss_latency": "core_cycle", "tma_info_system_power": "watts"}
    assert [r["metric"] for r in report.units_not_applied()] == ["bad_share"]  # a real mismatch stays reported
    assert g.metrics["bad_share"].unit_text == "event"
    m = _analyze(d / "cat", _perf_csv(tmp_path / "zen3.csv", PERF_CAPTURE), tmp_path / "o", capsys)
    assert m["nps1_die_to_dram"]["value"] == pytest.approx(195.2, rel=1e-12)
    assert m["l3_read_miss_latency"]["value"] == pytest.approx(120.0, rel=1e-12)
    assert m["tma_info_system_power"]["value"] == pytest.approx(91.5, rel=1e-12)


def test_semconv_exports_a_mib_total_as_bytes_and_a_latency_as_cycles(perf_cat):
    d, _ = perf_cat
    reg = export(load_catalog(d / "cat", None).graph)
    items = {m["name"]: m for m in yaml.safe_load(reg.files["registry/metrics.yaml"])["metrics"]}
    dram, lat = items["perfonto.nps1_die_to_dram"], items["perfonto.l3_read_miss_latency"]
    assert (dram["instrument"], dram["unit"]) == ("counter", "By")  # was a counter of {event}, `…_events`
    assert dram["annotations"]["perfonto"]["prometheus"] == "perfonto_nps1_die_to_dram_bytes"
    assert dram["annotations"]["perfonto"]["factor"] == 2.0**20
    assert (lat["instrument"], lat["unit"]) == ("gauge", "{core_cycle}")  # was a gauge `1`, `…_ratio`
    assert items["perfonto.tma_info_system_power"]["unit"] == "W"


def test_labels_map_and_only_units_events_cannot_give_are_taken_as_given():
    reg = registry_for(("core",))
    assert map_label(reg, "Watts") == ("watts", "")
    assert map_label(reg, "core clocks", "core") == ("core_cycle", "")
    assert map_label(reg, "core clocks")[0] is None  # without the clock domain: not known
    u = lambda t: parse_unit(reg, t)  # noqa: E731
    assert str(as_given(reg, u("event"), u("MiB"))) == "mebibyte / event"
    assert str(as_given(reg, u("event/s"), u("W"))) == "second * watt / event"
    assert as_given(reg, u("event"), u("percent")) is None  # a share: the formula could give it
    assert as_given(reg, u("1"), u("event")) is None  # counted in events: the formula could give it
    assert as_given(reg, u("byte"), u("W")) is None  # the formula has a dimension of its own
