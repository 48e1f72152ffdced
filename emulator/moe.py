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

Grouped expert GEMMs (``grouped_gemm_efficiency``): the experts of a chip run as one grouped GEMM,
each expert's rows tiled on their own, so its efficiency follows the tokens *per expert* ``t`` (the
rows of the chip ÷ the experts the step touches, ``tokens_per_expert``), with its own half size
``Assumptions.moe_half_rows``: ``eff(t) = mxu_eff_max · t / (t + moe_half_rows)``. A step of many
tokens gives every dense GEMM large efficiency while each expert sees few (decode at 8 tokens per
expert runs at 8/72 of the large-GEMM rate); the weights of every touched expert are read whatever
``t`` (``work``: the roofline's memory side), so below the ridge an expert GEMM is memory-bound.

All-to-all (dispatch and combine, ``a2a_efficiency``): each chip sends one message per peer; the
link efficiency grows with the message, ``a2a_eff · m / (m + a2a_half_bytes)``, and each of the
``ep − 1`` exchange steps costs ``hop_latency_s`` (``ops.slot_seconds``).
"""

from __future__ import annotations

import numpy as np

from .assumptions import efficiency


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


def tokens_per_expert(rows: np.ndarray, touched: np.ndarray) -> np.ndarray:
    """(steps,) rows of each expert GEMM a step runs: the chip's token-expert ``rows`` ÷ the experts
    it ``touched`` (0 where none): the size of the grouped GEMM's per-expert problems."""
    rows, touched = np.asarray(rows, np.float64), np.asarray(touched, np.float64)
    return np.divide(rows, touched, out=np.zeros(np.broadcast(rows, touched).shape), where=touched > 0)


def grouped_gemm_efficiency(t: np.ndarray, e_max: float, half_rows: float) -> np.ndarray:
    """Fraction of the dtype's dense peak a grouped expert GEMM sustains at ``t`` tokens per expert:
    ``e_max · t / (t + half_rows)`` (``Assumptions.mxu_eff_max``, ``Assumptions.moe_half_rows``; the
    size-dependent efficiency of Calculon and GenZ, sized by the expert's rows). 0 where ``t ≤ 0``."""
    return efficiency(t, e_max, half_rows)


def a2a_efficiency(bytes_per_peer: np.ndarray, eff_max: float, half_bytes: float) -> np.ndarray:
    """Fraction of the link rate an all-to-all sustains with ``bytes_per_peer`` per message:
    ``eff_max · m / (m + half_bytes)`` (``Assumptions.a2a_eff``, ``Assumptions.a2a_half_bytes``)."""
    return efficiency(bytes_per_peer, eff_max, half_bytes)


__all__ = ["a2a_efficiency", "grouped_gemm_efficiency", "imbalance", "tokens_per_expert"]
