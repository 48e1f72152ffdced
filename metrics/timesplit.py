"""Compute / communication / idle time of a window from busy intervals, as unions.

Two overlapping compute streams count once: compute time is the length of the *union* of compute
intervals, communication time the union of communication intervals, overlap the length of their
intersection, and idle the rest of the window. The four shares compute-only, communication-only,
overlap and idle sum to 1. (Nsight Systems and the PyTorch profiler's "overlap" view define the
communication–computation overlap the same way.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def union(intervals, lo: float, hi: float) -> np.ndarray:
    """Disjoint, sorted (start, end) intervals covering the union of ``intervals`` clipped to [lo, hi]."""
    a = np.asarray(intervals, dtype=np.float64).reshape(-1, 2)
    a = np.clip(a, lo, hi)
    a = a[a[:, 1] > a[:, 0]]
    if len(a) == 0:
        return np.zeros((0, 2))
    a = a[np.argsort(a[:, 0], kind="stable")]
    ends = np.maximum.accumulate(a[:, 1])
    new = np.empty(len(a), dtype=bool)
    new[0] = True
    new[1:] = a[1:, 0] > ends[:-1]
    starts = a[new, 0]
    group = np.cumsum(new) - 1
    stops = np.full(len(starts), -np.inf)
    np.maximum.at(stops, group, a[:, 1])
    return np.stack([starts, stops], axis=1)


def length(disjoint: np.ndarray) -> float:
    return float((disjoint[:, 1] - disjoint[:, 0]).sum()) if len(disjoint) else 0.0


def intersection_length(a: np.ndarray, b: np.ndarray) -> float:
    """Length of the intersection of two disjoint sorted interval sets (two-pointer sweep)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if e > s:
            total += e - s
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class TimeSplit:
    """Seconds (or whatever unit the intervals use) of the window, and shares that sum to 1."""

    window: float
    compute: float
    communication: float
    overlap: float
    idle: float

    @property
    def shares(self) -> dict[str, float]:
        w = self.window
        return {
            "compute_only": (self.compute - self.overlap) / w,
            "communication_only": (self.communication - self.overlap) / w,
            "overlap": self.overlap / w,
            "idle": self.idle / w,
        }


def time_split(compute, communication, lo: float, hi: float) -> TimeSplit:
    """Split the window [lo, hi] given compute and communication intervals (any number of streams)."""
    c, m = union(compute, lo, hi), union(communication, lo, hi)
    both = union(np.concatenate([c, m]) if len(c) + len(m) else np.zeros((0, 2)), lo, hi)
    ov = intersection_length(c, m)
    return TimeSplit(hi - lo, length(c), length(m), ov, (hi - lo) - length(both))
