"""Mixture of experts as the serving stacks run it (issue 16, point 2): attention data parallelism with
expert-parallel routed experts, all-to-all dispatch and combine, grouped-GEMM efficiency by tokens per
expert, and the combine waiting for the hottest expert rank."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfonto import emulator
from perfonto.emulator.assumptions import fitted_assumptions
from perfonto.emulator.models import get_model
from perfonto.emulator.moe import imbalance
from perfonto.emulator.ops import EmuConfig, build_ops, slot_seconds, stack_work
from perfonto.emulator.parallel import Mapping, Precision
from perfonto.ontology import load_generation

from test_emulator import _batch


def test_imbalance_of_the_hottest_rank_by_hand():
    # 1,000 token-expert assignments per rank on average over 8 ranks: σ = √(1000 · 7/8) = 29.58, and the
    # largest of 8 exceeds the mean by about σ · √(2 ln 8) = 29.58 × 2.039 = 60.3 (6.03 %)
    assert imbalance(np.array([1000.0]), 8)[0] == pytest.approx(1.0603, abs=1e-4)
    assert imbalance(np.array([1000.0]), 8, skew=1.5)[0] == pytest.approx(1.5 * 1.0603, abs=2e-4)
    assert imbalance(np.array([0.0, 10.0]), 1).tolist() == [1.0, 1.0]  # one rank: nothing to wait for


def test_moe_models_map_to_attention_dp_with_expert_parallelism():
    q, mix, llama = get_model("qwen3-235b-a22b"), get_model("mixtral-8x7b"), get_model("llama3-70b")
    assert Mapping.default(q, 8) == Mapping(tp=8, ep=8, attn_dp=True)
    assert Mapping.default(mix, 8) == Mapping(tp=8, ep=8, attn_dp=True) and Mapping.default(mix, 3) == Mapping(tp=3)
    assert Mapping.default(llama, 8) == Mapping(tp=8)


@pytest.fixture(scope="module")
def qwen():
    gen, _ = load_generation("h200")
    hw = emulator.hardware_from_generation(gen)
    a = fitted_assumptions()
    cfg = EmuConfig(get_model("qwen3-235b-a22b"), hw, a, Mapping(tp=8, ep=8, attn_dp=True), Precision.of("fp8"))
    return cfg


def test_dispatch_bytes_and_tokens_per_expert_by_hand(qwen):
    cfg, T = qwen, 512  # 512 decode tokens on each of the 8 attention ranks
    W = stack_work(_batch(decode_tokens=T, decode_keys=T * 1000, head_tokens=T, batch=T), cfg)
    S = cfg.plan.slots
    # each token's hidden state (4096 × 2 B) goes to every other chip holding one of its 8 experts:
    # P(a given chip holds one of them) = 1 − C(112, 8) / C(128, 8) with 16 of the 128 experts per chip
    p = 1 - math.comb(112, 8) / math.comb(128, 8)
    assert p == pytest.approx(0.6674, abs=1e-4)  # 1 − (112·111·…·105)/(128·127·…·121)
    assert W["tx"][0, S.index("moe_dispatch")] == pytest.approx(T * 4096 * 2 * 7 * p, rel=1e-12)
    assert W["tx"][0, S.index("moe_combine")] == W["tx"][0, S.index("moe_dispatch")]
    # the grouped expert GEMMs see the whole group's tokens: 8 × 512 × 8 / 128 = 256 rows per expert
    assert W["rows"][0, S.index("experts_gate_up")] == pytest.approx(8 * T * 8 / 128)
    assert (
        W["tx"][0, S.index("attn_allreduce")] == 0 and W["hops"][0, S.index("attn_allreduce")] == 0
    )  # no TP all-reduce


def test_the_combine_waits_for_the_hottest_rank_as_peer_wait(qwen):
    cfg, T = qwen, 512
    b = _batch(decode_tokens=T, decode_keys=T * 1000, head_tokens=T, batch=T)
    W = stack_work(b, cfg)
    tm = slot_seconds(W, cfg)
    S = cfg.plan.slots
    k = S.index("moe_combine")
    experts = [S.index(s) for s in ("experts_gate_up", "experts_silu_mul", "experts_down")]
    noise = imbalance(np.array([8 * T * 8 * 16 / 128]), 8)[0]  # 4,096 assignments per chip
    want = (cfg.a.expert_imbalance * noise - 1) * tm["t"][0, experts].sum()
    assert cfg.a.expert_imbalance > 1 and tm["imb_wait"][0, k] == pytest.approx(want, rel=1e-12)
    t = build_ops(b, cfg)
    f = cfg.hw.core_hz
    assert t.own_wait[0, k] == round(want * f) and t.wait[0, k] == t.own_wait[0, k]
    amt, off = t.phases["collective_wait"]
    assert amt[0, k] == t.wait[0, k] and off[0, k] == 0  # top-down level 2: waiting for a peer
    assert t.arrival_wait[0, k] == 0  # nobody arrived late: the trace blames no chip
