"""The step loop of ``serving.serve``: the scheduler ranks' batchers stepped in turn, online one step
at a time on the simulated clock (idle gaps until the next arrival when nothing is queued), offline in
blocks of steps timed together (doubling up to 1,024).
"""

from __future__ import annotations

from .steps import StepBatch

STOP, IDLE, STEPPED = "stop", "idle", "stepped"  # what one turn of the loop did


class StepLoop:
    """The loop's state: ``rows`` (each step's row; None for an idle gap), ``owner`` (its batcher, −1
    idle), ``idle`` (s idle before it), ``secs`` (its duration), ``local`` (per batcher, the global
    index of each of its steps), ``now`` (simulated s), ``k`` (the next batcher in turn), ``blk``
    (offline block size)."""

    def __init__(self, batchers, seconds_fn):
        self.batchers, self.seconds_fn = batchers, seconds_fn
        self.rows, self.owner, self.idle, self.secs = [], [], [], []
        self.local = [[] for _ in batchers]
        self.now, self.k, self.blk = 0.0, 0, 16

    def done_all(self) -> bool:
        """Whether every batcher has finished."""
        return all(bt.finished for bt in self.batchers)

    def online_turn(self, until_s: float | None) -> str:
        """One step of the next batcher in turn with a request queued (timed alone), or, with none
        queued, an idle gap until the next arrival (``IDLE``); ``STOP`` when no request will arrive."""
        batchers, pp = self.batchers, len(self.batchers)
        order = [(self.k + j) % pp for j in range(pp)]
        i = next((c for c in order if not batchers[c].finished and not batchers[c].idle(self.now)), None)
        if i is None:  # nothing queued anywhere: idle until the next arrival
            nxt = min((b.next_arrival() for b in batchers if b.next_arrival() is not None), default=None)
            if nxt is None:
                return STOP
            gap = nxt - self.now if until_s is None else min(nxt, until_s + 1e-9) - self.now
            self.rows.append(None), self.owner.append(-1), self.idle.append(max(gap, 0.0)), self.secs.append(0.0)
            self.now += max(gap, 0.0)
            return IDLE
        self.k = i + 1
        bt = batchers[i]
        self.local[i].append(len(self.rows))
        row = bt.step(self.now)
        s = float(self.seconds_fn(StepBatch.from_rows([row]))[0])
        self.rows.append(row), self.owner.append(i), self.idle.append(0.0), self.secs.append(s)
        self.now += s
        return STEPPED

    def offline_turn(self) -> str:
        """A block of ``blk`` turns (a finished batcher's skipped), timed together; the block size then
        doubles (at most 1,024). ``STOP`` when no batcher had a step to take."""
        batchers, pp = self.batchers, len(self.batchers)
        block = []
        for _ in range(self.blk):
            i = self.k % pp
            self.k += 1
            if batchers[i].finished:
                if self.done_all():
                    break
                continue
            self.local[i].append(len(self.rows) + len(block))
            block.append(batchers[i].step(0.0))
            self.owner.append(i)
        if not block:
            return STOP
        b = StepBatch.from_rows(block)
        s = self.seconds_fn(b)
        self.rows.extend(block), self.idle.extend([0.0] * len(block)), self.secs.extend(s.tolist())
        self.now += float(s.sum())
        self.blk = min(2 * self.blk, 1024)
        return STEPPED


__all__ = ["IDLE", "STEPPED", "STOP", "StepLoop"]
