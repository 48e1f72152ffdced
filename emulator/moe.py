"""Mixture-of-experts costs beyond the per-chip work (``work``): load imbalance across the
expert-parallel ranks.

With the routed experts spread over ``ep`` chips, every chip waits at the MoE combine for the chip
whose experts got the most tokens (the all-to-all is a barrier), so a layer's expert time is that of
the hottest rank, not the mean. Two parts (``imbalance``):

- routing noise: with ``n`` token-expert assignments per rank on average, each rank's count is close
  to binomial, standard deviation ``σ = √(n (1 − 1/ep))``; the largest of ``ep`` such counts exceeds
  the mean by about ``σ √(2 ln ep)`` (the extreme-value bound of ``ep`` normal variables);
- routing skew of trained routers (popular experts; serving stacks rebalance with replicated hot
  experts, DeepSeek's EPLB): ``Assumptions.expert_imbalance``, the hottest rank's load ÷ the mean
  beyond the noise (1 = a perfectly balanced router).

The counters count each chip's mean share of the work; the difference is time the other chips wait
at ``moe_combine`` (top-down level 2: waiting for a peer). The explicit ``router_skew`` knob
(``emulator.knobs``) gives chips different loads on top.
"""

from __future__ import annotations

import numpy as np


def imbalance(assignments_per_rank: np.ndarray, ep: int, skew: float = 1.0) -> np.ndarray:
    """(steps,) hottest rank's routed rows ÷ the mean, ``skew · (1 + √(2 ln ep) · σ/n)`` with
    ``σ = √(n (1 − 1/ep))`` for ``n`` assignments per rank (1 where ``ep ≤ 1`` or ``n = 0``). The
    emulator computes the noise part with the work (``skew = 1``) and applies
    ``Assumptions.expert_imbalance`` with the timing (``ops.slot_seconds``)."""
    n = np.asarray(assignments_per_rank, np.float64)
    if ep <= 1:
        return np.ones_like(n)
    noise = np.sqrt(2.0 * np.log(ep)) * np.sqrt(np.maximum(n, 0.0) * (1.0 - 1.0 / ep))
    rel = np.divide(noise, n, out=np.zeros_like(n), where=n > 0)
    return np.where(n > 0, float(skew) * (1.0 + rel), 1.0)


__all__ = ["imbalance"]
