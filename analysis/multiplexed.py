"""Metrics whose inputs were never counted together, marked after the engine's pass.

The fused kernel (``analysis.engine``) evaluates the formulas over the scaled registers
(``capture.multiplex``); it knows nothing of groups. This post-pass, over the window values the engine
kept, finds for each metric the windows where two of its signals (read directly or through other
metrics, ``metrics.levels.signal_deps``) ran in different multiplex groups (``capture.multiplex.
never_together``) and applies the declared policy:

- ``null`` (the default): those window values are null with the reason "mismeasured: a (group 1) and b
  (group 2) never counted together …" in the null counts (``Evaluation.nulls``: report.json's
  ``null_windows``, the terminal's "Null window values"), and the metric's per-chip value (a chip with
  such a window) and server value (any chip) are null too: a run-level ratio of counts taken in
  different intervals is no more a measurement than a window's;
- ``flag``: the values stay, marked: ``Evaluation.mismeasured`` (the ``mismeasured`` column of
  metrics.parquet, a note, and the mark beside a bounded metric's value in the terminal report).

Either way ``Evaluation.mismeasured[metric]`` is the (W, C) mask, and the bound checks are taken again
over the window values (a nulled window is no bound violation).
"""

from __future__ import annotations

import numpy as np

from perfonto.capture.multiplex import Multiplex, never_together
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import signal_deps

from .checks import WindowChecks
from .evaluate import Evaluation

POLICIES = ("null", "flag")


def apply_multiplexed(graph: MetricGraph, ev: Evaluation, mux: Multiplex, chips, policy: str = "null"):
    """Mark (``flag``) or null (``null``) the window values of ``ev`` (kept: ``ev.window`` (W, C, …)) whose
    inputs were never counted together (module docstring); ``chips``: (C,) chip numbers of the columns.
    Returns ``(checks, notes)``: the bound checks over the values as they now are, and report notes.

    Raises:
        ValueError: an unknown policy (not ``null`` or ``flag``).
    """
    if policy not in POLICIES:
        raise ValueError(f"--multiplexed {policy!r}: give one of {', '.join(POLICIES)}")
    w = ev.windows
    start = np.asarray(w.start_ns, np.int64)
    end = start + np.rint(np.asarray(w.interval) * 1e9).astype(np.int64)
    deps = signal_deps(graph)
    ev.mismeasured = {}
    notes = []
    for name in graph.metrics:
        reasons = never_together(mux, deps.get(name, ()), chips, start, end)
        if not reasons:
            continue
        mask = np.zeros(start.shape, bool)
        for m in reasons.values():
            mask |= m
        ev.mismeasured[name] = mask
        if policy == "flag":
            notes.append(f"{name}: {int(mask.sum())} window value(s) flagged — " + "; ".join(reasons))
            continue
        v = ev.window[name]
        already = np.isnan(v).reshape(v.shape[0], v.shape[1], -1).any(axis=2)
        v[mask] = np.nan
        counts = ev.nulls.setdefault(name, {})
        for why, m in reasons.items():
            if (m & ~already).any():
                counts[why] = counts.get(why, 0) + int((m & ~already).sum())
        bad_chip = mask.any(axis=0)
        if name in ev.per_chip:
            ev.per_chip[name] = np.asarray(ev.per_chip[name], np.float64).copy()
            ev.per_chip[name][bad_chip] = np.nan
        if name in ev.server and bad_chip.any():
            ev.server[name] = np.full(np.shape(ev.server[name]), np.nan)[()]
    checks = WindowChecks(graph)
    checks.add(ev.window, 0, np.asarray(chips), 0)
    return checks, notes


__all__ = ["POLICIES", "apply_multiplexed"]
