"""Issue 19: the compiled kernel (numba, ``codegen/kernel.py`` + ``codegen/runtime_kernel.py``) against
the generated evaluator's NumPy path and the reference interpreter, on random catalogs (the generators
of ``test_differential``: every register class, wraps, declared ranges, unit fields, resets, uptime
indicators, sentinels, histograms, packed fields, slots; random formulas with every operator), and on
the hand-worked rules of ``test_differential_rules``. Same tolerance and ambiguity oracle as the other
backends; ``push_flat``'s validity bitmap must mark exactly the non-null values. Each random catalog is
also run over several kernel blocks, kernel against NumPy fallback, bit for bit (``_check_blocks``)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from perfonto.codegen.python_evaluator import generate, load
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import prepare, read_counters
from test_differential import catalogs
from test_differential_backends import Oracle, _compile, agree, generations, series

numba = pytest.importorskip("numba")

NO_NULLS = {"absent": 0.0, "sentinel": 0.1, "missing": 0.0}  # the kernel takes rows without null or absent registers


# every test here compiles a kernel with numba (tens of seconds each): the slow suite (pytest -m slow; CI runs it)
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _jit_on(monkeypatch):
    monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)


def _both(mod, dump, metrics=None):
    regs = {n: dump.raw[n] for n, _, _ in mod._REGS}
    k = mod.Stream(metrics=metrics, jit=True)
    got = k.push_block(dump.timestamps_ns, regs)
    f = mod.Stream(metrics=metrics, jit=False)
    fallback = f.push_block(dump.timestamps_ns, regs)
    return got, fallback


def _uses_pow(graph, name) -> bool:
    import networkx as nx

    return any(
        "**" in graph.metrics[m].formula for m in ({name} | nx.ancestors(graph.graph, name)) if m in graph.metrics
    )


def _check_blocks(sigs, gen, graph, mod, seed, S):
    """A chunk of several 2,048-row kernel blocks with a ragged last one (``S`` samples × 3 chips): the
    kernel and the NumPy fallback give the same values, bit for bit, wherever no ``**`` is on the way
    to the metric; through ``**`` the same nulls and values within 1e-9 (numba calls libm's ``pow``,
    NumPy may use SVML's on AVX-512: they differ in the last bit on ~5 % of inputs here)."""
    dump = read_counters(series(sigs, seed, S, 3, NO_NULLS), gen)
    got, fallback = _both(mod, dump)
    for name in graph.metrics:
        what = f"{S} x 3 rows: {name} = {graph.metrics[name].formula}"
        if _uses_pow(graph, name):
            g, f = got[name], fallback[name]
            np.testing.assert_array_equal(np.isnan(g), np.isnan(f), err_msg=what)
            scale = np.nanmax(np.abs(f), initial=0.0)
            np.testing.assert_allclose(g, f, rtol=1e-9, atol=1e-12 * scale, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(got[name], fallback[name], err_msg=what)


def _check(sigs, src, seed, S, C, block_S=None):
    gen, graph = _compile(sigs, src)
    mod = load(generate(graph))
    if block_S:
        _check_blocks(sigs, gen, graph, mod, seed ^ 1, block_S)
    assert mod._jit() is not None
    dump = read_counters(series(sigs, seed, S, C, NO_NULLS), gen)
    w = prepare(dump, gen)
    ref = evaluate(graph, w)
    oracle = Oracle(graph, w)
    got, fallback = _both(mod, dump)
    for name in graph.metrics:
        agree(name, "kernel", got[name], ref[name], oracle)
        agree(name, "NumPy fallback", fallback[name], ref[name], oracle)
        agree(name, "kernel vs fallback", got[name], fallback[name], oracle)
    # Stream.push through the kernel, sample by sample: registers as a dict, and as one (chips, columns) array
    names = [n for n, _, _ in mod._REGS]
    for as_array in (False, True):
        kp, per = mod.Stream(jit=True), []
        for i in range(S):
            regs = {n: dump.raw[n][i] for n in names}
            if as_array:
                regs = np.concatenate([regs[n].reshape(C, -1) for n in names] + [np.zeros((C, 0), np.uint64)], axis=1)
            r = kp.push(dump.timestamps_ns[i], regs)
            assert (r is None) == (i == 0)
            if r is not None:
                per.append(r)
        for name in graph.metrics:
            agree(
                name,
                f"kernel push ({'array' if as_array else 'dict'})",
                np.stack([o[name] for o in per]),
                ref[name],
                oracle,
            )
    # push_flat: the same values through the columns API, with Arrow validity bitmaps
    X = np.concatenate(
        [dump.raw[n].reshape(S * C, b - a).T for n, a, b in mod._REGS] + [np.zeros((0, S * C), np.uint64)]
    )
    flat = mod.Stream(jit=True).push_flat(dump.timestamps_ns, X)
    for name, (vals, bits) in flat.items():
        np.testing.assert_array_equal(vals, got[name])
        valid = np.unpackbits(bits, bitorder="little")[: vals.size].astype(bool)
        np.testing.assert_array_equal(valid, ~np.isnan(vals.reshape(-1)), err_msg=name)


@settings(
    max_examples=int(os.environ.get("PERFONTO_KERNEL_EXAMPLES", 12)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)  # each example compiles a kernel: no long shrinking
@given(st.data())
def test_kernel_matches_numpy_and_reference_on_random_catalogs(data):
    sigs = data.draw(generations())
    src = data.draw(catalogs(sigs))
    seed, S, C = data.draw(st.integers(0, 2**32 - 1)), data.draw(st.integers(2, 9)), data.draw(st.integers(1, 3))
    _check(
        sigs, src, seed, S, C, block_S=data.draw(st.integers(700, 1100))
    )  # and 2-3 kernel blocks of the same catalog


def test_kernel_on_the_hand_worked_rules():
    """Every one-line rule case (wraps, ranges, unit fields, uptime resets, sentinels, histograms,
    fields, nulls in formulas) in one catalog: kernel, NumPy path and the hand-worked values agree."""
    from test_differential_rules import CASES, SIGS, _table

    src = "".join(f'metric t{k} [{u}] = {f}\n  "case"\n' for k, (_, u, f, _, _) in enumerate(CASES))
    gen, graph = _compile(SIGS, src)
    mod = load(generate(graph))
    for k, (what, _, _, samples, expected) in enumerate(CASES):
        dump = read_counters(_table(samples), gen)
        if dump.missing:  # null registers take the NumPy path: covered by test_differential_rules
            continue
        got, fallback = _both(mod, dump, metrics=[f"t{k}"])
        assert list(got) == [f"t{k}"]
        want = np.array(expected, float).reshape(got[f"t{k}"].shape)
        np.testing.assert_allclose(got[f"t{k}"], want, rtol=1e-12, equal_nan=True, err_msg=what)
        np.testing.assert_allclose(fallback[f"t{k}"], want, rtol=1e-12, equal_nan=True, err_msg=what)


def test_only_the_metrics_asked_for_are_evaluated():
    from test_differential_backends import Sig

    sigs = [Sig("a.x", "counter", "event", (), 32), Sig("a.y", "counter", "event", (), 32)]
    src = 'metric p [event] = a.x\n  "p"\nmetric q [1] = p / a.y\n  "q"\nmetric r [event] = a.y * 2\n  "r"\n'
    gen, graph = _compile(sigs, src)
    mod = load(generate(graph))
    s = mod.Stream(metrics=["q"], jit=True)
    assert list(mod.METRICS) == ["p", "q", "r"] and s._want.tolist() == [True, True, False]  # q reads p
    out = s.push_block(
        np.array([[0], [10], [20]]),
        {"a.x": np.array([[0], [6], [9]], np.uint64), "a.y": np.array([[0], [3], [0]], np.uint64)},
    )
    assert list(out) == ["q"]
    np.testing.assert_array_equal(out["q"][:, 0], [2.0, np.nan])  # 6 / 3; 3 / 0 is null


def test_parallel_kernel_is_bit_identical_to_the_serial_one(monkeypatch):
    """PERFONTO_KERNEL_THREADS=2 (blocks of rows in parallel, numba.prange): the same values and the
    same validity bitmaps as one thread, over many blocks with a ragged last one and a metric with
    instances (whose bitmap bytes span rows)."""
    from test_differential_backends import Sig

    sigs = [Sig("a.x", "counter", "event", (("i", 3),), 32), Sig("a.y", "counter", "event", (), 32)]
    src = 'metric p [event] = a.x\n  "p"\nmetric q [1] = sum(a.x) / a.y\n  "q"\nmetric r [event] = a.y * 2\n  "r"\n'
    gen, graph = _compile(sigs, src)
    rng = np.random.default_rng(7)
    S, C = 701, 5
    T = np.arange(S * C, dtype=np.int64).reshape(S, C) // C * 1_000_000
    inc = rng.integers(0, 5, size=(4, S, C)).astype(np.uint64)
    inc[3] = rng.integers(0, 2, size=(S, C)).astype(np.uint64)  # a.y: often no change, so q is often null
    X = (np.cumsum(inc, axis=1) & np.uint64(0xFFFFFFFF)).reshape(4, S * C)
    out = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("PERFONTO_KERNEL_THREADS", threads)
        mod = load(generate(graph))
        assert mod._jit() is not None and mod._KNTH == min(int(threads), numba.config.NUMBA_NUM_THREADS)
        out[threads] = mod.Stream(jit=True).push_flat(T, X)
    for name, (vals, bits) in out["1"].items():
        np.testing.assert_array_equal(vals, out["2"][name][0], err_msg=name)
        np.testing.assert_array_equal(bits, out["2"][name][1], err_msg=name)
        assert np.isnan(vals).any() or name != "q"  # a.y's zero deltas make q null somewhere: bitmaps are exercised
