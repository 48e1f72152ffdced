"""Live evaluation: raw samples in, the latest metric values out, in constant memory.

``LiveMetrics`` pushes blocks of raw samples (``SampleBlock``) through the generated ``Stream``
evaluator (``codegen.runtime_stream``: the window rules of ``metrics.windows``, window by window) and
keeps, per metric and series (host, chip, instance):

- for a **gauge** (``metrics.telemetry``): the value of the latest window, or nothing when that
  window is null (a null window is never exported as NaN: the series is absent until a valid window);
  or, with ``window_s`` (``perfonto serve --window SPAN``), its run-level value over the trailing span
  from the span's run-level sums (``analysis.live_window``), computed when a snapshot asks for it;
- for a **counter**: the running total of its valid window values (a null window adds nothing, and
  is counted in ``null_windows``), and the wall time it started.

Memory does not grow with the samples: a block's windows are reduced to these arrays as it arrives
(with a span, to at most 18 buckets of per-chip sums).
Values are in the exported unit (``Exposition.unit.factor`` applied). ``snapshot()`` gives a
consistent copy under a lock, for the HTTP thread and the OTLP reader.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.telemetry import Exposition, expositions

from .live_window import SpanSums


@dataclass
class SampleBlock:
    """Raw samples of every chip: ``timestamps_ns`` int64 (S, C); ``raw[signal]`` uint64 (S, C,
    instances); ``present`` bool (S, C) or None (all present); ``missing[signal]`` bool like ``raw``
    (null registers); ``chips`` (C,) chip ids; ``hosts`` (C,) host names or None (one host, the
    server's ``--host``); ``new_baseline``: the first sample starts a new stream (a new emulation
    chunk, a device reset) instead of closing a window with the previous block's last sample."""

    timestamps_ns: np.ndarray
    raw: dict[str, np.ndarray]
    chips: np.ndarray
    present: np.ndarray | None = None
    missing: dict[str, np.ndarray] = field(default_factory=dict)
    hosts: tuple[str, ...] | None = None
    new_baseline: bool = False
    source: str = ""

    @property
    def samples(self) -> int:
        return int(self.timestamps_ns.shape[0])

    def slice(self, i0: int, i1: int) -> "SampleBlock":
        """Samples ``[i0, i1)`` (views); only the first slice keeps ``new_baseline``."""
        return SampleBlock(
            self.timestamps_ns[i0:i1],
            {k: v[i0:i1] for k, v in self.raw.items()},
            self.chips,
            None if self.present is None else self.present[i0:i1],
            {k: v[i0:i1] for k, v in self.missing.items()},
            self.hosts,
            self.new_baseline and i0 == 0,
            self.source,
        )


@dataclass
class Snapshot:
    """A consistent copy of the live state. ``values[metric]``: float64 (C, *sizes) in the exported
    unit, NaN where the series is absent; ``series`` (C,) (host, chip) label pairs; ``created_s``:
    wall time (s since the epoch) the counters started; ``last_timestamp_ns`` (C,) the latest sample's
    device timestamp (−1 before the first); the rest are totals since start."""

    values: dict[str, np.ndarray]
    series: tuple[tuple[str, str], ...]
    created_s: float
    samples: int
    windows: int
    null_windows: dict[str, int]
    last_timestamp_ns: np.ndarray
    last_push_s: float | None
    baselines: int
    window_s: float | None = None  # the span gauges are served over (None: the latest window)
    span_windows: int = 0  # the windows in that span now

    def points(self, metric: str):
        """Every finite value of ``metric``: ``(host, chip, index, value)`` by series, then instance in C
        order (``index``: the instance's index tuple, ``()`` for a per-chip metric). Null (NaN) and
        infinite values are left out; nothing for a metric the snapshot does not hold."""
        values = self.values.get(metric)
        if values is None:
            return
        for ci, (host, chip) in enumerate(self.series):
            v = values[ci]
            for idx in np.ndindex(v.shape):
                x = float(v[idx])
                if math.isfinite(x):
                    yield host, chip, idx, x


class LiveMetrics:
    """Latest window values and running totals of every metric of ``graph`` (module docstring).

    ``evaluator``: the generated evaluator module (``codegen.python_evaluator.generate``, loaded with
    ``analysis.evaluate.load_evaluator``); ``host``: the host label of every series when the blocks
    carry no host names; ``window_s``: serve each gauge over the trailing span of that many seconds
    (``analysis.live_window``) instead of the latest window (None).
    """

    def __init__(
        self, graph: MetricGraph, evaluator, host: str, prefix: str = "perfonto", window_s: float | None = None
    ):
        self.graph = graph
        self.evaluator = evaluator
        self.host = host
        self.expositions: dict[str, Exposition] = expositions(graph, prefix)
        self._lock = threading.Lock()
        self._stream = None
        self._chips: np.ndarray | None = None
        self._series: tuple[tuple[str, str], ...] = ()
        self._values: dict[str, np.ndarray] = {}
        self._created_s = time.time()
        self._samples = 0
        self._windows = 0
        self._nulls = {name: 0 for name in self.expositions}
        self._last_ts: np.ndarray = np.zeros(0, dtype=np.int64)
        self._last_push_s: float | None = None
        self._baselines = 0
        self.window_s = window_s
        self._span: SpanSums | None = None
        if window_s is not None:
            gauges = [n for n, e in self.expositions.items() if e.instrument == "gauge"]
            self._span = SpanSums(graph, evaluator, max(1, round(window_s * 1e9)), gauges)
        self._span_dirty = False

    @property
    def chips(self) -> np.ndarray | None:
        """Chip ids of the series, once the first block arrived."""
        return self._chips

    def _start(self, block: SampleBlock) -> None:
        C = block.timestamps_ns.shape[1]
        self._chips = np.asarray(block.chips).copy()
        self._series = self._keys(block)
        for name, e in self.expositions.items():
            shape = (C,) + tuple(s for _, s in e.axes)
            self._values[name] = np.full(shape, np.nan)  # absent until a valid window
        self._last_ts = np.full(C, -1, dtype=np.int64)

    def _keys(self, block: SampleBlock) -> tuple[tuple[str, str], ...]:
        hosts = block.hosts if block.hosts is not None else (self.host,) * len(block.chips)
        return tuple((str(h), str(int(c))) for h, c in zip(hosts, block.chips))

    def push(self, block: SampleBlock) -> int:
        """Evaluate the windows that ``block`` closes and fold them into the state; returns their number.

        Raises:
            ValueError: the block's (host, chip) keys differ from the first block's (the series of a server do
                not change while it is served; restart ``serve`` for a new server).
        """
        if block.samples == 0:
            return 0
        if self._chips is None:
            self._start(block)
        elif self._keys(block) != self._series:
            raise ValueError(
                f"{block.source or 'block'}: chips {[':'.join(k) for k in self._keys(block)]} differ from the "
                f"served (host:chip) {[':'.join(k) for k in self._series]}; restart `perfonto serve` for another server"
            )
        if self._stream is None or block.new_baseline:
            self._stream = self.evaluator.Stream()
            self._baselines += 1
        if self._span is None:
            out = self._stream.push_block(block.timestamps_ns, block.raw, block.present, block.missing or None)
        else:
            out = self._span.push(self._stream, block, self._lock)
        n = 0 if out is None else next(iter(out.values())).shape[0] if out else 0
        with self._lock:
            self._samples += block.samples
            self._last_ts = np.array(block.timestamps_ns[-1], dtype=np.int64)
            self._last_push_s = time.time()
            if n:
                self._windows += n
                self._fold(out)
        return n

    def _fold(self, out: dict[str, np.ndarray]) -> None:
        for name, e in self.expositions.items():
            v = out[name]
            nulls = np.isnan(v)
            self._nulls[name] += int(nulls.any(axis=tuple(range(2, v.ndim))).sum()) if v.ndim > 2 else int(nulls.sum())
            if e.instrument == "gauge":
                if self._span is None:
                    self._values[name] = v[-1] * e.unit.factor
                else:
                    self._span_dirty = True
            else:
                add = np.where(nulls, 0.0, v).sum(axis=0) * e.unit.factor
                valid = (~nulls).any(axis=0)
                cur = self._values[name]
                self._values[name] = np.where(valid, np.where(np.isnan(cur), 0.0, cur) + add, cur)

    def snapshot(self) -> Snapshot:
        """A consistent copy of the state (module docstring)."""
        with self._lock:
            if self._span is not None and self._span_dirty:
                for name, v in self._span.values().items():
                    self._values[name] = v * self.expositions[name].unit.factor
                self._span_dirty = False
            return Snapshot(
                {k: v.copy() for k, v in self._values.items()},
                self._series,
                self._created_s,
                self._samples,
                self._windows,
                dict(self._nulls),
                self._last_ts.copy(),
                self._last_push_s,
                self._baselines,
                self.window_s,
                0 if self._span is None else self._span.windows,
            )
