"""The step sequence as a piecewise-linear cumulative function of time (in core cycles).

Every slot of every step is a segment ``[start, end)`` (whole core cycles) during which each
quantity grows at a constant rate; a step is a sequence of slot groups (prefix, one group per layer
kind, suffix, see ``ops.StepPlan``), each group repeated back to back (the layer groups once per
layer). The cumulative value of a quantity at cycle ``s`` is the sum of the finished segments plus
the elapsed part of the current one — linear interpolation between segment boundaries, evaluated in
closed form (no loop over samples, ops or layers): the step comes from ``searchsorted`` over step
ends, the group from a comparison against the group ends, the repetition from an integer division,
the slot from a comparison against the slot ends.

Cycle-class quantities (``elapsed``, ``compute`` … ``idle``) grow at rate exactly 0 or 1 per cycle
with integer boundaries, so their cumulative values are exact integers in float64 (< 2**53). The
level-2 classes (``emulator.subclasses``) are phases of their slot: each grows at rate 1 over its own
contiguous whole-cycle stretch of the slot and 0 elsewhere, so they too are exact integers and add up
to their level-1 class at every cycle.
Step-end impulses (tokens, requests, steps) are exact integer step counts.
A collective slot that waits for its group (``collective_wait``) does its op's work — link bytes and busy
time, the reduction — after the wait, over the rest of the slot; energy, job time and HBM refresh accrue
over the whole slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ops import CLASSES, QUANTITIES, OpTable, StepPlan
from .subclasses import SUBCLASSES

#: Column order of the timeline's quantity axis: cycle classes (level 1, then level 2) first, then the
#: ops' quantities.
CYCLE_QUANTITIES = ("elapsed",) + CLASSES + SUBCLASSES
_PHASED = [CYCLE_QUANTITIES.index(n) for n in SUBCLASSES]
QUANTITY_NAMES = CYCLE_QUANTITIES + tuple(QUANTITIES)
#: Quantities that accrue with time whatever the chip does (board energy, job time, HBM refresh): spread
#: over the whole slot. Every other quantity is the work of the slot's op, which a collective only starts
#: once its group has arrived: in a slot that waits (``collective_wait``, first in the slot) it accrues
#: over the rest of the slot, so a chip waiting for a peer sends nothing on its links until the transfer.
_ACCRUE_ALWAYS = ("energy", "job_time", "hbm_refresh")
_OP_WORK = [len(CYCLE_QUANTITIES) + i for i, n in enumerate(QUANTITIES) if n not in _ACCRUE_ALWAYS]
_WAIT = SUBCLASSES.index("collective_wait")
QUANTITY_UNITS = {**{c: "core_cycle" for c in CYCLE_QUANTITIES}, **QUANTITIES}


def concat_tables(parts: list[OpTable]) -> OpTable:
    """Stack the steps of several ``OpTable`` blocks."""
    cat = np.concatenate
    wait = own = None
    if any(p.wait is not None for p in parts):
        wait = cat([p.wait if p.wait is not None else np.zeros_like(p.dur) for p in parts])
    if any(p.own_wait is not None for p in parts):
        own = cat([p.own_wait if p.own_wait is not None else np.zeros_like(p.dur) for p in parts])
    return OpTable(
        dur=cat([p.dur for p in parts]),
        cls=cat([p.cls for p in parts]),
        q={k: cat([p.q[k] for p in parts]) for k in parts[0].q},
        gauges={k: cat([p.gauges[k] for p in parts]) for k in parts[0].gauges},
        impulses={k: cat([p.impulses[k] for p in parts]) for k in parts[0].impulses},
        wait=wait,
        own_wait=own,
        phases={
            k: (cat([p.phases[k][0] for p in parts]), cat([p.phases[k][1] for p in parts])) for k in parts[0].phases
        },
    )


def take_steps(t: OpTable, n: int) -> OpTable:
    """The first ``n`` steps of ``t``."""
    return OpTable(
        dur=t.dur[:n],
        cls=t.cls[:n],
        q={k: v[:n] for k, v in t.q.items()},
        gauges={k: v[:n] for k, v in t.gauges.items()},
        impulses={k: v[:n] for k, v in t.impulses.items()},
        wait=None if t.wait is None else t.wait[:n],
        phases={k: (a[:n], o[:n]) for k, (a, o) in t.phases.items()},
        own_wait=None if t.own_wait is None else t.own_wait[:n],
    )


def step_lengths(t: OpTable, plan: StepPlan) -> np.ndarray:
    """Core cycles of each step: Σ over slots of duration × the repetitions of the slot's group."""
    return (t.dur * plan.slot_reps[None, :]).sum(axis=1)


@dataclass
class Timeline:
    """Steps laid end to end from cycle 0.

    Attributes:
        table: the steps' slots.
        plan: slot groups and their repetitions (``ops.StepPlan``).
        starts, ends: (steps,) int64 first and one-past-last core cycle of each step.
        inc: (steps, slots, Q) float64 amount of each quantity in one execution of a slot
            (``QUANTITY_NAMES`` order).
        cinc: exclusive running sum of ``inc`` over the slots of the same group.
        sstart, send: (steps, slots) int64 slot start/end cycles within one execution of its group.
        glen: (steps, G) int64 cycles of one execution of each group; gtot: (steps, G, Q).
        goff: (steps, G) int64 first cycle of each group in the step; gbase: (steps, G, Q) amount
            before each group.
        step_total: (steps, Q) amount per step ``Σ_g reps_g · gtot_g``.
        phase_amt, phase_off: (steps, slots, P) int64 amount and start within the slot of each level-2
            cycle class (``SUBCLASSES`` order).
    """

    table: OpTable
    plan: StepPlan
    starts: np.ndarray
    ends: np.ndarray
    inc: np.ndarray
    cinc: np.ndarray
    sstart: np.ndarray
    send: np.ndarray
    glen: np.ndarray
    gtot: np.ndarray
    goff: np.ndarray
    gbase: np.ndarray
    step_total: np.ndarray
    phase_amt: np.ndarray | None = None
    phase_off: np.ndarray | None = None

    @classmethod
    def build(cls, table: OpTable, plan: StepPlan) -> "Timeline":
        """Lay the steps of ``table`` end to end starting at cycle 0."""
        n, S = table.dur.shape
        dur = table.dur
        G = len(plan.reps)
        inc = np.empty((n, S, len(QUANTITY_NAMES)))
        inc[:, :, 0] = dur
        for k in range(len(CLASSES)):
            inc[:, :, 1 + k] = np.where(table.cls == k, dur, 0)
        amt = np.stack([table.phases[n][0] for n in SUBCLASSES], axis=2)
        off = np.stack([table.phases[n][1] for n in SUBCLASSES], axis=2)
        inc[:, :, _PHASED] = amt
        for i, name in enumerate(QUANTITIES):
            inc[:, :, len(CYCLE_QUANTITIES) + i] = table.q[name]
        cinc = np.zeros_like(inc)
        sstart = np.zeros_like(dur)
        glen = np.zeros((n, G), np.int64)
        gtot = np.zeros((n, G, inc.shape[2]))
        for g in range(G):
            idx = np.flatnonzero(plan.group == g)
            a, b = idx[0], idx[-1] + 1
            cs = np.cumsum(inc[:, a:b], axis=1)
            cinc[:, a + 1 : b] = cs[:, :-1]
            gtot[:, g] = cs[:, -1]
            cd = np.cumsum(dur[:, a:b], axis=1)
            sstart[:, a + 1 : b] = cd[:, :-1]
            glen[:, g] = cd[:, -1]
        send = sstart + dur
        reps = plan.reps
        full = glen * reps[None, :]
        goff = np.cumsum(full, axis=1) - full
        fulltot = gtot * reps[None, :, None]
        gbase = np.cumsum(fulltot, axis=1) - fulltot
        step_total = fulltot.sum(axis=1)
        lens = full.sum(axis=1)
        ends = np.cumsum(lens)
        starts = ends - lens
        return cls(table, plan, starts, ends, inc, cinc, sstart, send, glen, gtot, goff, gbase, step_total, amt, off)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def layers(self) -> int:
        """Layer repetitions per step (all layer kinds)."""
        return int(self.plan.reps[1:-1].sum())

    def step_at(self, s: np.ndarray) -> np.ndarray:
        """Index of the step containing cycle ``s`` (``starts[j] ≤ s < ends[j]``).

        Raises:
            ValueError: ``s`` is past the last simulated step.
        """
        j = np.searchsorted(self.ends, s, side="right")
        if np.any(j >= len(self.ends)):
            raise ValueError("sample past the last simulated step")
        return j

    def relcum(self, anchor: int, s: np.ndarray) -> np.ndarray:
        """Cumulative amount of every quantity at cycles ``s`` since the start of step ``anchor``.

        Args:
            anchor: step index with ``starts[anchor] ≤ min(s)``.
            s: (k,) int64 core cycles.
        Returns:
            (k, Q) float64 in ``QUANTITY_NAMES`` order.
        """
        s = np.asarray(s, np.int64)
        j = self.step_at(s)
        hi = int(j.max()) if len(j) else anchor
        cs = np.zeros((hi - anchor + 1, self.step_total.shape[1]))
        np.cumsum(self.step_total[anchor:hi], axis=0, out=cs[1:])
        return cs[j - anchor] + self._within(j, s - self.starts[j])

    def _within(self, j: np.ndarray, tau: np.ndarray) -> np.ndarray:
        plan = self.plan
        goff = self.goff[j]
        gend = goff + self.glen[j] * plan.reps[None, :]
        g = (tau[:, None] >= gend).sum(axis=1)
        rows = np.arange(len(j))
        gl = self.glen[j, g]
        r = tau - goff[rows, g]
        rep = np.where(plan.reps[g] > 1, r // np.maximum(gl, 1), 0)
        u = r - rep * gl
        base = self.gbase[j, g] + rep[:, None] * self.gtot[j, g]
        in_group = plan.group[None, :] == g[:, None]
        done = (in_group & (self.send[j] <= u[:, None])).sum(axis=1)
        first = np.searchsorted(plan.group, g, side="left")
        k = first + done
        dur = self.table.dur[j, k]
        rate = self.inc[j, k] / np.maximum(dur, 1)[:, None]
        tau = u - self.sstart[j, k]
        within = tau[:, None] * rate
        within[:, _PHASED] = np.clip(tau[:, None] - self.phase_off[j, k], 0, self.phase_amt[j, k])
        wait = self.phase_amt[j, k, _WAIT]  # the slot's first cycles, waiting for the group to arrive
        if wait.any():
            w = wait > 0
            moved = np.clip(tau[w] - wait[w], 0, None) / np.maximum(dur[w] - wait[w], 1)
            within[np.ix_(w, _OP_WORK)] = moved[:, None] * self.inc[j[w], k[w]][:, _OP_WORK]
        return base + (self.cinc[j, k] + within)

    def impulses_at(self, s: np.ndarray) -> dict[str, np.ndarray]:
        """Step-end impulse counts at cycles ``s`` (steps ending at or before ``s``), exact int64."""
        n_done = np.searchsorted(self.ends, np.asarray(s, np.int64), side="right")
        out = {}
        for name, v in self.table.impulses.items():
            cs = np.concatenate([[0], np.cumsum(v, dtype=np.int64)])
            out[name] = cs[n_done]
        return out

    def gauges_at(self, s: np.ndarray) -> dict[str, np.ndarray]:
        """Level of every step gauge at cycles ``s`` (the level of the step in progress)."""
        j = self.step_at(np.asarray(s, np.int64))
        return {name: v[j] for name, v in self.table.gauges.items()}

    def totals_at(self, s: int) -> dict[str, float]:
        """Cumulative amount of every quantity from cycle 0 to cycle ``s`` (ground truth)."""
        v = self.relcum(0, np.array([s], np.int64))[0]
        return dict(zip(QUANTITY_NAMES, v.tolist()))


__all__ = [
    "Timeline",
    "QUANTITY_NAMES",
    "QUANTITY_UNITS",
    "CYCLE_QUANTITIES",
    "concat_tables",
    "take_steps",
    "step_lengths",
]
