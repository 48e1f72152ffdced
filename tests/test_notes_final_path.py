"""Notes name the final output folder, never the hidden temporary one it is written in
(``.NAME.tmp-RUNID``, renamed into place at the end)."""

from __future__ import annotations

import json

import perfonto.job as job
from perfonto.cli import main


def test_a_note_about_the_trace_names_the_final_path(tmp_path, monkeypatch, capsys):
    real = job.analyse_capture

    def with_trace_note(graph, capture, **kw):  # what analysis.groups says of a trace without op spans
        report = real(graph, capture, **kw)
        report.notes.append(f"{capture.trace}: the trace holds no device op spans for the dump's chips")
        return report

    monkeypatch.setattr(job, "analyse_capture", with_trace_note)
    out = tmp_path / "r3"
    assert main(["run", "--duration", "100ms", "--chips", "1", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    note = next(n for n in doc["notes"] if "no device op spans" in n)
    assert note == f"{out}/trace.parquet: the trace holds no device op spans for the dump's chips"
    assert not any(".tmp-" in n for n in doc["notes"])
    saved = json.loads((out / "report.json").read_text())
    assert not any(".tmp-" in n for n in saved["notes"])
