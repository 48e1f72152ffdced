"""Counter windows: from raw register samples to the per-window values that metrics read.

The rules, in one place:
- a counter's value in a window is its *increase*: the modular difference of two raw register reads
  in the counter's integer width, taken in unsigned 64-bit integer arithmetic before any conversion to
  float (so a 64-bit counter near 2^60 keeps every unit), then multiplied by the signal's ``scale``;
- a gauge's value in a window is its time-weighted mean, i.e. the mean of the two endpoint reads
  (trapezoid rule on a piecewise-linear level), times ``scale``;
- ``interval`` is the difference of the two samples' timestamps (ns → s), never wall-clock time;
- the first sample only sets the baseline: S samples give S − 1 windows.

Levels (``Windows.level``): ``window`` (W windows × C chips), ``run`` (one window per chip: counters
summed, gauges time-weighted, intervals summed) and ``server`` (one value: counters summed over chips,
gauges combined by their ``across_chips`` rule, interval the run duration, per-chip spec constants
multiplied by the number of chips). A metric at run or server level is computed from these summed base
quantities, so a run-level utilisation is a ratio of sums, never a mean of per-window ratios.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ontology.generation import Generation
from ontology.model import SignalKind


class DumpError(ValueError):
    """A counter dump that cannot be read as the generation's signals (message says what and how to fix)."""


@dataclass
class CounterDump:
    """Raw samples of one run. ``raw[name]`` has shape (samples, chips, instances) as uint64;
    ``timestamps_ns`` has shape (samples, chips)."""

    path: str
    chips: np.ndarray
    timestamps_ns: np.ndarray
    raw: dict[str, np.ndarray]
    metadata: dict = field(default_factory=dict)


@dataclass
class Windows:
    """Prepared values. ``values[name]``: float64 of shape (W, C, *axis sizes) in the signal's unit;
    ``interval``: (W, C) seconds; ``chips``: factor for per-chip spec constants (1, or C at server level)."""

    interval: np.ndarray
    values: dict[str, np.ndarray]
    chips: float = 1.0
    level: str = "window"
    start_ns: np.ndarray | None = None


def read_counters(path: str | Path, gen: Generation) -> CounterDump:
    """Read a counter Parquet file (columns ``chip``, ``timestamp_ns`` and one per signal).

    Raises:
        DumpError: unreadable file, missing or mistyped columns, chips with different sample counts,
            timestamps that do not increase.
    """
    p = str(path)
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(f"{p}: not a readable Parquet counter dump ({exc}); re-run the emulator or check the file") from None
    cols = set(table.column_names)
    need = {"chip", "timestamp_ns"} | set(gen.signals)
    missing = sorted(need - cols)
    if missing:
        raise DumpError(f"{p}: missing columns for generation `{gen.name}`: {', '.join(missing[:8])}"
                        f"{' …' if len(missing) > 8 else ''}; was the dump written for another generation?")
    meta = {}
    if table.schema.metadata and b"perfonto" in table.schema.metadata:
        try:
            meta = json.loads(table.schema.metadata[b"perfonto"])
        except ValueError:
            meta = {}
    chip = table.column("chip").to_numpy()
    ts = table.column("timestamp_ns").to_numpy().astype(np.int64)
    chips = np.unique(chip)
    n_chips = len(chips)
    if n_chips == 0:
        raise DumpError(f"{p}: the dump holds no samples")
    order = np.lexsort((ts, chip))  # by chip, then time
    counts = np.bincount(np.searchsorted(chips, chip), minlength=n_chips)
    if not np.all(counts == counts[0]):
        raise DumpError(f"{p}: chips have different numbers of samples ({dict(zip(chips.tolist(), counts.tolist()))}); the dump is truncated or corrupt")
    S = int(counts[0])
    ts_sc = ts[order].reshape(n_chips, S).T
    if S > 1 and np.any(np.diff(ts_sc, axis=0) <= 0):
        raise DumpError(f"{p}: timestamps do not increase within a chip (duplicate or out-of-order samples)")
    raw: dict[str, np.ndarray] = {}
    for name, sig in gen.signals.items():
        col = table.column(name).combine_chunks()
        n_inst = sig.instances
        if pa.types.is_fixed_size_list(col.type):
            if col.type.list_size != n_inst:
                raise DumpError(f"{p}: column `{name}` has {col.type.list_size} instances, the generation declares {n_inst}")
            arr = col.flatten().to_numpy(zero_copy_only=False).reshape(-1, n_inst)
        else:
            if n_inst != 1:
                raise DumpError(f"{p}: column `{name}` is a scalar but `{sig.block}` has {n_inst} instances")
            arr = col.to_numpy(zero_copy_only=False).reshape(-1, 1)
        if col.null_count:
            raise DumpError(f"{p}: column `{name}` holds {col.null_count} nulls; raw registers cannot be null")
        arr = arr.astype(np.uint64, copy=False)[order]
        raw[name] = arr.reshape(n_chips, S, n_inst).transpose(1, 0, 2)
    return CounterDump(p, chips, ts_sc, raw, meta)


def prepare(dump: CounterDump, gen: Generation) -> Windows:
    """Turn raw samples into windows (see the module docstring for the rules)."""
    ts = dump.timestamps_ns
    interval = np.diff(ts, axis=0).astype(np.float64) * 1e-9
    values: dict[str, np.ndarray] = {}
    for name, sig in gen.signals.items():
        raw = dump.raw[name]
        shape = raw.shape[:2]
        sizes = tuple(s for _, s in sig.axes)
        if sig.kind is SignalKind.counter:
            delta = modular_delta(raw[:-1], raw[1:], sig.width)
            v = delta.astype(np.float64) * sig.scale
        else:
            r = raw.astype(np.float64)
            v = (r[:-1] + r[1:]) * (0.5 * sig.scale)
        values[name] = v.reshape((shape[0] - 1, shape[1]) + sizes)
    return Windows(interval, values, 1.0, "window", ts[:-1])


def modular_delta(prev: np.ndarray, cur: np.ndarray, width: int) -> np.ndarray:
    """``(cur - prev) mod 2**width`` on uint64 registers, exact for every width up to 64.

    Source: how every wrapping hardware counter is read (e.g. Linux perf's ``delta = (new - prev) &
    ((1 << width) - 1)`` in ``x86_perf_event_update``).
    """
    d = cur.astype(np.uint64) - prev.astype(np.uint64)  # wraps modulo 2**64
    if width < 64:
        d &= np.uint64((1 << width) - 1)
    return d


def run_level(w: Windows, gen: Generation) -> Windows:
    """One window per chip: counters summed, gauges time-weighted over the windows, intervals summed."""
    dt = w.interval
    total = dt.sum(axis=0, keepdims=True)
    values = {}
    for name, v in w.values.items():
        sig = gen.signals[name]
        if sig.kind is SignalKind.counter:
            values[name] = v.sum(axis=0, keepdims=True)
        else:
            wt = dt.reshape(dt.shape + (1,) * (v.ndim - 2))
            with np.errstate(invalid="ignore", divide="ignore"):
                values[name] = (v * wt).sum(axis=0, keepdims=True) / total.reshape(total.shape + (1,) * (v.ndim - 2))
    return Windows(total, values, w.chips, "run")


def server_level(run: Windows, gen: Generation) -> Windows:
    """One value for the whole server from a run-level ``Windows`` (chips on axis 1)."""
    n = run.interval.shape[1]
    values = {}
    for name, v in run.values.items():
        sig = gen.signals[name]
        rule = "sum" if sig.kind is SignalKind.counter else sig.across_chips
        if rule == "sum":
            values[name] = v.sum(axis=1, keepdims=True)
        elif rule == "max":
            values[name] = v.max(axis=1, keepdims=True)
        else:
            values[name] = v.mean(axis=1, keepdims=True)
    interval = run.interval.mean(axis=1, keepdims=True)
    return Windows(interval, values, float(n) * run.chips, "server")
