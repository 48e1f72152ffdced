"""A catalog folder whose generation extends Sohu inherits Sohu's ``report:``; its own metric files'
metrics were in neither the terminal report nor the HTML page (an architect's `noc.*` metrics appeared
zero times; declaring a report of its own replaced Sohu's headline). They are now shown after what the
inherited report declares: in the headline and a per-chip group of their own. A generation that declares
its own report shows exactly that; the shipped Sohu report is unchanged."""

from __future__ import annotations

import json

from perfonto.cli import main

CHILD = """generation: sohu_mine
extends: sohu
description: Sohu with one metric of our own
"""
MINE = """metric my.hbm_share [percent] = hbm.bandwidth / spec.hbm.peak_bandwidth
  "HBM bandwidth over its peak, as our dashboards name it."
  groups memory
"""


def _report(tmp_path, capsys, child: str = CHILD) -> dict:
    d = tmp_path / "cat"
    d.mkdir()
    (d / "g.yaml").write_text(child)
    (d / "mine.metrics").write_text(MINE)
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "--duration",
                "0.1s",
                "--chips",
                "2",
                "--model",
                "llama-3.1-8b",
                "--catalog",
                str(d),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    return json.loads((out / "report.json").read_text())["report"] | {"text": text}


def test_a_childs_own_metrics_follow_the_inherited_report(tmp_path, capsys):
    rep = _report(tmp_path, capsys)
    assert rep["declared"] and "mfu" in rep["headline"] and rep["headline"][-1] == "my.hbm_share"
    title = "sohu_mine's own metrics"
    assert rep["groups"][title] == ["my.hbm_share"]
    assert "my.hbm_share" in rep["text"] and title in rep["text"]


def test_a_generation_declaring_its_report_shows_what_it_declares(tmp_path, capsys):
    own = CHILD + "report:\n  headline: [mfu, my.hbm_share]\n  groups: {Ours: [my.hbm_share]}\n"
    rep = _report(tmp_path, capsys, own)
    assert rep["headline"] == ["mfu", "my.hbm_share"] and list(rep["groups"]) == ["Ours"]
