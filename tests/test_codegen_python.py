"""The generated Python evaluator: its structure (topological order, common subexpressions once,
folded constants, no loop over samples, bounded temporaries), catalog text that cannot inject code,
and the streaming class (baseline, absent chips, blocks equal to samples)."""

import ast
import tracemalloc

import numpy as np
import pytest

from perfonto.codegen.python_evaluator import generate, load
from helpers import compile_src
from perfonto.metrics.interpreter import evaluate

SRC = """
metric a.rate [GB/s] = sum(hbm.read_bytes + hbm.write_bytes) / interval
  "rate"
metric a.per_cycle [B/core_cycle] = sum(hbm.read_bytes + hbm.write_bytes) / seq.elapsed_cycles
  "shares the sum with a.rate"
metric a.scaled [TB/s] = a.rate * 1000 / 1000000
  "a chain of constant factors"
metric a.share [percent] = a.rate / (spec.hbm.peak_bandwidth)
  "a metric of a metric"
"""


@pytest.fixture(scope="module")
def graph(sohu):
    g = compile_src(sohu, SRC)
    assert not g.errors, [d.render() for d in g.errors]
    return g


def _fn(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_structure(graph):
    src = generate(graph)
    body = ast.unparse(_fn(src, "_metrics"))
    assert body.count("hbm") == 0  # names only in the tables, as string constants
    assert body.count("s0 + s1") == 1  # the shared sum(read + write) is computed once
    assert "1e-06" in body and "1000.0 /" not in body  # a.rate * 1000 / 1e6: the factors fold into one constant
    order = [n for n in graph.metrics]
    assert order.index("a.rate") < order.index("a.scaled") and order.index("a.rate") < order.index("a.share")
    for fn in ("_metrics", "_metrics_one", "_windows", "evaluate"):
        loops = [n for n in ast.walk(_fn(src, fn)) if isinstance(n, (ast.For, ast.While))]
        if fn in ("_metrics", "_metrics_one"):
            assert not loops, fn  # no Python loop at all in the formulas
    assert all(
        isinstance(n, ast.Import) and [a.name for a in n.names] == ["numpy"]
        for n in ast.parse(src).body
        if isinstance(n, (ast.Import, ast.ImportFrom))
    )


def test_evaluate_is_chunked_and_matches_the_interpreter(graph, sohu):
    """Memory for W windows: the outputs plus a bounded number of chunk temporaries."""
    mod = load(generate(graph, chunk_rows=256))
    rng = np.random.default_rng(0)
    W, C = 20000, 4
    inputs = {n: rng.random((W, C) + tuple(s for _, s in sohu.signals[n].axes)) * 1e6 for n in mod.INPUTS}
    inputs["seq.elapsed_cycles"][5, 1] = 0.0  # a division by zero: null
    interval = np.full((W, C), 1e-3)
    tracemalloc.start()
    out = mod.evaluate(inputs, interval, 1.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result_bytes = sum(v.nbytes for v in out.values())
    assert peak < result_bytes + 2_000_000, (peak, result_bytes)  # temporaries: a few chunks of 256 rows, not W
    from perfonto.metrics.windows import Windows

    want = evaluate(graph, Windows(interval, inputs))
    for name in graph.metrics:
        np.testing.assert_allclose(out[name], want[name], rtol=1e-12, equal_nan=True, err_msg=name)
    assert np.isnan(out["a.per_cycle"][5, 1]) and not np.isnan(out["a.per_cycle"]).all()


def test_catalog_text_cannot_inject_code(sohu):
    evil = 'metric x.y [B] = sum(hbm.read_bytes)\n  "\\"\\"\\" ; import os; os.system(\'echo pwned\') # \\\\ \\n"\n'
    g = compile_src(sohu, evil)
    assert not g.errors, [d.render() for d in g.errors]
    src = generate(g)
    compile(src, "<gen>", "exec")
    assert "os.system" not in src.replace(repr(g.metrics["x.y"].description), "")
    mod = load(src)
    assert mod.METRICS["x.y"]["description"] == g.metrics["x.y"].description


def _sample(sohu, rng, C):
    return {
        n: rng.integers(0, 1 << 20, size=(C,) + tuple(s for _, s in sig.axes), dtype=np.uint64)
        for n, sig in sohu.signals.items()
    }


def test_stream_baseline_absent_chip_and_blocks(graph, sohu):
    mod = load(generate(graph))
    rng = np.random.default_rng(1)
    C, S = 3, 6
    regs = [_sample(sohu, rng, C) for _ in range(S)]
    for i in range(1, S):  # counters advance
        for n, sig in sohu.signals.items():
            if sig.kind == "counter":
                regs[i][n] = regs[i - 1][n] + rng.integers(0, 1000, size=regs[i][n].shape, dtype=np.uint64)
    ts = [np.full(C, i * 1_000_000) for i in range(S)]
    present = [np.ones(C, bool) for _ in range(S)]
    present[3][1] = False  # chip 1 has no sample 3: windows 2 and 3 of chip 1 are null
    one = mod.Stream()
    assert one.push(ts[0], regs[0]) is None
    outs = [one.push(ts[i], regs[i], present[i]) for i in range(1, S)]
    assert np.isnan(outs[2]["a.rate"][1]) and np.isnan(outs[3]["a.rate"][1]) and not np.isnan(outs[4]["a.rate"][1])
    assert not np.isnan(outs[2]["a.rate"][0])
    blk = mod.Stream()
    stack = {n: np.stack([r[n] for r in regs]) for n in regs[0]}
    res = blk.push_block(np.stack(ts), stack, np.stack(present))
    for name in graph.metrics:
        np.testing.assert_allclose(res[name], np.stack([o[name] for o in outs]), rtol=1e-12, equal_nan=True)
    # a window is the increase over the interval
    d = (
        regs[1]["hbm.read_bytes"] - regs[0]["hbm.read_bytes"] + regs[1]["hbm.write_bytes"] - regs[0]["hbm.write_bytes"]
    ).astype(float)
    np.testing.assert_allclose(outs[0]["a.rate"], d.sum(axis=1) * 64 / 1e-3 / 1e9, rtol=1e-12)


def test_generated_module_for_every_shipped_generation():
    from perfonto.metrics.catalog import shipped_others
    from perfonto.metrics.compiler import compile_files
    from perfonto.ontology import load_generation
    from perfonto.ontology.loader import shipped_generations

    for name in shipped_generations():
        gen, _ = load_generation(name)
        g = compile_files(gen, others=shipped_others(gen))
        mod = load(generate(g))
        assert set(mod.METRICS) == set(g.metrics) and mod.GENERATION == name
