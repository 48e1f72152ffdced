"""Gauges over a trailing span of time (``perfonto serve --window SPAN``), from run-level sums.

A gauge served as the latest window's value is one sample period's value (1 ms with ``--emulate``):
a rate of sparse events reads 0 in most windows, a utilization jumps between its extremes. Over a
span, ``SpanSums`` serves each gauge as ``perfonto analyze`` computes a run-level value: from the
span's *run-level sums* (``Stream.push_block(..., sums=True)``: per chip, counters summed, gauges and
packed fields × the window's interval, Σ interval), turned into run-level inputs
(``level_sums.run_values``) that the evaluator evaluates (``engine_levels._chip_level``) — a ratio of
sums, never a mean of window values. A ``rollup max|min`` metric is the extreme of its windows.

The ring: the pushed samples are cut at the lines of a time grid of ``SPAN / 16`` (the *buckets*,
by the latest timestamp of each sample over the chips; the samples of a block that fall out of the
span by its end go in one piece, so that a long block costs at most ~19 evaluator passes); each
bucket keeps its windows' sums, and the
oldest bucket is dropped once the younger ones cover ``SPAN`` (from its last sample to the latest).
So the span served is the trailing ``SPAN`` rounded up to whole buckets — at least ``SPAN`` once
that much was pushed, less than ``SPAN + SPAN/16`` — in at most 18 buckets of (chips × inputs) sums
whatever the sample period. A span shorter than the sample period serves the latest window.

Nulls: a bucket in which a window of that chip has a null value of an input a metric reads is left out
of that metric's sums on that chip (the other metrics and chips keep it); a metric with no bucket left
on a chip is null there (the series is absent). A new stream (``new_baseline``) whose time went
backwards (a device clock reset) starts the ring anew.
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass

import numpy as np

from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import signal_deps

from .engine_levels import _chip_level
from .level_sums import run_values

BUCKETS = 16  # buckets per span: the served span is SPAN rounded up to SPAN / BUCKETS


@dataclass
class _Bucket:
    """One bucket's sums: ``index`` on the grid, ``end_ns`` its last sample (max over chips),
    ``acc`` float64 (C, columns) the run-level sums (``Stream.sums``), ``windows`` their number,
    ``extremes`` {rollup metric: (C, …)} the extreme window value (NaN when all null)."""

    index: int
    end_ns: int
    acc: np.ndarray
    windows: int
    extremes: dict[str, np.ndarray]


class SpanSums:
    """The trailing ``span_ns`` of run-level sums of a live stream, and its gauges' values (module
    docstring). ``names``: the metrics to serve over the span."""

    def __init__(self, graph: MetricGraph, evaluator, span_ns: int, names: list[str]):
        if span_ns <= 0:
            raise ValueError(f"a span is positive, not {span_ns} ns")
        self.graph, self.evaluator = graph, evaluator
        self.span_ns = int(span_ns)
        self.bucket_ns = max(1, self.span_ns // BUCKETS)
        inputs = set(getattr(evaluator, "INPUTS", ()))
        deps = signal_deps(graph)
        self.rollup = {n: graph.metrics[n].rollup for n in names if graph.metrics[n].rollup}
        self.names = [n for n in names if n not in self.rollup]
        self.deps = {n: frozenset(deps[n] & inputs) for n in self.names}
        self.ring: collections.deque[_Bucket] = collections.deque()

    @property
    def windows(self) -> int:
        """The windows in the span."""
        return sum(b.windows for b in self.ring)

    def push(self, stream, block, lock) -> dict[str, np.ndarray] | None:
        """Push ``block`` (``live.SampleBlock``) through ``stream`` bucket by bucket, keeping each
        bucket's sums (the ring changed under ``lock``, which ``values`` is called under); returns the
        windows' metric values as ``Stream.push_block`` does."""
        ref = block.timestamps_ns.max(axis=1)
        if block.new_baseline and self.ring and int(ref[0]) <= self.ring[-1].end_ns:
            with lock:
                self.ring.clear()  # time went backwards: the old sums are of another clock
        grid = ref // self.bucket_ns
        change = np.flatnonzero(grid[1:] != grid[:-1]) + 1
        # the samples that fall out of the span by the end of this block go in one piece (dropped then)
        change = change[ref[change] > ref[-1] - self.span_ns - 2 * self.bucket_ns]
        cuts = [0, *change.tolist(), block.samples]
        outs = []
        for i0, i1 in zip(cuts[:-1], cuts[1:]):
            b = block.slice(i0, i1)
            out = stream.push_block(b.timestamps_ns, b.raw, b.present, b.missing or None, sums=True)
            if out:
                outs.append(out)
                with lock:
                    self._add(int(grid[i1 - 1]), int(ref[i1 - 1]), stream.sums, out)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}

    def _add(self, index: int, end_ns: int, acc: np.ndarray, out: dict[str, np.ndarray]) -> None:
        n = next(iter(out.values())).shape[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-null column: NaN
            ext = {m: (np.nanmax if how == "max" else np.nanmin)(out[m], axis=0) for m, how in self.rollup.items()}
        last = self.ring[-1] if self.ring else None
        if last is not None and last.index == index:
            last.acc += acc
            last.windows += n
            last.end_ns = max(last.end_ns, end_ns)
            for m, how in self.rollup.items():
                last.extremes[m] = (np.fmax if how == "max" else np.fmin)(last.extremes[m], ext[m])
        else:
            self.ring.append(_Bucket(index, end_ns, np.array(acc, dtype=np.float64), n, ext))
        while len(self.ring) > 1 and self.ring[-1].end_ns - self.ring[0].end_ns >= self.span_ns:
            self.ring.popleft()

    def values(self) -> dict[str, np.ndarray]:
        """{metric: float64 (C, …)} over the span, in the catalog's unit; NaN where null (module docstring)."""
        if not self.ring:
            return {}
        A = np.stack([b.acc for b in self.ring])  # (E, C, columns)
        E, C, K = A.shape
        flat = self.evaluator.input_sums(A.reshape(E * C, K))
        null = {n: np.isnan(v.reshape(E, C, -1)).any(axis=2) for n, v in flat.items()}  # (E, C)
        dirty = frozenset(n for n, m in null.items() if m.any())
        classes: dict[frozenset, list[str]] = {}
        for m in self.names:
            classes.setdefault(self.deps[m] & dirty, []).append(m)
        out: dict[str, np.ndarray] = {}
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for key, names in classes.items():
                if key:
                    keep = ~np.logical_or.reduce([null[n] for n in key])
                    S = np.where(keep[..., None], A, 0.0).sum(axis=0)
                else:
                    S = A.sum(axis=0)
                dt = S[:, -1]
                vals = run_values(self.graph.generation, self.evaluator.input_sums(S), dt)
                out.update(_chip_level(self.graph, self.evaluator, names, vals, dt, C))
            for m, how in self.rollup.items():
                ext = np.stack([b.extremes[m] for b in self.ring])
                out[m] = (np.nanmax if how == "max" else np.nanmin)(ext, axis=0)
        return out
