"""perfonto sensitivity (issue 18, point 2): elasticities d ln y / d ln x by central differences, ranked."""

from __future__ import annotations

import json
import math

import pytest

from perfonto.cli import main
from perfonto.whatif.knobs import Point
from perfonto.whatif.points import Target
from perfonto.whatif.sensitivity import sensitivity


def _base(**wl) -> Point:
    return Point(workload=tuple(sorted(wl.items())))


def _by(res):
    return {r["constant"]: r for r in res.ranked}


def test_memory_bound_point_ranks_hbm_bandwidth_first():
    # Llama-3.1-8B decoding 64 requests on one chip: each step re-reads the 8 GB of weights for 64
    # rows (128 FLOP per byte, far below the 9 PFLOP/s ÷ 7.2 TB/s = 1250 FLOP/B ridge).
    res = sensitivity(
        Target(), _base(model="llama-3.1-8b", chips=1, isl=128, osl=1024, concurrency=64, requests=256), jobs=1
    )
    assert res.base["bottleneck"] == "memory"
    assert res.ranked[0]["constant"] == "spec.hbm.peak_bandwidth"
    e = res.ranked[0]["elasticity"]
    tps = e["benchmark_tokens_per_second"]
    assert 0.2 < tps < 1.0 and e["itl_p50_s"] == pytest.approx(-tps, abs=0.02)
    flops = _by(res)["spec.mxu.peak_flops_fp8"]["elasticity"]["benchmark_tokens_per_second"]
    assert abs(flops) < 0.05 < tps / 4
    m = res.ranked[0]["marginal"]["benchmark_tokens_per_second"]  # tokens/s per TB/s = e · y / x
    assert m == pytest.approx(tps * res.base["benchmark_tokens_per_second"] / 7.2)
    assert not any(r["constant"].startswith(("spec.clock.", "spec.power.")) for r in res.ranked)


def test_compute_bound_point_ranks_peak_flops_first():
    # Prompts of 4096 tokens, 2 out: 32,768-token steps of matrix work, far above the ridge.
    res = sensitivity(Target(), _base(model="llama-3.1-8b", chips=1, isl=4096, osl=2, requests=200), jobs=1)
    assert res.base["bottleneck"] == "compute"
    assert res.ranked[0]["constant"] == "spec.mxu.peak_flops_fp8"
    assert (
        res.ranked[0]["elasticity"]["benchmark_tokens_per_second"]
        > 2 * _by(res)["spec.hbm.peak_bandwidth"]["elasticity"]["benchmark_tokens_per_second"]
    )


def test_pure_memory_roofline_has_unit_elasticity_and_the_preset_fixes_the_peak():
    # Under the claim preset (no per-op overhead) at 4 TB/s the decode step of test_whatif_sweep is
    # HBM-bound end to end, so tokens/s ∝ bandwidth: elasticity 1 by the roofline, less the fixed
    # 5 µs of host time per ~23 ms step and the size-dependent HBM efficiency (which does not change).
    # (The steady-window figure, the middle half of the run, may hold one burst of prompts more on one
    # side: ranked and asserted on the whole benchmark, whose schedule both sides share.)
    base = _base(
        model="llama-3.3-70b", chips=1, isl=16, osl=512, concurrency=256, requests=1024, preset="claim"
    ).with_values(**{"spec.hbm.peak_bandwidth": 4.0})
    res = sensitivity(
        Target(),
        base,
        jobs=1,
        constants=["spec.hbm.peak_bandwidth", "spec.mxu.peak_flops_fp8", "spec.mxu.peak_flops_bf16"],
        step=0.1,
    )
    (only,) = res.ranked
    assert only["value"] == 4.0 and only["elasticity"]["benchmark_tokens_per_second"] == pytest.approx(1.0, abs=0.01)
    assert only["elasticity"]["itl_p50_s"] == pytest.approx(-1.0, abs=0.01)
    assert res.fixed == ["spec.mxu.peak_flops_fp8", "spec.mxu.peak_flops_bf16"]  # the preset sets both peaks
    assert res.to_json()["factor"] == pytest.approx(math.exp(0.1))


def test_sensitivity_cli(capsys):
    argv = [
        "sensitivity",
        "--model",
        "llama-3.1-8b",
        "--chips",
        "1",
        "--isl",
        "4096",
        "--osl",
        "2",
        "--requests",
        "200",
        "--constants",
        "spec.mxu.peak_flops_fp8,spec.hbm.peak_bandwidth",
        "--jobs",
        "1",
        "--no-cache",
    ]
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["constant"] for r in doc["ranked"]] == ["spec.mxu.peak_flops_fp8", "spec.hbm.peak_bandwidth"]
    assert doc["step_ln"] == 0.05 and "central difference" in doc["definition"]
    assert main(argv) == 0
    assert "elasticity" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--step", "2"], "--step must be in (0, 1]"),
        (["--constants", "spec.hbm.peak_bandwith"], "did you mean `spec.hbm.peak_bandwidth`"),
        (["--constants", ","], "--constants is empty"),
        (["--model", "gpt-5"], "unknown model 'gpt-5'"),
    ],
)
def test_sensitivity_errors(argv, message, capsys):
    assert main(["sensitivity", "--no-cache", "--json", *argv]) == 2
    assert message in json.loads(capsys.readouterr().out)["error"]


def test_a_point_that_does_not_run_fails_with_its_reason(capsys):
    assert main(["sensitivity", "--model", "llama-3.1-405b", "--chips", "1", "--no-cache", "--json"]) == 1
    assert "does not run" in json.loads(capsys.readouterr().out)["error"]
