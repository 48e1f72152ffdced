"""`perfonto project --catalog DIR` projects the generation a catalog folder declares — future silicon
extending a shipped one — as `sweep` and `run` already did (a breaker found `project --generation
sohu_next` said only "no generation named sohu_next", with no way to point it at the folder)."""

from __future__ import annotations

import json

from perfonto.cli import main

NEXT = """generation: sohu_next
extends: sohu
description: Sohu with twice the HBM bandwidth (a what-if)
spec:
  hbm.peak_bandwidth: {value: 14.4, unit: TB/s, provenance: assumed, source: what-if, description: HBM bandwidth.}
"""


def _steady(capsys, *argv) -> dict:
    assert main(["project", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_project_reads_a_catalog_folders_generation(tmp_path, capsys):
    (tmp_path / "next.yaml").write_text(NEXT)
    base = _steady(capsys)
    doc = _steady(capsys, "--catalog", str(tmp_path))
    assert doc["generation"] == "sohu_next" and base["generation"] == "sohu"
    # twice the HBM bandwidth: faster, and less than twice (the matrix work and the collectives stay)
    ratio = doc["steady_tokens_per_second"] / base["steady_tokens_per_second"]
    assert 1.02 < ratio < 2.0


def test_a_misspelt_spec_override_is_caught(tmp_path, capsys):
    """`hbm.peak_bandwith` in a generation extending sohu left sohu's 7.2 TB/s in force: project printed
    sohu's own figure, rc 0 (a new user's what-if). check warns; the emulator refuses it."""
    (tmp_path / "g.yaml").write_text(NEXT.replace("hbm.peak_bandwidth", "hbm.peak_bandwith"))
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "warning[lint-spec-near-miss]: spec constant `spec.hbm.peak_bandwith`" in out.out + out.err
    assert main(["project", "--catalog", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "g.yaml:5: spec constant `spec.hbm.peak_bandwith` is new in `sohu_next`" in err
    assert "did you mean `hbm.peak_bandwidth`?" in err


def test_project_names_the_file_line_of_a_bad_generation_and_refuses_an_unknown_name(tmp_path, capsys):
    (tmp_path / "g.yaml").write_text(NEXT.replace("provenance", "provenence"))
    assert main(["project", "--catalog", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "generation `sohu_next` does not load:" in err and "g.yaml:5:" in err and "provenence" in err  # was `None`
    assert main(["project", "--generation", "sohuu"]) == 2  # a usage error, as for run
    assert "did you mean `sohu`?" in capsys.readouterr().err
