"""Plan every signal of a generation from its emulator binding (the ontology's ``emulator:`` data).

The binding of each signal (``ontology.binding``) says what the emulator counts for it, in terms of
the emulator's named quantities (``emulator.quantities``, ``data/quantities.yaml``):

- ``linear``: Σ coefficient × amount, split over the block's instances and converted to the
  signal's unit. The combination for all counters of all chips is one matrix ``M``
  (quantities × chips · columns), so that the raw values of a block of samples are one matrix
  product ``relcum @ M`` (``emulator.counters``);
- ``impulse``: a step-end count (exact integers);
- ``events``: random events, a Poisson process at the binding's rate per instance per second, drawn
  once from the seed;
- ``gauge``: a step level (or the board telemetry), split over the instances;
- ``constant``: one raw register value all run.

A signal without a binding gets no plan and no column in the dump (``ColumnPlan.unbound``).

Instance splits (per chip, over the signal's instances; ``ontology.model.InstanceSplit``):
``one`` and ``each`` give every instance the whole amount, ``even`` divides it evenly, ``jitter``
near-evenly with a per-chip split drawn once from the seed (``Assumptions.interleave_jitter``),
``links`` / ``links_each`` divide it over / give it to each of the links a ring collective uses
(``Assumptions.ring_links``; all links by default), 0 on the others. Under a throttled link
(``emulator.knobs``), a ``per_link`` quantity (``c2c_busy``) reads on that link its own busy time.
Leader-only quantities (``pcie_tx``) and ``leader_only`` bindings count on the leader chip of each
scheduler rank only (``ColumnPlan.leaders``; chip 0 alone for one tensor-parallel group).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
from perfonto.ontology import Generation, ResolvedSignal

from .assumptions import Assumptions
from .hardware import Hardware
from .quantities import BindingError, check_bindings, registry, unit_factor
from .timeline import QUANTITY_NAMES


@dataclass
class SignalPlan:
    """How one signal is produced. ``kind``: linear | impulse | events | gauge | constant."""

    signal: ResolvedSignal
    kind: str
    instances: int
    col: int = 0  # linear: first column in the chip's block of ``M``
    impulse: str = ""
    leader_only: bool = False
    factor: float = 1.0  # impulse: raw units per count (1: exact integers)
    event_times: list = field(default_factory=list)  # events: [chip][inst] sorted int64 cycles
    gauge: str = ""
    gauge_weights: np.ndarray | None = None  # (chips, inst)
    gauge_unit: str = ""
    constant: int = 0


@dataclass
class ColumnPlan:
    """The bound signals of a generation, in ``gen.signals`` order.

    M: (Q, chips, C) coefficients of the linear counters (raw units per quantity unit).
    mod: (C,) int64 ``2**width`` per linear column.
    unbound: signals without an emulator binding (no column in the dump).
    leaders: (chips,) bool, the chips that count tokens, requests and host-bound bytes.
    """

    signals: list[SignalPlan]
    M: np.ndarray
    mod: np.ndarray
    unbound: list[str]
    leaders: np.ndarray

    def of(self, name: str) -> SignalPlan | None:
        """The plan of signal ``name`` (None when it is unbound)."""
        return next((p for p in self.signals if p.signal.name == name), None)


def _rng(seed: int, key: str) -> np.random.Generator:
    """Child generator of ``seed`` for ``key``: deterministic and independent of draw order."""
    return np.random.default_rng([int(seed), zlib.crc32(key.encode())])


def split_weights(split: str, n: int, chips: int, block: str, hw: Hardware, a: Assumptions, seed: int) -> np.ndarray:
    """(chips, n) instance weights of a split (see the module docstring)."""
    if split in ("one", "each"):
        return np.ones((chips, n))
    if split == "even":
        return np.full((chips, n), 1.0 / n)
    if split == "jitter":
        w = 1.0 + a.interleave_jitter * _rng(seed, f"jitter:{block}").standard_normal((chips, n))
        return w / w.sum(axis=1, keepdims=True)
    used = min(a.ring_links or n, n)
    on = (np.arange(n) < used).astype(np.float64)
    return np.tile(on / used if split == "links" else on, (chips, 1))


def plan_columns(
    gen: Generation,
    hw: Hardware,
    a: Assumptions,
    chips: int,
    seed: int,
    duration_cycles: int,
    leaders: np.ndarray | None = None,
    slow_link: tuple[int, int] | None = None,
) -> ColumnPlan:
    """Plan every bound signal of ``gen`` (linear-counter matrix, impulses, events, gauges, constants).

    ``leaders``: (chips,) bool mask of the chips that count leader-only quantities (default: chip 0).
    ``slow_link``: (chip, link) of a throttled link, whose ``per_link`` quantities read the
    timeline's ``c2c_busy_slow`` (``emulator.knobs``).

    Raises:
        BindingError: a binding names a quantity the emulator does not know, or of the wrong unit
            (located diagnostics, ``quantities.check_bindings``).
    """
    diags = check_bindings(gen)
    if diags:
        raise BindingError(diags)
    if leaders is None:
        leaders = np.arange(chips) == 0
    leaders = np.asarray(leaders, bool)
    reg = registry()
    idx = {name: i for i, name in enumerate(QUANTITY_NAMES)}
    plans, cols, mods, unbound = [], [], [], []
    f_core = hw.core_hz
    for sig in gen.signals.values():
        b, n = sig.emulator, sig.instances
        if b is None:
            unbound.append(sig.name)
            continue
        if b.kind == "linear":
            p = SignalPlan(sig, "linear", n, col=sum(c.shape[2] for c in cols))
            block = np.zeros((len(QUANTITY_NAMES), chips, n))
            for qname, coef in b.terms:
                q = reg[qname]
                w = split_weights(b.split, n, chips, sig.block, hw, a, seed)
                if q.leader_only or b.leader_only:
                    w[~leaders] = 0.0
                contrib = w * (coef * unit_factor(gen, q.unit, sig) / sig.scale)
                block[idx[qname]] += contrib
                if q.per_link and b.split in ("links", "links_each") and slow_link is not None and slow_link[1] < n:
                    c, link = slow_link
                    block[idx["c2c_busy_slow"], c, link] += contrib[c, link]
                    block[idx[qname], c, link] -= contrib[c, link]
            cols.append(block)
            mods += [min(1 << sig.width, np.iinfo(np.int64).max)] * n  # a 64-bit register never wraps here
        elif b.kind == "impulse":
            p = SignalPlan(
                sig,
                "impulse",
                n,
                impulse=b.name,
                leader_only=b.leader_only,
                factor=unit_factor(gen, reg[b.name].unit, sig) / sig.scale,
            )
        elif b.kind == "events":
            rate = b.rate * split_weights(b.split, n, chips, sig.block, hw, a, seed)
            rng = _rng(seed, f"events:{sig.name}")
            lam = rate * duration_cycles / f_core
            counts = rng.poisson(lam)
            times = [
                [np.sort(rng.integers(0, duration_cycles + 1, counts[c, i])) for i in range(n)] for c in range(chips)
            ]
            p = SignalPlan(sig, "events", n, event_times=times, factor=unit_factor(gen, "event", sig) / sig.scale)
        elif b.kind == "gauge":
            p = SignalPlan(
                sig,
                "gauge",
                n,
                gauge=b.name,
                gauge_unit=reg[b.name].unit,
                gauge_weights=split_weights(b.split, n, chips, sig.block, hw, a, seed),
            )
        else:
            p = SignalPlan(sig, "constant", n, constant=b.constant)
        plans.append(p)
    M = np.concatenate(cols, axis=2) if cols else np.zeros((len(QUANTITY_NAMES), chips, 0))
    return ColumnPlan(plans, M, np.array(mods, np.int64), unbound, leaders)


__all__ = ["ColumnPlan", "SignalPlan", "plan_columns", "split_weights"]
