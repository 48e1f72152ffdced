"""The ``OpTable`` of every chip profile of a job, in lock step (see ``emulator.knobs``).

``lockstep_tables`` times each profile's slots on its own (``ops.op_timing``), makes the chips wait
for each other at every data-moving collective (``knobs.synchronise``), shares the model FLOPs out
over the chips (``ops.model_flop_scale``: each chip's share in proportion to its unpadded matrix
work, so the shares add up to the model total) and builds each profile's counter quantities
(``ops.op_table``). With one profile (every chip alike) it is ``ops.build_ops``.
"""

from __future__ import annotations

import numpy as np

from .knobs import ChipProfile, synchronise
from .ops import EmuConfig, OpTable, matrix_work, model_flop_scale, op_table, op_timing, own_wait
from .scheduler import StepBatch


def lockstep_tables(
    b: StepBatch, cfg: EmuConfig, idle_cycles: np.ndarray | None, profiles: list[ChipProfile], counts: np.ndarray
) -> list[OpTable]:
    """One ``OpTable`` per profile (``counts[p]`` chips each) for the steps of ``b``; every table has
    the same step and slot-group lengths."""
    timings = [op_timing(b, cfg, idle_cycles, p) for p in profiles]
    durs, waits = _sync(timings, cfg)
    counts = np.asarray(counts, np.float64)
    mean_u = sum(c * matrix_work(W, cfg.plan) for c, (W, _, _) in zip(counts, timings)) / counts.sum()
    scale = model_flop_scale(b, cfg, mean_u)
    out = []
    for i, (p, (W, tm, d)) in enumerate(zip(profiles, timings)):
        own = own_wait(tm, d, cfg.hw.core_hz)  # waiting for the hottest expert rank, part of the chip's own time
        wait = waits[i] if len(profiles) > 1 else None
        if own is not None:
            wait = own if wait is None else wait + own
        out.append(op_table(b, cfg, W, tm, durs[i], profile=p, wait=wait, own=own, model_scale=scale))
    return out


def lockstep_seconds(b: StepBatch, cfg: EmuConfig, profiles: list[ChipProfile]) -> np.ndarray:
    """(steps,) seconds of each step with the chips in lock step (for the scheduler's clock)."""
    timings = [op_timing(b, cfg, None, p) for p in profiles]
    durs, _ = _sync(timings, cfg)
    return (durs[0] @ cfg.plan.slot_reps.astype(np.float64)) / cfg.hw.core_hz


def _sync(timings, cfg: EmuConfig) -> tuple[np.ndarray, np.ndarray]:
    plan = cfg.plan
    durs = np.stack([d for _, _, d in timings])
    moves = np.zeros(durs.shape[1:], bool)
    for W, _, _ in timings:
        moves |= (W["tx"] > 0) | (W["hops"] > 0)
    coll = np.array([k == "collective" for k in plan.kinds])[None, :]
    return synchronise(durs, moves & coll, plan.kinds, plan.group)


__all__ = ["lockstep_seconds", "lockstep_tables"]
