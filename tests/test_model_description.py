"""The model description (issue 15, point 8): top-k sparse attention is accepted (each query attends
to at most top_k keys chosen by an indexer, as DeepSeek-V3.2's DSA), and unknown keys are refused
with a did-you-mean instead of being dropped."""

import pytest

from perfonto.emulator.models import load_models

BASE = """models:
  m:
    aliases: []
    source: test
    layers: 2
    hidden: 1024
    vocab: 1000
    tied: false
    attention: {ATT}
    ffn: {kind: dense, intermediate: 4096}
"""


def _load(tmp_path, att: str, name: str = "m.yaml"):
    p = tmp_path / name
    p.write_text(BASE.replace("{ATT}", att))
    load_models.cache_clear()
    try:
        return load_models(str(p))["m"]
    finally:
        load_models.cache_clear()


def test_top_k_sparse_attention_costs_the_selected_keys(tmp_path):
    m = _load(
        tmp_path,
        "{kind: gqa, heads: 8, kv_heads: 2, head_dim: 128, sparse: {kind: top_k, top_k: 2048, "
        "indexer_heads: 64, indexer_head_dim: 128}}",
    )
    assert m.sparse_top_k == 2048
    assert m.attended_keys(5000) == 2048 and m.attended_keys(100) == 100
    # a 1024-token chunk after 1536 cached tokens: 512 queries see <= 2048 keys, 512 see 2048
    assert m.attended_pairs(1024, 1536) == 512 * 1536 + 512 * 513 / 2 + 512 * 2048 == 1_966_336
    assert m.attended_pairs(1024, 0) == 1024 * 1025 / 2  # within top_k: the dense triangle
    assert m.indexer_flops(10) == 2 * 2 * 64 * 128 * 10  # layers x 2 x heads x dim x pairs
    dense = _load(tmp_path, "{kind: gqa, heads: 8, kv_heads: 2, head_dim: 128}", "d.yaml")
    assert dense.attended_pairs(1024, 1536) == 1024 * 1536 + 1024 * 1025 / 2 and dense.indexer_flops(10) == 0
    assert dense.attended_keys(5000) == 5000


@pytest.mark.parametrize(
    "att, word",
    [
        ("{kind: gqa, heads: 8, kv_head: 2, head_dim: 128}", "did you mean `kv_heads`"),
        ("{kind: gqa, heads: 8, kv_heads: 2, head_dim: 128, sparse: {kind: top_k, topk: 64}}", "did you mean `top_k`"),
        ("{kind: gqa, heads: 8, kv_heads: 2, head_dim: 128, sparse: {kind: top_k}}", "top_k: N"),
    ],
)
def test_unknown_keys_are_refused(tmp_path, att, word):
    with pytest.raises(ValueError, match=word):
        _load(tmp_path, att)


def test_the_shipped_models_still_load_unchanged():
    from perfonto.emulator.models import get_model

    m = get_model("llama3-70b")
    assert m.non_embedding_params == 68_452_360_192 and m.sparse_top_k == 0
