"""Run-level sums that can be added up piece by piece, and the levels built from them.

``metrics.levels`` evaluates a run-level value from sums over the windows where every signal the
metric reads is valid (counters summed, gauges and packed fields time-weighted, the interval summed
over the same windows). Over a dump read in pieces (``capture.dump_scan``) the same sums are carried
from piece to piece: ``ChipSums`` keeps one set of sums per *class* of metrics — the metrics that
read the same signals among those that were null somewhere so far — and splits a class when a piece
shows a new null signal (the new classes start from the old class's sums), so that every metric's
sums are over exactly the windows ``metrics.levels`` would use.

``combine`` rolls per-chip run-level values up to a group of chips as ``metrics.windows.server_level``
does over the windows valid on every chip (counters summed, gauges by their ``across_chips`` rule, packed
fields by their maximum, the interval the chips' mean, per-chip constants × the number of chips) — except
that a leader-counted amount (``ontology.kinds.leader_counted``: steps, tokens, requests) is the sum of its
leaders' rates × that interval: the chips' own windows differ in length where one's samples stop early,
and a count only the leader made must not be read over the others' time (over the windows valid on every
chip the two rules agree) — from sums and maxima, so that a
rollup of rollups (rack of hosts, pod of racks) is the rollup of the chips.
"""

from __future__ import annotations

import numpy as np

from perfonto.metrics.graph import MetricGraph
from perfonto.ontology import kinds
from perfonto.metrics.bridge import server_bad, spans, totals
from perfonto.metrics.levels import _invalid, signal_deps
from perfonto.metrics.windows import Windows


def masked_sums(w: Windows, gen, names, mask: np.ndarray | None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per chip: ``Σ v`` of counters and ``Σ v·dt`` of gauges and fields over the windows where ``mask``
    (W, C) is True (all when None), and ``Σ dt``. Null values in kept windows stay NaN.

    Each sum is one weighted pass over the windows (``einsum`` with the 0/1 mask, or the masked
    interval, as weights), with no masked copy of the values: a left-out window's value × 0 adds
    nothing as long as it is finite, which is checked on the left-out windows only (few); a signal
    with a NaN or ±inf there is summed through a masked copy instead."""
    dt = w.interval if mask is None else np.where(mask, w.interval, 0.0)
    ones = None if mask is None else mask.astype(np.float64)
    out_w, out_c = (None, None) if mask is None else np.nonzero(~mask)
    out = {}
    for n in names:
        v = w.values[n]
        counter = kinds.row_of(gen, n).run == "sum"
        if mask is None and counter:
            out[n] = np.einsum("wc...->c...", v)  # 3-4x ndarray.sum(axis=0) over (W, C) with C short
            continue
        weight = dt if not counter else ones
        if out_w is not None and out_w.size and not np.isfinite(v[out_w, out_c]).all():
            extra = (1,) * (v.ndim - 2)
            vv = np.where(mask.reshape(mask.shape + extra), v, 0.0)
            out[n] = vv.sum(axis=0) if counter else (vv * dt.reshape(dt.shape + extra)).sum(axis=0)
            continue
        out[n] = np.einsum("wc...,wc->c...", v, weight)
    return out, dt.sum(axis=0)


class ChipSums:
    """Run-level sums of one group of chips, piece by piece (module docstring). With ``server``, each
    class's sums are over the windows valid on *every* chip of the group (the server level's windows,
    ``metrics.levels``) instead of each chip's own valid windows."""

    def __init__(self, graph: MetricGraph, server: bool = False):
        self.graph = graph
        self.server = server
        self.gen = graph.generation
        self.deps = signal_deps(graph)
        self.dirty: frozenset[str] = frozenset()
        self.sums: dict[frozenset, tuple[dict[str, np.ndarray], np.ndarray]] = {}

    def key(self, metric: str, dirty: frozenset | None = None) -> frozenset:
        """The class of ``metric``: the signals it reads among those null somewhere so far."""
        return frozenset(self.deps[metric] & (self.dirty if dirty is None else dirty))

    def needs(self, key: frozenset) -> set[str]:
        """Signals the metrics of class ``key`` read."""
        return (
            set().union(*[self.deps[m] for m in self.graph.metrics if self.key(m) == key])
            if self.graph.metrics
            else set()
        )

    def add(self, w: Windows) -> None:
        """Add one piece's prepared windows (null ones left out per class; the windows of a missing sample
        bridged by ``w.bridged`` counted, ``metrics.bridge.totals``)."""
        tv = totals(w)
        dirty_now = frozenset(s for s, r in tv.null.items() if r.any())

        def sums_of(key, names):
            bad = _invalid(w, sorted(key & dirty_now), names) if key & dirty_now else None
            if bad is not None and self.server:  # a window null on one chip is left out on all of them
                bad = server_bad(bad, spans(w, names))
            return masked_sums(tv, self.gen, names, None if bad is None else ~bad)

        self._add(dirty_now, sums_of)

    def add_sums(self, full: dict[str, np.ndarray], dt: np.ndarray) -> None:
        """Add one piece none of whose window values is null, given as its per-chip sums (``full``:
        {input: (C, …)}, counters summed, gauges and fields × interval; ``dt``: Σ interval (C,)):
        every class adds them whole."""
        self._add(frozenset(), lambda key, names: ({n: full[n] for n in names}, dt))

    def _add(self, dirty_now: frozenset, sums_of) -> None:
        new = self.dirty | dirty_now
        if new != self.dirty or not self.sums:
            old, self.dirty = self.dirty, new
            split: dict[frozenset, tuple] = {}
            for m in self.graph.metrics:
                k_new, k_old = self.key(m), self.key(m, old)
                if k_new not in split:
                    prev = self.sums.get(k_old)
                    split[k_new] = ({n: v.copy() for n, v in prev[0].items()}, prev[1].copy()) if prev else None
            self.sums = split
        for key in list(self.sums):
            names = sorted(self.needs(key))
            sums, dt = sums_of(key, names)
            prev = self.sums[key]
            if prev is None:
                self.sums[key] = (
                    {n: np.array(sums[n], dtype=np.float64) for n in names},
                    np.array(dt, dtype=np.float64),
                )
            else:
                for n in names:
                    prev[0][n] += sums[n]
                self.sums[key] = (prev[0], prev[1] + dt)

    def run_values(self, key: frozenset) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(per-chip run-level values (C, …) of the signals of class ``key``, Σ dt (C,))."""
        sums, dt = self.sums[key]
        return run_values(self.gen, sums, dt), dt


def run_values(gen, sums: dict[str, np.ndarray], dt: np.ndarray) -> dict[str, np.ndarray]:
    """Run-level values from sums: counters as summed, gauges and fields divided by Σ dt."""
    out = {}
    for n, v in sums.items():
        if kinds.row_of(gen, n).run == "sum":
            out[n] = v
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                out[n] = v / dt.reshape(dt.shape + (1,) * (v.ndim - 1))
    return out


def combine(
    gen, values: dict[str, np.ndarray], dt: np.ndarray, groups: np.ndarray, n_groups: int
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Roll per-chip run-level ``values`` (C, …) and intervals ``dt`` (C,) up to ``n_groups`` groups
    (``groups``: (C,) group index of each chip): (values (G, …), interval (G,), chips (G,))."""
    n = np.bincount(groups, minlength=n_groups).astype(np.float64)
    interval = np.zeros(n_groups)
    np.add.at(interval, groups, dt)
    interval = interval / np.maximum(n, 1)
    out = {}
    for name, v in values.items():
        rule = kinds.across_rule(gen, name)
        shape = (n_groups,) + v.shape[1:]
        if kinds.leader_counted(gen, name):
            # each leader's count over its own time, the rates summed over the node's leaders, × the node's
            # interval: a chip that stopped reporting early shortens the mean interval, and a count only the
            # leader made must not be read over it (a dead non-leader chip made its host 14 % faster)
            ext = (-1,) + (1,) * (v.ndim - 1)
            with np.errstate(invalid="ignore", divide="ignore"):
                rate = np.where((dt > 0).reshape(ext), v / np.where(dt > 0, dt, 1.0).reshape(ext), 0.0)
            acc = np.zeros(shape)
            np.add.at(acc, groups, rate)
            out[name] = acc * interval.reshape(ext)
            continue
        if rule == "max":
            acc = np.full(shape, -np.inf)
            np.maximum.at(acc, groups, v)
            nan = np.zeros(shape, bool)
            np.logical_or.at(nan, groups, np.isnan(v))
            acc[nan] = np.nan
        else:
            acc = np.zeros(shape)
            np.add.at(acc, groups, v)
            if rule != "sum":
                acc = acc / n.reshape((-1,) + (1,) * (v.ndim - 1))
        out[name] = acc
    return out, interval, n
