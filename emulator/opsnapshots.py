"""Counter snapshots at op boundaries (trigger-on-marker) and the per-op ground truth.

Some hardware reads its counters when the runtime writes a marker, not only on a timer: at the
start and end of every op, a snapshot of every register. ``write_snapshots`` emulates that
collector: for each chip, the registers at every boundary of every op, collective and host
transfer the trace holds (``emulator.trace``: slot executions with a duration, the idle slot left
out), stamped exactly as the trace stamps the boundary (the chip's device clock), and at every
regular sample instant (stamped as ``counters.parquet`` stamps it), so the snapshot dump alone
covers the counted span and its registers agree with each other. It is a counter dump in the
collector format (``snapshots.parquet``: wide layout, every chip the same number of rows — a chip
with fewer boundaries gets extra reads in its longest interval — no sampling period in its
metadata, since the snapshots are on no grid). Two boundaries whose stamps would coincide (under
1 ns apart) keep one read, a sample instant's if one of them is.

``by_op`` is the per-op ground truth: each slot's amounts (FLOPs, bytes, time) within each chip's
counted span (host time [0, its last sample]), read from the timelines — never from a dump — and
summed over chips; a span in progress at the last sample counts the part before it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .timeline import QUANTITY_NAMES, Timeline
from .trace import executions

#: ``by_op`` entries: name -> timeline quantities summed (cycle quantities are core cycles)
BY_OP = {
    "flops": ("mxu_flops_fp8", "mxu_flops_bf16", "mxu_flops_fp4"),
    "flops_fp8": ("mxu_flops_fp8",),
    "flops_bf16": ("mxu_flops_bf16",),
    "flops_fp4": ("mxu_flops_fp4",),
    "vector_flops": ("vpu_flops",),
    "hbm_read_bytes": ("hbm_read",),
    "hbm_write_bytes": ("hbm_write",),
    "hbm_bytes": ("hbm_read", "hbm_write"),
    "sram_bytes": ("sram_read", "sram_write"),
    "c2c_tx_bytes": ("c2c_tx",),
    "pcie_rx_bytes": ("pcie_rx",),
}


def slot_amounts(tl: Timeline, end: int) -> np.ndarray:
    """(slots, Q) amount of every quantity in every slot within cycles [0, ``end``] (every
    execution of the slot; the execution in progress at ``end`` counted in proportion)."""
    reps = tl.plan.slot_reps.astype(np.float64)
    full = np.flatnonzero(tl.ends <= end)
    out = np.einsum("jsq,s->sq", tl.inc[full], reps)
    for j in np.flatnonzero((tl.starts < end) & (tl.ends > end)):
        ex = executions(tl, np.array([j]))
        frac = np.where(
            ex.dur > 0,
            np.clip((end - ex.start) / np.maximum(ex.dur, 1), 0.0, 1.0),
            (ex.start <= end).astype(np.float64),
        )
        np.add.at(out, ex.slot, tl.inc[j, ex.slot] * frac[:, None])
    return out


def by_op(tls: list[Timeline], prof_of: np.ndarray, end_cycles: np.ndarray, core_hz: float) -> dict:
    """Per-op ground truth: {slot name: {``flops`` (matrix-engine FLOP, padding included), ``flops_fp8``,
    ``flops_bf16``, ``flops_fp4``, ``vector_flops``, ``hbm_read_bytes``, ``hbm_write_bytes``,
    ``hbm_bytes``, ``sram_bytes``, ``c2c_tx_bytes``, ``pcie_rx_bytes`` (B), ``time_s`` (summed over
    chips)}}. The ``idle`` slot is the time between the trace's spans."""
    q = {n: i for i, n in enumerate(QUANTITY_NAMES)}
    plan = tls[0].plan
    total = np.zeros((len(plan.slots), len(QUANTITY_NAMES)))
    for c, e in enumerate(np.asarray(end_cycles, np.int64)):
        total += slot_amounts(tls[int(prof_of[c])], int(e))
    out = {}
    for k, slot in enumerate(plan.slots):
        d = {name: float(sum(total[k, q[x]] for x in qs)) for name, qs in BY_OP.items()}
        d["time_s"] = float(total[k, q["elapsed"]] / core_hz)
        out[slot] = d
    return out


def _chip_grid(
    tl: Timeline, clk, ns: float, end: int, s_cyc: np.ndarray, t_dev: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, stamps) of one chip's snapshots: op boundaries and sample instants, increasing."""
    kinds = np.array(tl.plan.kinds)
    steps = np.flatnonzero(tl.starts < end)
    ex = executions(tl, steps)
    keep = (ex.dur > 0) & (kinds[ex.slot] != "idle")
    b = np.unique(np.r_[ex.start[keep], ex.start[keep] + ex.dur[keep]])
    b = b[(b >= 0) & (b <= end)]
    cyc = np.r_[s_cyc, b].astype(np.int64)
    stamp = np.r_[t_dev, clk.device_int(b * ns)].astype(np.int64)
    sample = np.r_[np.ones(len(s_cyc), bool), np.zeros(len(b), bool)]
    order = np.lexsort((~sample, cyc))
    cyc, stamp, sample = cyc[order], stamp[order], sample[order]
    first = np.r_[True, cyc[1:] != cyc[:-1]]
    cyc, stamp, sample = cyc[first], stamp[first], sample[first]
    while True:  # strictly increasing stamps: of two reads under 1 ns apart keep one (a sample's)
        bad = np.flatnonzero(np.diff(stamp) <= 0)
        if not len(bad):
            return cyc, stamp
        drop = np.where(sample[bad + 1] & ~sample[bad], bad, bad + 1)
        keep = np.ones(len(cyc), bool)
        keep[np.unique(drop)] = False
        cyc, stamp, sample = cyc[keep], stamp[keep], sample[keep]


def _pad(cyc: np.ndarray, stamp: np.ndarray, n: int, clk, ns: float) -> tuple[np.ndarray, np.ndarray]:
    """Add reads in the longest intervals until the chip has ``n``."""
    while len(cyc) < n:
        i = int(np.argmax(np.diff(cyc)))
        mid = (cyc[i] + cyc[i + 1]) // 2
        st = int(clk.device_int(np.array([mid * ns]))[0])
        if not (cyc[i] < mid < cyc[i + 1] and stamp[i] < st < stamp[i + 1]):
            raise ValueError("no room for another snapshot between two reads; sample less often")
        cyc, stamp = np.insert(cyc, i + 1, mid), np.insert(stamp, i + 1, st)
    return cyc, stamp


def write_snapshots(
    path: Path,
    gen,
    tls: list[Timeline],
    prof_of: np.ndarray,
    plan,
    clocks,
    core_hz: float,
    s_cyc: np.ndarray,
    t_dev: np.ndarray,
    thermal,
    metadata: dict,
) -> dict:
    """Write ``snapshots.parquet`` (module docstring) for sample cycles ``s_cyc`` and stamps ``t_dev``
    (samples, chips) of ``counters.parquet``; ``plan``: the counters' ``signals.ColumnPlan``.
    Returns ``{"rows", "per_chip"}``."""
    from .counters import write_counters

    ns = 1e9 / core_hz
    chips = s_cyc.shape[1]
    grids = [
        _chip_grid(tls[int(prof_of[c])], clocks[c], ns, int(s_cyc[-1, c]), s_cyc[:, c], t_dev[:, c])
        for c in range(chips)
    ]
    n = max(len(g[0]) for g in grids)
    grids = [_pad(cy, st, n, clocks[c], ns) for c, (cy, st) in enumerate(grids)]
    cyc = np.stack([g[0] for g in grids], axis=1)
    stamps = np.stack([g[1] for g in grids], axis=1)
    meta = {k: v for k, v in metadata.items() if k != "sample_period_ns"} | {"trigger": "op-boundary and sample timer"}
    write_counters(Path(path), gen, tls, plan, stamps, cyc, chips, thermal, meta, profile_of=prof_of)
    return {"rows": int(n * chips), "per_chip": int(n)}


__all__ = ["BY_OP", "by_op", "slot_amounts", "write_snapshots"]
