"""`perfonto export semconv`: the catalog as an OpenTelemetry semantic-conventions registry.

Weaver cannot be installed on this machine (no crates.io, no GitHub releases), so the registry is
validated against Weaver's published JSON schema (v0.25.1, vendored in tests/fixtures/weaver with its
source) and by `interop.semconv.lint` (the resolver's reference and naming checks). The same schema
accepts OpenTelemetry's own hardware-GPU registry and rejects broken documents, so the check can fail.
"""

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from perfonto.cli import main
from perfonto.interop.semconv import export, lint
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.compiler import compile_texts
from ref_windows import real_file

FIX = Path(__file__).parent / "fixtures" / "weaver"


def _validator():
    return jsonschema.Draft202012Validator(json.loads((FIX / "semconv.schema.v2.json").read_text()))


def _manifest_validator():
    schema = json.loads((FIX / "definition-manifest.v2.json").read_text())
    schema["$defs"]["SchemaUrl"] = {"type": "string", "format": "uri"}  # see fixtures/weaver/README.md
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def graph():
    return load_catalog(None, "sohu").graph


@pytest.fixture(scope="module")
def registry(graph):
    return export(graph)


def test_every_registry_file_validates_against_weavers_schema(registry):
    v = _validator()
    registry_files = [r for r in registry.files if r.startswith("registry/")]
    assert {"registry/attributes.yaml", "registry/metrics.yaml", "registry/signals.yaml"} <= set(registry_files)
    for rel in registry_files:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(yaml.safe_load(registry.files[rel]))]
        assert errors == [], (rel, errors[:5])
    manifest = yaml.safe_load(registry.files["manifest.yaml"])
    assert list(_manifest_validator().iter_errors(manifest)) == []
    assert lint(registry.files) == []


def test_schema_accepts_opentelemetrys_own_registry_file():
    real = real_file("otel-semconv_hardware_gpu-metrics.yaml")
    assert list(_validator().iter_errors(yaml.safe_load(real.read_text()))) == []


def test_schema_check_can_fail():
    v = _validator()
    doc = {
        "file_format": "definition/2",
        "metrics": [
            {"name": "perfonto.x", "brief": "x", "instrument": "gauge", "unit": "1", "stability": "development"}
        ],
    }
    assert list(v.iter_errors(doc)) == []
    for breakage in (
        lambda d: d["metrics"][0].update(instrument="meter"),
        lambda d: d["metrics"][0].pop("unit"),
        lambda d: d["metrics"][0].update(stability="experimental"),
        lambda d: d.update(file_format="definition/1"),
        lambda d: d["metrics"][0].update(colour="red"),
    ):
        bad = copy.deepcopy(doc)
        breakage(bad)
        assert list(v.iter_errors(bad)), bad


def test_lint_finds_dangling_refs_and_duplicates(registry):
    files = dict(registry.files)
    attrs = yaml.safe_load(files["registry/attributes.yaml"])
    attrs["attributes"] = [a for a in attrs["attributes"] if a["key"] != "perfonto.hbm.stack"]
    files["registry/attributes.yaml"] = yaml.safe_dump(attrs)
    sig = yaml.safe_load(files["registry/signals.yaml"])
    sig["metrics"].append(dict(sig["metrics"][0]))
    files["registry/signals.yaml"] = yaml.safe_dump(sig)
    problems = lint(files)
    assert any("`perfonto.hbm.stack` is not defined" in p for p in problems)
    assert any(f"metric `{sig['metrics'][0]['name']}` is also defined" in p for p in problems)


def test_metrics_carry_instrument_unit_and_axes(graph):
    extra = 'metric hbm.stack_read_bytes [GB] = hbm.read_bytes\n  "Bytes read per stack."\n'
    g = compile_texts(graph.generation, {"x.metrics": extra})
    reg = export(g)
    metrics = {m["name"]: m for m in yaml.safe_load(reg.files["registry/metrics.yaml"])["metrics"]}
    m = metrics["perfonto.hbm.stack_read_bytes"]
    assert (m["instrument"], m["unit"]) == ("counter", "By")
    assert [a["ref"] for a in m["attributes"]] == ["perfonto.chip", "perfonto.hbm.stack"]
    assert m["annotations"]["perfonto"]["factor"] == 1e9
    keys = {a["key"]: a for a in yaml.safe_load(reg.files["registry/attributes.yaml"])["attributes"]}
    assert keys["perfonto.hbm.stack"]["type"] == "int" and keys["perfonto.hbm.stack"]["examples"] == [0, 5]


def test_shipped_catalog_names_types_and_units(registry, graph):
    metrics = {m["name"]: m for m in yaml.safe_load(registry.files["registry/metrics.yaml"])["metrics"]}
    assert len(metrics) == len(graph.metrics)
    assert (metrics["perfonto.hbm.read_bandwidth"]["instrument"], metrics["perfonto.hbm.read_bandwidth"]["unit"]) == (
        "gauge",
        "By/s",
    )
    assert (metrics["perfonto.mfu"]["unit"], metrics["perfonto.mfu"]["annotations"]["perfonto"]["factor"]) == (
        "1",
        0.01,
    )
    assert metrics["perfonto.hbm.bytes"]["instrument"] == "counter"
    assert metrics["perfonto.power.temperature_peak"]["unit"] == "Cel"
    assert metrics["perfonto.energy_per_token"]["unit"] == "J/{token}"
    signals = {m["name"]: m for m in yaml.safe_load(registry.files["registry/signals.yaml"])["metrics"]}
    assert signals["perfonto.hbm.read_bytes"]["instrument"] == "counter"
    assert "perfonto.power.status" not in signals and "perfonto.power.status.pstate" in signals  # packed: its fields
    assert "ttft_p50" in registry.skipped
    records = {m["name"]: m for m in yaml.safe_load(registry.files["registry/records.yaml"])["metrics"]}
    assert (records["perfonto.ttft"]["instrument"], records["perfonto.ttft"]["unit"]) == ("histogram", "s")


def test_cli_writes_the_registry(tmp_path, capsys):
    out = tmp_path / "semconv"
    assert main(["export", "semconv", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    from perfonto.metrics.catalog import load_catalog

    assert (
        doc["ok"] and doc["problems"] == [] and doc["metrics"] == len(load_catalog().graph.metrics)
    )  # every window metric
    assert (out / "manifest.yaml").exists() and (out / "registry" / "metrics.yaml").exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["export", "semconv", "--out", str(blocker), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "is a file, not a folder" in doc["error"]


@pytest.mark.skipif(
    shutil.which("weaver") is None,
    reason="OpenTelemetry Weaver is not installed (a Rust binary; "
    "crates.io and GitHub releases are out of reach here): the registry is checked against its JSON schema above",
)
def test_weaver_registry_check(tmp_path):
    import subprocess

    export(load_catalog(None, "sohu").graph).write(tmp_path / "reg")
    r = subprocess.run(
        ["weaver", "registry", "check", "-r", str(tmp_path / "reg")], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
