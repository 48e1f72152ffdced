"""`--catalog DIR` for the commands that read generations (`diff`, `compare`) and run vectors (`test`),
and `diff`'s spec constants compared as quantities: what an architect found with a folder holding
`caelius.yaml` (extending the shipped `sohu`), `caelius.metrics` and `caelius.vectors.yaml`."""

import json

import pytest

from perfonto.cli import main

#: A folder's own `caelius`, unlike the shipped one: it extends sohu with an on-chip NoC and nothing else.
CAELIUS_YAML = """\
generation: caelius
extends: sohu
description: Caelius as an architect plans it, with an on-chip NoC block.

clock_domains:
  noc:
    description: On-chip interconnect clock.
    frequency: {value: 2.0, unit: GHz, provenance: assumed, source: "architect's plan"}

spec:
  noc.link_peak_bandwidth: {value: 512, unit: GB/s, scope: instance, provenance: assumed, description: One link's peak.}

blocks:
  noc:
    description: On-chip interconnect, one instance per link.
    clock: noc
    instances: {link: 16}
    signals:
      tx_bytes:
        kind: counter
        unit: B
        width: 48
        description: Bytes carried by the link.
        emulator: {linear: {dma_bytes: 1}, split: jitter}
"""

CAELIUS_METRICS = """\
metric noc.link_utilization [percent] = avg(noc.tx_bytes / (spec.noc.link_peak_bandwidth * interval))
  "Mean NoC link utilisation."
  groups interconnect, noc, utilization
  bounds 0 .. 100
"""

CAELIUS_VECTORS = """\
generation: caelius
vectors:
  - name: noc half busy
    interval: 1 ms
    inputs:
      noc.tx_bytes: 2.56e8
    expect:
      noc.link_utilization: 50
"""

#: A generation that overrides two sohu constants in other units with the same values, and two clocks
#: in MHz: the core's by a plain change, the link's by 500 Hz (``str.format`` field ``{extra}``: more spec lines).
SOHU_MHZ_YAML = """\
generation: sohu_mhz
extends: sohu
description: sohu's figures written in other units, and two clock changes in MHz.

clock_domains:
  core:
    description: Matrix, vector, SRAM, DMA and sequencer clock.
    frequency: {{value: 1600, unit: MHz, provenance: assumed}}
  link:
    description: Chip-to-chip links.
    frequency: {{value: 1600.0005, unit: MHz, provenance: assumed}}

spec:
  hbm.peak_bandwidth: {{value: 7200, unit: GB/s, provenance: assumed}}
  sram.capacity: {{value: 262144, unit: KiB, provenance: assumed}}
{extra}"""


@pytest.fixture
def cat(tmp_path):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "caelius.yaml").write_text(CAELIUS_YAML)
    (d / "caelius.metrics").write_text(CAELIUS_METRICS)
    (d / "caelius.vectors.yaml").write_text(CAELIUS_VECTORS)
    return d


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


# --- diff --catalog --------------------------------------------------------------------------------


def test_diff_catalog_takes_the_folders_generation_and_the_shipped_one_it_lacks(cat, capsys):
    assert main(["diff", "sohu", "caelius", "--catalog", str(cat), "--json"]) == 0
    doc = _json(capsys)
    assert (doc["old"], doc["new"]) == ("sohu", "caelius")
    assert doc["signals"]["added"] == ["noc.tx_bytes"]  # the folder's caelius, not the shipped one
    assert doc["signals"]["removed"] == [] and doc["signals"]["renamed"] == []
    assert {c["constant"] for c in doc["spec"]} == {"spec.clock.noc", "spec.noc.link_peak_bandwidth"}


def test_diff_catalog_keeps_the_yaml_path_form(cat, capsys):
    assert main(["diff", "sohu", str(cat / "caelius.yaml"), "--json"]) == 0
    plain = _json(capsys)
    assert main(["diff", "sohu", str(cat / "caelius.yaml"), "--catalog", str(cat), "--json"]) == 0
    folder = _json(capsys)
    assert {k: v for k, v in folder.items() if k != "metrics"} == {k: v for k, v in plain.items() if k != "metrics"}
    assert plain["signals"]["added"] == ["noc.tx_bytes"]
    # with --catalog the folder's own metric files are compiled too (the YAML alone: the shipped library)
    assert plain["metrics"]["added"] == [] and folder["metrics"]["added"] == ["noc.link_utilization"]


def test_diff_catalog_name_in_neither_is_a_usage_error_naming_both(cat, capsys):
    assert main(["diff", "sohu", "caelus", "--catalog", str(cat)]) == 2
    err = capsys.readouterr().err
    assert f"cannot load generation `caelus` (neither {cat} nor the shipped generations declare it)" in err
    assert f"{cat}: error[unknown-generation]: no file declares `generation: caelus`" in err
    assert "did you mean `caelius`?" in err and "--generation" not in err  # diff takes no --generation
    assert "Traceback" not in err


def test_diff_catalog_that_is_not_a_folder_says_so(tmp_path, capsys):
    missing = tmp_path / "nosuch"
    assert main(["diff", "sohu", "caelius", "--catalog", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"--catalog {missing}: not a catalog folder" in err and "Traceback" not in err


def test_diff_catalog_generation_that_does_not_load_points_at_its_line(tmp_path, capsys):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "caelius.yaml").write_text(
        "generation: caelius\nextends: sohu\ndescription: x\nspec:\n"
        "  hbm.peak_bandwidth: {value: 1, unit: s, provenance: assumed}\n"
    )
    assert main(["diff", "sohu", "caelius", "--catalog", str(d)]) == 1
    err = capsys.readouterr().err
    assert "caelius.yaml:5:" in err and "unit-mismatch" in err
    assert f"perfonto check --catalog {d} --generation caelius" in err


# --- diff: spec constants as quantities ------------------------------------------------------------


def _spec_diff(tmp_path, capsys, extra: str = "") -> dict:
    child = tmp_path / "sohu_mhz.yaml"
    child.write_text(SOHU_MHZ_YAML.format(extra=extra))
    assert main(["diff", "sohu", str(child), "--json"]) == 0
    return {c["constant"]: (c["old"], c["new"]) for c in _json(capsys)["spec"]}


def test_diff_a_value_written_in_another_unit_is_no_change(tmp_path, capsys):
    spec = _spec_diff(tmp_path, capsys)
    assert "spec.hbm.peak_bandwidth" not in spec  # 7.2 TB/s -> 7200 GB/s
    assert "spec.sram.capacity" not in spec  # 256 MiB -> 262144 KiB


def test_diff_lists_clock_changes_given_in_mhz_in_ghz(tmp_path, capsys):
    spec = _spec_diff(tmp_path, capsys)
    # 500 Hz on 1.6 GHz: %g printed both sides as 1.6e+09 and the change was left out
    assert "spec.clock.link" in spec
    assert spec["spec.clock.link"] == ("1.6 GHz (assumed)", "1.6000005 GHz (assumed)")
    assert spec["spec.clock.core"] == ("1.5 GHz (assumed)", "1.6 GHz (assumed)")


def test_diff_still_lists_real_changes_and_provenance_in_another_unit(tmp_path, capsys):
    extra = (
        "  power.tdp: {value: 0.7, unit: kW, provenance: claimed}\n"
        "  power.idle: {value: 0.1, unit: kW, provenance: assumed}\n"
    )
    spec = _spec_diff(tmp_path, capsys, extra)
    assert spec["spec.power.tdp"] == ("700 W (assumed)", "0.7 kW (claimed)")  # same figure, now claimed
    assert spec["spec.power.idle"] == ("90 W (assumed)", "0.1 kW (assumed)")  # 90 W -> 100 W


def test_diff_text_output_lists_no_unchanged_constant(tmp_path, capsys):
    child = tmp_path / "sohu_mhz.yaml"
    child.write_text(SOHU_MHZ_YAML.format(extra=""))
    assert main(["diff", "sohu", str(child)]) == 0
    out = capsys.readouterr().out
    assert "spec constants changed (2):" in out and "peak_bandwidth" not in out
    assert "spec.clock.core: 1.5 GHz (assumed) -> 1.6 GHz (assumed)" in out


# --- test --catalog ---------------------------------------------------------------------------------


def test_test_catalog_runs_the_folders_vectors(cat, capsys):
    assert main(["test", "--catalog", str(cat), "--json"]) == 0
    doc = _json(capsys)
    assert (doc["passed"], doc["failed"], doc["diagnostics"]) == (2, 0, [])  # one expectation, both evaluators


def test_test_catalog_catches_a_failing_vector_of_the_folder(cat, capsys):
    (cat / "caelius.vectors.yaml").write_text(
        CAELIUS_VECTORS.replace("noc.link_utilization: 50", "noc.link_utilization: 60")
    )
    assert main(["test", "--catalog", str(cat)]) == 1
    out = capsys.readouterr().out
    assert "caelius.vectors.yaml:" in out and "FAIL 'noc half busy': noc.link_utilization" in out


def test_test_catalog_without_vectors_says_what_to_do(cat, capsys):
    (cat / "caelius.vectors.yaml").unlink()
    assert main(["test", "--catalog", str(cat)]) == 1
    err = capsys.readouterr().err
    assert f"no test vectors (*.vectors.yaml) in the --catalog folder {cat}; add a <name>.vectors.yaml there" in err


def test_test_path_still_wins_over_the_catalog_folder(cat, tmp_path, capsys):
    other = tmp_path / "vec"
    other.mkdir()
    (other / "x.vectors.yaml").write_text(CAELIUS_VECTORS.replace("noc half busy", "from PATH"))
    (cat / "caelius.vectors.yaml").write_text(
        CAELIUS_VECTORS.replace("noc.link_utilization: 50", "noc.link_utilization: 60")
    )
    assert main(["test", str(other), "--catalog", str(cat), "--json"]) == 0  # the folder's failing vector is not run
    assert _json(capsys)["passed"] == 2


# --- compare --catalog ------------------------------------------------------------------------------

WORKLOAD = ["--model", "llama-3.1-8b", "--chips", "1", "--isl", "128", "--osl", "16", "--requests", "20"]


def test_compare_catalog_runs_the_folders_generation_against_the_shipped_one(cat, capsys):
    assert main(["compare", "sohu", "caelius", "--catalog", str(cat), *WORKLOAD, "--json"]) == 0
    doc = _json(capsys)
    assert (doc["a"], doc["b"]) == ("sohu", "caelius")
    # the folder's caelius adds a NoC clock and changes none of sohu's figures; the shipped one adds FP4
    assert any("spec.clock.noc" in x for x in doc["not_moved"])
    assert not any("peak_flops_fp4" in x for x in doc["not_moved"])


def test_compare_catalog_name_in_neither_is_a_usage_error(cat, capsys):
    assert main(["compare", "sohu", "caelus", "--catalog", str(cat), *WORKLOAD]) == 2
    err = capsys.readouterr().err
    assert f"cannot load generation `caelus` (neither {cat} nor the shipped generations declare it)" in err
    assert "did you mean `caelius`?" in err and "Traceback" not in err


def test_diff_with_a_catalog_lists_the_folders_own_metrics(tmp_path, capsys):
    """A new user's two metrics of a folder generation extending sohu were missing from `diff --catalog`
    (it compiled the shipped library only, and listed no metric added)."""
    d = tmp_path / "mine"
    d.mkdir()
    (d / "g.yaml").write_text("generation: sohu_mine\nextends: sohu\ndescription: one metric more\n")
    (d / "m.metrics").write_text(
        'metric my.hbm_share [percent] = hbm.bandwidth / spec.hbm.peak_bandwidth\n  "HBM bandwidth over its peak."\n'
    )
    assert main(["diff", "sohu", "sohu_mine", "--catalog", str(d), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["metrics"]["added"] == ["my.hbm_share"] and doc["metrics"]["removed"] == []
    assert main(["diff", "sohu", "sohu_mine", "--catalog", str(d)]) == 0
    assert "metrics added (1): my.hbm_share" in capsys.readouterr().out
