"""Per-step operations of one chip: work (FLOPs, bytes) from the shapes, time from a roofline.

Parallelism: tensor parallelism over all ``N`` chips (one TP group, Megatron-LM style), so every chip
does the same work. Per chip: ``H/N`` query heads, ``max(Hkv/N, 1)`` KV heads (replicated when
``N > Hkv``), ``F/N`` FFN columns, ``V/N`` vocabulary rows of the embedding and the LM head (vocab-
parallel, as vLLM's ``VocabParallelEmbedding``). RMSNorms are replicated (plain TP with all-reduce,
no sequence parallelism). Data types: FP8 weights and KV cache (1 B), BF16 activations (2 B); the
attention matmuls run in FP8 (FP8 KV cache), so ``mxu.flops_bf16`` stays 0.

Activations stay in on-chip SRAM (token-tiled; one layer's weights per chip, 107 MB for
Llama-3-70B at TP = 8, fit beside them), so HBM traffic is weights, KV cache reads and KV writes.

Step layout (slots; the layer slots repeat ``L`` times)::

    prefix: host_in, embed, embed_allreduce
    layer:  attn_norm, qkv_proj, rope, attn_prefill, attn_decode, o_proj, attn_allreduce,
            ffn_norm, ffn_gate, ffn_up, silu_mul, ffn_down, ffn_allreduce
    suffix: final_norm, lm_head, sample, sample_gather, host_out, idle

Formulas (per chip; T tokens in the step, Th rows through the LM head, d hidden, dh head dim):

- GEMM ``m×k·k×n``: ``2mkn`` FLOP (one MAC = 2 FLOP); weights ``k·n`` bytes read from HBM once
  per step.
- Attention: QKᵀ and PV are ``2·dh`` FLOP per (query, key) pair each, per head: ``4·H·dh·pairs``.
  A prompt chunk of ``q`` tokens after ``p`` of history has ``q·p + q(q+1)/2`` causal pairs; a
  decode token attends to its whole history and itself. KV history is read from HBM.
- Ring all-reduce of ``M`` bytes over ``N`` chips: each chip sends (and receives)
  ``2(N−1)/N · M`` bytes in ``2(N−1)`` steps (Patarasuk & Yuan 2009; NCCL's ring algorithm);
  time = bytes / (link bandwidth × links × link efficiency) + ``2(N−1)`` × hop latency, not
  overlapped with compute. Links: by default all of a chip's links, as a bidirectional ring (half
  the links to each neighbour, half the message each way; every link transmits and receives);
  ``Assumptions.ring_links`` narrows it. The all-reduce's additions (``(N−1)/N · T·d`` FLOP) run on
  the vector unit. Sampling all-gathers ``sample_topk`` (value, index) candidates per row
  (``(N−1)`` × message per chip, ``N−1`` hops).
- Vector work per element: RMSNorm + residual ``norm_flops``, rotary + KV quantisation
  ``rope_flops``, softmax ``softmax_flops`` per score, SiLU·up ``silu_mul_flops``, sampling
  ``sample_flops`` per logit (``assumptions``).
- Host: before the pass, ``host_step_s`` + PCIe transfer of the new prompt token IDs (4 B each),
  per-request metadata and a command buffer (every chip); after it, the sampled token IDs (4 B
  each) go back over the leader's PCIe (``pcie_latency_s`` + transfer). Both are host-wait time.
- Op time (roofline, as LLM-Viewer/GenZ): ``max(FLOPs/(peak·eff_c), bytes/(bw·eff_m))`` with the
  size-dependent efficiencies of ``assumptions`` (SRAM time counts on the compute side); the op is
  compute-bound when the compute side is the larger. Durations are rounded up to whole core cycles.
- Busy time of a unit in an op is its own side of the roofline (e.g. ``FLOPs/(peak·eff_c)`` for the
  MXU), capped at the op's duration; the rest of a matmul op counts as MXU operand stall.
- Power: ``P = idle + (tdp − idle) · activity``, activity = Σ weight × unit utilisation in the op
  (MXU, HBM, VPU, links; weights in ``assumptions`` sum to 1, so idle ≤ P ≤ TDP); energy = P × time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .assumptions import Assumptions, efficiency
from .hardware import Hardware
from .models import ModelShape
from .scheduler import StepBatch

PREFIX = ("host_in", "embed", "embed_allreduce")
LAYER = ("attn_norm", "qkv_proj", "rope", "attn_prefill", "attn_decode", "o_proj", "attn_allreduce",
         "ffn_norm", "ffn_gate", "ffn_up", "silu_mul", "ffn_down", "ffn_allreduce")
SUFFIX = ("final_norm", "lm_head", "sample", "sample_gather", "host_out", "idle")
SLOTS = PREFIX + LAYER + SUFFIX
GROUP = np.array([0] * len(PREFIX) + [1] * len(LAYER) + [2] * len(SUFFIX), dtype=np.int64)
COLLECTIVES = ("embed_allreduce", "attn_allreduce", "ffn_allreduce", "sample_gather")

#: Cycle classes of ``seq.*_cycles`` (index = class code in ``OpTable.cls``).
CLASSES = ("compute", "memory", "collective", "host_wait", "idle")

#: Quantities every slot accumulates, with their units (per chip; ``pcie_tx`` on the leader only).
QUANTITIES: dict[str, str] = {
    "mxu_busy": "s", "mxu_stall": "s", "mxu_flops_fp8": "FLOP", "mxu_flops_bf16": "FLOP",
    "mxu_instructions": "instruction",
    "vpu_busy": "s", "vpu_flops": "FLOP", "vpu_instructions": "instruction",
    "sram_read": "B", "sram_write": "B", "sram_conflict": "s",
    "hbm_read": "B", "hbm_write": "B", "hbm_active": "s", "hbm_refresh": "s",
    "dma_bytes": "B", "dma_busy": "s",
    "c2c_tx": "B", "c2c_rx": "B", "c2c_busy": "s",
    "pcie_rx": "B", "pcie_tx": "B", "doorbells": "event",
    "seq_instructions": "instruction", "energy": "J",
}
LEADER_ONLY = frozenset({"pcie_tx"})


@dataclass
class OpTable:
    """Slots of a block of steps.

    dur: (steps, slots) int64 core cycles of one execution of each slot.
    cls: (steps, slots) int8 cycle class (index into ``CLASSES``).
    q: quantity name → (steps, slots) float64, the amount of one execution of the slot.
    gauges: name → (steps,) level during the step (``batch``, ``kv_tokens``, ``hbm_alloc_bytes``,
        ``sram_bytes``).
    impulses: name → (steps,) int64 counted at the step's end (``steps``, ``input_tokens``,
        ``output_tokens``, ``requests_completed``).
    """

    dur: np.ndarray
    cls: np.ndarray
    q: dict[str, np.ndarray]
    gauges: dict[str, np.ndarray]
    impulses: dict[str, np.ndarray]


@dataclass(frozen=True)
class ChipShape:
    """Per-chip share of the model under TP = ``chips`` (float head/column counts)."""

    heads: float
    kv_heads: float
    ffn: float
    vocab: float
    weight_bytes: float
    layer_weight_bytes: float
    kv_bytes_per_token: float


def chip_shape(m: ModelShape, chips: int, weight_bytes: float = 1.0, kv_bytes: float = 1.0) -> ChipShape:
    """Per-chip shapes and memory footprint (bytes) of ``m`` split over ``chips``-way TP."""
    n = float(chips)
    h, kv = m.heads / n, max(m.kv_heads / n, 1.0)
    f, v, d, dh = m.ffn / n, m.vocab / n, m.hidden, m.head_dim
    layer = d * (h + 2 * kv) * dh + h * dh * d + 3 * d * f + 2 * d
    embed = v * d * (1 if m.tied_embeddings else 2)
    total = (m.layers * layer + d + embed) * weight_bytes
    return ChipShape(h, kv, f, v, total, layer * weight_bytes, 2.0 * m.layers * kv * dh * kv_bytes)


def _zeros(n: int) -> np.ndarray:
    return np.zeros(n, np.float64)


def _work(b: StepBatch, m: ModelShape, cs: ChipShape, chips: int, a: Assumptions) -> dict[str, dict]:
    """Work of every slot: mxu/vpu FLOP, HBM/SRAM/link/PCIe bytes, rows (tokens), per step."""
    n = len(b)
    T = b.tokens.astype(np.float64)
    D = b.decode_tokens.astype(np.float64)
    P = b.prefill_tokens.astype(np.float64)
    Th = b.head_tokens.astype(np.float64)
    d, dh, ab = float(m.hidden), float(m.head_dim), 2.0  # BF16 activations
    h, kv, f, v = cs.heads, cs.kv_heads, cs.ffn, cs.vocab
    qkv = (h + 2 * kv) * dh
    kv_tok = 2 * kv * dh  # FP8 K+V bytes of one token in one layer on this chip
    N = float(chips)
    ring = 2 * (N - 1) / N

    def w(**kw):
        out = {k: _zeros(n) for k in ("mxu", "vpu", "hbm_r", "hbm_w", "sram_r", "sram_w", "tx", "rx", "pcie_rx", "pcie_tx", "hops")}
        out["rows"] = T
        for k, val in kw.items():
            out[k] = np.broadcast_to(np.asarray(val, np.float64), (n,)).astype(np.float64)
        return out

    def gemm(rows, k, cols):
        wt = k * cols
        return w(mxu=2 * rows * k * cols, hbm_r=np.where(rows > 0, wt, 0.0), sram_r=rows * k * ab + np.where(rows > 0, wt, 0.0),
                 sram_w=np.where(rows > 0, wt, 0.0) + rows * cols * ab, rows=rows)

    def norm(rows):
        return w(vpu=a.norm_flops * rows * d, hbm_r=np.where(rows > 0, d, 0.0), sram_r=2 * rows * d * ab,
                 sram_w=2 * rows * d * ab, rows=rows)

    def allreduce(rows):
        msg = rows * d * ab
        return w(tx=ring * msg, rx=ring * msg, vpu=(N - 1) / N * rows * d, sram_r=ring * msg, sram_w=ring * msg,
                 hops=np.where(msg > 0, 2 * (N - 1), 0.0), rows=rows)

    gather_msg = Th * a.sample_topk * 8.0
    ops = {
        "host_in": w(pcie_rx=np.where(T > 0, a.token_id_bytes * P + a.request_meta_bytes * b.batch + a.command_bytes, 0.0)),
        "embed": w(hbm_r=T / N * d, vpu=T * d / N, sram_w=T * d * ab),
        "embed_allreduce": allreduce(T),
        "attn_norm": norm(T),
        "qkv_proj": gemm(T, d, qkv),
        "rope": w(vpu=a.rope_flops * T * qkv, sram_r=T * qkv * ab, sram_w=T * qkv * ab),
        "attn_prefill": w(mxu=4 * h * dh * b.prefill_pairs, vpu=a.softmax_flops * h * b.prefill_pairs,
                          hbm_r=b.prefill_history * kv_tok, sram_r=P * h * dh * ab + (b.prefill_history + P) * kv_tok,
                          sram_w=b.prefill_history * kv_tok + P * h * dh * ab, rows=P),
        "attn_decode": w(mxu=4 * h * dh * b.decode_keys, vpu=a.softmax_flops * h * b.decode_keys,
                         hbm_r=(b.decode_keys - D) * kv_tok, sram_r=D * h * dh * ab + b.decode_keys * kv_tok,
                         sram_w=(b.decode_keys - D) * kv_tok + D * h * dh * ab, rows=D),
        "o_proj": gemm(T, h * dh, d),
        "attn_allreduce": allreduce(T),
        "ffn_norm": norm(T),
        "ffn_gate": gemm(T, d, f),
        "ffn_up": gemm(T, d, f),
        "silu_mul": w(vpu=a.silu_mul_flops * T * f, sram_r=2 * T * f * ab, sram_w=T * f * ab),
        "ffn_down": gemm(T, f, d),
        "ffn_allreduce": allreduce(T),
        "final_norm": norm(Th),
        "lm_head": gemm(Th, d, v),
        "sample": w(vpu=a.sample_flops * Th * v, sram_r=Th * v * ab, rows=Th),
        "sample_gather": w(tx=(N - 1) * gather_msg, rx=(N - 1) * gather_msg, sram_r=(N - 1) * gather_msg,
                           sram_w=(N - 1) * gather_msg, hops=np.where(gather_msg > 0, N - 1, 0.0), rows=Th),
        "host_out": w(pcie_tx=a.token_id_bytes * Th),
        "idle": w(),
    }
    ops["qkv_proj"]["hbm_w"] = T * kv_tok  # new K/V of every token written to the KV cache
    return ops


def build_ops(b: StepBatch, m: ModelShape, hw: Hardware, a: Assumptions, chips: int,
              idle_cycles: np.ndarray | None = None) -> OpTable:
    """Durations, cycle classes and counter quantities of every slot of the steps in ``b``.

    All arithmetic is on (steps, slots) matrices: no loop over steps or slots.

    Args:
        b: scheduled steps.
        idle_cycles: (steps,) core cycles of the ``idle`` slot (steps with no work have all other
            slots empty); None = no idle.
    Returns:
        ``OpTable`` (per chip; leader-only quantities carry the leader's value).
    """
    n, S = len(b), len(SLOTS)
    cs = chip_shape(m, chips)
    f_core = hw.core_hz
    links = a.ring_links or hw.links
    per_slot = _work(b, m, cs, chips, a)
    W = {k: np.stack([per_slot[s][k] for s in SLOTS], axis=1) for k in per_slot[SLOTS[0]]}
    is_coll = np.isin(SLOTS, COLLECTIVES)[None, :]
    is_in, is_out, is_idle = (np.array([s == x for s in SLOTS])[None, :] for x in ("host_in", "host_out", "idle"))

    def div(num, den):
        return np.divide(num, den, out=np.zeros((n, S)), where=num > 0)

    t_mxu = div(W["mxu"], hw.peak_fp8 * efficiency(W["rows"], a.mxu_eff_max, a.mxu_half_tokens))
    t_vpu = div(W["vpu"], hw.vpu_peak * efficiency(W["rows"], a.vpu_eff_max, a.vpu_half_tokens))
    hbm = W["hbm_r"] + W["hbm_w"]
    t_mem = div(hbm, hw.hbm_bw * efficiency(hbm, a.hbm_eff_max, a.hbm_half_bytes))
    sram = W["sram_r"] + W["sram_w"]
    t_sram = sram / (hw.sram_bw * a.sram_eff_max)
    t_link = W["tx"] / (hw.link_bw * links * a.link_eff)
    t_pcie = np.maximum(W["pcie_rx"], W["pcie_tx"]) / (hw.pcie_bw * a.pcie_eff)
    comp = np.maximum(np.maximum(t_mxu, t_vpu), t_sram)
    t = np.where(is_coll, np.maximum(t_link, comp) + W["hops"] * a.hop_latency_s, np.maximum(comp, t_mem))
    t = np.where(is_in, np.where(W["pcie_rx"] > 0, a.host_step_s + t_pcie, 0.0), t)
    t = np.where(is_out, np.where(W["pcie_tx"] > 0, a.pcie_latency_s + t_pcie, 0.0), t)
    cls = np.where(comp >= t_mem, 0, 1)
    cls = np.where(is_coll, 2, np.where(is_in | is_out, 3, np.where(is_idle, 4, cls))).astype(np.int8)
    dur = np.ceil(t * f_core - 1e-9).astype(np.int64)
    dur[:, SLOTS.index("idle")] = 0 if idle_cycles is None else np.asarray(idle_cycles, np.int64)
    ds = dur / f_core
    busy = {"mxu": np.minimum(t_mxu, ds), "vpu": np.minimum(t_vpu, ds), "hbm": np.minimum(t_mem, ds),
            "c2c": np.minimum(t_link, ds)}
    q = {
        "mxu_busy": busy["mxu"], "mxu_stall": np.where(W["mxu"] > 0, ds - busy["mxu"], 0.0),
        "mxu_flops_fp8": W["mxu"], "mxu_flops_bf16": np.zeros((n, S)), "mxu_instructions": W["mxu"] / a.mxu_tile_flops,
        "vpu_busy": busy["vpu"], "vpu_flops": W["vpu"], "vpu_instructions": W["vpu"] / a.vpu_instruction_flops,
        "sram_read": W["sram_r"], "sram_write": W["sram_w"],
        "sram_conflict": hw.banks * a.sram_conflict_fraction * np.minimum(sram / hw.sram_bw, ds),
        "hbm_read": W["hbm_r"], "hbm_write": W["hbm_w"], "hbm_active": busy["hbm"],
        "hbm_refresh": a.hbm_refresh_fraction * ds,
        "dma_bytes": hbm + W["tx"] + W["rx"] + W["pcie_rx"],
        "dma_busy": np.minimum(np.maximum(np.maximum(t_mem, t_link), t_pcie), ds),
        "c2c_tx": W["tx"], "c2c_rx": W["rx"], "c2c_busy": busy["c2c"],
        "pcie_rx": W["pcie_rx"], "pcie_tx": W["pcie_tx"], "doorbells": np.where(W["pcie_rx"] > 0, 1.0, 0.0),
        "seq_instructions": np.where((dur > 0) & ~is_idle, a.seq_instructions_per_op, 0.0),
    }
    act = a.power_w_mxu * busy["mxu"] + a.power_w_hbm * busy["hbm"] + a.power_w_vpu * busy["vpu"] + a.power_w_c2c * busy["c2c"]
    act = np.clip(np.divide(act, ds, out=np.zeros((n, S)), where=ds > 0), 0.0, 1.0)
    q["energy"] = (hw.idle_power + (hw.tdp - hw.idle_power) * act) * ds
    alloc = cs.weight_bytes + b.kv_alloc_tokens * cs.kv_bytes_per_token
    sram_level = np.minimum(hw.sram_capacity, cs.layer_weight_bytes + b.tokens * m.hidden * 2.0 + 8 * 2**20)
    busy_step = b.tokens > 0
    return OpTable(
        dur=dur, cls=cls, q=q,
        gauges={"batch": b.batch.astype(np.float64), "kv_tokens": b.kv_tokens.astype(np.float64),
                "hbm_alloc_bytes": alloc.astype(np.float64), "sram_bytes": np.where(busy_step, sram_level, 0.0)},
        impulses={"steps": busy_step.astype(np.int64), "input_tokens": b.prefill_tokens.astype(np.int64),
                  "output_tokens": b.head_tokens.astype(np.int64), "requests_completed": b.completed.astype(np.int64)},
    )
