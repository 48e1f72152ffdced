"""A finding rule that names a metric unavailable on the generation is noted once, even where the rule
names that metric twice: the library's link-transfer rule lists `c2c.retry_rate` both as evidence and as
a next step, and a generation without `c2c.retries` printed its note twice. Only a rule whose own metric
is unavailable is left out; this one fires without its retry-rate evidence (its finding names it)."""

from pathlib import Path

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog

RULE = "finding `topdown.interconnect.link_transfer` fires without `c2c.retry_rate`: unavailable"


def _no_retries(tmp_path: Path) -> Path:
    d = tmp_path / "cat"
    d.mkdir()
    (d / "sohu2.yaml").write_text(
        "generation: sohu2\nextends: sohu\ndescription: no link retry counter\nremoved: [c2c.retries]\n"
    )
    return d


def test_the_left_out_note_is_given_once(tmp_path):
    cat = load_catalog(_no_retries(tmp_path), None, cache=False)
    assert not cat.errors, [d.render() for d in cat.errors]
    notes = [n for n in cat.notes if RULE in n]
    assert len(notes) == 1, notes
    assert "signal `c2c.retries` was removed in generation `sohu2`" in notes[0]
    assert "topdown.interconnect.link_transfer" in {r.metric for r in cat.graph.findings}  # kept: it fires


def test_the_command_prints_it_once(tmp_path, capsys):
    assert main(["check", "--catalog", str(_no_retries(tmp_path))]) == 0
    out = "".join(capsys.readouterr())
    assert out.count(RULE) == 1, out
