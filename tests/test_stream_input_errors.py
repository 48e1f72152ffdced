"""``Stream`` refuses input it would otherwise misread (a new user's trial): registers that are not raw
unsigned integers (a float array holding a NaN was cast to garbage and gave a wrong figure), missing
signals, wrong shapes, timestamps that are not int64 ns or do not go forward, an unknown metric name —
each with an error (``ValueError`` / ``TypeError``, ``KeyError`` for a metric name as before) that names
the argument, the signal, what was given and what is expected. A stream of chosen metrics needs only the
signals those read. Each case runs on the NumPy path and through the compiled kernel (numba)."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.codegen.python_evaluator import generate, load
from test_differential_backends import Sig, _compile

C = 2
T0 = np.array([1_000_000, 1_000_000], np.int64)
T1 = T0 + 1_000_000
T2 = T1 + 1_000_000


@pytest.fixture(scope="module")
def mod():
    sigs = [
        Sig("a.x", "counter", "event", (("i", 3),), 32),
        Sig("a.y", "counter", "event", (), 32),
        Sig("b.t", "gauge", "event", ()),
    ]
    src = 'metric p [1] = sum(a.x) / a.y\n  "p"\nmetric q [event] = b.t\n  "q"\n'
    return load(generate(_compile(sigs, src)[1]))


@pytest.fixture(params=[False, True], ids=["numpy", "kernel"])
def jit(request, monkeypatch):
    if request.param:
        pytest.importorskip("numba")
        monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)
    return request.param


def regs(k: int, dtype=np.uint64) -> dict:
    return {
        "a.x": np.array([[10, 20, 30], [40, 50, 60]], dtype) * (k + 1),
        "a.y": np.array([5, 7], dtype) * (k + 1),
        "b.t": np.array([3, 4], dtype),
    }


def started(mod, jit, metrics=None):
    st = mod.Stream(metrics=metrics, jit=jit)
    assert st.push(T0, regs(0)) is None
    return st


def test_the_kernel_runs_when_asked(mod, jit):
    st = started(mod, jit)
    st.push(T1, regs(1))
    assert (st._push is not None) == jit  # the kernel's buffers: push went through it


def test_float_registers_are_refused_not_cast(mod, jit):
    st = started(mod, jit)
    r = {k: v.astype(np.float64) for k, v in regs(1).items()}
    r["a.x"][0, 0] = np.nan
    with pytest.raises(TypeError, match=r"registers\['a.x'\]: float64 values given; registers are raw unsigned") as e:
        st.push(T1, r)
    assert "missing=" in str(e.value)
    no_nan = {k: v.astype(np.float64) for k, v in regs(1).items()}
    with pytest.raises(TypeError, match="raw unsigned integers"):
        st.push(T1, no_nan)
    flat = np.concatenate([regs(1)[n].reshape(C, -1) for n, _, _ in mod._REGS], axis=1)
    with pytest.raises(TypeError, match=r"registers: float32 values given"):
        st.push(T1, flat.astype(np.float32))
    good = st.push(T1, regs(1))  # the refused pushes left the stream as it was
    assert np.allclose(good["p"], [60 / 5, 150 / 7])


def test_negative_signed_registers_are_refused_and_non_negative_ones_read(mod, jit):
    st = started(mod, jit)
    r = regs(1, np.int64)
    r["a.y"][1] = -5
    with pytest.raises(ValueError, match=r"registers\['a.y'\]: a negative value \(-5\) in an array of int64"):
        st.push(T1, r)
    got = st.push(T1, regs(1, np.int64))  # signed integers without a negative value are read as they are
    want = started(mod, jit).push(T1, regs(1))
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_a_missing_signal_is_named_with_every_other_missing_one(mod, jit):
    st = started(mod, jit)
    r = regs(1)
    del r["a.x"], r["a.y"]
    r["a.z"] = r["b.t"]
    with pytest.raises(ValueError, match=r"registers: no value for signal\(s\) 'a.x', 'a.y'; 'a.z' is no signal; did"):
        st.push(T1, r)


def test_chosen_metrics_need_only_their_signals(mod, jit):
    full = started(mod, jit).push(T1, regs(1))
    r0, r1 = regs(0), regs(1)
    del r0["b.t"], r1["b.t"]  # q's signal: p does not read it
    st = mod.Stream(metrics=["p"], jit=jit)
    assert st.push(T0, r0) is None
    got = st.push(T1, r1)
    assert list(got) == ["p"]
    np.testing.assert_array_equal(got["p"], full["p"])
    assert list(
        mod.Stream(metrics=["p"], jit=jit).push_block(np.stack([T0, T1]), {k: np.stack([r0[k], r1[k]]) for k in r0})
    ) == ["p"]
    del r1["a.y"]
    with pytest.raises(ValueError, match=r"no value for signal\(s\) 'a.y'\. Each push needs every signal the chosen"):
        st.push(T2, r1)


def test_a_wrong_instance_shape_names_the_signal_and_both_shapes(mod, jit):
    st = started(mod, jit)
    r = regs(1)
    r["a.x"] = r["a.x"][:, :2]
    with pytest.raises(ValueError, match=r"registers\['a.x'\]: an array of shape \(2, 2\) given; expected \(2, 3\) "):
        st.push(T1, r)
    with pytest.raises(ValueError, match=r"registers: an array of shape \(2, 3\) given; expected \(2, 5\)"):
        st.push(T1, np.zeros((2, 3), np.uint64))


def test_timestamps_must_be_int_ns_one_per_chip(mod, jit):
    st = started(mod, jit)
    with pytest.raises(ValueError, match=r"timestamp_ns: a scalar given; expected an int64 array of shape \(chips,\)"):
        st.push(int(T1[0]), regs(1))
    with pytest.raises(TypeError, match="timestamp_ns: float64 values given; expected int64 nanoseconds"):
        st.push(T1 / 1e9, regs(1))
    with pytest.raises(ValueError, match=r"timestamp_ns: 1 chip\(s\) given; this stream has 2"):
        st.push(T1[:1], {k: v[:1] for k, v in regs(1).items()})
    with pytest.raises(TypeError, match="timestamps_ns: float64 values given"):
        mod.Stream(jit=jit).push_block(np.stack([T0, T1]) / 1e9, {k: np.stack([v, v]) for k, v in regs(0).items()})
    assert st.push(list(T1), regs(1)) is not None  # a list of ints is fine


def test_a_timestamp_not_after_the_previous_one_is_refused(mod, jit):
    st = started(mod, jit)
    with pytest.raises(ValueError, match=r"timestamp_ns: chip 0 at 1000000 ns is not after its previous sample"):
        st.push(T0, regs(1))
    back = T1.copy()
    back[1] = 0
    with pytest.raises(ValueError, match=r"chip 1 at 0 ns is not after its previous sample \(1000000 ns\)"):
        st.push(back, regs(1))
    # an absent chip's timestamp is not checked (its windows are null anyway)
    out = st.push(back, regs(1), present=np.array([True, False]))
    assert np.isnan(out["p"][1]) and not np.isnan(out["p"][0])
    blk = mod.Stream(jit=jit)
    block = {k: np.stack([v, v * 2, v * 3]) for k, v in regs(0).items()}
    with pytest.raises(ValueError, match=r"timestamps_ns: chip 1 at 1000000 ns is not after .* \(2000000 ns\)"):
        blk.push_block(np.array([[0, 1_000_000], [1_000_000, 2_000_000], [2_000_000, 1_000_000]]), block)


def test_registers_of_a_block_are_refused_as_in_push(mod, jit):
    block = {k: np.stack([v, 2 * v]) for k, v in regs(0).items()}
    block["a.y"] = block["a.y"].astype(np.float64)
    with pytest.raises(TypeError, match=r"registers\['a.y'\]: float64 values given"):
        mod.Stream(jit=jit).push_block(np.stack([T0, T1]), block)
    X = np.zeros((mod._N, 2 * C))
    with pytest.raises(TypeError, match="X: float64 values given"):
        mod.Stream(jit=jit).push_flat(np.stack([T0, T1]), X)


def test_an_unknown_metric_name_gets_a_did_you_mean(mod):
    with pytest.raises(KeyError, match=r"no metric named 'pp'; did you mean 'p'\?"):
        mod.Stream(metrics=["pp"])


def test_a_block_with_fewer_register_rows_than_time_stamps_names_the_signal(mod, jit):
    """A review: on the NumPy path the shorter array was sliced into numpy's "cannot reshape array of size
    24 into shape (9,2,3)"; both paths now name the signal and the rows the time stamps ask for."""
    S = 10
    T = (np.arange(1, S + 1)[:, None] * 1_000_000 + np.zeros(C, np.int64)).astype(np.int64)
    R = {
        "a.x": np.ones((5, C, 3), np.uint64).cumsum(0),
        "a.y": np.ones((5, C), np.uint64).cumsum(0),
        "b.t": np.ones((5, C), np.uint64),
    }
    with pytest.raises(ValueError, match=r"registers\['a.x'\]: an array of shape \(5, 2, 3\) given; expected \(10, "):
        mod.Stream(jit=jit).push_block(T, R)


def test_unsigned_stamps_past_int64_and_bool_registers_are_refused(mod, jit):
    st = started(mod, jit)
    with pytest.raises(ValueError, match="past the int64 range"):
        st.push(T1.astype(np.uint64) + np.uint64(2**63), regs(1))
    bad = regs(1)
    bad["a.y"] = np.array([True, True])
    with pytest.raises(TypeError, match=r"registers\['a.y'\]: bool values given; registers are raw unsigned"):
        st.push(T1, bad)


def test_int64_registers_read_as_uint64_ones(mod, jit):
    """int64 (pandas', Python lists') take one check and one copy, with the same values as uint64."""
    a, b = started(mod, jit), mod.Stream(jit=jit)
    b.push(T0, regs(0, np.int64))
    for k, t in ((1, T1), (2, T2)):
        want, got = a.push(t, regs(k)), b.push(t, regs(k, np.int64))
        assert want.keys() == got.keys() and all(np.array_equal(want[m], got[m], equal_nan=True) for m in want)
