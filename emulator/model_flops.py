"""Model FLOPs: the work a transformer's forward pass needs, the numerator of MFU.

Definitions (one place; the emulator's runtime counts ``seq.model_flops`` with them):
- every processed token costs 2 FLOPs per non-embedding parameter (one multiply-accumulate per weight;
  Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1) — the input embedding is
  a lookup, not a matmul, so it is excluded;
- attention scores and values cost 2 × 2 × n_layers × context × d_attn FLOPs per token (QKᵀ and PV,
  each a multiply-accumulate per element) when every token attends to the whole context; with a
  causal mask a prefill token at position i attends to i + 1 keys, so over a prompt of L tokens the
  mean context is (L + 1) / 2 (PaLM, Chowdhery et al. 2022, appendix B, costs attention this way);
- the LM head (d_model × vocabulary) runs once per decode token and once per prefill *request* (only
  the last prompt position's logits are sampled), never once per prefill token;
- padding is not model work (it is hardware work, counted by the matrix engine's counters: HFU), nor
  is a speculative-decoding verify row whose draft token is rejected (it emits nothing), nor the draft
  network's own passes.
MFU = model FLOPs per second ÷ the dense peak of the precision the model runs at.
"""

from __future__ import annotations


def dense_flops_per_token(non_embedding_params: float) -> float:
    """2 FLOPs per non-embedding parameter per token (FLOP/token)."""
    return 2.0 * non_embedding_params


def attention_flops_per_token(n_layers: int, d_attn: int, context: float, causal: bool = True) -> float:
    """Attention score and value FLOPs per token (FLOP/token) at ``context`` keys.

    ``causal``: for a prompt of ``context`` tokens, the mean token attends to (context + 1) / 2 keys.
    """
    keys = (context + 1) / 2 if causal else context
    return 2.0 * 2.0 * n_layers * keys * d_attn


def lm_head_flops(d_model: int, vocab: int, tokens: float = 1.0) -> float:
    """LM-head FLOPs for ``tokens`` sampled positions: 2 × d_model × vocab each."""
    return 2.0 * d_model * vocab * tokens


def prefill_flops(
    non_embedding_params: float,
    n_layers: int,
    d_attn: int,
    prompt: int,
    d_model: int,
    vocab: int,
    causal: bool = True,
    lm_head_in_params: bool = True,
) -> float:
    """Model FLOPs of one request's prefill of ``prompt`` tokens.

    ``lm_head_in_params``: the LM head's weights are part of ``non_embedding_params`` (as in a parameter
    count of an untied model); they are then taken out of the per-token cost and charged once.
    """
    head = lm_head_flops(d_model, vocab)
    per_token = dense_flops_per_token(non_embedding_params) - (head if lm_head_in_params else 0.0)
    return prompt * per_token + prompt * attention_flops_per_token(n_layers, d_attn, prompt, causal) + head


def mfu(model_flops_per_s: float, dense_peak_flops_per_s: float) -> float:
    """Model FLOPs utilisation, a fraction."""
    return model_flops_per_s / dense_peak_flops_per_s
