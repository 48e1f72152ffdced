"""Which chips stand out in a fleet (``analysis.fleet._spread``), with hand-worked numbers: a modified
z-score, 0.6745 · (value − median) / MAD, past 3.5 (Iglewicz and Hoaglin) and at least 1 % from the
median."""

from types import SimpleNamespace

import numpy as np
import pytest

from perfonto.analysis.fleet import _spread

META = SimpleNamespace(threshold=None)


def _out(values):
    v = np.asarray(values, float)
    place = [(f"h{i:03d}", 0, "r0", None) for i in range(len(v))]
    return _spread(META, v, place, top=5)[1]


def test_a_tight_fleet_has_no_outliers_however_small_its_mad():
    # median 1.0, MAD 0.0001: the chip at 1.0014 scores 0.6745 * 0.0014 / 0.0001 = 9.4, but is 0.14 % off
    v = [1.0, 1.0001, 0.9999, 1.0, 1.0001, 0.9999, 1.0, 1.0014]
    assert _out(v) == {"high": [], "low": []}


def _on_hosts(values, chips_per_host):
    v = np.asarray(values, float)
    place = [(f"h{i // chips_per_host:03d}", i % chips_per_host, "r0", None) for i in range(len(v))]
    return _spread(META, v, place, top=5)[1]


def test_a_zero_mad_flags_chips_a_percent_away_with_a_null_score():
    out = _out([2.0] * 9 + [2.6, 2.01])  # median 2.0, MAD 0: 2.6 is +30 %, 2.01 only +0.5 %
    assert [(o["host"], o["deviation"], o["relative"]) for o in out["high"]] == [("h009", None, pytest.approx(0.3))]
    assert out["low"] == []


def test_a_zero_mad_tells_a_role_from_an_odd_host():
    # 4 hosts x 4 chips, each host's chip 0 doing its I/O: off the shared 0 on every host, a role
    assert _on_hosts([5.0, 0.0, 0.0, 0.0] * 4, 4) == {"high": [], "low": []}
    # one host's 4 chips throttled to half (1 of 4 hosts): an odd host, all four stand out
    out = _on_hosts([10.0] * 12 + [5.0] * 4, 4)
    assert [(o["host"], o["chip"], o["relative"]) for o in out["low"]] == [("h003", c, -0.5) for c in range(4)]
    # ECC errors on one chip where no other chip has any: p50 0, so no relative; it stands out
    out = _on_hosts([0.0] * 15 + [3.0], 4)
    assert [(o["host"], o["chip"], o["deviation"], o["relative"]) for o in out["high"]] == [("h003", 3, None, None)]


def test_a_zero_median_and_a_mad_leave_the_score_alone_to_decide():
    # p50 0 and MAD 1 (half the chips at +-1): 0.6745 * 9 = 6.1 stands out, with no relative
    out = _out([0.0] * 5 + [1.0, -1.0] * 3 + [9.0])
    assert [(o["value"], o["relative"]) for o in out["high"]] == [(9.0, None)]
    assert out["high"][0]["deviation"] == pytest.approx(0.6745 * 9.0)


def test_scores_and_sides():
    # median 100, |x - 100| = [0, 1, 1, 0.5, 0.5, 6, 1.5, 8, 0] -> MAD 1.0 (the median of those nine);
    # 106 scores 0.6745 * 6 = 4.05 (a chip at 105 would score 3.37: not past 3.5)
    v = [100.0, 101.0, 99.0, 100.5, 99.5, 106.0, 98.5, 92.0, 100.0]
    out = _out(v)
    (hi,) = out["high"]
    assert hi["host"] == "h005" and hi["deviation"] == pytest.approx(0.6745 * 6.0 / 1.0)
    assert hi["relative"] == pytest.approx(0.06)
    assert _out(v[:5] + [105.0] + v[6:])["high"] == []
    (lo,) = out["low"]  # 98.5 scores only -1.0; 92 scores -5.4 and is 8 % low
    assert lo["host"] == "h007" and lo["deviation"] == pytest.approx(-0.6745 * 8.0)
    assert lo["relative"] == pytest.approx(-0.08)


def test_nan_chips_are_never_outliers_and_top_caps_each_side():
    v = [1.0] * 20 + [np.nan, 5.0, 4.0, 3.0] + [0.1, 0.2]
    out = _spread(META, np.asarray(v), [(f"h{i}", 0, None, None) for i in range(len(v))], top=2)[1]
    assert [o["value"] for o in out["high"]] == [5.0, 4.0]
    assert [o["value"] for o in out["low"]] == [0.1, 0.2]
