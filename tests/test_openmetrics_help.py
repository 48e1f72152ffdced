"""Issue 28, defect 6: raw CR, other control characters and U+2028/U+2029 from a description never
reach a `# HELP` line of `perfonto serve`'s exposition (prometheus_client escapes only `\\` and LF)."""

from __future__ import annotations

from prometheus_client.openmetrics import exposition

from perfonto.analysis.evaluate import load_evaluator
from perfonto.analysis.live import LiveMetrics
from perfonto.analysis.openmetrics import LiveCollector, registry_for
from perfonto.codegen.python_evaluator import generate
from perfonto.ontology import load_generation

from helpers import compile_src


def test_help_lines_stay_one_line(tmp_path):
    gen = load_generation("sohu")[0]
    graph = compile_src(
        gen,
        'metric evil.help [B] = hbm.read_bytes\n  "one\\rtwo\\u2028three\\u2029four\\u0085five\\x1bsix \\\\ seven"\n',
    )
    assert not graph.errors, [d.render() for d in graph.errors]
    (tmp_path / "ev.py").write_text(generate(graph))
    live = LiveMetrics(graph, load_evaluator(tmp_path / "ev.py"), "h")
    text = exposition.generate_latest(
        registry_for(
            LiveCollector(
                live, {"generation": "sohu", "catalog_hash": "x", "version": "0"}, lambda: {"errors": 0, "lag_s": None}
            )
        )
    ).decode()
    help_lines = [ln for ln in text.split("\n") if ln.startswith("# HELP perfonto_evil_help")]
    assert help_lines, text[:500]
    for ln in help_lines:
        assert not any(c in ln for c in "\r\u2028\u2029\x85\x1b"), repr(ln)
        assert "one two three four five six" in ln
    assert all(c not in text for c in "\r\u2028\u2029\x85\x1b")
