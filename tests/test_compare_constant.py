"""A metric constant over every window of each run (the emulator draws the HBM stacks' byte split once per
seed) has a zero-width interval: two runs differing only in ``--seed`` read ``hbm.stack_imbalance``
0.166 → 0.329, "+98 % [+98, +98] increased", and ``--fail-on-regression`` failed on a reseed. The windows
measure no noise there; the verdict says so, and the metric is undecided, not "increased"."""

from __future__ import annotations

import numpy as np

from perfonto.analysis.compare_runs import CONSTANT, _metric, undecided

BOOT = {"n_boot": 400, "confidence": 0.95, "seed": 0}


def test_a_metric_constant_within_each_run_gets_no_verdict():
    wa, wb = np.full(50, 0.166188), np.full(50, 0.329366)
    m = _metric(0.166188, 0.329366, wa, wb, "1", BOOT)
    assert m["verdict"] == CONSTANT and undecided(m)
    assert m["relative"] == (0.329366 - 0.166188) / 0.166188  # the change itself is still given


def test_a_noisy_metric_that_moved_is_still_increased():
    rng = np.random.default_rng(1)
    wa, wb = 1.0 + 0.01 * rng.standard_normal(200), 1.2 + 0.01 * rng.standard_normal(200)
    m = _metric(float(wa.mean()), float(wb.mean()), wa, wb, "1", BOOT)
    assert m["verdict"] == "increased" and not undecided(m)
