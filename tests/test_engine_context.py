"""An emulated run analysed by the embedded engine (as by Spark: ``analysis.fleet_capture``) keeps the run's
context — its preset, assumptions, the public claim and the offline queue — which those engines left out of
report.json and the terminal with no note; the trace's time split, made by the in-memory engine only, is
named in a note."""

from __future__ import annotations

import json

from perfonto.cli import main


def test_the_embedded_engine_reports_the_emulated_runs_context(tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["run", "--duration", "300ms", "--chips", "2", "--out", str(run)]) == 0
    reports = {}
    for engine in ("memory", "embedded"):
        assert main(["analyze", str(run), "--engine", engine, "--out", str(tmp_path / engine)]) == 0
        reports[engine] = json.loads((tmp_path / engine / "report.json").read_text())
    said = capsys.readouterr()
    text = " ".join((said.out + said.err).split())  # the notes, as the terminal wraps them
    mem, emb = reports["memory"], reports["embedded"]
    for key in ("assumptions", "preset", "preset_says", "claim", "offline_queued_s"):
        assert key in mem and emb.get(key) == mem[key], key
    assert mem["time_split"] is not None and emb.get("time_split") is None
    assert "the trace's time split (compute, communication, overlap, idle) are made by the in-memory engine" in text


def test_with_by_op_the_time_split_is_still_named(tmp_path, capsys):
    """With ``--by op`` the note on the per-op attribution gave way to the --by one, and the time split
    the embedded engine skips went unsaid."""
    run = tmp_path / "r"
    assert main(["run", "--duration", "300ms", "--chips", "2", "--out", str(run)]) == 0
    assert main(["analyze", str(run), "--engine", "embedded", "--by", "op", "--out", str(tmp_path / "e")]) == 0
    said = capsys.readouterr()
    text = " ".join((said.out + said.err).split())
    assert "--by op is evaluated by the in-memory engine only" in text
    assert "the trace's time split (compute, communication, overlap, idle) is made by the in-memory engine" in text
