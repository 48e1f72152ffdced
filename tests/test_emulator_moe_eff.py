"""Issue 30, item 2: MoE that holds — a grouped expert GEMM's efficiency follows the tokens per
touched expert on its own curve (``Assumptions.moe_half_rows``), not the dense GEMMs' one; below the
ridge the expert GEMM is memory-bound on the touched experts' weights; the all-to-all's link
efficiency follows its per-peer message size (``Assumptions.a2a_half_bytes``)."""

from __future__ import annotations

import math

import pytest

from perfonto import emulator
from perfonto.emulator.assumptions import Assumptions
from perfonto.emulator.models import get_model
from perfonto.emulator.ops import EmuConfig, slot_seconds, stack_work
from perfonto.emulator.parallel import Mapping, Precision
from perfonto.ontology import load_generation

from test_emulator import _batch

# stated constants of the test (not the fitted ones, so that the arithmetic below is fixed)
A = Assumptions(mxu_eff_max=0.6, mxu_half_rows=10.0, moe_half_rows=64.0, a2a_eff=0.5, a2a_half_bytes=262144.0)


@pytest.fixture(scope="module")
def qwen():
    gen, _ = load_generation("h200")
    hw = emulator.hardware_from_generation(gen)
    assert hw.peak_fp8 == pytest.approx(1.979e15) and hw.hbm_bw == pytest.approx(4.8e12)  # H200 SXM catalog
    return EmuConfig(get_model("qwen3-235b-a22b"), hw, A, Mapping(tp=8, ep=8, attn_dp=True), Precision.of("fp8"))


def _step(cfg, T):
    """One decode step of ``T`` tokens on each of the 8 attention-DP ranks."""
    b = _batch(decode_tokens=T, decode_keys=T * 1000, head_tokens=T, batch=T)
    W = stack_work(b, cfg)
    return W, slot_seconds(W, cfg), cfg.plan.slots


def test_expert_gemm_at_8_tokens_runs_at_the_small_batch_efficiency(qwen):
    W, tm, S = _step(qwen, 16)
    k = S.index("experts_gate_up")
    # Qwen3-235B: 128 experts, top-8, d = 4096, expert FFN 1536; EP8: 16 experts per chip. The group's 8 × 16 =
    # 128 tokens give each chip 128 × 8 × 16/128 = 128 token-expert rows; the step touches
    # 16 × (1 − (120/128)^128) = 16 × (1 − 2.583e-4) = 15.99587 experts: t = 128/15.99587 = 8.00206 tokens each
    touched = 16 * (1 - (120 / 128) ** 128)
    assert touched == pytest.approx(15.99587, abs=1e-5)
    assert W["rows"][0, k] == pytest.approx(8.00206, abs=1e-5)
    # grouped-GEMM efficiency 0.6 × 8.00206/(8.00206 + 64) = 4.80124/72.00206 = 0.066682;
    # FLOP 2 × 128 × 4096 × 3072 = 3.2212e9; at 1.979e15 FLOP/s: 3.2212e9/(1.979e15 × 0.066682) = 24.410 µs
    eff_small = 0.6 * 8.00206 / (8.00206 + 64)
    assert eff_small == pytest.approx(0.066682, abs=1e-6)
    assert tm["mxu"][0, k] == pytest.approx(2 * 128 * 4096 * 3072 / (1.979e15 * eff_small), rel=1e-5)
    assert tm["mxu"][0, k] == pytest.approx(24.410e-6, rel=1e-4)
    # the dense curve at the same 8 rows would give 0.6 × 8/18 = 0.2667: 4 × faster — not what it runs at
    eff_dense = 0.6 * 8.00206 / (8.00206 + 10)
    assert tm["mxu"][0, k] / (2 * 128 * 4096 * 3072 / (1.979e15 * eff_dense)) == pytest.approx(
        (8.00206 + 64) / (8.00206 + 10), rel=1e-5
    )  # = 4.00
    # a dense GEMM of the same step (o_proj, 16 rows on its rank) keeps the dense curve: 0.6 × 16/26
    o = S.index("o_proj")
    assert tm["mxu"][0, o] == pytest.approx(W["fp8"][0, o] / (1.979e15 * 0.6 * 16 / 26), rel=1e-9)
    # below the ridge the expert GEMM is memory-bound: the 15.99587 touched experts' weights,
    # 15.99587 × 4096 × 3072 × 1 B = 201.27 MB at 4.8e12 × 0.9 × b/(b + 256 KiB) = 4.3144e12 B/s: 46.651 µs
    wbytes = touched * 4096 * 3072
    assert W["w"][0, k] == pytest.approx(wbytes, rel=1e-9)
    bw = 4.8e12 * 0.9 * wbytes / (wbytes + 262144)
    assert tm["mem"][0, k] == pytest.approx(wbytes / bw, rel=1e-9)
    assert tm["mem"][0, k] == pytest.approx(46.651e-6, rel=1e-4) and tm["mem"][0, k] > tm["mxu"][0, k]


def test_tokens_per_expert_counts_only_the_touched_experts(qwen):
    W, _, S = _step(qwen, 1)
    # one token per rank: 8 tokens, 8 × 8 × 16/128 = 8 rows per chip over 16 × (1 − (120/128)^8) = 16 × 0.40328
    # = 6.4525 touched experts: 1.2398 tokens each (the mean over all 16 local experts would be 0.5)
    assert 1 - (120 / 128) ** 8 == pytest.approx(0.40328, abs=1e-5)
    assert W["rows"][0, S.index("experts_down")] == pytest.approx(8 / 6.4525, rel=1e-4)


def test_all_to_all_efficiency_follows_the_message_size(qwen):
    hw = qwen.hw
    for T, m_half in ((16, 87_477.0), (1024, 5_598_545.0)):
        W, tm, S = _step(qwen, T)
        k = S.index("moe_dispatch")
        # dispatch: T × 4096 × 2 B to each of the 7 peers holding one of the token's experts with p = 1 − C(112,8)/
        # C(128,8) = 0.66743: per peer T × 8192 × 0.66743 (16 tokens: 87.48 kB; 1,024: 5.5985 MB)
        p = 1 - math.comb(112, 8) / math.comb(128, 8)
        per_peer = T * 8192 * p
        assert per_peer == pytest.approx(m_half, rel=1e-4)
        eff = 0.5 * per_peer / (per_peer + 262144)  # 16: 0.1251 of the link rate; 1,024: 0.4776
        assert tm["link"][0, k] == pytest.approx(7 * per_peer / (hw.link_bw * hw.links * eff), rel=1e-9)
    # small messages run far below the large-message efficiency: 0.1251 vs 0.4776
    assert 0.5 * 87_477 / (87_477 + 262144) == pytest.approx(0.1251, abs=1e-4)
