"""`perfonto import` on the command line: exit codes, the report on stderr or as JSON on stdout, the
generated files pass `perfonto check`, and catalog text can never inject into the generated files."""

import json

import pytest
import yaml

from perfonto.cli import main
from perfonto.interop import import_file
from ref_windows import real_file


def test_import_real_perf_file_then_check(tmp_path, capsys):
    path = real_file("perf_arm64_neoverse-n2-v2_metrics.json")
    assert main(["import", "perf", str(path), "--out", str(tmp_path), "--name", "n2"]) == 0
    err = capsys.readouterr().err
    assert "41 imported (100.0 %)" in err and "translations:" in err
    assert (tmp_path / "n2.yaml").is_file() and (tmp_path / "n2.metrics").is_file()
    assert json.loads((tmp_path / "import-report.json").read_text())["imported"] == 41
    assert main(["check", "--catalog", str(tmp_path), "--generation", "n2"]) == 0


def test_json_report_on_stdout(tmp_path, capsys):
    path = real_file("arm_telemetry_neoverse-n1.json")
    assert main(["import", "arm", str(path), "--out", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # stdout holds one JSON document and nothing else
    assert doc["ok"] and doc["metrics"] == 31 and doc["with_unit"] == 31 and doc["rejected"] == []
    assert {"findings", "translations", "units_not_applied", "thresholds_not_translated", "names"} <= set(doc)


def test_exit_1_below_95_percent(tmp_path, capsys):
    p = tmp_path / "m.json"
    p.write_text(
        json.dumps([{"MetricName": "ok", "MetricExpr": "a / b"}, {"MetricName": "bad", "MetricExpr": "a % b"}])
    )
    assert main(["import", "perf", str(p), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad" in err and "`%`" in err and "below the 95 %" in err
    assert "the files are written for inspection" in err and list((tmp_path / "o").glob("*.metrics"))


def test_a_file_with_no_metric_writes_nothing_and_says_what_it_may_be(tmp_path, capsys):
    """A migrator gave the OpenTelemetry GPU registry to `import rocprof`: "0 in the file … below the 95 %
    needed", exit 1, `"error": ""`, and the output folder written."""
    p = tmp_path / "semconv.yaml"
    p.write_text("groups:\n  - id: metric.hw.gpu.io\n    type: metric\n    metric_name: hw.gpu.io\n")
    assert main(["import", "rocprof", str(p), "--out", str(tmp_path / "o"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "holds no metric that `perfonto import rocprof` reads" in doc["error"]
    assert "rocprofiler-sdk counter definitions YAML" in doc["error"] and not (tmp_path / "o").exists()


def test_a_constant_the_file_does_not_have_is_named(tmp_path, capsys):
    """`--constant NOPE=4` was ignored in silence."""
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"MetricName": "ipc", "MetricExpr": "instructions / cycles / #slots"}]))
    assert (
        main(["import", "perf", str(p), "--out", str(tmp_path / "o"), "--constant", "NOPE=4", "--constant", "slots=6"])
        == 0
    )
    err = capsys.readouterr().err
    assert "warning: --constant nope: the file has no constant of that name (its constants: slots); not used" in err
    assert json.loads((tmp_path / "o" / "import-report.json").read_text())["unused_constants"] == ["nope"]


@pytest.mark.parametrize("content", ["not json", '{"a": 1}'])
def test_exit_1_when_the_file_cannot_be_read(tmp_path, capsys, content):
    p = tmp_path / "m.json"
    p.write_text(content)
    assert main(["import", "perf", str(p), "--out", str(tmp_path / "o"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["ok"] and doc["error"].startswith("cannot read")
    assert main(["import", "intel", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o")]) == 1


def test_usage_errors_exit_2(tmp_path):
    assert main(["import", "csv", "x", "--out", str(tmp_path)]) == 2
    assert main(["import", "perf", "x"]) == 2  # --out is required
    assert main(["import", "perf", "x", "--out", str(tmp_path), "--constant", "slots"]) == 2


def test_catalog_text_cannot_inject(tmp_path):
    nasty = 'quote " backslash \\ newline\nmetric pwned [1] = 1\n# comment? {yaml: [x]} \u00e9 \u2603'
    entries = [
        {"EventName": "a", "BriefDescription": "events: {also: 'nasty'}\n- list\n" + nasty},
        {
            "MetricName": 'x"\nmetric pwned [1] = 2',
            "MetricExpr": "a / b",
            "BriefDescription": nasty,
            "MetricGroup": 'g;h i;metric;x"y',
            "ScaleUnit": "100%",
        },
        {
            "MetricName": "threshold",
            "MetricExpr": "cpu@weird\\,ev\\=1@ + uncore_imc@cas_count_read@ + a",
            "BriefDescription": "keyword name",
        },
    ]
    p = tmp_path / "m.json"
    p.write_text(json.dumps(entries))
    report = import_file("perf", p, tmp_path / "o")
    assert report.ok, report.render()
    built = report.generations[0]
    g = built.graph
    assert "pwned" not in g.metrics and len(g.metrics) == 2
    x = g.metrics[built.names['x"\nmetric pwned [1] = 2']]
    assert x.description == nasty  # escaped on the way out, read back unchanged
    assert set(x.groups) == {"g", "h_i", "metric_", "x_y"}
    assert built.names["threshold"] == "threshold_"  # a keyword of the language is never a bare name
    doc = yaml.safe_load(built.yaml_path.read_text())
    assert doc["blocks"]["cpu"]["signals"]["a"]["description"].endswith(nasty)
    assert built.gen.signals["cpu.a"].description.endswith(nasty)
    assert {"cpu.weird_ev_1", "uncore_imc.cas_count_read"} <= set(built.gen.signals)  # pmu@event@ → block pmu
    text = built.metrics_path.read_text()
    assert "\nmetric pwned" not in text and text.count("\nmetric ") == 2


def test_defined_events_keep_their_encoding_and_unused_ones_are_named(tmp_path, capsys):
    """A migrator: a Zen 3 file's 21 defined events were dropped in silence, and an event a metric reads
    kept only its description (EventCode 0x3c / UMask 0x2 lost)."""
    p = tmp_path / "m.json"
    p.write_text(
        json.dumps(
            [
                {"EventName": "my_ev", "EventCode": "0x3c", "UMask": "0x2", "BriefDescription": "My event."},
                {"EventName": "spare_ev", "EventCode": "0x10", "BriefDescription": "Unused."},
                {"MetricName": "my_rate", "MetricExpr": "my_ev / duration_time"},
            ]
        )
    )
    assert main(["import", "perf", str(p), "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "1 event definition(s) no metric reads are left out: spare_ev" in err
    doc = yaml.safe_load(next((tmp_path / "o").glob("*.yaml")).read_text())
    sig = next(s for b in doc["blocks"].values() for n, s in b["signals"].items() if n == "my_ev")
    assert sig["description"] == "My event. (EventCode 0x3c, UMask 0x2)"


def test_renames_are_said_and_a_kept_duplicate_keeps_its_name(tmp_path, capsys):
    """A migrator: of `ok1`, `OK1`, `ok1` the metric kept was named `ok1_3` (the rejected copies had
    taken `ok1` and `ok1_2`), an empty MetricName became metric `x` with no warning, and `héllo wörld` →
    `h_llo_w_rld` was said in the JSON's `names` only."""
    p = tmp_path / "m.json"
    p.write_text(
        json.dumps(
            [
                {"MetricName": "ok1", "MetricExpr": "a / b"},
                {"MetricName": "OK1", "MetricExpr": "b / a"},
                {"MetricName": "ok1", "MetricExpr": "a + b"},
                {"MetricName": "", "MetricExpr": "a"},
                {"MetricName": "héllo wörld", "MetricExpr": "a * 2"},
                {"MetricName": "twice", "MetricExpr": "ok1 * 2"},
            ]
        )
    )
    main(["import", "perf", str(p), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    text = next((tmp_path / "o").glob("*.metrics")).read_text()
    assert "metric ok1 [1] = cpu.a / cpu.b" in text and "metric twice [1] = ok1 * 2" in text and "ok1_3" not in text
    assert "#3: entry 3 has an empty MetricName" in err and "metric x " not in text
    assert "renamed (1; every name is in report.json's `names`):" in err
    assert "'héllo wörld' → h_llo_w_rld (characters a metric name cannot hold)" in err


def test_rejected_entries_take_no_name_and_a_pmu_qualified_event_is_read(tmp_path, capsys):
    """A review: an empty MetricName's rejection took `x` first (a kept `x` became `x_2`), and a defined
    event read as `cpu_core@MY_EV@` was reported unused and lost its encoding."""
    p = tmp_path / "m.json"
    p.write_text(
        json.dumps(
            [
                {"MetricName": "", "MetricExpr": "a"},
                {"EventName": "MY_EV", "EventCode": "0x3c", "BriefDescription": "My event."},
                {"MetricName": "x", "MetricExpr": "cpu_core@MY_EV@ / duration_time"},
            ]
        )
    )
    main(["import", "perf", str(p), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    text = next((tmp_path / "o").glob("*.metrics")).read_text()
    assert "metric x " in text and "x_2" not in text
    assert "left out" not in err
    doc = yaml.safe_load(next((tmp_path / "o").glob("*.yaml")).read_text())
    descs = [s["description"] for b in doc["blocks"].values() for s in b["signals"].values()]
    assert any("(EventCode 0x3c)" in d for d in descs), descs
