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


def test_a_counters_help_says_it_is_a_running_total(tmp_path):
    """An SRE read `perfonto_hbm_bytes_total`'s HELP ("… in the window", the catalog's description of one
    window's amount) while the value served is the total since the server started."""
    gen = load_generation("sohu")[0]
    graph = compile_src(
        gen,
        'metric rb [B] = sum(hbm.read_bytes)\n  "Bytes read in the window."\n'
        'metric bw [GB/s] = sum(hbm.read_bytes) / interval\n  "Read bandwidth over the window."\n',
    )
    assert not graph.errors, [d.render() for d in graph.errors]
    (tmp_path / "ev.py").write_text(generate(graph))
    live = LiveMetrics(graph, load_evaluator(tmp_path / "ev.py"), "h")
    info = {"generation": "sohu", "catalog_hash": "x", "version": "0"}
    text = exposition.generate_latest(
        registry_for(LiveCollector(live, info, lambda: {"errors": 0, "lag_s": None}))
    ).decode()
    helps = {ln.split()[2]: ln for ln in text.split("\n") if ln.startswith("# HELP perfonto_")}
    (counter,) = [h for n, h in helps.items() if n.startswith("perfonto_rb")]
    (gauge,) = [h for n, h in helps.items() if n.startswith("perfonto_bw")]
    assert "served as the running total since the server started" in counter, counter
    assert "running total" not in gauge, gauge
