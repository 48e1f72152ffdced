"""Clock alignment against synthetic driver reads with known offsets and drifts (issue 8's model:
offsets up to 10 ms, drifts up to ±100 ppm, one-way latencies log-normal with a 2 µs median, 1 % of
reads delayed by up to 200 µs)."""

import numpy as np
import pytest

from perfonto.analysis.align import fit_clock


def synth(rng, offset_ns, drift, seconds=10.0, every_s=0.01, sigma=0.5):
    host = np.arange(0, seconds, every_s) * 1e9 + rng.uniform(0, 1e5)
    up = 2000.0 * np.exp(sigma * rng.standard_normal(len(host)))
    down = 2000.0 * np.exp(sigma * rng.standard_normal(len(host)))
    late = rng.random(len(host)) < 0.01
    extra = np.where(late, rng.uniform(0, 200_000, len(host)), 0.0)
    leg = rng.random(len(host)) < 0.5
    up = up + np.where(leg, extra, 0)
    down = down + np.where(~leg, extra, 0)
    h0 = host
    t_read = h0 + up
    d = offset_ns + (1 + drift) * t_read
    h1 = t_read + down
    return h0, d, h1


@pytest.mark.parametrize("seed", range(5))
def test_alignment_error_under_1us_median_5us_p99(seed):
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(8):  # eight chips
        off = rng.uniform(-10e6, 10e6)
        drift = rng.uniform(-100e-6, 100e-6)
        h0, d, h1 = synth(rng, off, drift)
        fit = fit_clock(h0, d, h1)
        # map device timestamps of arbitrary events back to host time and compare with the truth
        true_host = np.sort(rng.uniform(0, 10e9, 2000))
        dev = off + (1 + drift) * true_host
        errors.append(np.abs(fit.to_host(dev) - true_host))
        assert fit.drift_ppm == pytest.approx(drift * 1e6, abs=0.05)
    e = np.concatenate(errors)
    assert np.median(e) < 1000 and np.quantile(e, 0.99) < 5000, (np.median(e), np.quantile(e, 0.99))


def test_too_few_reads():
    with pytest.raises(ValueError, match="at least 3"):
        fit_clock([0, 1], [0, 1], [1, 2])
