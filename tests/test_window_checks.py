"""``analysis.checks``: the first violations of a piece, found without indexing the whole piece."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.analysis.checks import _first_true


@pytest.mark.parametrize("density", [0.0, 1e-4, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("shape", [(1, 1), (3, 8), (4032, 8), (5000, 3)])
def test_first_true_is_nonzero_cut_to_k(density, shape):
    rng = np.random.default_rng(11)
    bad = rng.random(shape) < density
    for k in (1, 20, 10_000):
        wis, cis = _first_true(bad, k)
        want_w, want_c = np.nonzero(bad)
        np.testing.assert_array_equal(wis, want_w[:k])
        np.testing.assert_array_equal(cis, want_c[:k])


def test_first_true_reads_a_strided_mask_in_window_then_chip_order():
    bad = np.zeros((8, 4), bool, order="F")
    bad[5, 0] = bad[2, 3] = bad[2, 1] = True
    wis, cis = _first_true(bad, 2)
    assert list(zip(wis.tolist(), cis.tolist())) == [(2, 1), (2, 3)]
