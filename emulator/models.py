"""Model shapes as data, and the parameter counts that follow from a shape.

A dense decoder-only transformer with grouped-query attention (GQA), RMSNorm and a SwiGLU
feed-forward network (gate, up, down projections), as in Llama 3. Shapes come from the models'
published ``config.json`` files (Hugging Face ``meta-llama/Meta-Llama-3-70B``,
``meta-llama/Llama-3.1-8B``).

Parameter counts are computed from the shape (no bias terms, as in Llama):

- attention per layer: ``d·(H·dh)`` (Q) + ``2·d·(Hkv·dh)`` (K, V) + ``(H·dh)·d`` (O)
- FFN per layer (SwiGLU): ``3·d·F`` (gate, up, down)
- norms: ``2·d`` per layer (input and post-attention RMSNorm) + ``d`` (final norm)
- embedding: ``V·d``; LM head: ``V·d`` (untied) or 0 (tied to the embedding)

Llama-3-70B: 80 × 855,654,400 + 8,192 = 68,452,360,192 non-embedding parameters,
1,050,673,152 embedding and 1,050,673,152 LM-head parameters: 70,553,706,496 in all (≈ 70.55e9).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """Shape of a dense GQA transformer with a SwiGLU FFN.

    Attributes:
        name: short identifier (``"llama3-70b"``).
        layers: decoder layers ``L``.
        hidden: model width ``d``.
        heads: attention (query) heads ``H``.
        kv_heads: key/value heads ``Hkv`` (GQA; ``Hkv == H`` is plain multi-head attention).
        head_dim: per-head width ``dh``.
        ffn: FFN intermediate width ``F`` (per projection).
        vocab: vocabulary size ``V``.
        tied_embeddings: the LM head reuses the embedding matrix.
        source: where the shape comes from.
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

    # ---- per-layer parameter counts -----------------------------------------------------------
    @property
    def q_params(self) -> int:
        """Q projection ``d × H·dh`` (parameters per layer)."""
        return self.hidden * self.heads * self.head_dim

    @property
    def kv_params(self) -> int:
        """K and V projections ``2 × d × Hkv·dh`` (parameters per layer)."""
        return 2 * self.hidden * self.kv_heads * self.head_dim

    @property
    def o_params(self) -> int:
        """O projection ``H·dh × d`` (parameters per layer)."""
        return self.heads * self.head_dim * self.hidden

    @property
    def ffn_params(self) -> int:
        """SwiGLU gate, up and down projections ``3 × d × F`` (parameters per layer)."""
        return 3 * self.hidden * self.ffn

    @property
    def norm_params_per_layer(self) -> int:
        """Two RMSNorm weight vectors of width ``d`` per layer."""
        return 2 * self.hidden

    @property
    def matmul_params_per_layer(self) -> int:
        """Parameters of the layer's matrix multiplications (everything but the norms)."""
        return self.q_params + self.kv_params + self.o_params + self.ffn_params

    @property
    def params_per_layer(self) -> int:
        return self.matmul_params_per_layer + self.norm_params_per_layer

    # ---- whole-model counts -------------------------------------------------------------------
    @property
    def non_embedding_params(self) -> int:
        """All decoder-layer parameters plus the final norm (no embedding, no LM head)."""
        return self.layers * self.params_per_layer + self.hidden

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

    def kv_bytes_per_token(self, bytes_per_element: float = 1.0) -> float:
        """KV-cache bytes of one token over all layers: ``2 · L · Hkv · dh · bytes`` (K and V)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * bytes_per_element


MODELS: dict[str, ModelShape] = {
    "llama3-70b": ModelShape(
        name="llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672,
        vocab=128256, tied_embeddings=False,
        source="meta-llama/Meta-Llama-3-70B config.json (also Llama-3.1/3.3-70B)"),
    "llama3-8b": ModelShape(
        name="llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
        vocab=128256, tied_embeddings=False,
        source="meta-llama/Llama-3.1-8B config.json"),
}


def get_model(name: str) -> ModelShape:
    """The shape registered under ``name``.

    Raises:
        KeyError: unknown model; the message lists the known ones.
    """
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}") from None
