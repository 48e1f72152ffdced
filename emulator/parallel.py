"""How a model is split over the chips (parallel mapping), its dtypes, and each chip's share.

Mapping of ``chips = dp × pp × tp`` chips (``Mapping``):

- ``tp``: chips of one pipeline stage. Attention and dense FFNs are tensor-parallel over them
  (Megatron-LM: heads and FFN columns split, one all-reduce after attention and one after the FFN;
  vocabulary-parallel embedding and LM head), unless ``attn_dp``.
- ``attn_dp`` (MoE models): attention, dense FFNs, shared experts, embedding and head are
  *replicated* on the stage's chips and each chip serves its own requests (data-parallel attention,
  as DeepSeek-V3's deployment and TensorRT-LLM's ``enable_attention_dp``); the routed experts are
  expert-parallel over the stage (``ep = tp``), tokens go to the chips holding their experts by an
  all-to-all (dispatch) and come back by another (combine).
- ``ep``: expert parallelism of the routed experts within the stage: 1 = every expert's FFN is
  split over the ``tp`` chips like a dense FFN; ``tp`` = each chip holds ``E/tp`` whole experts.
  With tensor-parallel attention every chip already has every token, so EP needs no dispatch and
  the combine is the FFN's all-reduce.
- ``pp``: pipeline stages, each with ``L/pp`` layers of every layer kind; activations go from stage
  to stage by send/receive. ``pp`` micro-batches are in flight, so every stage is always busy.
- ``dp``: independent replicas (data parallel), each with its own requests.

Default for ``--chips N`` (``Mapping.default``): tensor parallel, ``tp = N``, for dense models; for
MoE models as the serving stacks run them (TensorRT-LLM's perf-overview MoE runs: ``--ep`` with
``enable_attention_dp``; DeepSeek-V3's deployment; SGLang's DP attention): data-parallel attention
and the routed experts expert-parallel over the same chips (``ep = N``, all-to-all dispatch and
combine) when ``N`` divides the experts, else the experts split like a dense FFN under TP
attention. ``perfonto project --no-attention-dp`` asks for TP attention with EP.

Per-chip shares (``ChipShape``): GQA KV heads are ``max(Hkv/tp, 1)`` per chip (replicated when
``tp > Hkv``, as vLLM and TensorRT-LLM do); an MLA latent cache is replicated on every chip of a
tensor-parallel group (each chip needs all of it for its heads). The small MLA down-projections and
the MoE router are counted column-split over the group (their outputs' all-gather is not modelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .models import ModelShape
from perfonto.ontology.errors import PerfontoError

#: Bytes per element: NVFP4 is E2M1 values plus one E4M3 scale per 16 elements (4.5 bits).
DTYPE_BYTES = {"fp4": 0.5625, "fp8": 1.0, "bf16": 2.0}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (``fp4``, ``fp8``, ``bf16``).

    Raises:
        ValueError: unknown dtype.
    """
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class Precision:
    """Dtypes: ``weights`` of the decoder's matrices, ``kv`` cache, ``head`` (embedding and LM head),
    activations (BF16, 2 B). Default KV dtype: FP8 for FP8/FP4 weights, BF16 for BF16 weights."""

    weights: str = "fp8"
    kv: str = "fp8"
    head: str = "bf16"

    @classmethod
    def of(cls, weights: str = "fp8", kv: str | None = None, head: str = "bf16") -> "Precision":
        for d in (weights, kv or "fp8", head):
            dtype_bytes(d)
        return cls(weights, kv or ("bf16" if weights == "bf16" else "fp8"), head)


class MappingError(PerfontoError, ValueError):
    """A parallel mapping that does not fit the model or the chip count."""


@dataclass(frozen=True)
class Mapping:
    """Parallel mapping (see the module docstring). ``chips = dp · pp · tp``."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    attn_dp: bool = False

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ranks(self) -> int:
        """Independent schedulers (request pools): replicas × attention-DP ranks per stage."""
        return self.dp * (self.tp if self.attn_dp else 1)

    @property
    def ar_group(self) -> int:
        """Chips of the tensor-parallel all-reduce (1 with data-parallel attention)."""
        return 1 if self.attn_dp else self.tp

    @classmethod
    def default(cls, m: ModelShape, chips: int) -> "Mapping":
        """``tp = chips``; for MoE models data-parallel attention with the routed experts
        expert-parallel over the same chips (``ep = tp``, ``E/tp`` whole experts per chip, all-to-all
        dispatch and combine) when the chips divide the experts."""
        if m.is_moe and chips > 1 and m.experts % chips == 0:
            return cls(tp=chips, ep=chips, attn_dp=True)
        return cls(tp=chips)

    def check(self, m: ModelShape) -> None:
        """Raises ``MappingError`` when the mapping does not fit ``m``."""
        for name in ("tp", "pp", "dp", "ep"):
            if int(getattr(self, name)) < 1:
                raise MappingError(f"{name} must be ≥ 1 (got {getattr(self, name)})")
        if self.ep not in (1, self.tp):
            raise MappingError(f"ep must be 1 or tp = {self.tp} (got {self.ep})")
        if self.ep > 1 and not m.is_moe:
            raise MappingError(f"{m.name} has no experts; expert parallelism needs a MoE model")
        if self.ep > 1 and m.experts % self.ep:
            raise MappingError(f"{m.experts} experts of {m.name} do not split over ep = {self.ep} chips")
        if self.attn_dp and self.ep != self.tp and self.tp > 1:
            raise MappingError("data-parallel attention needs the experts spread over the stage (ep = tp)")
        self._check_heads(m)
        for kind, n in m.layer_kinds():
            if n % self.pp:
                ok = [p for p in range(1, m.layers + 1) if all(c % p == 0 for _, c in m.layer_kinds())]
                raise MappingError(
                    f"{n} {kind} layers of {m.name} do not split over pp = {self.pp} stages; "
                    f"possible pp: {', '.join(map(str, ok))}"
                )

    def _check_heads(self, m: ModelShape) -> None:
        """Tensor parallelism splits attention by whole heads (Megatron-LM; vLLM and TensorRT-LLM refuse
        otherwise): the query heads divide over the attention TP, and the KV heads either divide over it or
        are replicated to it (tp a multiple of them).

        Raises:
            MappingError: naming the heads and the TP degrees that split them."""
        tp = 1 if self.attn_dp else self.tp
        kv = m.heads if m.is_mla else m.kv_heads

        def fits(t: int) -> bool:
            return m.heads % t == 0 and (kv % t == 0 or t % kv == 0)

        if not fits(tp):
            ok = [t for t in range(1, m.heads + 1) if fits(t)]
            raise MappingError(
                f"{m.heads} attention heads ({kv} KV heads) of {m.name} do not split over tp = {tp} chips; "
                f"possible tp: {', '.join(map(str, ok))} (the other chips as data-parallel replicas or pipeline "
                "stages: --tp with --dp or --pp)"
            )

    def describe(self) -> str:
        parts = [f"TP{self.tp}" + (" (attention data-parallel)" if self.attn_dp else "")]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.dp > 1:
            parts.append(f"DP{self.dp}")
        return " × ".join(parts)


def p_chip_touched(experts: int, top_k: int, chips: int) -> float:
    """Probability that a token routed to ``top_k`` of ``experts`` (uniformly, without replacement)
    has at least one expert on a given one of ``chips`` equal shares: ``1 − C(E−E/n, k)/C(E, k)``."""
    if chips <= 1:
        return 1.0
    e_local = experts // chips
    return 1.0 - math.comb(experts - e_local, top_k) / math.comb(experts, top_k)


@dataclass(frozen=True)
class ChipShape:
    """One chip's share of the model under a mapping (float counts; bytes in B).

    heads, kv_heads: query and KV heads whose attention the chip computes (GQA: ``max(Hkv/tp, 1)``).
    ffn: dense FFN columns; expert_ffn: columns of each local expert; local_experts: experts held.
    shared_ffn: columns of the shared experts (all of them together).
    attn_split: divisor of the MLA down-projections and the router (1 with data-parallel attention).
    vocab: vocabulary rows of the embedding and LM head.
    layers: {kind: layers on the chip's stage}.
    kv_bytes_per_token: KV bytes one token of the chip's requests takes on the chip (its layers).
    weight_bytes: every weight on the chip; layer_weight_bytes: the largest layer.
    group_tokens: tokens the MoE layers see per scheduler token (tp with data-parallel attention).
    """

    heads: float
    kv_heads: float
    ffn: float
    expert_ffn: float
    local_experts: int
    shared_ffn: float
    attn_split: float
    vocab: float
    layers: dict
    kv_bytes_per_token: float
    weight_bytes: float
    layer_weight_bytes: float
    group_tokens: float


def chip_shape(
    m: ModelShape,
    mp: Mapping | int,
    prec: Precision | None = None,
    *,
    weight_bytes: float | None = None,
    kv_bytes: float | None = None,
) -> ChipShape:
    """Per-chip shapes and memory footprint of ``m`` under mapping ``mp`` (an int = TP over that many).

    ``weight_bytes`` / ``kv_bytes`` override the bytes per element of ``prec`` (kept for the
    single-dtype callers of the first emulator). Formulas as in the module docstring.
    """
    if isinstance(mp, int):
        mp = Mapping.default(m, mp) if m.is_moe else Mapping(tp=mp)
    prec = prec or Precision()
    wb = dtype_bytes(prec.weights) if weight_bytes is None else weight_bytes
    kvb = dtype_bytes(prec.kv) if kv_bytes is None else kv_bytes
    hb = dtype_bytes(prec.head) if weight_bytes is None else weight_bytes
    nb = 2.0  # norm weights, router: BF16
    tp = float(1 if mp.attn_dp else mp.tp)
    d = m.hidden
    heads = m.heads / tp
    if m.is_mla:
        kv_heads = heads
        kv_layer = m.kv_elements_per_token_layer * kvb  # latent replicated in a TP group
        attn = (
            d * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) / tp
            + m.q_lora_rank * heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
            + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
            + heads * m.v_head_dim * d
        )
    else:
        kv_heads = max(m.kv_heads / tp, 1.0)
        kv_layer = 2 * kv_heads * m.head_dim * kvb
        attn = d * (heads + 2 * kv_heads) * m.head_dim + heads * m.head_dim * d
    ffn = m.ffn / tp
    if m.is_moe:
        local = m.experts // mp.ep
        expert_ffn = m.expert_ffn / (1 if mp.attn_dp else mp.tp / mp.ep)
        shared = m.shared_experts * m.expert_ffn / tp
    else:
        local, expert_ffn, shared = 0, 0.0, 0.0
    norms = (2 * d + m.attn_norm_params) * nb
    per_kind = {}
    for kind, _ in m.layer_kinds():
        if kind == "dense":
            f = 3 * d * ffn * wb
        else:
            f = (local * 3 * d * expert_ffn + 3 * d * shared) * wb + d * m.experts / tp * nb
        per_kind[kind] = attn * wb + f + norms
    layers = {k: n / mp.pp for k, n in m.layer_kinds()}
    vocab = m.vocab / tp
    embed = vocab * d * (1 if m.tied_embeddings else 2) * hb / mp.pp
    total = sum(layers[k] * per_kind[k] for k in layers) + d * nb + embed
    return ChipShape(
        heads=heads,
        kv_heads=kv_heads,
        ffn=ffn,
        expert_ffn=expert_ffn,
        local_experts=local,
        shared_ffn=shared,
        attn_split=tp,
        vocab=vocab,
        layers=layers,
        kv_bytes_per_token=m.layers / mp.pp * kv_layer,
        weight_bytes=total,
        layer_weight_bytes=max(per_kind.values()),
        group_tokens=float(mp.tp if mp.attn_dp else 1),
    )


def kv_capacity_tokens(hbm_capacity: float, cs: ChipShape, kv_fraction: float, reserve_bytes: float) -> int:
    """KV-cache tokens one scheduler rank can hold: ``fraction × (HBM − weights − reserve) / KV per token``.

    Raises:
        MappingError: the weights (and reserve) do not fit in HBM.
    """
    free = hbm_capacity - cs.weight_bytes - reserve_bytes
    if free <= 0:
        raise MappingError(
            f"the weights need {cs.weight_bytes / 1e9:.1f} GB per chip (+ {reserve_bytes / 1e9:.1f} GB "
            f"runtime reserve) but a chip has {hbm_capacity / 1e9:.1f} GB; use more chips or a "
            f"smaller dtype"
        )
    return int(kv_fraction * free // cs.kv_bytes_per_token)
