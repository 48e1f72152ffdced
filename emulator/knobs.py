"""Chips that differ: a slow chip, a throttled link, an imbalanced MoE router — and how the chips of a
synchronous job wait for each other.

By default every chip of a rank does the same work at the same pace. Three knobs (``Knobs``) make
them differ, each giving some chips their own ``ChipProfile``:

- ``slow_chip=(c, f)``: every op of chip ``c`` takes ``f`` × as long (a chip binned or throttled to a
  lower clock; ``f = 1.2`` is "20 % slower"). Its FLOPs and bytes are unchanged.
- ``throttled_link=(c, l, f)``: link ``l`` of chip ``c`` carries ``1/f`` of its rate. A ring
  collective stripes its data evenly over the links it uses and every ring step waits for its slowest
  transfer, so the transfer part of every collective of the group takes ``f`` × as long on every
  chip; the throttled link is busy all that time, the others ``1/f`` of it (NCCL's ring has the same
  property: its bus bandwidth is that of its slowest hop).
- ``router_skew=s``: routed-expert load is imbalanced: with the experts spread over ``ep`` chips in
  contiguous blocks, chip ``c``'s experts receive a share of the token-expert assignments
  proportional to ``(c + 1) ** −s`` (a Zipf law over the chips' expert groups; chip 0 is the
  hottest; ``s = 0`` is uniform routing). ``ChipProfile.expert_load`` is that share × ``ep`` (mean 1).

Synchronisation (``synchronise``): the chips run in lock step — every collective that moves data is
a barrier. A chip *arrives* at a collective when its ops since the previous barrier are done; the
collective starts when the last chip arrives and then takes the longest of the participants' own
collective times. So on chip ``c`` a collective slot lasts ``wait_c + max_j coll_j`` with
``wait_c = max_j arrive_j − arrive_c`` (the time it waits for the straggler: the *collective wait*,
as NCCL's profiler and Nsight Systems' NCCL view measure it). Host transfers and idle slots are the
same on every chip. Whatever difference is left at the end of a slot group (ops after its last
data-moving collective) is waited out in the group's last collective slot, so every step — and every
group execution — has the same length on every chip. Knobs with data-parallel replicas (``dp > 1``)
are refused: replicas never wait for each other, and this lock-step model would make them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from perfonto.ontology.errors import PerfontoError


#: the largest slow-chip or throttled-link factor (a binned or throttled part is 1.1–2 × slower; 10^9 asked the
#: emulator for 617 GiB)
MAX_SLOWDOWN = 100.0


class WorkloadError(PerfontoError, ValueError):
    """A run's workload, sampling or knob that the emulator refuses (a duration, period, chip count, model
    name, warm-up or a slow-chip/throttled-link/router-skew knob out of range): bad input, so a
    ``perfonto.Error``; a ``ValueError`` as it always was."""


@dataclass(frozen=True)
class ChipProfile:
    """How one chip differs from the nominal chip.

    compute_factor: multiplier of every op's duration (≥ 1 slows the chip).
    expert_load: the chip's routed-expert rows ÷ the mean over chips (1 = uniform routing).
    ring_factor: multiplier of the link-transfer time of the chip's collectives (the group's slowest link).
    slow_link: index of a link of this chip that runs at ``1 / ring_factor`` of its rate, or None.
    routed: the expert loads of the chips are the router-skew knob's, not the routing model's.
    """

    compute_factor: float = 1.0
    expert_load: float = 1.0
    ring_factor: float = 1.0
    slow_link: int | None = None
    routed: bool = False  # expert loads set by router_skew: the routing model's imbalance (``moe``) is off


NOMINAL = ChipProfile()


@dataclass(frozen=True)
class Knobs:
    """Emulator knobs that make chips differ (see the module docstring). ``None``/0 = off."""

    slow_chip: tuple[int, float] | None = None
    throttled_link: tuple[int, int, float] | None = None
    router_skew: float = 0.0

    @property
    def active(self) -> bool:
        return self.slow_chip is not None or self.throttled_link is not None or self.router_skew != 0.0

    def to_json(self) -> dict:
        return {
            "slow_chip": list(self.slow_chip) if self.slow_chip else None,
            "throttled_link": list(self.throttled_link) if self.throttled_link else None,
            "router_skew": float(self.router_skew),
        }

    def check(self, chips: int, mapping, model, links: int, ring_links: int) -> None:
        """Raises ``ValueError`` for a knob that does not apply (bad chip or link, factor < 1 or not
        finite, router skew without routed experts spread over chips, any knob with ``dp > 1``)."""

        def factor(name, f):
            if not (np.isfinite(f) and 1.0 <= f <= MAX_SLOWDOWN):
                raise WorkloadError(
                    f"{name} factor must be a number from 1 to {MAX_SLOWDOWN:g} (a slowdown; got {f}): a run covers "
                    "whole engine steps, and a chip or link 10^4 × slower made one step 828 s long"
                )

        if self.slow_chip is not None:
            c, f = self.slow_chip
            if not 0 <= int(c) < chips:
                raise WorkloadError(f"slow_chip: chip {c} is not one of the {chips} chips (0 … {chips - 1})")
            factor("slow_chip", float(f))
        if self.throttled_link is not None:
            c, link, f = self.throttled_link
            if not 0 <= int(c) < chips:
                raise WorkloadError(f"throttled_link: chip {c} is not one of the {chips} chips (0 … {chips - 1})")
            used = min(ring_links or links, links)
            if not 0 <= int(link) < used:
                raise WorkloadError(
                    f"throttled_link: link {link} is not one of the {used} links the collectives use (0 … {used - 1})"
                )
            factor("throttled_link", float(f))
            if mapping.tp * mapping.pp <= 1:
                raise WorkloadError("throttled_link: a single-chip group sends nothing over its links")
        if not np.isfinite(self.router_skew) or self.router_skew < 0:
            raise WorkloadError(f"router_skew must be a finite number ≥ 0 (got {self.router_skew})")
        if self.router_skew and not (model.is_moe and mapping.ep > 1):
            raise WorkloadError(
                "router_skew needs a mixture-of-experts model with its experts spread over chips (ep > 1)"
            )
        if self.active and mapping.dp > 1:
            raise WorkloadError(
                "the slow-chip, throttled-link and router-skew knobs model chips that synchronise every "
                "step; data-parallel replicas (dp > 1) never wait for each other — emulate one replica"
            )

    def profiles(self, chips: int, mapping) -> tuple[list[ChipProfile], np.ndarray]:
        """Distinct profiles and the profile index of every chip ((chips,) int64). Chips are numbered
        ``(replica · pp + stage) · tp + position``; the experts of a stage are spread over its ``tp``
        chips (``ep = tp``), so a chip's expert group is its position."""
        ring = 1.0
        if self.throttled_link is not None:
            ring = float(self.throttled_link[2])
        per_chip = []
        for c in range(chips):
            load = 1.0
            if self.router_skew and mapping.ep > 1:
                w = (np.arange(mapping.ep) + 1.0) ** -float(self.router_skew)
                load = float(w[c % mapping.tp % mapping.ep] / w.mean())
            comp = float(self.slow_chip[1]) if self.slow_chip is not None and int(self.slow_chip[0]) == c else 1.0
            slow_link = (
                int(self.throttled_link[1])
                if self.throttled_link is not None and int(self.throttled_link[0]) == c
                else None
            )
            per_chip.append(
                ChipProfile(comp, round(load, 12), ring, slow_link, bool(self.router_skew and mapping.ep > 1))
            )
        distinct: list[ChipProfile] = []
        index = np.zeros(chips, np.int64)
        for c, p in enumerate(per_chip):
            if p not in distinct:
                distinct.append(p)
            index[c] = distinct.index(p)
        return distinct, index


def synchronise(
    durs: np.ndarray, sync: np.ndarray, kinds: tuple[str, ...], group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lock-step slot durations of every profile (see the module docstring).

    Args:
        durs: (P, steps, slots) int64 core cycles of each profile's slots on its own.
        sync: (steps, slots) bool, True where a collective slot moves data (a barrier).
        kinds: slot kinds (``op``, ``collective``, ``host_in``, ``host_out``, ``idle``).
        group: (slots,) slot group of each slot (slots of a group are contiguous, in order).
    Returns:
        ``(durations, waits)``: (P, steps, slots) int64; ``waits`` are the cycles each profile waits
        in each collective slot (per execution of the slot), part of its duration.
    """
    durs = np.asarray(durs, np.int64)
    P, n, S = durs.shape
    out = durs.copy()
    wait = np.zeros_like(durs)
    if P == 1:
        return out, wait
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        acc = np.zeros((P, n), np.int64)
        last_coll = None
        for k in idx:
            kind = kinds[k]
            if kind == "op":
                acc += durs[:, :, k]
            elif kind == "collective":
                last_coll = k
                s = sync[:, k][None, :]
                w = acc.max(axis=0, keepdims=True) - acc
                coll = durs[:, :, k].max(axis=0, keepdims=True)
                out[:, :, k] = np.where(s, w + coll, durs[:, :, k])
                wait[:, :, k] = np.where(s, w, 0)
                acc = np.where(s, 0, acc + durs[:, :, k])
            else:  # the same on every chip
                out[:, :, k] = durs[:, :, k].max(axis=0, keepdims=True)
        w = acc.max(axis=0, keepdims=True) - acc
        if w.any():
            k = last_coll if last_coll is not None else idx[-1]
            out[:, :, k] += w
            if last_coll is not None:
                wait[:, :, k] += w
    return out, wait


__all__ = ["ChipProfile", "Knobs", "NOMINAL", "synchronise"]
