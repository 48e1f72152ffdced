"""Model shapes as data (``emulator/data/models.yaml``), and the parameter counts and attention work
that follow from a shape.

Shapes come from the models' published Hugging Face ``config.json`` files (the YAML names each
source). Supported blocks:

- attention: grouped-query attention (GQA; Llama 3, Mixtral, Qwen3 with per-head QK-norm) or
  multi-head latent attention (MLA; DeepSeek-V2/V3: low-rank query, a compressed KV latent of
  ``kv_lora_rank`` plus a shared rotary key of ``qk_rope_head_dim`` per token);
- feed-forward: dense SwiGLU (gate, up, down) or mixture of experts (MoE: a router, ``experts``
  SwiGLU experts of width ``expert_ffn`` of which ``top_k`` run per token, plus ``shared_experts``
  that every token runs; the first ``dense_layers`` layers keep a dense FFN of width ``ffn``);
- top-k sparse attention (``attention.sparse: {kind: top_k, top_k: K, indexer_heads, indexer_head_dim}``,
  as DeepSeek-V3.2's DSA): each query attends to at most K selected keys (``attended_keys``,
  ``attended_pairs``), chosen by an indexer that scores every key (``indexer_flops``).
Unknown keys are refused with a did-you-mean, never dropped.

Parameter counts (no bias terms, as in every model shipped; per layer):

- GQA: Q ``d·H·dh``, K and V ``2·d·Hkv·dh``, O ``H·dh·d``; QK-norm ``2·dh``.
- MLA (DeepSeek-V2 paper, §2.1): ``q_a`` ``d·q_lora``, ``q_b`` ``q_lora·H·(nope+rope)``,
  ``kv_a`` ``d·(kv_lora+rope)``, ``kv_b`` ``kv_lora·H·(nope+v)``, O ``H·v·d``; norms ``q_lora + kv_lora``.
- dense FFN ``3·d·F``; expert ``3·d·Fe``; router ``d·E``.
- two RMSNorms of width ``d`` per layer, one final norm; embedding ``V·d``; LM head ``V·d`` unless tied.

Llama-3-70B: 80 × 855,654,400 + 8,192 = 68,452,360,192 non-embedding parameters, 70,553,706,496
in all; DeepSeek-V3: 671,026,419,200 (the model card's 671 B, without the 14 B MTP module).

Attention work per (query, key) pair, all heads of one layer, in FLOP (one MAC = 2 FLOP):

- GQA: ``4·H·dh`` (QKᵀ and PV);
- MLA prefill (keys decompressed through ``kv_b``): ``H·(2·(nope+rope) + 2·v)``, plus
  ``2·kv_lora·H·(nope+v)`` per history key re-decompressed by a later prompt chunk;
- MLA decode (``kv_b`` absorbed into the query and output, DeepSeek-V2 §2.1.3):
  ``H·(2·(kv_lora+rope) + 2·kv_lora)`` over the latent cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class ModelShape:
    """Shape of a decoder-only transformer.

    Attributes:
        name: canonical identifier (``"llama-3.3-70b"``); aliases map to it.
        layers: decoder layers ``L``; hidden: model width ``d``; vocab: ``V``.
        heads: query heads ``H``; kv_heads: key/value heads ``Hkv`` (GQA; MLA: ``H``);
        head_dim: per-head width ``dh`` (GQA; MLA: ``nope + rope``).
        ffn: dense FFN width ``F`` (0 when every layer is MoE).
        attention: ``"gqa"`` or ``"mla"``; qk_norm: per-head RMSNorm on Q and K.
        q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim: MLA ranks (0 for GQA).
        experts, top_k, shared_experts, expert_ffn: MoE (0 for dense models).
        dense_layers: leading layers with a dense FFN in a MoE model.
        router_bias: the router has one bias per expert (DeepSeek-V3 ``e_score_correction_bias``).
        sparse_top_k: top-k sparse attention — each query attends to at most this many keys, chosen by
            a light indexer (DeepSeek-V3.2 DSA, ``index_topk``); 0 for dense attention.
        indexer_heads, indexer_head_dim: the indexer's heads and width (``index_n_heads``,
            ``index_head_dim``): it scores every key, ``2·heads·dim`` FLOP per (query, key) pair.
        tied_embeddings: LM head shares the embedding matrix.
        source: where the shape comes from.
        family: the model family (``family:`` in the YAML; the name by default).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied_embeddings: bool = False
    source: str = ""
    attention: str = "gqa"
    qk_norm: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0
    router_bias: bool = False
    sparse_top_k: int = 0
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    aliases: tuple[str, ...] = field(default=(), compare=False)
    family: str = ""  # model family (``llama-3``, ``qwen3``, …): the unit of the calibration's hold-out

    # ---- kinds ---------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    def layer_kinds(self) -> list[tuple[str, int]]:
        """``[(kind, count), ...]`` in layer order; kind is ``"dense"`` or ``"moe"``."""
        if not self.is_moe:
            return [("dense", self.layers)]
        kinds = [("dense", self.dense_layers), ("moe", self.layers - self.dense_layers)]
        return [(k, n) for k, n in kinds if n > 0]

    # ---- attention parameters per layer --------------------------------------------------------
    @property
    def q_params(self) -> int:
        """Query projection(s): GQA ``d·H·dh``; MLA ``d·q_lora + q_lora·H·(nope+rope)``."""
        if self.is_mla:
            return self.hidden * self.q_lora_rank + self.q_lora_rank * self.heads * (
                self.qk_nope_head_dim + self.qk_rope_head_dim
            )
        return self.hidden * self.heads * self.head_dim

    @property
    def kv_params(self) -> int:
        """Key/value projection(s): GQA ``2·d·Hkv·dh``; MLA ``d·(kv_lora+rope) + kv_lora·H·(nope+v)``."""
        if self.is_mla:
            return self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_b_params
        return 2 * self.hidden * self.kv_heads * self.head_dim

    @property
    def kv_b_params(self) -> int:
        """MLA ``kv_b``: latent → per-head keys (nope part) and values, ``kv_lora·H·(nope+v)``."""
        return self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim) if self.is_mla else 0

    @property
    def o_params(self) -> int:
        """Output projection ``H·dh·d`` (MLA: ``H·v·d``)."""
        return self.heads * (self.v_head_dim if self.is_mla else self.head_dim) * self.hidden

    @property
    def attn_params(self) -> int:
        """Matrix parameters of one layer's attention."""
        return self.q_params + self.kv_params + self.o_params

    @property
    def attn_norm_params(self) -> int:
        """Norm weights inside attention: QK-norm ``2·dh``; MLA ``q_lora + kv_lora``."""
        if self.is_mla:
            return self.q_lora_rank + self.kv_lora_rank
        return 2 * self.head_dim if self.qk_norm else 0

    # ---- FFN parameters per layer --------------------------------------------------------------
    @property
    def ffn_params(self) -> int:
        """Dense SwiGLU gate, up and down ``3·d·F``."""
        return 3 * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """One SwiGLU expert ``3·d·Fe``."""
        return 3 * self.hidden * self.expert_ffn

    @property
    def router_params(self) -> int:
        """Router (gate) ``d·E``."""
        return self.hidden * self.experts

    def ffn_matmul_params(self, kind: str, active: bool = False) -> int:
        """FFN matrix parameters of a layer of ``kind``; ``active``: those one token runs."""
        if kind == "dense":
            return self.ffn_params
        routed = self.top_k if active else self.experts
        return self.router_params + (routed + self.shared_experts) * self.expert_params

    @property
    def norm_params_per_layer(self) -> int:
        """Two RMSNorm weight vectors of width ``d`` per layer, plus the attention's own norms."""
        return 2 * self.hidden + self.attn_norm_params

    def layer_params(self, kind: str) -> int:
        """All parameters of one layer of ``kind``."""
        bias = self.experts if kind == "moe" and self.router_bias else 0
        return self.attn_params + self.ffn_matmul_params(kind) + self.norm_params_per_layer + bias

    @property
    def matmul_params_per_layer(self) -> int:
        """Matrix parameters of one layer of a dense model (everything but the norms)."""
        return self.attn_params + self.ffn_params

    @property
    def params_per_layer(self) -> int:
        """Parameters of one layer (dense models; MoE: see ``layer_params``)."""
        ((kind, _),) = self.layer_kinds() if len(self.layer_kinds()) == 1 else [("dense", 0)]
        return self.layer_params(kind)

    # ---- whole-model counts -------------------------------------------------------------------
    @property
    def non_embedding_params(self) -> int:
        """All decoder-layer parameters plus the final norm (no embedding, no LM head)."""
        return sum(n * self.layer_params(k) for k, n in self.layer_kinds()) + self.hidden

    @property
    def active_matmul_params(self) -> int:
        """Decoder matrix parameters one token runs through (MoE: router, top-k and shared experts)."""
        return sum(n * (self.attn_params + self.ffn_matmul_params(k, active=True)) for k, n in self.layer_kinds())

    @property
    def embedding_params(self) -> int:
        """Token embedding table ``V × d``."""
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        """LM head ``d × V``; 0 when tied to the embedding."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        return self.non_embedding_params + self.embedding_params + self.lm_head_params

    # ---- KV cache and attention work -----------------------------------------------------------
    @property
    def kv_elements_per_token_layer(self) -> int:
        """Cached elements per token per layer: GQA ``2·Hkv·dh``; MLA ``kv_lora + rope`` (shared by all heads)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, bytes_per_element: float = 1.0) -> float:
        """KV-cache bytes of one token over all layers (whole model, unsharded)."""
        return float(self.layers * self.kv_elements_per_token_layer * bytes_per_element)

    @property
    def prefill_pair_flops(self) -> int:
        """Attention FLOP per causal (query, key) pair, all heads, one layer, prompt (unabsorbed)."""
        if self.is_mla:
            return self.heads * (2 * (self.qk_nope_head_dim + self.qk_rope_head_dim) + 2 * self.v_head_dim)
        return 4 * self.heads * self.head_dim

    @property
    def decode_pair_flops(self) -> int:
        """Attention FLOP per (query, key) pair, all heads, one layer, decode (MLA: absorbed)."""
        if self.is_mla:
            return self.heads * (2 * (self.kv_lora_rank + self.qk_rope_head_dim) + 2 * self.kv_lora_rank)
        return 4 * self.heads * self.head_dim

    @property
    def history_decompress_flops(self) -> int:
        """MLA: FLOP to decompress one cached latent through ``kv_b`` again (a later prompt chunk)."""
        return 2 * self.kv_b_params

    # ---- top-k sparse attention ---------------------------------------------------------------
    def attended_keys(self, context):
        """Keys one query attends to with ``context`` keys visible: ``min(context, top_k)`` with top-k
        sparse attention, ``context`` otherwise (scalars or NumPy arrays)."""
        import numpy as np

        return np.minimum(context, self.sparse_top_k) if self.sparse_top_k else context

    def attended_pairs(self, q, p):
        """(query, key) pairs a prompt chunk of ``q`` tokens after ``p`` cached tokens attends to:
        Σ_{i=1..q} min(p + i, top_k) — ``q·p + q(q+1)/2`` for dense attention (closed form, arrays ok)."""
        import numpy as np

        q, p = np.asarray(q, np.float64), np.asarray(p, np.float64)
        dense = q * p + q * (q + 1) / 2
        if not self.sparse_top_k:
            return dense
        k = float(self.sparse_top_k)
        # queries i = 1..m see p + i <= k keys (the causal triangle), the other q - m see k each
        m = np.clip(k - p, 0, q)
        return m * p + m * (m + 1) / 2 + (q - m) * k

    def indexer_flops(self, scored_pairs: float) -> float:
        """FLOP of the top-k indexer over ``scored_pairs`` (query, key) pairs (it scores every visible
        key), all layers; 0 for dense attention."""
        return (
            float(self.layers * 2 * self.indexer_heads * self.indexer_head_dim * scored_pairs)
            if self.sparse_top_k
            else 0.0
        )

    def attention_flops(self, prefill_pairs: float, decode_pairs: float, prefill_history: float = 0.0) -> float:
        """Attention matrix FLOP of the whole model (all layers, unsharded) for the given pair counts.

        ``prefill_pairs``: causal (query, key) pairs of prompt chunks; ``decode_pairs``: Σ over decode
        tokens of the keys each attends to; ``prefill_history``: Σ over chunks of the history keys.
        """
        hist = self.history_decompress_flops * prefill_history if self.is_mla else 0.0
        return self.layers * (self.prefill_pair_flops * prefill_pairs + self.decode_pair_flops * decode_pairs + hist)


KEYS = {
    "model": {"aliases", "family", "source", "layers", "hidden", "vocab", "tied", "attention", "ffn"},
    "gqa": {"kind", "heads", "kv_heads", "head_dim", "qk_norm", "sparse"},
    "mla": {
        "kind",
        "heads",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "qk_norm",
        "sparse",
    },
    "dense": {"kind", "intermediate"},
    "moe": {
        "kind",
        "intermediate",
        "expert_intermediate",
        "experts",
        "top_k",
        "shared_experts",
        "dense_layers",
        "router_bias",
    },
    "sparse": {"kind", "top_k", "indexer_heads", "indexer_head_dim"},
}


def _known(where: str, d, allowed: set[str]) -> None:
    """Refuse a key the model description does not know (with a did-you-mean), instead of dropping it."""
    import difflib

    if not isinstance(d, dict):
        raise ValueError(f"{where} must be a mapping, got {type(d).__name__}")
    for k in d:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), sorted(allowed), n=1)
            raise ValueError(
                f"unknown key `{k}` in {where}"
                + (f" (did you mean `{close[0]}`?)" if close else f" (known: {', '.join(sorted(allowed))})")
            )


def _shape(name: str, d: dict) -> ModelShape:
    _known("the model", d, KEYS["model"])
    at, ffn = d["attention"], d["ffn"]
    _known("attention", at, KEYS.get(at.get("kind") if isinstance(at, dict) else "", KEYS["gqa"]))
    _known("ffn", ffn, KEYS.get(ffn.get("kind") if isinstance(ffn, dict) else "", KEYS["dense"]))
    sp = at.get("sparse") or {}
    if sp:
        _known("attention.sparse", sp, KEYS["sparse"])
        if sp.get("kind", "top_k") != "top_k" or int(sp.get("top_k", 0)) < 1:
            raise ValueError("attention.sparse is `{kind: top_k, top_k: N}` with N >= 1 keys per query")
    mla = at["kind"] == "mla"
    moe = ffn["kind"] == "moe"
    heads = int(at["heads"])
    return ModelShape(
        name=name,
        layers=int(d["layers"]),
        hidden=int(d["hidden"]),
        vocab=int(d["vocab"]),
        tied_embeddings=bool(d.get("tied", False)),
        source=str(d.get("source", "")),
        heads=heads,
        kv_heads=heads if mla else int(at["kv_heads"]),
        head_dim=int(at["qk_nope_head_dim"] + at["qk_rope_head_dim"])
        if mla
        else int(at.get("head_dim", d["hidden"] // heads)),
        attention=at["kind"],
        qk_norm=bool(at.get("qk_norm", False)),
        q_lora_rank=int(at.get("q_lora_rank", 0)),
        kv_lora_rank=int(at.get("kv_lora_rank", 0)),
        qk_nope_head_dim=int(at.get("qk_nope_head_dim", 0)),
        qk_rope_head_dim=int(at.get("qk_rope_head_dim", 0)),
        v_head_dim=int(at.get("v_head_dim", 0)),
        ffn=int(ffn.get("intermediate", 0)),
        experts=int(ffn.get("experts", 0)) if moe else 0,
        top_k=int(ffn.get("top_k", 0)) if moe else 0,
        shared_experts=int(ffn.get("shared_experts", 0)) if moe else 0,
        expert_ffn=int(ffn.get("expert_intermediate", 0)) if moe else 0,
        dense_layers=int(ffn.get("dense_layers", 0)) if moe else 0,
        router_bias=bool(ffn.get("router_bias", False)) if moe else False,
        sparse_top_k=int(sp.get("top_k", 0)),
        indexer_heads=int(sp.get("indexer_heads", 0)),
        indexer_head_dim=int(sp.get("indexer_head_dim", 0)),
        aliases=tuple(d.get("aliases", ())),
        family=str(d.get("family", name)),
    )


@lru_cache(maxsize=None)
def load_models(path: str | None = None) -> dict[str, ModelShape]:
    """Model shapes of ``path`` (default ``emulator/data/models.yaml``), keyed by name and alias.

    Raises:
        ValueError: a model is missing a field or has an unknown kind.
    """
    p = Path(path) if path else DATA / "models.yaml"
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    out: dict[str, ModelShape] = {}
    for name, d in doc["models"].items():
        try:
            if d["attention"]["kind"] not in ("gqa", "mla") or d["ffn"]["kind"] not in ("dense", "moe"):
                raise ValueError(f"unknown attention/ffn kind {d['attention']['kind']!r}/{d['ffn']['kind']!r}")
            m = _shape(name, d)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p}: model {name!r}: {exc}") from None
        out[name] = m
        for a in m.aliases:
            out[a] = m
    return out


MODELS: dict[str, ModelShape] = load_models()


def get_model(name: str) -> ModelShape:
    """The shape registered under ``name`` (canonical name or alias).

    Raises:
        KeyError: unknown model; the message lists the known ones.
    """
    try:
        return MODELS[name]
    except KeyError:
        canon = sorted({m.name for m in MODELS.values()})
        raise KeyError(
            f"unknown model {name!r}; known models: {', '.join(canon)} "
            f"(aliases: {', '.join(sorted(set(MODELS) - set(canon)))})"
        ) from None
