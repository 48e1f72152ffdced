"""Clock alignment: map each chip's device timestamps to the host timeline.

Each chip's clock runs with its own offset and drift: ``device = offset + (1 + drift) × host``.
A driver samples the relation every few milliseconds as a host/device/host triple: it reads the host
clock (``host_before``), reads the device clock over PCIe (``device``, taken one one-way latency
later) and reads the host clock again (``host_after``, after the return latency). The midpoint of the
two host reads is the best host-side estimate of the device read's instant when the two one-way
latencies are alike (as NTP and PTP assume); a read delayed on one leg shows up as a long round trip.

Estimator (robust to jitter and outliers, in the spirit of NTP's clock filter, which prefers the
samples with the shortest round-trip delay):
1. keep the reads whose round trip is within the fastest 50 % (an outlier read is always slow);
2. fit ``device − host_mid = offset + drift × host_mid`` by least squares on them;
3. drop reads whose residual is more than 4 robust standard deviations (MAD) away and refit.
The fit maps any device timestamp to host time: ``host = (device − offset) / (1 + drift)``.

This is one line per chip, for a clock that never restarts. ``perfonto align`` and ``perfonto timeline``
use ``analysis.clock_fit`` instead: the same estimator per clock epoch, split at detected resets, with
offsets free of the midpoint bias, a stated rule for when a drift is fitted, and an error bound on
every mapped time (``analysis.clock_run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ClockFit:
    """``device_ns = offset_ns + (1 + drift) × host_ns`` for one chip; ``residual_ns``: robust spread of
    the kept reads (MAD × 1.4826), ``kept``/``total``: reads used."""

    offset_ns: float
    drift: float
    residual_ns: float
    kept: int
    total: int

    @property
    def drift_ppm(self) -> float:
        return self.drift * 1e6

    def to_host(self, device_ns) -> np.ndarray:
        """Host time (ns, float64) of device timestamps."""
        return (np.asarray(device_ns, dtype=np.float64) - self.offset_ns) / (1.0 + self.drift)


def fit_clock(host_before_ns, device_ns, host_after_ns) -> ClockFit:
    """Estimate one chip's offset and drift from its sync reads (arrays of the same length ≥ 3).

    Raises:
        ValueError: fewer than 3 reads, or reads whose host_after precedes host_before.
    """
    h0 = np.asarray(host_before_ns, dtype=np.float64)
    h1 = np.asarray(host_after_ns, dtype=np.float64)
    d = np.asarray(device_ns, dtype=np.float64)
    if len(d) < 3:
        raise ValueError(f"need at least 3 sync reads to fit offset and drift, got {len(d)}")
    rtt = h1 - h0
    if np.any(rtt < 0):
        raise ValueError("sync reads with host_after before host_before: the host clock went backwards")
    mid = h0 + rtt / 2
    t0 = mid[0]
    x = mid - t0  # centre for numerical conditioning
    y = d - mid
    keep = rtt <= np.quantile(rtt, 0.5)
    if keep.sum() < 3:
        keep = np.ones(len(d), dtype=bool)
    for _ in range(3):
        A = np.stack([np.ones(keep.sum()), x[keep]], axis=1)
        (a, b), *_ = np.linalg.lstsq(A, y[keep], rcond=None)
        res = y - (a + b * x)
        mad = np.median(np.abs(res[keep] - np.median(res[keep]))) * 1.4826
        new = keep & (np.abs(res) <= 4 * max(mad, 1e-3))
        if new.sum() < 3 or np.array_equal(new, keep):
            break
        keep = new
    # y = a + b (mid - t0)  =>  d = (a - b t0) + (1 + b) mid
    return ClockFit(
        offset_ns=float(a - b * t0), drift=float(b), residual_ns=float(mad), kept=int(keep.sum()), total=len(d)
    )
