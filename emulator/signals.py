"""What each signal of the generation counts, in terms of the timeline's quantities.

Every counter that grows with the work is a linear combination of timeline quantities, split over
the block's instances and converted to the signal's unit. The combination for all counters of all
chips is one matrix ``M`` (quantities × chips·columns), so that the raw values of a block of samples
are one matrix product ``relcum @ M``. Other signals are step-end impulses (tokens, requests, steps;
exact integers), random events (ECC corrections, link retries), gauges, or constant zero.

Instance splits (per chip, over the signal's instances):
- ``each``: every instance sees the whole amount (per-core busy time: work is split evenly over
  the cores, so each is busy the same time);
- ``even``: the amount is divided evenly (FLOPs over cores);
- ``jitter``: divided near-evenly with a per-chip split drawn once from the seed (bytes over HBM
  stacks, SRAM banks and DMA engines: address interleaving is close to uniform);
- ``links`` / ``links_each``: divided over / given to each of the links a ring collective uses
  (``Assumptions.ring_links``; all links by default), 0 on the others;
- ``one``: a block without instances.
Quantities in ``ops.LEADER_ONLY`` (tokens to the host) and the token/request impulses count on the
leader chip of each scheduler rank only (``ColumnPlan.leaders``; chip 0 alone for one tensor-parallel
group).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
from perfonto.ontology import Generation, ResolvedSignal
from perfonto.ontology.model import SignalKind

from .assumptions import Assumptions
from .hardware import Hardware
from .ops import LEADER_ONLY
from .timeline import QUANTITY_NAMES, QUANTITY_UNITS

LINEAR: dict[str, list[tuple[str, str]]] = {
    "mxu.busy_cycles": [("mxu_busy", "each")],
    "mxu.flops_fp8": [("mxu_flops_fp8", "even")],
    "mxu.flops_bf16": [("mxu_flops_bf16", "even")],
    "mxu.flops_fp4": [("mxu_flops_fp4", "even")],
    "mxu.instructions": [("mxu_instructions", "even")],
    "mxu.operand_stall_cycles": [("mxu_stall", "each")],
    "vpu.busy_cycles": [("vpu_busy", "each")],
    "vpu.flops": [("vpu_flops", "even")],
    "vpu.instructions": [("vpu_instructions", "even")],
    "sram.read_bytes": [("sram_read", "jitter")],
    "sram.write_bytes": [("sram_write", "jitter")],
    "sram.bank_conflict_cycles": [("sram_conflict", "jitter")],
    "hbm.read_bytes": [("hbm_read", "jitter")],
    "hbm.write_bytes": [("hbm_write", "jitter")],
    "hbm.active_cycles": [("hbm_active", "each")],
    "hbm.refresh_cycles": [("hbm_refresh", "each")],
    "dma.bytes": [("dma_bytes", "jitter"), ("pcie_tx", "jitter")],
    "dma.descriptors": [("dma_bytes", "even")],  # scaled by 1 / Assumptions.dma_descriptor_bytes
    "dma.busy_cycles": [("dma_busy", "each")],
    "c2c.tx_bytes": [("c2c_tx", "links")],
    "c2c.rx_bytes": [("c2c_rx", "links")],
    "c2c.busy_cycles": [("c2c_busy", "links_each")],
    "pcie.rx_bytes": [("pcie_rx", "one")],
    "pcie.tx_bytes": [("pcie_tx", "one")],
    "pcie.doorbells": [("doorbells", "one")],
    "seq.elapsed_cycles": [("elapsed", "one")],
    "seq.compute_cycles": [("compute", "one")],
    "seq.memory_cycles": [("memory", "one")],
    "seq.collective_cycles": [("collective", "one")],
    "seq.host_wait_cycles": [("host_wait", "one")],
    "seq.idle_cycles": [("idle", "one")],
    "seq.instructions": [("seq_instructions", "one")],
    "power.energy": [("energy", "one")],
    "seq.model_flops": [("model_flops", "one")],
    "power.job_energy": [("energy", "one")],   # every chip of the run is assigned to its job all along
    "seq.job_time": [("job_time", "one")],
}
#: step-end impulses: signal -> (impulse name, leader only)
IMPULSES = {"seq.steps": ("steps", True), "seq.input_tokens": ("input_tokens", True),
            "seq.output_tokens": ("output_tokens", True), "seq.requests_completed": ("requests_completed", True)}
#: random events: signal -> (Assumptions rate attribute (per instance per second), split)
EVENTS = {"hbm.ecc_corrected": ("ecc_rate_per_stack_s", "each"), "c2c.retries": ("retry_rate_per_link_s", "links_each")}
#: gauges: signal -> (level name, level unit, split)
GAUGES = {"seq.batch_size": ("batch", "request", "one"), "seq.kv_cache_tokens": ("kv_tokens", "token", "one"),
          "hbm.allocated_bytes": ("hbm_alloc_bytes", "B", "even"), "sram.occupancy": ("sram_bytes", "B", "even"),
          "power.power": ("power", "W", "one"), "power.temperature": ("temperature", "degC", "one")}
#: counters that stay 0 in this model (power never exceeds TDP, so the clock is never throttled)
ZERO = {"power.throttle_cycles"}


class SignalMappingError(ValueError):
    """A signal's unit does not match what the emulator counts for it."""


@dataclass
class SignalPlan:
    """How one signal is produced. ``kind``: linear | impulse | events | gauge | zero."""

    signal: ResolvedSignal
    kind: str
    instances: int
    col: int = 0                       # linear: first column in the chip's block of ``M``
    impulse: str = ""
    leader_only: bool = False
    event_times: list = field(default_factory=list)  # events: [chip][inst] sorted int64 cycles
    gauge: str = ""
    gauge_weights: np.ndarray | None = None  # (chips, inst)
    gauge_unit: str = ""
    key: str = ""  # the emulator's name for the signal (its name before a later generation renamed it)


@dataclass
class ColumnPlan:
    """All signals of a generation, in ``gen.signals`` order.

    M: (Q, chips, C) coefficients of the linear counters (raw units per quantity unit).
    mod: (C,) int64 ``2**width`` per linear column.
    unmodelled: signals the emulator does not model (emitted as 0).
    leaders: (chips,) bool, the chips that count tokens, requests and host-bound bytes.
    """

    signals: list[SignalPlan]
    M: np.ndarray
    mod: np.ndarray
    unmodelled: list[str]
    leaders: np.ndarray


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


def unit_factor(gen: Generation, q_unit: str, sig: ResolvedSignal) -> float:
    """Multiplier from a quantity in ``q_unit`` to ``sig``'s unit (seconds → cycles via its clock).

    Raises:
        SignalMappingError: the dimensions do not match.
    """
    reg = gen.registry
    q = reg.Quantity(1.0, q_unit)
    target = reg.Quantity(1.0, sig.unit)
    if q.dimensionality == reg.Quantity(1.0, "s").dimensionality and target.dimensionality != q.dimensionality:
        clock = gen.clock_domains[sig.clock]
        q = q * reg.Quantity(clock.value, clock.unit)
    try:
        return float(q.to(sig.unit).magnitude)
    except Exception:
        raise SignalMappingError(f"signal `{sig.name}` is in {sig.unit_text}, but the emulator counts it in {q_unit}") from None


def plan_columns(gen: Generation, hw: Hardware, a: Assumptions, chips: int, seed: int, duration_cycles: int,
                 leaders: np.ndarray | None = None, slow_link: tuple[int, int] | None = None) -> ColumnPlan:
    """Plan every signal of ``gen`` (linear-counter matrix, impulses, events, gauges).

    ``leaders``: (chips,) bool mask of the chips that count leader-only quantities (default: chip 0).
    ``slow_link``: (chip, link) of a throttled link, whose ``c2c.busy_cycles`` reads the timeline's
    ``c2c_busy_slow`` (``emulator.knobs``).
    """
    if leaders is None:
        leaders = np.arange(chips) == 0
    leaders = np.asarray(leaders, bool)
    idx = {name: i for i, name in enumerate(QUANTITY_NAMES)}
    plans, cols, mods, unmodelled = [], [], [], []
    f_core = hw.core_hz
    renamed = {new: old for old, new in getattr(gen, "aliases", {}).items()}
    known = set(LINEAR) | set(IMPULSES) | set(EVENTS) | set(GAUGES) | ZERO
    for sig in gen.signals.values():
        n = sig.instances
        name = sig.name if sig.name in known else renamed.get(sig.name, sig.name)  # renamed by a later generation
        if sig.kind is SignalKind.counter and name in LINEAR:
            p = SignalPlan(sig, "linear", n, col=sum(c.shape[2] for c in cols))
            block = np.zeros((len(QUANTITY_NAMES), chips, n))
            for qname, split in LINEAR[name]:
                w = split_weights(split, n, chips, sig.block, hw, a, seed)
                if qname in LEADER_ONLY:
                    w[~leaders] = 0.0
                f = unit_factor(gen, "event", sig) / a.dma_descriptor_bytes if name == "dma.descriptors" \
                    else unit_factor(gen, QUANTITY_UNITS[qname], sig)
                block[idx[qname]] += w * f / sig.scale
            if name == "c2c.busy_cycles" and slow_link is not None and slow_link[1] < n:
                c, link = slow_link
                block[idx["c2c_busy_slow"], c, link] = block[idx["c2c_busy"], c, link]
                block[idx["c2c_busy"], c, link] = 0.0
            cols.append(block)
            mods += [min(1 << sig.width, np.iinfo(np.int64).max)] * n  # a 64-bit register never wraps here
        elif sig.kind is SignalKind.counter and name in IMPULSES:
            imp, leader = IMPULSES[name]
            unit_factor(gen, {"steps": "event", "input_tokens": "token", "output_tokens": "token",
                              "requests_completed": "request"}[imp], sig)
            p = SignalPlan(sig, "impulse", n, impulse=imp, leader_only=leader)
        elif sig.kind is SignalKind.counter and name in EVENTS:
            attr, split = EVENTS[name]
            rate = getattr(a, attr) * split_weights(split, n, chips, sig.block, hw, a, seed)
            rng = _rng(seed, f"events:{name}")
            lam = rate * duration_cycles / f_core
            counts = rng.poisson(lam)
            times = [[np.sort(rng.integers(0, duration_cycles + 1, counts[c, i])) for i in range(n)] for c in range(chips)]
            p = SignalPlan(sig, "events", n, event_times=times)
        elif sig.kind is SignalKind.gauge and name in GAUGES:
            level, unit, split = GAUGES[name]
            p = SignalPlan(sig, "gauge", n, gauge=level, gauge_unit=unit,
                           gauge_weights=split_weights(split, n, chips, sig.block, hw, a, seed))
        else:
            if name not in ZERO:
                unmodelled.append(sig.name)
            p = SignalPlan(sig, "zero", n)
        p.key = name
        plans.append(p)
    M = np.concatenate(cols, axis=2) if cols else np.zeros((len(QUANTITY_NAMES), chips, 0))
    return ColumnPlan(plans, M, np.array(mods, np.int64), unmodelled, leaders)
