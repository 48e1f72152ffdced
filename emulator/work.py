"""What one step of one chip does: the slots of a step and their work (FLOPs, bytes, rows).

A step is one forward pass of a scheduler rank's batch (see ``emulator.parallel`` for the mapping;
every chip of a rank does the same work, every rank the same). Its slots (``StepPlan``) are a prefix,
one group of slots per layer kind repeated ``layers`` times (the chip's stage), and a suffix::

    prefix: host_in, embed, embed_allreduce
    layer (GQA attention): attn_norm, qkv_proj, rope, attn_prefill, attn_decode, o_proj, attn_allreduce
    layer (MLA attention): attn_norm, qkv_down, latent_norm, q_up, rope, kv_up, attn_prefill, q_absorb,
                           attn_decode, v_absorb, o_proj, attn_allreduce
    then (dense FFN):      ffn_norm, ffn_gate_up, silu_mul, ffn_down, ffn_allreduce
    or (MoE FFN):          ffn_norm, router, moe_dispatch, experts_gate_up, experts_silu_mul, experts_down,
                           [shared_gate_up, shared_silu_mul, shared_down,] moe_combine, ffn_allreduce
    suffix: final_norm, lm_head, sample, draft, sample_gather, pp_send, host_out, idle

With two layer kinds (DeepSeek-V3: dense then MoE layers) the layer slots are named ``dense.<op>``
and ``moe.<op>``. Slots a mapping does not use (a collective on one chip) do no work and take no time.

Formulas (per chip; T tokens in the step, P prompt tokens, D decode tokens, Th rows through the LM
head; d hidden; dtypes from ``Precision``; activations BF16, 2 B):

- GEMM ``m×k·k×n``: ``2mkn`` FLOP in the weights' math dtype (FP4 runs FP8 math on chips without
  FP4); weights ``k·n`` × bytes read from HBM once per step (the weights of the experts a step
  touches, for MoE); activations ``m·k`` read, ``m·n`` written.
- MoE (uniform routing): a step of ``T`` tokens touches ``E_local·(1 − (1 − k/E)^T)`` of a chip's
  local experts; each touched expert's GEMM has the chip's ``T·k·E_local/E`` rows ÷ the experts
  touched (``moe.tokens_per_expert``: the grouped GEMM efficiency's size, ``moe``).
- Attention: ``ModelShape.prefill_pair_flops`` per causal pair of a prompt chunk, ``decode_pair_flops``
  per (decode token, key); KV history read from HBM (paged reads); new K/V (MLA: the latent and
  rotary key) written by ``rope``. MLA prompts decompress their keys through ``kv_up`` (the history
  again for later chunks); decode runs absorbed (``q_absorb``, ``v_absorb``).
- Ring all-reduce of ``M`` bytes over ``N`` chips: ``2(N−1)/N · M`` sent and received per chip in
  ``2(N−1)`` steps (Patarasuk & Yuan 2009; NCCL ring). All-to-all (MoE dispatch/combine): each token's
  hidden state goes once to every other chip holding one of its experts (``parallel.p_chip_touched``),
  ``N−1`` exchange steps; the combine waits for the hottest expert-parallel rank (``moe``, field
  ``imb``: its load ÷ the mean). Pipeline send/receive: ``T·d`` activations to the next stage. Sampling
  all-gathers ``sample_topk`` (value, index) candidates per row.
- Speculative decoding (``draft``): ``k`` sequential passes of a draft network of
  ``Assumptions.draft_layers`` layers (the target's average active matrix parameters per layer) and
  the LM head over the decoding requests, each pass re-reading its weights; FLOP ``2 · draft rows ·
  params``; the draft's attention and collectives are left out.
- Host: prompt token IDs, request metadata and a command buffer over PCIe before the pass; the
  sampled IDs after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .assumptions import Assumptions
from .hardware import Hardware
from .models import ModelShape
from .parallel import ChipShape, Mapping, MappingError, Precision, chip_shape, dtype_bytes, p_chip_touched
from .knobs import NOMINAL, ChipProfile
from .moe import imbalance, tokens_per_expert
from .model_flops import attention_flops_per_token, dense_flops_per_token, lm_head_flops
from .scheduler import StepBatch

_FIELDS = (
    "fp4",
    "fp8",
    "bf16",
    "vpu",
    "w",
    "kv_r",
    "kv_w",
    "act_r",
    "act_w",
    "sram_x",
    "tx",
    "rx",
    "pcie_rx",
    "pcie_tx",
    "hops",
    "rows",
    "pad_fp4",
    "pad_fp8",
    "pad_bf16",
    "imb",
)
ACT_BYTES = 2.0  # BF16 activations


@dataclass(frozen=True)
class StepPlan:
    """Slots of a step: names, group of each slot (0 prefix, 1..K layer kinds, K+1 suffix), the
    repetitions of each group per step, and each slot's kind (``op``, ``collective``, ``host_in``,
    ``host_out``, ``idle``) and collective tag."""

    slots: tuple[str, ...]
    group: np.ndarray
    reps: np.ndarray
    kinds: tuple[str, ...]
    tags: tuple[str, ...]

    def index(self, name: str) -> int:
        return self.slots.index(name)

    @property
    def layer_slots(self) -> list[int]:
        return [i for i, g in enumerate(self.group) if 0 < g < len(self.reps) - 1]

    @property
    def slot_reps(self) -> np.ndarray:
        """(S,) executions of each slot per step."""
        return self.reps[self.group]


@dataclass(frozen=True)
class EmuConfig:
    """Everything the per-step model needs: model, hardware, assumptions, mapping and dtypes."""

    model: ModelShape
    hw: Hardware
    a: Assumptions
    mapping: Mapping
    prec: Precision = field(default_factory=Precision)

    @cached_property
    def cs(self) -> ChipShape:
        self.mapping.check(self.model)
        return chip_shape(self.model, self.mapping, self.prec)

    @cached_property
    def plan(self) -> StepPlan:
        return _plan(self.model, self.mapping)


def _layer_ops(m: ModelShape, kind: str) -> list[tuple[str, str, str]]:
    attn = (
        [
            "attn_norm",
            "qkv_down",
            "latent_norm",
            "q_up",
            "rope",
            "kv_up",
            "attn_prefill",
            "q_absorb",
            "attn_decode",
            "v_absorb",
            "o_proj",
        ]
        if m.is_mla
        else ["attn_norm", "qkv_proj", "rope", "attn_prefill", "attn_decode", "o_proj"]
    )
    ops = [(o, "op", "") for o in attn] + [("attn_allreduce", "collective", "allreduce"), ("ffn_norm", "op", "")]
    if kind == "dense":
        ops += [(o, "op", "") for o in ("ffn_gate_up", "silu_mul", "ffn_down")]
    else:
        ops += [("router", "op", ""), ("moe_dispatch", "collective", "all_to_all")]
        ops += [(o, "op", "") for o in ("experts_gate_up", "experts_silu_mul", "experts_down")]
        if m.shared_experts:
            ops += [(o, "op", "") for o in ("shared_gate_up", "shared_silu_mul", "shared_down")]
        ops += [("moe_combine", "collective", "all_to_all")]
    return ops + [("ffn_allreduce", "collective", "allreduce")]


PREFIX = [("host_in", "host_in", ""), ("embed", "op", ""), ("embed_allreduce", "collective", "allreduce")]
SUFFIX = [
    ("final_norm", "op", ""),
    ("lm_head", "op", ""),
    ("sample", "op", ""),
    ("draft", "op", ""),
    ("sample_gather", "collective", "all_gather"),
    ("pp_send", "collective", "send_recv"),
    ("host_out", "host_out", ""),
    ("idle", "idle", ""),
]


def _plan(m: ModelShape, mp: Mapping) -> StepPlan:
    kinds = m.layer_kinds()
    entries, groups, reps = list(PREFIX), [0] * len(PREFIX), [1]
    for gi, (kind, n) in enumerate(kinds, start=1):
        ops = _layer_ops(m, kind)
        prefix = f"{kind}." if len(kinds) > 1 else ""
        entries += [(prefix + o, k, t) for o, k, t in ops]
        groups += [gi] * len(ops)
        if n % mp.pp:
            raise MappingError(f"{n} {kind} layers do not split over pp = {mp.pp} stages")
        reps.append(n // mp.pp)
    entries += SUFFIX
    groups += [len(kinds) + 1] * len(SUFFIX)
    reps.append(1)
    return StepPlan(
        tuple(e[0] for e in entries),
        np.array(groups, np.int64),
        np.array(reps, np.int64),
        tuple(e[1] for e in entries),
        tuple(e[2] for e in entries),
    )


# ---- work ---------------------------------------------------------------------------------------


def padded_rows(rows, block: float, groups=None) -> np.ndarray:
    """Rows a matrix engine processes for ``rows`` rows in blocks of ``block``: each of ``groups``
    separate GEMMs (default one; e.g. the experts a step touches, sharing ``rows`` evenly) rounds its
    rows up to a whole block. 0 rows stay 0."""
    rows = np.asarray(rows, np.float64)
    if groups is None:
        return np.where(rows > 0, np.ceil(rows / block - 1e-9) * block, 0.0)
    g = np.asarray(groups, np.float64)
    per = np.divide(rows, g, out=np.zeros(np.broadcast(rows, g).shape), where=g > 0)
    return np.where(rows > 0, g * np.ceil(per / block - 1e-9) * block, 0.0)


def model_flops(b: StepBatch, m) -> np.ndarray:
    """(steps,) model FLOPs of one scheduler rank's steps, whole model (every layer, every chip of the
    rank), by the definitions of ``emulator.model_flops``: 2 × the matrix parameters a token runs
    through (the decoder's; MoE: router, top-k and shared experts; no embedding, no LM head) per
    token, the LM head once per sampled row (each decode token, each finished prompt), attention over
    the causal (query, key) pairs actually attended (``prefill_pairs + decode_keys``) at
    ``d_attn = prefill_pair_flops / 4`` (GQA ``H·dh``; MLA unabsorbed ``H·(nope + rope + v)/2``) — no
    padding, no replicated heads, no MLA decompression of history, and no rejected draft row: with
    speculative decoding a verify row whose draft token is rejected emits nothing, so its weights, LM
    head and attention (at the step's mean keys per decode row) are hardware work (HFU), not model work
    (a what-if audit: MFU rose 4.55× for 2.59× the tokens with 4 drafts)."""
    T = b.tokens.astype(np.float64)
    pairs = (b.prefill_pairs + b.decode_keys).astype(np.float64)
    heads = b.head_tokens.astype(np.float64)
    if b.draft_rows is not None and b.accepted_tokens is not None:
        rejected = np.maximum(b.draft_rows.astype(np.float64) - b.accepted_tokens.astype(np.float64), 0.0)
        D = b.decode_tokens.astype(np.float64)
        keys_per_row = np.divide(b.decode_keys, D, out=np.zeros_like(D), where=D > 0)
        T, heads, pairs = T - rejected, heads - rejected, pairs - rejected * keys_per_row
    per_pair = attention_flops_per_token(m.layers, m.prefill_pair_flops / 4.0, 1.0, causal=False)
    return (
        dense_flops_per_token(m.active_matmul_params) * T + lm_head_flops(m.hidden, m.vocab, heads) + per_pair * pairs
    )


def _work(b: StepBatch, cfg: EmuConfig, profile: ChipProfile = NOMINAL) -> dict[str, dict[str, np.ndarray]]:
    """Work of every slot (FLOP, bytes, rows), per step: ``{slot: {field: (steps,) array}}``.

    ``profile.expert_load`` scales the routed-expert rows of this chip (router skew)."""
    m, mp, a, prec, cs = cfg.model, cfg.mapping, cfg.a, cfg.prec, cfg.cs
    n = len(b)
    T = b.tokens.astype(np.float64)
    D = b.decode_tokens.astype(np.float64)
    P = b.prefill_tokens.astype(np.float64)
    Th = b.head_tokens.astype(np.float64)
    keys = b.decode_keys.astype(np.float64)
    pairs = b.prefill_pairs.astype(np.float64)
    hist = b.prefill_history.astype(np.float64)
    d, ab = float(m.hidden), ACT_BYTES
    wb, kvb, hb = dtype_bytes(prec.weights), dtype_bytes(prec.kv), dtype_bytes(prec.head)
    wmath = cfg.hw.math_dtype(prec.weights)
    amath = "bf16" if prec.kv == "bf16" else "fp8"
    hmath = cfg.hw.math_dtype(prec.head)
    h, kvh = cs.heads, cs.kv_heads
    N = float(mp.ar_group)
    ring = 2 * (N - 1) / N
    inv_pp = 1.0 / mp.pp
    out: dict[str, dict[str, np.ndarray]] = {}
    zero = np.zeros(n)

    def put(name, rows=None, **kw):
        w = dict.fromkeys(_FIELDS, zero)
        w["rows"] = T if rows is None else rows
        for k, v in kw.items():
            x = np.asarray(v, np.float64)
            # a (steps,) array as it is, a scalar spread over the steps (np.broadcast_to cost 40 % of a
            # step's timing at one step a call, as an online projection times its steps)
            w[k] = x if x.shape == (n,) else np.broadcast_to(x, (n,))
        out[name] = w

    def gemm(rows, k, cols, math, bpe, *, touched=None, mrows=None, groups=None):
        """rows × k · k × cols; ``touched``: weight bytes actually read (MoE); ``mrows``: efficiency size;
        ``groups``: separate GEMMs the rows are split over (padding is per GEMM)."""
        wt = np.where(rows > 0, k * cols * bpe, 0.0) if touched is None else touched
        pad = padded_rows(rows, a.mxu_pad_rows, groups) - rows
        return {
            math: 2 * rows * k * cols,
            "pad_" + math: 2 * pad * k * cols,
            "w": wt,
            "act_r": rows * k * ab,
            "act_w": rows * cols * ab,
            "rows": rows if mrows is None else mrows,
        }

    def norm(rows, width=d):
        return {
            "vpu": a.norm_flops * rows * width,
            "w": np.where(rows > 0, width * 2.0, 0.0),
            "act_r": 2 * rows * width * ab,
            "act_w": rows * width * ab,
            "rows": rows,
        }

    def allreduce(rows):
        if N <= 1:
            return {}
        msg = rows * d * ab
        return {
            "tx": ring * msg,
            "rx": ring * msg,
            "vpu": (N - 1) / N * rows * d,
            "act_r": ring * msg,
            "act_w": ring * msg,
            "hops": np.where(msg > 0, 2 * (N - 1), 0.0),
            "rows": rows,
        }

    # prefix
    put(
        "host_in", pcie_rx=np.where(T > 0, a.token_id_bytes * P + a.request_meta_bytes * b.batch + a.command_bytes, 0.0)
    )
    # vocabulary-parallel embedding: each of the N chips holds V/N rows and looks up the tokens in its range
    # (T/N rows on average), writes T rows with zeros elsewhere, and the all-reduce sums them
    put("embed", w=T * d * hb * inv_pp / N, vpu=T * d * inv_pp, act_w=T * d * ab * inv_pp)
    ar = allreduce(T)
    put("embed_allreduce", **{k: v * inv_pp for k, v in ar.items() if k != "rows"}, **({"rows": T} if ar else {}))

    for kind, _ in m.layer_kinds():
        pre = f"{kind}." if len(m.layer_kinds()) > 1 else ""
        put(pre + "attn_norm", **norm(T))
        if m.is_mla:
            lat = m.kv_lora_rank + m.qk_rope_head_dim
            lat_b = lat * kvb
            nope, rope, v = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim
            put(pre + "qkv_down", **gemm(T, d, (m.q_lora_rank + lat) / cs.attn_split, wmath, wb))
            put(pre + "latent_norm", **norm(T, m.q_lora_rank + m.kv_lora_rank))
            put(pre + "q_up", **gemm(T, m.q_lora_rank, h * (nope + rope), wmath, wb))
            put(
                pre + "rope",
                vpu=a.rope_flops * T * (h + 1) * rope,
                act_r=T * (h * (nope + rope) + lat) * ab,
                act_w=T * h * (nope + rope) * ab,
                kv_w=T * lat_b,
            )
            kvu = gemm(P + hist, m.kv_lora_rank, h * (nope + v), wmath, wb)
            put(pre + "kv_up", **{**kvu, "kv_r": hist * lat_b, "act_r": P * m.kv_lora_rank * ab})
            put(
                pre + "attn_prefill",
                rows=P,
                **{amath: m.prefill_pair_flops / m.heads * h * pairs},
                vpu=a.softmax_flops * h * pairs,
                act_r=P * h * (nope + rope) * ab + (P + hist) * h * (nope + v) * ab,
                act_w=P * h * v * ab,
            )
            put(pre + "q_absorb", **gemm(D, nope, m.kv_lora_rank * h, wmath, wb, mrows=D))
            put(
                pre + "attn_decode",
                rows=D * h,
                **{amath: m.decode_pair_flops / m.heads * h * keys},
                vpu=a.softmax_flops * h * keys,
                kv_r=(keys - D) * lat_b,
                sram_x=D * lat_b,
                act_r=D * h * (m.kv_lora_rank + rope) * ab,
                act_w=D * h * m.kv_lora_rank * ab,
            )
            put(pre + "v_absorb", **gemm(D, m.kv_lora_rank, h * v, wmath, wb))
            put(pre + "o_proj", **gemm(T, h * v, d, wmath, wb))
        else:
            dh = float(m.head_dim)
            kv_tok = 2 * kvh * dh * kvb
            qkv = (h + 2 * kvh) * dh
            put(pre + "qkv_proj", **gemm(T, d, qkv, wmath, wb))
            qk = a.norm_flops * T * (h + kvh) * dh if m.qk_norm else 0.0
            put(
                pre + "rope",
                vpu=a.rope_flops * T * qkv + qk,
                act_r=T * qkv * ab,
                act_w=T * h * dh * ab,
                kv_w=T * kv_tok,
            )
            put(
                pre + "attn_prefill",
                rows=P,
                **{amath: 4 * h * dh * pairs},
                vpu=a.softmax_flops * h * pairs,
                kv_r=hist * kv_tok,
                sram_x=P * kv_tok,
                act_r=P * h * dh * ab,
                act_w=P * h * dh * ab,
            )
            put(
                pre + "attn_decode",
                rows=D * h / kvh,
                **{amath: 4 * h * dh * keys},
                vpu=a.softmax_flops * h * keys,
                kv_r=(keys - D) * kv_tok,
                sram_x=D * kv_tok,
                act_r=D * h * dh * ab,
                act_w=D * h * dh * ab,
            )
            put(pre + "o_proj", **gemm(T, h * dh, d, wmath, wb))
        put(pre + "attn_allreduce", **allreduce(T))
        put(pre + "ffn_norm", **norm(T))
        if kind == "dense":
            put(pre + "ffn_gate_up", **gemm(T, d, 2 * cs.ffn, wmath, wb))
            put(pre + "silu_mul", vpu=a.silu_mul_flops * T * cs.ffn, act_r=2 * T * cs.ffn * ab, act_w=T * cs.ffn * ab)
            put(pre + "ffn_down", **gemm(T, cs.ffn, d, wmath, wb))
        else:
            E, k = float(m.experts), float(m.top_k)
            Tg = T * cs.group_tokens  # tokens the stage's MoE sees
            r = gemm(T, d, E / cs.attn_split, "bf16", 2.0)
            put(pre + "router", **{**r, "vpu": a.router_flops * T * E / cs.attn_split})
            if mp.attn_dp and mp.tp > 1:
                p = p_chip_touched(m.experts, m.top_k, mp.ep)
                msg = T * d * ab * (mp.ep - 1) * p
                a2a = {"tx": msg, "rx": msg, "act_r": msg, "act_w": msg, "hops": np.where(msg > 0, mp.ep - 1.0, 0.0)}
            else:
                a2a = {}
            put(pre + "moe_dispatch", **a2a)
            load = float(profile.expert_load)
            rows = Tg * k * cs.local_experts / E * load  # token-expert rows on this chip
            touched = cs.local_experts * (1.0 - (1.0 - min(k / E * load, 1.0)) ** Tg)
            per_expert = tokens_per_expert(rows, touched)
            fe = cs.expert_ffn
            put(
                pre + "experts_gate_up",
                **gemm(rows, d, 2 * fe, wmath, wb, touched=touched * d * 2 * fe * wb, mrows=per_expert, groups=touched),
            )
            put(
                pre + "experts_silu_mul",
                vpu=a.silu_mul_flops * rows * fe,
                act_r=2 * rows * fe * ab,
                act_w=rows * fe * ab,
                rows=rows,
            )
            put(
                pre + "experts_down",
                **gemm(rows, fe, d, wmath, wb, touched=touched * fe * d * wb, mrows=per_expert, groups=touched),
            )
            if m.shared_experts:
                fs = cs.shared_ffn
                put(pre + "shared_gate_up", **gemm(T, d, 2 * fs, wmath, wb))
                put(pre + "shared_silu_mul", vpu=a.silu_mul_flops * T * fs, act_r=2 * T * fs * ab, act_w=T * fs * ab)
                put(pre + "shared_down", **gemm(T, fs, d, wmath, wb))
            # the combine waits for the hottest expert-parallel rank (moe.imbalance: the routing noise here,
            # × Assumptions.expert_imbalance in ops.slot_seconds, so that a calibration can vary it)
            imb = imbalance(rows, mp.ep, 1.0) if mp.ep > 1 and not profile.routed else np.zeros(n)
            put(pre + "moe_combine", **a2a, vpu=T * d * k, imb=np.where(rows > 0, imb, 0.0))  # + the top-k weighted sum
        put(pre + "ffn_allreduce", **allreduce(T))

    # suffix (embedding/head work spread evenly over pipeline stages)
    put("final_norm", **{k: v * inv_pp if k != "rows" else v for k, v in norm(Th).items()})
    head = gemm(Th, d, cs.vocab, hmath, hb)
    put("lm_head", **{k: v * inv_pp if k != "rows" else v for k, v in head.items()})
    put("sample", rows=Th, vpu=a.sample_flops * Th * cs.vocab * inv_pp, act_r=Th * cs.vocab * ab * inv_pp)
    passes, drows = b.draft_passes.astype(np.float64), b.draft_rows.astype(np.float64)
    split = 1.0 if mp.attn_dp else float(mp.tp)
    p_layer = a.draft_layers * m.active_matmul_params / m.layers / split
    p_head = d * cs.vocab
    dr = {wmath: 2 * drows * p_layer * inv_pp}
    dr[hmath] = dr.get(hmath, 0.0) + 2 * drows * p_head * inv_pp
    put(
        "draft",
        rows=np.divide(drows, passes, out=np.zeros(n), where=passes > 0),
        **dr,
        w=passes * (p_layer * wb + p_head * hb) * inv_pp,
        act_r=drows * d * ab * inv_pp,
        act_w=drows * d * ab * inv_pp,
    )
    if N > 1:
        g = Th * a.sample_topk * 8.0 * (N - 1) * inv_pp
        put("sample_gather", rows=Th, tx=g, rx=g, act_r=g, act_w=g, hops=np.where(g > 0, N - 1, 0.0))
    else:
        put("sample_gather", rows=Th)
    if mp.pp > 1:
        s = T * d * ab
        put("pp_send", tx=s, rx=s, act_r=s, act_w=s, hops=np.where(s > 0, 1.0, 0.0))
    else:
        put("pp_send")
    put("host_out", pcie_tx=a.token_id_bytes * Th)
    put("idle")
    return out


def stack_work(b: StepBatch, cfg: EmuConfig, profile: ChipProfile = NOMINAL) -> dict[str, np.ndarray]:
    """``_work`` as (steps, slots) matrices in ``cfg.plan.slots`` order (independent of the
    fitted assumptions, so a calibration computes it once per scenario)."""
    per_slot = _work(b, cfg, profile)
    slots = [per_slot[s] for s in cfg.plan.slots]
    out = {}
    for k in _FIELDS:
        m = np.empty((len(b), len(slots)))
        for j, w in enumerate(slots):
            m[:, j] = w[k]
        out[k] = m
    return out
