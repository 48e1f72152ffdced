"""Clocks: the host clock, each chip's device clock, and the driver's synchronisation reads.

Host clock: the reference timeline; host time 0 is the start of the run (request records, host-side
trace events and the ground truth are in host time). Device clock of chip ``c`` (its timestamp
counter, from its own oscillator)::

    device_ns = offset_ns + (1 + drift) × host_ns

with ``offset_ns`` uniform in ±``offset_max_ns`` (an integer) and ``drift`` uniform in
±``drift_max_ppm`` × 1e-6, drawn per chip from the seed. Crystal oscillators are specified at
±20–100 ppm; PTP and NTP correct exactly this model (offset + frequency error).

Counter sampling: each chip's sampler fires on its own clock, at device times ``offset + t`` for
``t`` on the sampling grid (``run.sample_grid``: 0, P, 2P, … and possibly a final sample), so every
chip's samples are exactly one period apart on its own clock and its first sample is at the start
of the run; in host time sample ``t`` happens at ``t / (1 + drift)``.

Synchronisation reads (``sync_reads``), as a driver takes them (``perfonto.align`` fits them): every
``every_ns`` per chip (chips read one after another, ``stagger_ns`` apart) the driver reads the host
clock (``host_before_ns``), reads the device clock over PCIe (``device_ns``, taken one one-way
latency later) and reads the host clock again (``host_after_ns``, after the return latency). Each
one-way latency is log-normal with median ``median_ns`` (σ = ``sigma`` of its logarithm); a fraction
``late_fraction`` of the reads is delayed on one leg by a further uniform 0 … ``late_max_ns``
(an interrupt, a PCIe replay, a preempted driver thread).

Clock reset (``DeviceClock.with_reset``, off by default): the device clock restarts at a given device
time at a given host time, so the sync reads (and any stamp taken through ``device_int``) show the jump
that ``perfonto.analysis.clock_fit`` splits its fits at.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class DeviceClock:
    """``device_ns = offset_ns + (1 + drift) × host_ns``; with a reset (``reset_host_ns`` not None), from
    host time ``reset_host_ns`` on the clock restarts at ``reset_to_ns``: ``device_ns = reset_to_ns +
    (1 + drift) × (host_ns − reset_host_ns)`` (a device reset or a timer re-initialised by the driver)."""

    offset_ns: int
    drift: float
    reset_host_ns: int | None = None
    reset_to_ns: int = 0

    @property
    def drift_ppm(self) -> float:
        return self.drift * 1e6

    def with_reset(self, host_ns: int, to_ns: int = 0) -> "DeviceClock":
        """The same clock, restarting at device time ``to_ns`` at host time ``host_ns``."""
        return DeviceClock(self.offset_ns, self.drift, int(host_ns), int(to_ns))

    def _base(self, host_ns) -> tuple[np.ndarray, np.ndarray]:
        """(the epoch's device time at its start, host time since then) at host times ``host_ns``."""
        h = np.asarray(host_ns, np.float64)
        if self.reset_host_ns is None:
            return np.full(h.shape, float(self.offset_ns)), h
        after = h >= self.reset_host_ns
        return np.where(after, float(self.reset_to_ns), float(self.offset_ns)), np.where(
            after, h - self.reset_host_ns, h
        )

    def device(self, host_ns) -> np.ndarray:
        """Device time (ns, float64) at host times ``host_ns``."""
        base, h = self._base(host_ns)
        return base + (1.0 + self.drift) * h

    def device_int(self, host_ns) -> np.ndarray:
        """Device timestamps (int64 ns, rounded) at host times ``host_ns``."""
        base, h = self._base(host_ns)
        return base.astype(np.int64) + np.rint((1.0 + self.drift) * h).astype(np.int64)

    def host(self, device_ns, after_reset: bool = False) -> np.ndarray:
        """Host time (ns, float64) of device timestamps (of the epoch after the reset when ``after_reset``)."""
        d = np.asarray(device_ns, np.float64)
        if after_reset and self.reset_host_ns is not None:
            return self.reset_host_ns + (d - self.reset_to_ns) / (1.0 + self.drift)
        return (d - self.offset_ns) / (1.0 + self.drift)


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(key.encode())])


def draw_clocks(chips: int, seed: int, offset_max_ns: float = 10e6, drift_max_ppm: float = 100.0) -> list[DeviceClock]:
    """The device clock of every chip (see the module docstring).

    Raises:
        ValueError: a negative or non-finite bound, or a drift bound of 1e6 ppm or more.
    """
    for name, v in (("clock offset bound", offset_max_ns), ("clock drift bound", drift_max_ppm)):
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number ≥ 0 (got {v})")
    if drift_max_ppm >= 1e6:
        raise ValueError(f"a clock drift of {drift_max_ppm} ppm would run a clock backwards")
    rng = _rng(seed, "clocks")
    off = np.rint(rng.uniform(-offset_max_ns, offset_max_ns, chips)).astype(np.int64)
    drift = rng.uniform(-drift_max_ppm, drift_max_ppm, chips) * 1e-6
    return [DeviceClock(int(o), float(d)) for o, d in zip(off, drift)]


def sync_reads(
    clocks: list[DeviceClock],
    duration_ns: float,
    seed: int,
    *,
    every_ns: int = 10_000_000,
    stagger_ns: int = 20_000,
    median_ns: float = 2000.0,
    sigma: float = 0.5,
    late_fraction: float = 0.01,
    late_max_ns: float = 200_000.0,
) -> pa.Table:
    """Synchronisation reads of every chip over host time [0, ``duration_ns``]: columns ``chip`` (int32),
    ``host_before_ns``, ``device_ns``, ``host_after_ns`` (int64), ordered by read time. At least three
    reads per chip (a fit needs them), even in a short run."""
    rng = _rng(seed, "sync")
    cols = {"chip": [], "host_before_ns": [], "device_ns": [], "host_after_ns": []}
    n = max(3, int(duration_ns // every_ns) + 1)
    every = every_ns if (n - 1) * every_ns <= duration_ns else max(int(duration_ns // (n - 1)), 1)
    for c, clk in enumerate(clocks):
        h0 = np.arange(n, dtype=np.int64) * every + c * stagger_ns % max(every, 1)
        up = median_ns * np.exp(sigma * rng.standard_normal(n))
        down = median_ns * np.exp(sigma * rng.standard_normal(n))
        late = rng.random(n) < late_fraction
        extra = np.where(late, rng.uniform(0.0, late_max_ns, n), 0.0)
        on_up = rng.random(n) < 0.5
        up, down = up + np.where(on_up, extra, 0.0), down + np.where(on_up, 0.0, extra)
        t_read = h0 + up
        cols["chip"].append(np.full(n, c, np.int32))
        cols["host_before_ns"].append(h0)
        cols["device_ns"].append(clk.device_int(t_read))
        cols["host_after_ns"].append(np.rint(t_read + down).astype(np.int64))
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(arrays["host_before_ns"], kind="stable")
    return pa.table(
        {
            "chip": pa.array(arrays["chip"][order], pa.int32()),
            **{k: pa.array(arrays[k][order], pa.int64()) for k in ("host_before_ns", "device_ns", "host_after_ns")},
        }
    )


__all__ = ["DeviceClock", "draw_clocks", "sync_reads"]
