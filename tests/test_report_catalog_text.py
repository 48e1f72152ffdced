"""Text from a user's catalog (threshold messages, finding titles, descriptions) is printed as it is
written: never read as rich markup (a `[/x]` in a threshold message crashed `perfonto run` after the whole
run, and `[dim]` in a header vanished) and never sent to the terminal as control characters."""

from __future__ import annotations

from perfonto.cli import main

METRICS = """metric hbm.rb [GB/s] = sum(hbm.read_bytes) / interval
  "HBM read bandwidth, raw \x1b[31mESC in its description."
  groups memory
  threshold > 0 [GB/s]: "see [/x] and [dim]this[/dim]"
"""
FINDINGS = """findings:
  - metric: hbm.rb
    title: "reads [/t] bound \\e[31mRED"
    share: topdown.memory_bound
    why: "a [bold]why[/bold] with brackets"
"""


def test_catalog_text_with_brackets_and_escapes_prints_verbatim(tmp_path, capsys):
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "a.metrics").write_text(METRICS, encoding="utf-8")
    (cat / "mine.findings.yaml").write_text(FINDINGS, encoding="utf-8")
    argv = ["run", "--catalog", str(cat), "--duration", "20ms", "--chips", "1", "--warmup-steps", "0"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "see [/x] and [dim]this[/dim]" in out  # the threshold message, whole
    assert "reads [/t] bound \\x1b[31mRED" in out and "\x1b" not in out  # the finding's title, escaped
    assert "a [bold]why[/bold] with brackets" in out
    assert main(["explain", "hbm.rb", "--catalog", str(cat)]) == 0
    text = capsys.readouterr().out
    assert "raw \\x1b[31mESC" in text and "\x1b" not in text
