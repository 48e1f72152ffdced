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
