"""Serving definitions that must come out right (issue 9 cases 5–8, 10–12)."""

import numpy as np
import pytest

from perfonto.emulator.model_flops import attention_flops_per_token, dense_flops_per_token, lm_head_flops, mfu
from helpers import compile_src


def test_case5_causal_attention_in_mfu():
    # 7e9 non-embedding params, 32 layers, hidden 4096, context 8192, 20,000 tokens/s, 989 TFLOP/s dense
    base = dense_flops_per_token(7e9)
    causal = base + attention_flops_per_token(32, 4096, 8192, causal=True)
    dense = base + attention_flops_per_token(32, 4096, 8192, causal=False)
    assert mfu(causal * 20_000, 989e12) == pytest.approx(0.327, abs=5e-4)
    assert mfu(dense * 20_000, 989e12) == pytest.approx(0.370, abs=5e-4)
    assert mfu(base * 20_000, 989e12) == pytest.approx(0.283, abs=5e-4)


def test_case6_embedding_is_not_model_work():
    # 8.03e9 parameters of which 0.525e9 are the input embedding, 8,000 tokens/s, 989 TFLOP/s
    assert mfu(dense_flops_per_token(8.03e9 - 0.525e9) * 8000, 989e12) == pytest.approx(0.121, abs=5e-4)
    assert mfu(dense_flops_per_token(8.03e9) * 8000, 989e12) == pytest.approx(0.130, abs=5e-4)  # the wrong answer


def test_case7_lm_head_once_per_prefill_request():
    assert lm_head_flops(4096, 128_256, tokens=1) == pytest.approx(1.05e9, rel=5e-3)
    assert lm_head_flops(4096, 128_256, tokens=2000) == pytest.approx(2.1e12, rel=5e-3)  # per prefill token: wrong


def test_case8_dense_work_over_sparse_peak_is_refused():
    from perfonto.ontology import load_generation

    h100, _ = load_generation("h100")
    ok = compile_src(
        h100,
        "metric u [percent] = mxu.achieved_flops_x / spec.mxu.peak_flops_fp8\n"
        "metric mxu.achieved_flops_x [TFLOP/s] = sum(mxu.flops_fp8) / interval",
    )
    assert not ok.errors
    bad = compile_src(h100, "metric u [percent] = sum(mxu.flops_fp8) / interval / spec.mxu.peak_flops_fp8_sparse")
    assert [d.code for d in bad.errors] == ["sparsity"]
    # 9,600 tokens/s x 5.0e10 FLOP/token on a dense peak of 989 TFLOP/s -> 48.5 %
    assert mfu(9600 * 5.0e10, 989e12) == pytest.approx(0.485, abs=5e-4)


def test_case8_per_die_measurement_needs_the_die_peak(tmp_path):
    from perfonto.metrics.interpreter import evaluate
    from perfonto.metrics.windows import Windows
    from perfonto.ontology import load_generation

    p = tmp_path / "two_die.yaml"
    p.write_text("""\
generation: two_die
description: a two-die package rated 383 TFLOP/s
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
spec:
  die.peak_flops: {value: 383, unit: TFLOP/s, provenance: claimed, sparsity: dense, description: package peak}
  die.peak_flops_per_die: {value: 191.5, unit: TFLOP/s, provenance: claimed, sparsity: dense, scope: instance,
                           description: per die}
blocks:
  die:
    description: one die
    clock: core
    instances: {die: 2}
    signals:
      flops: {kind: counter, unit: FLOP, width: 64, sparsity: dense, description: FLOPs of the die}
""")
    gen, d = load_generation(p)
    bad = compile_src(gen, "metric u [percent] = die.flops / interval / spec.die.peak_flops")
    assert [x.code for x in bad.errors] == ["scope"]
    good = compile_src(gen, "metric u [percent] = die.flops / interval / spec.die.peak_flops_per_die")
    w = Windows(np.ones((1, 1)), {"die.flops": np.array([[[127e12, 0.0]]])})
    assert evaluate(good, w)["u"][0, 0, 0] == pytest.approx(66.3, abs=0.05)


def test_case12_time_split_is_a_union():
    from perfonto.metrics.timesplit import time_split

    ts = time_split([(0, 40), (20, 60)], [(60, 80)], 0, 100)
    assert (ts.compute, ts.communication, ts.idle, ts.overlap) == (60, 20, 20, 0)
    assert ts.shares["idle"] == 0.2 and sum(ts.shares.values()) == pytest.approx(1.0)


def test_time_split_overlap():
    from perfonto.metrics.timesplit import time_split

    ts = time_split([(0, 50)], [(40, 70), (65, 90)], 0, 100)
    assert (ts.compute, ts.communication, ts.overlap, ts.idle) == (50, 50, 10, 10)
    assert sum(ts.shares.values()) == pytest.approx(1.0)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), max_size=8),
    st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), max_size=8),
)
def test_time_split_shares_sum_to_one(c, m):
    from perfonto.metrics.timesplit import time_split

    ts = time_split([tuple(sorted(x)) for x in c], [tuple(sorted(x)) for x in m], 0, 100)
    assert sum(ts.shares.values()) == pytest.approx(1.0, abs=1e-9)
    assert min(ts.shares.values()) >= -1e-12


def test_time_split_with_negative_clock_times():
    from perfonto.metrics.timesplit import time_split

    ts = time_split([(-100, -60), (-80, -40)], [(-40, -20)], -100, 0)
    assert (ts.compute, ts.communication, ts.idle, ts.overlap) == (60, 20, 20, 0)


def test_case9_bandwidth_in_gb_gib_and_share_of_peak():
    from perfonto.metrics.interpreter import evaluate
    from perfonto.metrics.windows import Windows
    from perfonto.ontology import load_generation

    h100, _ = load_generation("h100")  # HBM peak 3.35 TB/s
    g = compile_src(
        h100,
        "metric bw [GB/s] = sum(hbm.read_bytes) / interval\nmetric bw_gib [GiB/s] = bw\n"
        "metric util [percent] = bw / spec.hbm.peak_bandwidth",
    )
    vals = {
        n: np.zeros((1, 1) + tuple(s for _, s in sig.axes))
        for n, sig in list(h100.signals.items()) + list(h100.fields.items())
    }
    vals["hbm.read_bytes"][:] = 3.0e9 / 5  # five stacks
    out = evaluate(g, Windows(np.full((1, 1), 1e-3), vals))
    assert out["bw"][0, 0] == pytest.approx(3000.0)
    assert out["bw_gib"][0, 0] == pytest.approx(2794.0, abs=0.5)
    assert out["util"][0, 0] == pytest.approx(89.6, abs=0.05)
