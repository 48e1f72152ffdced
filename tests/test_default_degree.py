"""A literal default stands for x, so it takes x's chip degree even where the generation lacks x's signal
(``metrics.optional.type_default``): `default(sum(c2c.retries), 6 event) / seq.elapsed_cycles` is a ratio
of per-chip amounts (retries per cycle), which a generation without the retry counter compiled as a
literal of degree 0 over cycles of degree 1, a `chip-degree` error ("scales as chips^-1").

Server-level numbers by hand, one window, two chips with 1000 and 3000 elapsed cycles: each chip's 6
retries over its cycles are 6/1000 = 0.006 and 6/3000 = 0.002; the server's ratio of totals is
(6 + 6) / (1000 + 3000) = 0.003 (a default of degree 0 would give 6 / 4000 = 0.0015)."""

from pathlib import Path

import numpy as np
import pytest

from perfonto.metrics.compiler import compile_texts
from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.levels import evaluate_levels
from perfonto.metrics.optional import fill_defaults
from perfonto.metrics.windows import Windows
from perfonto.ontology.loader import load_generation

METRIC = (
    "metric my.retries_per_cycle [event/core_cycle] = default(sum(c2c.retries), 6 event) / seq.elapsed_cycles\n"
    '  "Link retries per core cycle."\n'
)


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    d = tmp_path / "cat"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def _levels(graph, cycles: list[float]):
    """Per-chip and server values over one 1 ms window, every signal 0 but the chips' elapsed cycles."""
    gen = graph.generation
    C = len(cycles)
    v = {n: np.zeros((1, C) + tuple(s for _, s in sig.axes)) for n, sig in gen.signals.items()}
    v["seq.elapsed_cycles"][0, :] = cycles
    w = Windows(np.full((1, C), 1e-3), v, 1.0)
    return evaluate_levels(graph, w, lambda vals, i, c: evaluate(graph, Windows(i, vals, c)))


def test_a_removed_renamed_signal_default_is_a_ratio(tmp_path, capsys):
    """`caelius` renames `c2c.retries` to `c2c.replays`; its child removes `c2c.replays`."""
    d = _folder(
        tmp_path,
        {
            "caelius3.yaml": "generation: caelius3\nextends: caelius\ndescription: no replay counter\n"
            "removed: [c2c.replays]\n",
            "my.metrics": METRIC,
        },
    )
    cat = load_catalog(d, None, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    m = cat.graph.metrics["my.retries_per_cycle"]
    assert m.degree == 0 and m.signal_deps == ("seq.elapsed_cycles",)
    lv = _levels(cat.graph, [1000.0, 3000.0])
    np.testing.assert_allclose(lv.per_chip["my.retries_per_cycle"], [0.006, 0.002], rtol=1e-12)
    assert float(lv.server["my.retries_per_cycle"]) == pytest.approx(0.003, rel=1e-12)
    assert main(["check", "--catalog", str(d)]) == 0
    assert "chip-degree" not in "".join(capsys.readouterr())


def test_the_degree_comes_from_the_parent_in_the_folder(tmp_path):
    """A user's parent generation beside the child declares the signal the child removes."""
    block = (
        "description: a test generation\nclock_domains:\n"
        "  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: test}}\n"
        "blocks:\n  b:\n    description: a block\n    clock: core\n    instances: {lane: 4}\n    signals:\n"
        "      cycles: {kind: counter, unit: core_cycle, width: 48, description: elapsed cycles}\n"
        "      retries: {kind: counter, unit: event, width: 32, description: retries}\n"
    )
    d = _folder(
        tmp_path,
        {
            "p.yaml": "generation: p\n" + block,
            "c.yaml": "generation: c\nextends: p\ndescription: x\nremoved: [b.retries]\n",
        },
    )
    gen, diags = load_generation(d / "c.yaml")
    assert gen is not None and "b.retries" not in gen.signals, [x.render() for x in diags]
    src = (
        'metric t.rate [event/core_cycle] = default(sum(b.retries), 2 event) / avg(b.cycles)\n  "Retries per cycle."\n'
    )
    g = compile_texts(gen, {"t.metrics": src})
    assert not g.errors, [x.render() for x in g.errors]
    assert g.metrics["t.rate"].degree == 0


def test_a_name_declared_nowhere_keeps_a_clear_error(tmp_path):
    """No generation known here declares `c2c.nosuch`: its degree is unknown, and the metric is reported
    at file:line:col as before (the unknown-name warning names it), never a traceback."""
    d = _folder(
        tmp_path,
        {"my.metrics": METRIC.replace("c2c.retries", "c2c.nosuch")},
    )
    cat = load_catalog(d, "sohu", cache=False)
    codes = {(x.code, x.span.line) for x in cat.diagnostics}
    assert ("unknown-name", 1) in codes and ("chip-degree", 1) in codes
    (err,) = [x for x in cat.diagnostics if x.code == "chip-degree"]
    assert err.span.file == str(d / "my.metrics") and err.span.col == 50


def test_a_signal_absent_from_the_dump_reads_the_default_per_chip(tmp_path):
    """The same metric on `sohu`, which has the counter, over a dump without it (``fill_defaults``):
    the default compiled with x's degree, so the server value is the same ratio of totals."""
    d = _folder(tmp_path, {"my.metrics": METRIC})
    cat = load_catalog(d, "sohu", cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    graph = fill_defaults(cat.graph, {"c2c.retries"})
    assert graph.metrics["my.retries_per_cycle"].signal_deps == ("seq.elapsed_cycles",)
    lv = _levels(graph, [1000.0, 3000.0])
    np.testing.assert_allclose(lv.per_chip["my.retries_per_cycle"], [0.006, 0.002], rtol=1e-12)
    assert float(lv.server["my.retries_per_cycle"]) == pytest.approx(0.003, rel=1e-12)
