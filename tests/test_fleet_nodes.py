"""Racks and pods that stand out as a group (``analysis.fleet_nodes``), on hand-made chip values: the
rule names a rack whose chips share a shift even when it holds half of the fleet (the chip rule's median
then sits between the halves), and not a rack that one odd host drags."""

import numpy as np
import pytest

from perfonto.analysis.fleet_nodes import nodes_standing_out as _by_index


def nodes_standing_out(labels: list[str], v: np.ndarray) -> list[dict]:
    names, idx = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return _by_index(idx, [str(n) for n in names], v)


def test_a_hot_half_of_the_fleet_is_named_once():
    # 16 chips at 37.5 degC ± 0.1, 16 at 52.5 ± 0.1: each rack's own median, 37.5 and 52.5
    jitter = np.tile([-0.1, 0.0, 0.1, 0.0], 4)
    v = np.concatenate([37.5 + jitter, 52.5 + jitter])
    labels = ["r00"] * 16 + ["r01"] * 16
    (o,) = nodes_standing_out(labels, v)
    assert (o["node"], o["chips"], o["median"], o["reference"]) == ("r01", 16, 52.5, 37.5)
    assert o["relative"] == pytest.approx(15.0 / 37.5)  # +40 %
    # pooled MAD: |x − own median| is 0.1 on 16 chips and 0 on 16, median 0.05 → σ = 0.05 / 0.6745
    assert o["deviation"] == pytest.approx(15.0 / (0.05 / 0.6745))  # signed, as the chip outliers'
    (low,) = nodes_standing_out(labels, -v)
    assert low["node"] == "r00" and low["deviation"] == pytest.approx(15.0 / (0.05 / 0.6745))


def test_one_odd_host_does_not_name_its_rack():
    # four racks of 8 chips at 40 % ± 0.5; in r02 three chips of one host run at 20 %: its median, the
    # mean of its 4th and 5th values (39.5 and 40.0), is 39.75, 0.6 % under the typical rack's 40.0
    good = np.tile([39.5, 40.0, 40.5, 40.0], 2)
    r02 = np.array([20.0, 20.0, 20.0, 39.5, 40.0, 40.5, 40.0, 40.0])
    v = np.concatenate([good, good, r02, good])
    labels = [f"r0{k}" for k in range(4) for _ in range(8)]
    assert np.median(r02) == 39.75 and nodes_standing_out(labels, v) == []
    # the same host's chips spread over a rack of 4 instead: the rack's median is 20 % and it is named
    small = np.concatenate([good, good, [20.0, 20.0, 20.0, 39.5], good])
    (o,) = nodes_standing_out(labels[:16] + ["r02"] * 4 + labels[24:], small)
    assert (o["node"], o["median"], o["reference"]) == ("r02", 20.0, 40.0) and o["relative"] == pytest.approx(-0.5)
    assert o["deviation"] is None  # 15 of 28 chips sit on their rack's median: pooled MAD 0, the 1 % decides


def test_a_shift_under_one_percent_or_within_the_spread_is_not_named():
    labels = ["a"] * 8 + ["b"] * 8
    assert nodes_standing_out(labels, np.r_[[100.0] * 8, [100.5] * 8]) == []  # 0.5 %, chips agree: < 1 %
    noisy = np.array([90.0, 110.0, 95.0, 105.0, 100.0, 100.0, 92.0, 108.0])
    # 3 % apart, but the chips spread ±8 within each rack: |d| / σ = 3 / (5 / 0.6745) ≈ 0.40 ≤ 3.5
    assert nodes_standing_out(labels, np.r_[noisy, noisy + 3.0]) == []


def test_agreeing_racks_one_percent_apart_are_named_without_a_score():
    labels = ["p0"] * 4 + ["p1"] * 4 + ["p2"] * 4
    (o,) = nodes_standing_out(labels, np.r_[[10.0] * 4, [10.0] * 4, [10.5] * 4])  # the typical pod: 10.0
    assert (o["node"], o["relative"], o["deviation"]) == ("p2", pytest.approx(0.05), None)  # pooled MAD 0


def test_nulls_are_left_out_and_one_node_is_no_comparison():
    assert nodes_standing_out(["r0"] * 4, np.array([1.0, 2.0, 3.0, 4.0])) == []
    v = np.array([1.0, np.nan, 1.0, 1.0, 2.0, 2.0, np.nan, 2.0])
    (o,) = nodes_standing_out(["a"] * 4 + ["b"] * 4, v)
    assert (o["node"], o["chips"], o["reference"]) == ("b", 3, 1.0)
    assert nodes_standing_out(["a"] * 4 + ["b"] * 4, np.r_[[1.0] * 4, [np.nan] * 4]) == []


def test_one_chip_nodes_give_no_spread_and_no_findings():
    # 32 one-chip racks of 5 % noise: each chip is its own rack's median, so there is no spread within
    # racks to measure against; that level is the chip level, which the chip rule judges
    rng = np.random.default_rng(0)
    v = 100.0 * (1 + 0.05 * rng.standard_normal(32))
    assert nodes_standing_out([f"r{k:02d}" for k in range(32)], v) == []
    # zero reference and no spread: nothing to measure a difference against
    assert nodes_standing_out(["a"] * 2 + ["b"] * 2 + ["c"] * 2, np.r_[0.0, 0.0, 0.0, 0.0, 1e-12, 1e-12]) == []
