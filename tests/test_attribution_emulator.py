"""Acceptance of issue 17 on the emulator: per-op-class matrix FLOPs and HBM bytes attributed from
the 1 ms counter windows equal the emulator's per-op ground truth (``ground_truth.json`` ``by_op``)
within 2 % (every op class that carries at least 1 % of the run's FLOPs or bytes; the others
together misattribute under 1 % of the run total) and within the hard bound always; with op-boundary snapshots
(``emulator.run(op_snapshots=True)``) they are exact to the registers' resolution."""

from __future__ import annotations

import json

import pytest

from perfonto import emulator
from perfonto.analysis.attribution import attribute
from perfonto.analysis.snapshots import merged_windows, read_snapshots
from perfonto.analysis.spans import NO_SPAN, read_spans
from perfonto.cli import main
from perfonto.metrics.windows import prepare, read_counters

FLOPS = ("mxu.flops_fp8", "mxu.flops_bf16")
BYTES = ("hbm.read_bytes", "hbm.write_bytes")


def per_op_truth(res) -> dict[str, dict[str, float]]:
    """The emulator's per-op ground truth (``ground_truth.json`` ``by_op``)."""
    return res.ground_truth["by_op"]


def _attributed(res, gen, snapshots=False):
    dump = read_counters(res.counters_path, gen)
    w = prepare(dump, gen)
    merged = merged_windows(read_snapshots(res.snapshots_path, gen), dump, gen) if snapshots else None
    att = attribute(gen, dump, w, read_spans(res.trace_path), ("op",), merged)
    g = att.groupings["op"]
    out = {}
    for what, names in (("flops", FLOPS), ("hbm_bytes", BYTES)):
        v = sum(g.sums[n].reshape(len(g.groups), -1).sum(axis=1) for n in names)
        b = sum(g.bound[n] for n in names)
        out[what] = ({k: float(x) for k, x in zip(g.groups, v)}, {k: float(x) for k, x in zip(g.groups, b)})
    out["spans"] = dict(zip(g.groups, g.spans.tolist()))
    return out, att


CASES = {
    "llama3-70b x8": dict(model="llama3-70b", chips=8, duration_s=1.0, warmup_steps=400),
    "llama-3.1-8b x2": dict(model="llama-3.1-8b", chips=2, duration_s=0.3, warmup_steps=400),
}
#: online serving of a small model, no warm-up: 4-9 ms steps whose batch changes every step; 0.25 s (~40 steps)
#: leaves the rate model's residual at 0.32 (0.5 s: 0.32), far above the 0.05 that flags it
ONLINE_SMALL = dict(model="llama-3.1-8b", chips=2, duration_s=0.25, isl=512, osl=64, rate=150.0, warmup_steps=0)


@pytest.mark.parametrize("case", list(CASES))
def test_window_attribution_matches_the_per_op_ground_truth(case, sohu, tmp_path):
    res = emulator.run(sohu, out_dir=tmp_path, **CASES[case])
    truth = per_op_truth(res)
    got, att = _attributed(res, sohu)
    assert att.source == "windows"
    for what in ("flops", "hbm_bytes"):
        vals, bound = got[what]
        total = sum(t[what] for t in truth.values())
        assert sum(vals.values()) == pytest.approx(total, rel=1e-6)  # every window shared out completely
        small = 0.0
        for op, t in truth.items():
            key = op if op != "idle" else NO_SPAN
            a = vals.get(key, 0.0)
            assert abs(a - t[what]) <= bound.get(key, 0.0) * (1 + 1e-9) + 1e-6 * total
            if t[what] >= 0.01 * total:
                assert a == pytest.approx(t[what], rel=0.02), (case, op, what)
            else:
                small += abs(a - t[what])
        # ops that run once per step next to each other (lm_head, host_out) share every window, so 1 ms
        # windows cannot tell them apart: what they swap stays under 1 % of the run's total
        assert small <= 0.01 * total, (case, what, small / total)


@pytest.mark.parametrize("case", list(CASES))
def test_op_boundary_snapshots_make_the_attribution_exact(case, sohu, tmp_path):
    res = emulator.run(sohu, out_dir=tmp_path, op_snapshots=True, **CASES[case])
    assert res.snapshots_path.is_file() and res.ground_truth["trace"]["snapshots"]["rows"] > 0
    truth = per_op_truth(res)
    got, att = _attributed(res, sohu, snapshots=True)
    assert att.source == "snapshots"
    worst = 0.0
    for what, names in (("flops", FLOPS), ("hbm_bytes", BYTES)):
        vals, bound = got[what]
        # one register count per instance at each end of a span: the resolution of the attribution
        unit = sum(sohu.signals[n].scale * sohu.signals[n].instances for n in names)
        for op, t in truth.items():
            key = op if op != "idle" else NO_SPAN
            assert bound.get(key, 0.0) == 0.0  # every interval lies inside one span or between spans
            a = vals.get(key, 0.0)
            assert abs(a - t[what]) <= (got["spans"].get(key, 0) + 2) * unit, (case, op, what, a, t[what])
            if t[what] > 0:
                worst = max(worst, abs(a - t[what]) / t[what])
    assert worst < 1e-4, worst


def test_run_and_analyze_use_the_snapshots_of_a_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    argv = "run --model llama-3.1-8b --chips 1 --duration 100ms --op-snapshots --by op --json"
    assert main([*argv.split(), "--out", str(run)]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(run), "--by", "op", "--out", str(tmp_path / "a"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert ran["attribution"]["source"] == got["attribution"]["source"] == "snapshots"
    assert ran["ops"] == got["ops"] and ran["by"] == got["by"]
    assert got["outputs"]["snapshots"].endswith("snapshots.parquet")


def test_short_varying_steps_are_flagged_and_snapshots_fix_them(sohu, tmp_path):
    # online serving of a small model: 4-9 ms steps whose batch changes every step, so a 1 ms window
    # holds several layers at rates that change from step to step — no per-op rate model fits; the
    # attribution says so (and falls back to time weighting) instead of printing confident numbers,
    # and op-boundary snapshots give the truth
    res = emulator.run(sohu, out_dir=tmp_path, op_snapshots=True, **ONLINE_SMALL)
    _, att = _attributed(res, sohu)
    assert not att.reliable(FLOPS) and att.fit["mxu.flops_fp8"]["residual"] > 0.05
    got, exact = _attributed(res, sohu, snapshots=True)
    assert exact.reliable(FLOPS + BYTES)
    truth = per_op_truth(res)
    for op in ("qkv_proj", "ffn_gate_up", "attn_decode"):
        assert got["flops"][0][op] == pytest.approx(truth[op]["flops"], rel=1e-4)
