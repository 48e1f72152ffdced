"""``analysis.level_sums.masked_sums``: one weighted pass per signal, equal to summing a masked copy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from perfonto.analysis.level_sums import masked_sums
from perfonto.ontology import kinds


def _copy_sums(w, gen, names, mask):
    """The plain formulation: a masked copy of each signal, summed (gauges × the kept interval)."""
    dt = w.interval if mask is None else np.where(mask, w.interval, 0.0)
    out = {}
    for n in names:
        v = w.values[n]
        extra = (1,) * (v.ndim - 2)
        vv = v if mask is None else np.where(mask.reshape(mask.shape + extra), v, 0.0)
        out[n] = vv.sum(axis=0) if kinds.row_of(gen, n).run == "sum" else (vv * dt.reshape(dt.shape + extra)).sum(0)
    return out, dt.sum(axis=0)


def _pick(gen):
    counter = next(n for n in sorted(gen.signals) if kinds.row_of(gen, n).run == "sum")
    gauge = next(n for n in sorted(gen.signals) if kinds.row_of(gen, n).run != "sum")
    return counter, gauge


@pytest.mark.parametrize("poison", [None, np.nan, np.inf, -np.inf])
def test_masked_sums_equal_the_masked_copy(sohu, poison):
    rng = np.random.default_rng(7)
    counter, gauge = _pick(sohu)
    W, C, K = 64, 3, 4
    # a counter of one instance per chip and a gauge of K instances, laid out instance-major as the kernel's
    values = {counter: rng.integers(0, 1000, (W, C)).astype(float), gauge: rng.random((K, W, C)).transpose(1, 2, 0)}
    mask = rng.random((W, C)) > 0.2
    if poison is not None:  # a left-out window of each holds what a null or wrapped read leaves there
        w0, c0 = np.argwhere(~mask)[0]
        values[counter][w0, c0] = poison
        values[gauge][w0, c0, 1] = poison
    values[gauge][np.argwhere(mask)[0][0], np.argwhere(mask)[0][1], 2] = np.nan  # a null kept window stays NaN
    w = SimpleNamespace(values=values, interval=rng.random((W, C)) + 0.5)
    names = [counter, gauge]
    for m in (mask, None):
        got, dt = masked_sums(w, sohu, names, m)
        want, dt_want = _copy_sums(w, sohu, names, m)
        np.testing.assert_array_equal(dt, dt_want)
        for n in names:
            assert got[n].shape == want[n].shape
            np.testing.assert_allclose(got[n], want[n], rtol=1e-12, equal_nan=True)
    got, _ = masked_sums(w, sohu, names, mask)
    assert np.isnan(got[gauge][np.argwhere(mask)[0][1], 2])  # the kept null
    assert np.isfinite(got[counter]).all()  # a poisoned left-out window adds nothing
