"""Server-level semantics across chips (issue 15, point 7).

- A frequency or clock rate does not add up across chips: two chips at 1.5 GHz are a server at
  1.5 GHz (``metrics.infer``: a frequency of chip degree 1 is divided by the number of chips).
- Counters that only the leader chip of a tensor-parallel group counts (``counted_by: leader``:
  steps, tokens, requests) divided into a time that every chip measures give the group's value at
  server level: a step latency written the natural way reads the same on a group of 8 chips as on
  one, and on two groups as on one (``metrics.levels.group_times``), while amounts over leader counts
  (energy per step) stay plain ratios of totals."""

import numpy as np
import pytest

from helpers import compile_src
from perfonto.analysis.capture import analyse_capture, capture_of
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.levels import evaluate_levels, leader_chips
from perfonto.metrics.windows import Windows

SRC = """metric t.core_freq [GHz] = seq.elapsed_cycles / interval / 1 [core_cycle]
  "The core clock as measured."
metric t.step_time [ms/event] = seq.elapsed_cycles / spec.clock.core / seq.steps
  "Forward-pass duration."
metric t.busy_per_step [core_cycle/event] = avg(mxu.busy_cycles) / seq.steps
  "Matrix-engine busy cycles per pass (per engine, per chip of the group)."
metric t.energy_per_step [J/event] = power.energy / seq.steps
  "Energy of the group per pass (every chip's energy)."
metric t.steps_per_second [event/s] = seq.steps / interval
  "Passes per second: each group's passes once."
"""


def _windows(gen, C: int, leaders: list[int]):
    W = 20
    v = {n: np.zeros((W, C) + tuple(s for _, s in sig.axes)) for n, sig in gen.signals.items()}
    v["seq.elapsed_cycles"][:] = 1.5e6  # 1 ms windows at 1.5 GHz on every chip
    v["mxu.busy_cycles"][:] = 0.6e6  # each core busy 40 % of the time
    v["power.energy"][:] = 0.5  # 500 W per chip
    v["seq.steps"][:, leaders] = 0.25  # a group's pass every 4 ms, counted by its leader
    return Windows(np.full((W, C), 1e-3), v, 1.0)


@pytest.mark.parametrize("C, leaders, groups", [(1, [0], 1), (8, [0], 1), (8, [0, 4], 2), (2, [0, 1], 2)])
def test_server_values_of_groups(sohu, C, leaders, groups):
    g = compile_src(sohu, SRC)
    assert not g.errors and g.metrics["t.step_time"].group_rule and not g.metrics["t.energy_per_step"].group_rule
    w = _windows(sohu, C, leaders)
    lv = evaluate_levels(g, w, lambda v, i, c: evaluate(g, Windows(i, v, c)))
    s = {n: float(lv.server[n]) for n in g.metrics}
    assert leader_chips(sohu, w) == groups
    assert s["t.core_freq"] == pytest.approx(1.5)  # not 1.5 x chips
    assert s["t.step_time"] == pytest.approx(4.0)  # 4 ms per pass, whatever the group size
    assert s["t.busy_per_step"] == pytest.approx(0.6e6 * 4)  # per engine of one chip: 4 windows of 0.6e6
    assert s["t.energy_per_step"] == pytest.approx(0.5 * 4 * C / groups)  # the group's chips' energy per pass
    assert s["t.steps_per_second"] == pytest.approx(250.0 * groups)
    assert lv.per_chip["t.step_time"][leaders[0]] == pytest.approx(4.0)


@pytest.mark.slow
def test_emulated_8_chip_group_step_time_matches_the_ground_truth(sohu, tmp_path):
    from perfonto import emulator

    g = compile_src(sohu, SRC)
    r = emulator.run(
        "sohu",
        duration_s=0.3,
        sample_period_s=0.002,
        warmup_steps=200,
        isl=128,
        osl=32,
        token_budget=1024,
        out_dir=tmp_path,
    )
    rep = analyse_capture(g, capture_of(tmp_path))
    gt = r.ground_truth
    assert gt["steps"] >= 12 and gt["mapping"]["tp"] == 8
    want = gt["duration_s"] / gt["steps"] * 1e3  # one tensor-parallel group of 8: ms per pass
    assert float(rep.evaluation.server["t.step_time"]) == pytest.approx(want, rel=0.1)  # ±1 pass at the run's edges
    assert float(rep.evaluation.server["t.core_freq"]) == pytest.approx(1.5, rel=0.02)
