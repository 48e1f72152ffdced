"""`perfonto import perf` of perfonto's own perf-json export and of perf constructs whose value depends on
the machine (a migrator's interop review):

- `--constant NAME=VALUE` is used for the `spec.*` constants the export writes (it was read back and the
  given value dropped without a word), and the import report lists it as given;
- perf's `source_count(x)` of a plain perf file's event is not translated as 1 (`x / source_count(x)`, a
  mean over 6 IMC PMUs, came back 6 × too large): the metric is rejected with that reason;
- `--generation sohu` (the help's use for perfonto's own export) writes a folder that compiles as commands
  load it, with the shipped metric library: the metrics the library defines alike are not written again;
- the constants the importer assumes are listed in its report, with the `--constant` that overrides one.
"""

import json

import pytest

from perfonto.cli import main
from perfonto.interop import import_file
from perfonto.metrics.catalog import load_catalog
from perfonto.ontology.loader import load_generation

# The Neoverse N2/V2 top-down entries of tools/perf/pmu-events/arch/arm64/arm/neoverse-n2-v2/metrics.json
# (torvalds/linux): the formulas branch on `#slots - 5` (N2 has 5 issue slots, V2 8).
N2_V2 = [
    {
        "ArchStdEvent": "FRONTEND_BOUND",
        "MetricExpr": "((stall_slot_frontend) if (#slots - 5) else (stall_slot_frontend - cpu_cycles)) / "
        "(#slots * cpu_cycles)",
    },
    {
        "ArchStdEvent": "BAD_SPECULATION",
        "MetricExpr": "(1 - op_retired / op_spec) * (1 - (stall_slot if (#slots - 5) else (stall_slot - cpu_cycles))"
        " / (#slots * cpu_cycles))",
    },
    {
        "ArchStdEvent": "RETIRING",
        "MetricExpr": "(op_retired / op_spec) * (1 - (stall_slot if (#slots - 5) else (stall_slot - cpu_cycles)) / "
        "(#slots * cpu_cycles))",
    },
    {"ArchStdEvent": "BACKEND_BOUND"},
]

# Neoverse V2, 8 slots, by hand: frontend = 1500 / (8 × 1000) = 18.75 % (`#slots − 5` ≠ 0 takes
# stall_slot_frontend); backend = 1000 / 8000 = 12.5 %; bad speculation = (1 − 1800/2000) × (1 − 2500/8000)
# = 0.1 × 0.6875 = 6.875 %; retiring = 0.9 × 0.6875 = 61.875 %. (With 5 slots: 10, 20, 7 and 63 %.)
V2_VECTORS = """generation: {gen}
vectors:
  - name: v2 slots=8
    interval: 1 s
    inputs:
      cpu.cpu_cycles: 1000
      cpu.stall_slot_frontend: 1500
      cpu.stall_slot_backend: 1000
      cpu.stall_slot: 2500
      cpu.op_retired: 1800
      cpu.op_spec: 2000
    expect:
      frontend_bound: 18.75
      backend_bound: 12.5
      bad_speculation: 6.875
      retiring: 61.875
"""


@pytest.fixture(scope="module")
def n2_export(tmp_path_factory):
    """The N2/V2 top-down file imported (slots assumed 5) and exported as perf-json by perfonto."""
    d = tmp_path_factory.mktemp("n2")
    src = d / "n2.json"
    src.write_text(json.dumps(N2_V2))
    assert import_file("perf", src, d / "n2", "n2").ok
    out = d / "n2.perf.json"
    assert main(["export", "perf-json", "--catalog", str(d / "n2"), "--out", str(out)]) == 0
    slots = next(e for e in json.loads(out.read_text()) if e.get("MetricName") == "spec.slots")
    assert slots["MetricExpr"] == "5"  # the export carries the assumed 5
    return out


@pytest.fixture(scope="module")
def sohu_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("sohu") / "sohu.perf.json"
    assert main(["export", "perf-json", "--out", str(out)]) == 0
    return out


def test_a_constant_given_on_the_command_line_is_used_for_an_exported_file(n2_export, tmp_path, capsys):
    out = tmp_path / "v2"
    capsys.readouterr()
    assert main(["import", "perf", str(n2_export), "--out", str(out), "--constant", "slots=8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["given_constants"] == [
        {"name": "slots", "value": 8.0, "unit": "1", "why": "given on the command line (--constant)"}
    ]
    assert doc["unused_constants"] == []
    gen, _ = load_generation(out / "perf_n2_perf.yaml")
    assert gen.spec["spec.slots"].value == 8.0 and gen.spec["spec.slots"].provenance == "claimed"
    vectors = tmp_path / "v2.vectors.yaml"
    vectors.write_text(V2_VECTORS.format(gen=gen.name))
    assert main(["test", str(vectors), "--catalog", str(out)]) == 0  # 18.75 / 12.5 / 6.875 / 61.875 %


def test_a_given_constant_of_perfontos_own_export_and_against_its_generation(sohu_export, tmp_path):
    """`power.tdp` is 700 W in the export; 1000 (in the constant's unit, W) is used, written as claimed — also
    against `--generation sohu`, whose own 700 W the written generation overrides."""
    report = import_file("perf", sohu_export, tmp_path / "a", constants={"power.tdp": 1000.0})
    assert report.ok and report.generations[0].gen.spec["spec.power.tdp"].value == 1000.0
    assert str(report.generations[0].gen.spec["spec.power.tdp"].unit) == "watt"
    report = import_file("perf", sohu_export, tmp_path / "b", extends="sohu", constants={"power.tdp": 1000.0})
    assert report.ok, report.render()
    tdp = report.generations[0].gen.spec["spec.power.tdp"]
    assert (tdp.value, tdp.provenance) == (1000.0, "claimed")
    assert load_generation("sohu")[0].spec["spec.power.tdp"].value == 700.0


def test_source_count_of_a_plain_perf_event_is_rejected_not_read_as_one(tmp_path):
    """perf's `source_count(ev)` is the PMU instances counted into `ev` (6 IMC PMUs: 600 reads in all are 100
    per instance); a plain perf file does not say how many, so the metric is rejected with that reason."""
    src = tmp_path / "sc.json"
    src.write_text(
        json.dumps(
            [
                {
                    "MetricName": "imc_avg_reads",
                    "MetricExpr": "unc_m_cas_count.rd / source_count(unc_m_cas_count.rd)",
                    "BriefDescription": "mean CAS reads per IMC instance",
                },
                {"MetricName": "imc_reads", "MetricExpr": "unc_m_cas_count.rd", "BriefDescription": "CAS reads"},
            ]
        )
    )
    report = import_file("perf", src, tmp_path / "o")
    (rej,) = report.rejected()
    assert rej["metric"] == "imc_avg_reads"
    assert "source_count(unc_m_cas_count.rd)" in rej["reason"] and "not translated" in rej["reason"]
    assert "imc_avg_reads" not in report.generations[0].graph.metrics
    assert "imc_reads" in report.generations[0].graph.metrics


def test_import_against_sohu_writes_a_folder_that_compiles_with_the_library(sohu_export, tmp_path, capsys):
    out = tmp_path / "g"
    capsys.readouterr()
    assert main(["import", "perf", str(sohu_export), "--generation", "sohu", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    exported = [e for e in json.loads(sohu_export.read_text()) if "MetricName" in e]
    n = sum(1 for e in exported if not e["MetricName"].startswith("spec."))
    assert doc["ok"] and doc["imported"] == n and len(doc["from_library"]) == n  # all the library's, alike
    cat = load_catalog(out, None, cache=False)  # as `perfonto check --catalog g` loads it: the library too
    assert not [d for d in cat.diagnostics if d.severity == "error"]
    assert "mfu" in cat.graph.metrics and "metric " not in next(out.glob("*.metrics")).read_text()
    assert main(["explain", "mfu", "--catalog", str(out)]) == 0


def test_a_metric_the_library_defines_otherwise_is_rejected_with_those_that_read_it(sohu_export, tmp_path):
    entries = json.loads(sohu_export.read_text())
    for e in entries:
        if e.get("MetricName") == "c2c.bytes_sent":
            e["MetricExpr"] = "(c2c.tx_bytes * 8)"  # the library's reads 16-byte flits: values halved
    entries += [
        {"MetricName": "my_total", "MetricExpr": "c2c.bytes_sent * 2", "ScaleUnit": "1e-09GB"},
        {"MetricName": "my_read_rate", "MetricExpr": "hbm.read_bytes * 64 / duration_time", "ScaleUnit": "1e-09GB/s"},
    ]
    src = tmp_path / "edited.json"
    src.write_text(json.dumps(entries))
    report = import_file("perf", src, tmp_path / "g", extends="sohu")
    why = {r["metric"]: r["reason"] for r in report.rejected()}
    assert "defines `c2c.bytes_sent` too, with other values" in why["c2c.bytes_sent"]
    assert why["my_total"].startswith("reads `c2c.bytes_sent`, which is rejected")
    assert "c2c.bytes_sent.per_second" in why  # the library's generated submetric reads the library's metric
    text = next((tmp_path / "g").glob("*.metrics")).read_text()
    assert "metric my_read_rate [GB/s] = sum(hbm.read_bytes) / interval" in text
    assert "metric c2c.bytes_sent " not in text and "metric my_total" not in text
    cat = load_catalog(tmp_path / "g", None, cache=False)
    assert not [d for d in cat.diagnostics if d.severity == "error"] and "my_read_rate" in cat.graph.metrics


def test_the_report_lists_the_constants_the_importer_assumed(tmp_path):
    src = tmp_path / "n2.json"
    src.write_text(json.dumps(N2_V2))
    report = import_file("perf", src, tmp_path / "o")
    (slots,) = report.to_json()["assumed_constants"]
    assert (slots["name"], slots["value"]) == ("slots", 5.0) and "Neoverse N2" in slots["why"]
    assert "constants assumed" in report.render() and "slots = 5" in report.render()
    report = import_file("perf", src, tmp_path / "p", constants={"slots": 8.0})
    assert report.to_json()["assumed_constants"] == [] and report.to_json()["given_constants"][0]["value"] == 8.0


def test_perf_topdown_levels_are_perfontos_topdown_tree(tmp_path, capsys):
    """perf's TopdownL1 metrics are top-down level 1 (the Intel importer's TMA level 1 already was). By hand over
    the two windows below (5 slots; 2000 cycles, 10000 slots): frontend = (1500 − 1000 + 2500 − 1000) / 10000 =
    20 %, backend = (1000 + 500) / 10000 = 15 %, not stalled = 1 − (2500 − 1000 + 3000 − 1000) / 10000 = 0.65,
    retiring = (2800 / 4000) × 0.65 = 45.5 %, bad speculation = 0.3 × 0.65 = 19.5 %: 100 % in all. A TopdownL1
    metric that is not a share (an IPC) is no top-down node."""
    src = tmp_path / "n2.json"
    ipc = {"MetricName": "ipc", "MetricExpr": "op_retired / cpu_cycles", "MetricGroup": "TopdownL1"}
    src.write_text(json.dumps(N2_V2 + [ipc]))
    assert import_file("perf", src, tmp_path / "n2", "n2").ok
    rows = {
        "cpu_cycles": (1000, 1000),
        "stall_slot_frontend": (1500, 2500),
        "stall_slot_backend": (1000, 500),
        "stall_slot": (2500, 3000),
        "op_retired": (1800, 1000),
        "op_spec": (2000, 2000),
    }
    csv = tmp_path / "n2_perf.csv"
    csv.write_text(
        "".join(f"{t + 1}.000100000,{v[t]},,{ev},1000000000,100.00,,\n" for t in (0, 1) for ev, v in rows.items())
    )
    capsys.readouterr()
    argv = [
        "analyze",
        str(csv),
        "--catalog",
        str(tmp_path / "n2"),
        "--no-library",
        "--out",
        str(tmp_path / "o"),
        "--json",
    ]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    want = {"frontend_bound": 20.0, "backend_bound": 15.0, "bad_speculation": 19.5, "retiring": 45.5}
    assert doc["topdown"] == pytest.approx(want, rel=1e-12)
    # retiring (45.5 %) is useful work, not a stall: the bottleneck is the largest stall, frontend 20 % > bad
    # speculation 19.5 % > backend 15 % (interop.perf_topdown marks retiring `useful`)
    assert doc["bottleneck"] == "frontend_bound" and doc["topdown_tree_violations"] == []


def test_intel_events_with_a_modifier_are_named_with_the_metrics_a_perf_capture_cannot_feed(tmp_path):
    """`UOPS_EXECUTED.CORE:c1` has no perf name (perf spells it `…/cmask=1/`): the import says so, naming the
    metrics that read it; a metric named `..` is listed as renamed."""
    src = tmp_path / "intel.json"
    ilp = {
        "MetricName": "Info_Core_ILP",
        "Formula": "a / b",
        "Events": [{"Name": "UOPS_EXECUTED.CORE", "Alias": "a"}, {"Name": "UOPS_EXECUTED.CORE:c1", "Alias": "b"}],
    }
    twice = {**ilp, "MetricName": "Twice_ILP", "Formula": "2 * a / b"}
    dots = {"MetricName": "..", "Formula": "a", "Events": [{"Name": "INST_RETIRED.ANY", "Alias": "a"}]}
    src.write_text(json.dumps({"Header": {}, "Metrics": [ilp, twice, dots]}))
    report = import_file("intel", src, tmp_path / "o")
    (f,) = [f for _, f in report.findings() if f.code == "no-perf-name"]
    assert "UOPS_EXECUTED.CORE:C1" in f.message and "info_core_ilp, twice_ilp" in f.message
    assert ("..", "x", " (characters a metric name cannot hold)") in report.renamed()


def test_wrong_input_files_say_what_they_are(tmp_path, capsys):
    perf = tmp_path / "perf.json"
    perf.write_text(json.dumps([{"MetricName": "ipc", "MetricExpr": "instructions / cycles"}]))
    report = import_file("intel", perf, tmp_path / "i")  # a perf file given to `import intel`
    assert "a Linux perf pmu-events file" in report.error and "perfonto import perf" in report.error
    assert not (tmp_path / "i").exists()
    cut = tmp_path / "cut.json"
    cut.write_text('[{"MetricName": "ipc", "MetricExpr": "instr')
    report = import_file("perf", cut, tmp_path / "c")  # json's own text stops at "starting at"
    assert f"{cut}:1:38: malformed JSON: Unterminated string starting here (is the file complete?" in report.error
    capsys.readouterr()
    assert main(["import", "perf", str(tmp_path), "--out", str(tmp_path / "b")]) == 1  # a folder, --out inside it
    err = capsys.readouterr().err
    assert "is a folder, not a Linux perf pmu-events metrics JSON file" in err and "lies inside" not in err


def test_a_flat_sum_and_a_runtime_parameter_are_explained(tmp_path):
    src = tmp_path / "p.json"
    src.write_text(
        json.dumps(
            [
                {"MetricName": "sum101", "MetricExpr": " + ".join(f"ev{i}" for i in range(101))},
                {"MetricName": "pb_cyc", "MetricExpr": "hv_24x7@PM_PB_CYC\\,chip\\=?@ / duration_time"},
            ]
        )
    )
    report = import_file("perf", src, tmp_path / "o")
    (rej,) = report.rejected()
    assert "a sum of more than 100 terms is refused too" in rej["reason"]
    assert any(f.code == "runtime-parameter" and "chip=0" in f.message for _, f in report.findings())


def test_a_folder_shared_by_two_imports_says_it_is_storage(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([{"MetricName": "ipc", "MetricExpr": "instructions / cycles"}]))
    b.write_text(json.dumps([{"MetricName": "cpi", "MetricExpr": "cycles / instructions"}]))
    out = tmp_path / "shared"
    assert main(["import", "perf", str(a), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["import", "perf", str(b), "--out", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"note: {out} also holds the import of perf_a: `--catalog {out}` compiles every metrics file" in err


def test_only_real_renames_are_listed_not_camelcase_words(tmp_path):
    """rocprof's `MfmaBusy` → mfma_busy is a case conversion; `FetchSize` → fetch_size_2 keeps it apart from
    `FETCH_SIZE` (→ fetch_size), the one rename a migrator must see."""
    src = tmp_path / "counter_defs.yaml"
    src.write_text(
        "GRBM_COUNT:\n  architectures:\n    gfx90a:\n      block: GRBM\n      event: 0\n  description: cycles\n"
        "FETCH_SIZE:\n  architectures:\n    gfx90a:\n      expression: reduce(GRBM_COUNT,sum)\n  description: x\n"
        "FetchSize:\n  architectures:\n    gfx90a:\n      expression: FETCH_SIZE\n  description: y\n"
        "MfmaBusy:\n  architectures:\n    gfx90a:\n      expression: 2*FETCH_SIZE\n  description: z\n"
    )
    report = import_file("rocprof", src, tmp_path / "o")
    assert report.ok, report.render()
    assert report.renamed() == [("FetchSize", "fetch_size_2", " (to keep it apart from another metric of that name)")]
    assert report.generations[0].names["MfmaBusy"] == "mfma_busy"
