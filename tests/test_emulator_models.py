"""Model shapes as data: public parameter counts, KV-cache sizes, MoE and MLA work by hand."""

from __future__ import annotations

import pytest

from perfonto.emulator.assumptions import Assumptions
from perfonto.emulator.hardware import hardware_from_generation
from perfonto.emulator.models import MODELS, get_model
from perfonto.emulator.ops import EmuConfig, stack_work
from perfonto.emulator.parallel import Mapping, MappingError, Precision, chip_shape, p_chip_touched
from perfonto.ontology import load_generation

from test_emulator import _batch


@pytest.mark.parametrize(
    "name,total",
    [
        ("llama-3.1-8b", 8_030_261_248),  # model card: 8.03 B
        ("llama-3.3-70b", 70_553_706_496),  # 70.6 B
        ("llama-3.1-405b", 405_853_388_800),  # 405.9 B
        ("mixtral-8x7b", 46_702_792_704),  # 46.7 B
        ("deepseek-v3", 671_026_419_200),  # 671 B (without the 14 B MTP module)
        ("qwen3-235b-a22b", 235_093_634_560),  # 235 B
        # by hand, per layer: q and o 2 × 5120 × heads × 128, k and v 2 × 5120 × 8 × 128, SwiGLU 3 × 5120 ×
        # intermediate, two RMSNorms (2 × 5120) and QK-norm (2 × 128); then the final norm (5120) and the
        # untied embedding and LM head (2 × 151936 × 5120). Model cards: 14.8 B (13.2 B non-embedding) and
        # 32.8 B (31.2 B non-embedding).
        ("qwen3-14b", 14_768_307_200),
        ("qwen3-32b", 32_762_123_264),
    ],
)
def test_total_parameters_match_the_published_counts(name, total):
    assert get_model(name).total_params == total


@pytest.mark.parametrize(
    "name,active,rel", [("mixtral-8x7b", 12.9e9, 0.02), ("deepseek-v3", 37e9, 0.02), ("qwen3-235b-a22b", 22e9, 0.03)]
)
def test_active_parameters_match_the_model_cards(name, active, rel):
    m = get_model(name)
    assert m.active_matmul_params + m.lm_head_params == pytest.approx(active, rel=rel)


def test_aliases_and_unknown_names():
    assert get_model("llama3-70b") is get_model("llama-3.3-70b") and get_model("llama3-8b").name == "llama-3.1-8b"
    with pytest.raises(KeyError, match="known models: .*deepseek-v3"):
        get_model("gpt-17")
    assert {m.name for m in MODELS.values()} == {
        "llama-3.1-8b",
        "llama-3.3-70b",
        "llama-3.1-405b",
        "mixtral-8x7b",
        "deepseek-v3",
        "qwen3-235b-a22b",
        "qwen3-14b",
        "qwen3-32b",
    }


def test_kv_cache_bytes_gqa_and_mla():
    assert get_model("llama-3.3-70b").kv_bytes_per_token(1.0) == 2 * 80 * 8 * 128 == 163_840
    # MLA caches the 512-wide latent and the 64-wide rotary key, shared by all 128 heads: 61 × 576
    assert get_model("deepseek-v3").kv_bytes_per_token(1.0) == 61 * 576 == 35_136
    assert get_model("qwen3-235b-a22b").kv_bytes_per_token(2.0) == 2 * 94 * 4 * 128 * 2


def test_deepseek_layer_kinds_and_mla_flops():
    m = get_model("deepseek-v3")
    assert m.layer_kinds() == [("dense", 3), ("moe", 58)]
    assert m.prefill_pair_flops == 128 * (2 * 192 + 2 * 128)  # unabsorbed: q·k over 192, p·v over 128
    assert m.decode_pair_flops == 128 * (2 * 576 + 2 * 512)  # absorbed: over the 576-wide cache
    assert m.history_decompress_flops == 2 * 512 * 128 * 256


@pytest.fixture(scope="module")
def h200():
    g, _ = load_generation("h200")
    return hardware_from_generation(g)


def test_moe_bytes_count_only_the_experts_a_step_touches(h200):
    m = get_model("qwen3-235b-a22b")
    cfg = EmuConfig(m, h200, Assumptions(), Mapping(tp=1), Precision.of("fp8"))
    W = stack_work(_batch(decode_tokens=1, decode_keys=100, head_tokens=1), cfg)
    gu, dn = cfg.plan.index("experts_gate_up"), cfg.plan.index("experts_down")
    # one token touches exactly its 8 experts: 8 × 3 × 4096 × 1536 FP8 bytes per layer
    assert W["w"][0, gu] + W["w"][0, dn] == pytest.approx(8 * 3 * 4096 * 1536)
    # 4096 tokens touch essentially all 128: E·(1 − (1 − k/E)^T)
    W = stack_work(_batch(decode_tokens=4096, decode_keys=4096 * 100, head_tokens=4096), cfg)
    assert W["w"][0, gu] + W["w"][0, dn] == pytest.approx(128 * 3 * 4096 * 1536, rel=1e-6)
    # and every token-expert pair is computed once: 2 × 8 experts × 3·d·Fe per token
    assert W["fp8"][0, gu] + W["fp8"][0, dn] == pytest.approx(4096 * 2 * 8 * 3 * 4096 * 1536)


def test_expert_parallel_shares_and_all_to_all_bytes(h200):
    m = get_model("deepseek-v3")
    cs = chip_shape(m, Mapping(tp=8, ep=8, attn_dp=True), Precision.of("fp8"))
    assert cs.local_experts == 32 and cs.heads == 128 and cs.group_tokens == 8
    # probability a token has one of its 8 experts among a chip's 32 of 256
    from math import comb

    assert p_chip_touched(256, 8, 8) == pytest.approx(1 - comb(224, 8) / comb(256, 8))
    cfg = EmuConfig(m, h200, Assumptions(), Mapping(tp=8, ep=8, attn_dp=True), Precision.of("fp8"))
    W = stack_work(_batch(decode_tokens=64, decode_keys=64 * 1000, head_tokens=64), cfg)
    j = cfg.plan.index("moe.moe_dispatch")
    assert W["tx"][0, j] == pytest.approx(64 * 7168 * 2 * 7 * p_chip_touched(256, 8, 8))
    assert cfg.plan.tags[j] == "all_to_all" and W["tx"][0, cfg.plan.index("moe.attn_allreduce")] == 0


def test_mappings_that_do_not_fit_are_refused():
    m = get_model("deepseek-v3")
    with pytest.raises(MappingError, match="pp = 2"):
        Mapping(tp=4, pp=2).check(m)
    with pytest.raises(MappingError, match="experts"):
        Mapping(tp=3, ep=3).check(m)
    with pytest.raises(MappingError, match="no experts"):
        Mapping(tp=2, ep=2).check(get_model("llama-3.1-8b"))
