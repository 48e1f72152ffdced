"""``capture.dump_grid.Stamps``: a regular host's timestamps kept compactly in the dump's plan (issue 26:
the plan of a 125-host fleet held 0.3 GB of int64 stamps) give exactly the int64 values back, however
they are indexed; stamps whose remainders do not fit 32 bits stay an array."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.capture.dump_grid import Stamps

PERIOD = 100_000_000


@pytest.mark.parametrize("jitter, dtype", [(0, np.int8), (1_000, np.int16), (50_000_000, np.int32)])
def test_compact_stamps_index_as_the_array(jitter, dtype):
    rng = np.random.default_rng(1)
    S, C = 1000, 8
    t0 = 1_700_000_000_000_000_000 + rng.integers(0, 10**9, C)  # each chip its own clock
    a = t0[None, :] + PERIOD * np.arange(S)[:, None] + rng.integers(-jitter, jitter + 1, (S, C))
    s = Stamps.compact(a, PERIOD)
    assert isinstance(s, Stamps) and s.rest.dtype == dtype and s.shape == a.shape and len(s) == S
    idx = rng.integers(0, S, 50)
    for key in (slice(10, 500), slice(None), 0, -1, 999, (idx, 3), (slice(5, 9), 2), idx):
        got, want = s[key], a[key]
        assert got.dtype == np.int64 and np.array_equal(got, want), key
    assert np.array_equal(np.asarray(s), a)
    out = np.zeros((S + 4, C), np.int64)
    out[2 : S + 2] = s  # placed into a longer grid, as dump_host_grid._on_dump_grid does
    assert np.array_equal(out[2 : S + 2], a)


def test_stamps_that_do_not_fit_stay_an_array():
    S, C = 100, 2
    a = PERIOD * np.arange(S)[:, None] + np.zeros((1, C), np.int64)
    a[50:, 1] += 3 * 10**9  # a clock that jumps 3 s: the remainder needs 64 bits
    assert Stamps.compact(a, PERIOD) is a
    assert Stamps.compact(a, 0) is a  # no sample period: nothing to take off
