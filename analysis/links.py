"""Chip × link utilisation over the run: the share of each chip-to-chip link's cycles spent
transmitting, ``Σ busy cycles ÷ (link clock × Σ window intervals)`` over the windows where the
register is valid (the per-link form of ``c2c.link_busy``)."""

from __future__ import annotations

import numpy as np

SIGNAL = "c2c.busy_cycles"


def link_utilization(gen, w, chips) -> dict | None:
    """``{"signal", "unit": "percent", "chips": [...], "links": L, "utilization": [[...] per chip]}``
    from prepared windows ``w`` (``metrics.windows.prepare``), or None when the dump has no per-link
    busy counter (or the generation no clock for it)."""
    sig = gen.signals.get(SIGNAL)
    if sig is None or SIGNAL not in w.values or not sig.axes:
        return None
    clock = gen.clock_domains.get(sig.clock)
    if clock is None:
        return None
    reg = gen.registry
    hz = float(reg.Quantity(clock.value, clock.unit).to(f"{sig.clock}_cycle/s").magnitude)
    busy = w.values[SIGNAL].reshape(w.interval.shape + (-1,))  # (W, C, L) link cycles
    ok = np.isfinite(busy)
    total = np.where(ok, busy, 0.0).sum(axis=0)  # (C, L)
    time = np.where(ok, w.interval[:, :, None], 0.0).sum(axis=0)  # (C, L) s
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(time > 0, total / (hz * np.where(time > 0, time, 1.0)) * 100.0, np.nan)
    return {
        "signal": SIGNAL,
        "unit": "percent",
        "chips": [int(c) for c in chips],
        "links": int(util.shape[1]),
        "utilization": [[float(x) if np.isfinite(x) else None for x in row] for row in util],
    }


__all__ = ["link_utilization"]
