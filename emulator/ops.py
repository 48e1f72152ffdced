"""How long a step's ops take (a roofline per op), and the counter quantities of every slot.

The work of each slot comes from ``emulator.work``. Timing:

- Op time (roofline per op, as GenZ): ``max(t_compute, t_memory) + op_overhead_s`` with
  ``t_compute = max(FLOPs/(peak·eff_c(rows)), vector/(vpu·eff_v), SRAM bytes/(SRAM bw·eff))`` and
  ``t_memory = stream bytes/(bw·eff_m(bytes)) + KV reads/(bw·kv_read_eff)``; stream bytes are
  weights, KV writes and (``activations_in_hbm``) activations. A collective takes
  ``op_overhead_s + hops·hop_latency_s + max(link bytes/(links·link bw·link_eff), its compute)``;
  with ``overlap_collectives`` only the latency part is exposed. With ``overlap_ops`` the units work
  concurrently (a dataflow pipeline): the ops of a layer are scaled so that the layer takes as long
  as its busiest unit, ``max(Σ MXU, Σ VPU, Σ SRAM, Σ HBM)`` over its ops.
- Host: ``host_step_s`` + the PCIe transfer before the pass; ``pcie_latency_s`` + transfer after it.
- Busy time of a unit is its own side of the roofline, capped at the op's duration; the rest of a
  matrix op counts as MXU operand stall. Power: ``P = idle + (tdp − idle) · activity``.
- Chips that differ (``emulator.knobs``): a ``ChipProfile`` scales the op times of a slow chip and
  the link time of a throttled ring; ``knobs.synchronise`` then makes the chips wait for each other
  at collectives, and ``op_table`` derives the counter quantities from the lock-step durations.
- Matrix FLOPs: ``mxu_flops_*`` count the hardware's work, padding included (``work.padded_rows``);
  ``model_flops`` is the chip's share of the model FLOPs (``work.model_flops``), spread over the
  step's slots in proportion to their unpadded matrix work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .assumptions import Assumptions, efficiency
from .knobs import NOMINAL, ChipProfile
from .moe import a2a_efficiency, grouped_gemm_efficiency
from .quantities import of_kind
from .subclasses import SUBCLASSES, subclass_phases
from .scheduler import StepBatch
from .work import EmuConfig, StepPlan, model_flops, stack_work

__all__ = [
    "CLASSES",
    "QUANTITIES",
    "LEADER_ONLY",
    "HBM_TAGS",
    "C2C_TAGS",
    "EmuConfig",
    "OpTable",
    "StepPlan",
    "build_ops",
    "op_table",
    "op_timing",
    "slot_seconds",
    "stack_work",
    "step_seconds",
]

#: The grouped expert GEMMs (``moe.grouped_gemm_efficiency``), by slot name without its layer-kind prefix.
EXPERT_GEMMS = ("experts_gate_up", "experts_down")

#: Cycle classes of ``seq.*_cycles`` (index = class code in ``OpTable.cls``).
CLASSES = ("compute", "memory", "collective", "host_wait", "idle")

#: Quantities every slot accumulates, with their units (per chip; ``LEADER_ONLY`` on rank leaders): the
#: registry's amounts (``emulator/data/quantities.yaml``) after the cycle classes, then the internal
#: ``c2c_busy_slow`` (the busy time of a throttled link, which its ``links`` split reads, see ``signals``).
QUANTITIES: dict[str, str] = {
    **{n: q.unit for n, q in of_kind("amount").items() if n not in ("elapsed",) + CLASSES + SUBCLASSES},
    "c2c_busy_slow": "s",
}
LEADER_ONLY = frozenset(n for n, q in of_kind("amount").items() if q.leader_only)
HBM_TAGS = {
    "weights": "hbm_weights",
    "kv_read": "hbm_kv_read",
    "kv_write": "hbm_kv_write",
    "activations": "hbm_activations",
}
C2C_TAGS = {
    "allreduce": "c2c_allreduce",
    "all_to_all": "c2c_all_to_all",
    "all_gather": "c2c_all_gather",
    "send_recv": "c2c_send_recv",
}


@dataclass
class OpTable:
    """Slots of a block of steps.

    dur: (steps, slots) int64 core cycles of one execution of each slot.
    cls: (steps, slots) int8 cycle class (index into ``CLASSES``).
    q: quantity name → (steps, slots) float64, the amount of one execution of the slot.
    gauges: name → (steps,) level during the step (``batch``, ``kv_tokens``, ``hbm_alloc_bytes``,
        ``sram_bytes``).
    impulses: name → (steps,) int64 counted at the step's end (``steps``, ``input_tokens``,
        ``output_tokens``, ``requests_completed``, ``accepted_draft_tokens``).
    wait: (steps, slots) int64 core cycles of each slot execution spent waiting for other chips at a
        collective (part of ``dur``), or None (no waiting).
    phases: level-2 cycle class → ``(amount, offset)``, each (steps, slots) int64: the slot's cycles of
        that sub-class and where within the slot they start (``emulator.subclasses``).
    own_wait: (steps, slots) int64 part of ``wait`` spent waiting for the hottest expert-parallel
        rank of the routing model (``moe``), or None.
    """

    dur: np.ndarray
    cls: np.ndarray
    q: dict[str, np.ndarray]
    gauges: dict[str, np.ndarray]
    impulses: dict[str, np.ndarray]
    wait: np.ndarray | None = None
    phases: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    own_wait: np.ndarray | None = None

    @property
    def arrival_wait(self) -> np.ndarray | None:
        """(steps, slots) cycles waited for other chips to *arrive* (``wait`` less ``own_wait``, the
        modelled wait for the hottest expert rank, which no chip of this run arrives late for)."""
        if self.wait is None or self.own_wait is None:
            return self.wait
        return self.wait - self.own_wait


def slot_seconds(
    W: dict[str, np.ndarray], cfg: EmuConfig, a: Assumptions | None = None, profile: ChipProfile = NOMINAL
) -> dict[str, np.ndarray]:
    """Roofline time of every slot (s) and its parts: ``t``, ``mxu``, ``vpu``, ``mem`` (of which
    ``mem_kv_read``: the paged KV-cache reads), ``link``, ``pcie``, ``comp``; ``stream``: the bytes
    streamed through HBM besides the KV reads.

    ``a`` overrides ``cfg.a`` (the calibration varies the fitted constants). ``profile``: the unit
    times and per-op overhead × ``compute_factor``; the link time × ``ring_factor``.
    """
    a = a or cfg.a
    hw, plan = cfg.hw, cfg.plan
    shape = W["rows"].shape
    kinds = np.array(plan.kinds)[None, :]

    def div(num, den):
        return np.divide(num, den, out=np.zeros(shape), where=(num > 0) & (den > 0))

    expert = np.array([s.split(".")[-1] in EXPERT_GEMMS for s in plan.slots])[None, :]
    eff = np.where(
        expert,
        grouped_gemm_efficiency(W["rows"], a.mxu_eff_max, a.moe_half_rows),
        efficiency(W["rows"], a.mxu_eff_max, a.mxu_half_rows),
    )
    t_mxu = div(W["fp8"], hw.peak_fp8 * eff) + div(W["bf16"], hw.peak_bf16 * eff)
    if W["fp4"].any():
        t_mxu = t_mxu + div(W["fp4"], hw.peak("fp4") * eff * a.fp4_eff_ratio)
    t_vpu = div(W["vpu"], hw.vpu_peak * efficiency(W["rows"], a.vpu_eff_max, a.vpu_half_tokens))
    act = W["act_r"] + W["act_w"]
    stream = W["w"] + W["kv_w"] + (act if a.activations_in_hbm else 0.0)
    t_kvr = W["kv_r"] / (hw.hbm_bw * a.kv_read_eff)
    t_mem = div(stream, hw.hbm_bw * efficiency(stream + W["kv_r"], a.hbm_eff_max, a.hbm_half_bytes)) + t_kvr
    sram = act + 2 * W["w"] + 2 * W["kv_r"] + W["sram_x"]
    t_sram = sram / (hw.sram_bw * a.sram_eff_max)
    cf = float(profile.compute_factor)
    if cf != 1.0:
        t_mxu, t_vpu, t_mem, t_sram, t_kvr = t_mxu * cf, t_vpu * cf, t_mem * cf, t_sram * cf, t_kvr * cf
    links = a.ring_links or hw.links
    a2a = np.array([t == "all_to_all" for t in plan.tags])[None, :]
    per_peer = div(W["tx"], W["hops"])  # all-to-all: one message to each of the ep − 1 peers
    link_eff = np.where(a2a, a2a_efficiency(per_peer, a.a2a_eff, a.a2a_half_bytes), a.link_eff)
    t_link = div(W["tx"], hw.link_bw * links * link_eff) * float(profile.ring_factor)
    t_pcie = np.maximum(W["pcie_rx"], W["pcie_tx"]) / (hw.pcie_bw * a.pcie_eff)
    comp = np.maximum(np.maximum(t_mxu, t_vpu), t_sram)
    active = (W["fp4"] + W["fp8"] + W["bf16"] + W["vpu"] + stream + W["kv_r"] + W["tx"]) > 0
    over = np.where(active, a.op_overhead_s * cf, 0.0)
    lat = W["hops"] * a.hop_latency_s
    coll = lat + over + (0.0 if a.overlap_collectives else np.maximum(np.maximum(t_link, comp), t_mem))
    t = np.where(kinds == "collective", coll, np.maximum(comp, t_mem) + over)
    t = np.where(kinds == "host_in", np.where(W["pcie_rx"] > 0, a.host_step_s + t_pcie, 0.0), t)
    t = np.where(kinds == "host_out", np.where(W["pcie_tx"] > 0, a.pcie_latency_s + t_pcie, 0.0), t)
    t = np.where(kinds == "idle", 0.0, t)
    imb_wait = _imbalance_wait(W, t, plan, a.expert_imbalance)
    t = t + imb_wait
    if a.overlap_ops:  # layer-level roofline: scale each layer's ops to the time of its busiest unit
        is_op = kinds == "op"
        for g in range(1, len(plan.reps) - 1):
            sel = is_op & (plan.group == g)[None, :]
            tot = np.where(sel, t, 0.0).sum(axis=1)
            busiest = [np.where(sel, x, 0.0).sum(axis=1) for x in (t_mxu + over, t_vpu, t_sram, t_mem)]
            need = np.max(busiest, axis=0)
            f = np.divide(need, tot, out=np.ones_like(tot), where=tot > 0)
            t = np.where(sel, t * f[:, None], t)
    return {
        "t": t,
        "fixed": np.where(np.isin(kinds, ("op", "collective")), np.minimum(over, t), 0.0),
        "mxu": t_mxu,
        "vpu": t_vpu,
        "mem": t_mem,
        "link": t_link,
        "pcie": t_pcie,
        "comp": comp,
        "sram": sram,
        "stream": stream,
        "mem_kv_read": t_kvr,
        "imb_wait": imb_wait,
    }


def _imbalance_wait(W: dict[str, np.ndarray], t: np.ndarray, plan: StepPlan, skew: float) -> np.ndarray:
    """(steps, slots) s each MoE combine waits for the hottest expert-parallel rank: (imbalance − 1) ×
    the time of the routed-expert ops of its layer, the imbalance being ``skew`` × the routing noise
    of ``W["imb"]`` (``moe``)."""
    out = np.zeros_like(t)
    imb = W["imb"]
    if not imb.any():
        return out
    for k in np.flatnonzero(imb.any(axis=0)):
        experts = [i for i, s in enumerate(plan.slots) if plan.group[i] == plan.group[k] and ".experts_" in f".{s}"]
        out[:, k] = np.where(imb[:, k] > 0, np.maximum(skew * imb[:, k] - 1.0, 0.0), 0.0) * t[:, experts].sum(axis=1)
    return out


def step_seconds(W: dict[str, np.ndarray], cfg: EmuConfig, a: Assumptions | None = None) -> np.ndarray:
    """(steps,) seconds of each step (every slot × its repetitions; core-cycle rounding ignored)."""
    return slot_seconds(W, cfg, a)["t"] @ cfg.plan.slot_reps.astype(np.float64)


def op_timing(
    b: StepBatch, cfg: EmuConfig, idle_cycles: np.ndarray | None = None, profile: ChipProfile = NOMINAL
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Work, roofline times and whole-cycle durations of every slot of the steps in ``b`` on a chip
    of ``profile``: ``(W, tm, dur)``, ``dur`` (steps, slots) int64 core cycles (the idle slot from
    ``idle_cycles``)."""
    W = stack_work(b, cfg, profile)
    tm = slot_seconds(W, cfg, profile=profile)
    dur = np.ceil(tm["t"] * cfg.hw.core_hz - 1e-9).astype(np.int64)
    dur[:, cfg.plan.index("idle")] = 0 if idle_cycles is None else np.asarray(idle_cycles, np.int64)
    return W, tm, dur


def own_wait(tm: dict[str, np.ndarray], dur: np.ndarray, core_hz: float) -> np.ndarray | None:
    """(steps, slots) int64 core cycles a chip waits in its own collective slots for the hottest
    expert-parallel rank (``moe``), or None when it never does."""
    if not tm["imb_wait"].any():
        return None
    return np.minimum(np.rint(tm["imb_wait"] * core_hz).astype(np.int64), dur)


def matrix_work(W: dict[str, np.ndarray], plan: StepPlan) -> np.ndarray:
    """(steps,) unpadded matrix FLOPs of one chip per step (every slot × its repetitions)."""
    return (W["fp4"] + W["fp8"] + W["bf16"]) @ plan.slot_reps.astype(np.float64)


def model_flop_scale(b: StepBatch, cfg: EmuConfig, mean_matrix_work: np.ndarray) -> np.ndarray:
    """(steps,) factor turning a chip's unpadded matrix FLOPs into its share of the model FLOPs:
    ``model_flops(b) × ranks / chips ÷ mean over chips of the chip's matrix work`` (so the shares of
    all chips add up to the model total)."""
    mf = model_flops(b, cfg.model) * cfg.mapping.ranks / cfg.mapping.chips
    return np.divide(mf, mean_matrix_work, out=np.zeros(len(mf)), where=mean_matrix_work > 0)


def build_ops(b: StepBatch, cfg: EmuConfig, idle_cycles: np.ndarray | None = None) -> OpTable:
    """Durations, cycle classes and counter quantities of every slot of the steps in ``b`` (every
    chip nominal: ``op_timing`` then ``op_table``).

    All arithmetic is on (steps, slots) matrices: no loop over steps or slots.

    Args:
        b: scheduled steps of one scheduler rank.
        idle_cycles: (steps,) core cycles of the ``idle`` slot (steps with no work have all other
            slots empty); None = no idle.
    Returns:
        ``OpTable`` (per chip; leader-only quantities carry the leader's value).
    """
    W, tm, dur = op_timing(b, cfg, idle_cycles)
    own = own_wait(tm, dur, cfg.hw.core_hz)
    return op_table(
        b, cfg, W, tm, dur, wait=own, own=own, model_scale=model_flop_scale(b, cfg, matrix_work(W, cfg.plan))
    )


def op_table(
    b: StepBatch,
    cfg: EmuConfig,
    W: dict[str, np.ndarray],
    tm: dict[str, np.ndarray],
    dur: np.ndarray,
    *,
    profile: ChipProfile = NOMINAL,
    wait: np.ndarray | None = None,
    own: np.ndarray | None = None,
    model_scale: np.ndarray | None = None,
) -> OpTable:
    """The ``OpTable`` of one chip profile from its work ``W``, roofline times ``tm`` and (lock-step)
    durations ``dur`` (core cycles); ``wait``: cycles of ``dur`` spent waiting at collectives (of which
    ``own``: for the hottest expert rank); ``model_scale``: ``model_flop_scale`` (None: no model FLOPs)."""
    a, hw, plan, cs = cfg.a, cfg.hw, cfg.plan, cfg.cs
    n, S = W["rows"].shape
    f_core = hw.core_hz
    kinds = np.array(plan.kinds)[None, :]
    cls = np.where(tm["comp"] >= tm["mem"], 0, 1)
    cls = np.where(
        kinds == "collective",
        2,
        np.where((kinds == "host_in") | (kinds == "host_out"), 3, np.where(kinds == "idle", 4, cls)),
    ).astype(np.int8)
    ds = dur / f_core
    ring = float(profile.ring_factor)
    busy = {
        "mxu": np.minimum(tm["mxu"], ds),
        "vpu": np.minimum(tm["vpu"], ds),
        "hbm": np.minimum(tm["mem"], ds),
        "c2c": np.minimum(tm["link"] / ring, ds),
    }
    flops = W["fp4"] + W["fp8"] + W["bf16"]
    hw_flops = flops + W["pad_fp4"] + W["pad_fp8"] + W["pad_bf16"]
    act_hbm = (W["act_r"] + W["act_w"]) if a.activations_in_hbm else np.zeros((n, S))
    hbm_r = W["w"] + W["kv_r"] + (W["act_r"] if a.activations_in_hbm else 0.0)
    hbm_w = W["kv_w"] + (W["act_w"] if a.activations_in_hbm else 0.0)
    sram_r = W["act_r"] + W["w"] + W["kv_r"] + W["sram_x"]
    sram_w = W["act_w"] + W["w"] + W["kv_r"]
    tags = np.array(plan.tags)[None, :]
    q = {
        "mxu_busy": busy["mxu"],
        "mxu_stall": np.where(flops > 0, ds - busy["mxu"], 0.0),
        "mxu_flops_fp8": W["fp8"] + W["pad_fp8"],
        "mxu_flops_bf16": W["bf16"] + W["pad_bf16"],
        "mxu_flops_fp4": W["fp4"] + W["pad_fp4"],
        "mxu_instructions": hw_flops / a.mxu_tile_flops,
        "vpu_busy": busy["vpu"],
        "vpu_flops": W["vpu"],
        "vpu_instructions": W["vpu"] / a.vpu_instruction_flops,
        "sram_read": sram_r,
        "sram_write": sram_w,
        "sram_conflict": hw.banks * a.sram_conflict_fraction * np.minimum((sram_r + sram_w) / hw.sram_bw, ds),
        "hbm_read": hbm_r,
        "hbm_write": hbm_w,
        "hbm_active": busy["hbm"],
        "hbm_refresh": a.hbm_refresh_fraction * ds,
        "hbm_weights": W["w"],
        "hbm_kv_read": W["kv_r"],
        "hbm_kv_write": W["kv_w"],
        "hbm_activations": act_hbm,
        "dma_bytes": hbm_r + hbm_w + W["tx"] + W["rx"] + W["pcie_rx"],
        "dma_descriptors": (hbm_r + hbm_w + W["tx"] + W["rx"] + W["pcie_rx"]) / a.dma_descriptor_bytes,
        "dma_busy": np.minimum(np.maximum(np.maximum(tm["mem"], tm["link"]), tm["pcie"]), ds),
        "c2c_tx": W["tx"],
        "c2c_rx": W["rx"],
        "c2c_busy": busy["c2c"],
        "c2c_busy_slow": np.minimum(tm["link"], ds) if profile.slow_link is not None else busy["c2c"],
        **{qn: np.where(tags == tag, W["tx"], 0.0) for tag, qn in C2C_TAGS.items()},
        "pcie_rx": W["pcie_rx"],
        "pcie_tx": W["pcie_tx"],
        "doorbells": np.where(W["pcie_rx"] > 0, 1.0, 0.0),
        "seq_instructions": np.where((dur > 0) & (kinds != "idle"), a.seq_instructions_per_op, 0.0),
        "model_flops": flops * (model_scale[:, None] if model_scale is not None else 0.0),
        "job_time": ds,
    }
    act = (
        a.power_w_mxu * busy["mxu"]
        + a.power_w_hbm * busy["hbm"]
        + a.power_w_vpu * busy["vpu"]
        + a.power_w_c2c * busy["c2c"]
    )
    act = np.clip(np.divide(act, ds, out=np.zeros((n, S)), where=ds > 0), 0.0, 1.0)
    q["energy"] = (hw.idle_power + (hw.tdp - hw.idle_power) * act) * ds
    alloc = cs.weight_bytes + b.kv_alloc_tokens * cs.kv_bytes_per_token
    sram_level = np.minimum(hw.sram_capacity, cs.layer_weight_bytes + b.tokens * cfg.model.hidden * 2.0 + 8 * 2**20)
    busy_step = b.tokens > 0
    return OpTable(
        dur=dur,
        cls=cls,
        q=q,
        phases=subclass_phases(W, tm, dur, cls, wait, kinds, a),
        gauges={
            "batch": b.batch.astype(np.float64),
            "kv_tokens": b.kv_tokens.astype(np.float64),
            "hbm_alloc_bytes": alloc.astype(np.float64),
            "sram_bytes": np.where(busy_step, sram_level, 0.0),
        },
        impulses={
            "steps": busy_step.astype(np.int64),
            "input_tokens": b.prefill_tokens.astype(np.int64),
            "output_tokens": b.emitted_tokens.astype(np.int64),
            "requests_completed": b.completed.astype(np.int64),
            "accepted_draft_tokens": b.accepted_tokens.astype(np.int64),
        },
        wait=wait,
        own_wait=own,
    )
