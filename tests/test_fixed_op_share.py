"""The share of a projection's time that is the ops' fixed cost (``op_overhead_s`` per executed op and
collective: launch, ramp-up, drain), beside the level-1 classes it is counted in. A new user's decode
workload read "memory 99.9 %" while HBM ran at 45 % and 16 TB/s instead of 7.2 bought 1.4x: most of each
step was the preset's 5.9 µs per op, which no bandwidth shortens."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.emulator.breakdown import time_split
from perfonto.emulator.ops import slot_seconds, stack_work
from perfonto.emulator.project import project
from perfonto.emulator.serving import steady_window

DECODE = dict(model="llama-3.1-8b", chips=1, isl=128, osl=1024, concurrency=64, num_requests=256)


def test_the_fixed_share_is_the_ops_count_times_the_overhead_over_the_time():
    pr = project("sohu", **DECODE)
    split = time_split(pr)
    sv, cfg = pr.served, pr.config
    win = steady_window(np.cumsum(sv.seconds + sv.idle_s), sv.batch.batch, sv.batch.prefill_tokens, sv.idle_s)
    idx = np.flatnonzero(win & (sv.owner >= 0))
    W = stack_work(sv.batch.select(idx), cfg)
    tm = slot_seconds(W, cfg)
    reps = cfg.plan.slot_reps.astype(np.float64)
    kinds = np.array(cfg.plan.kinds)
    # by hand: every op or collective slot that does any work costs op_overhead_s, × its repetitions
    active = np.isin(kinds, ("op", "collective"))[None, :] & (tm["t"] > 0)
    n_ops = float((active * reps[None, :]).sum())
    total = float((tm["t"] * reps[None, :]).sum()) + float(sv.idle_s[win].sum())
    assert cfg.a.op_overhead_s > 1e-6  # the fitted per-op cost of the conservative preset
    assert split["fixed_op_share"] == pytest.approx(n_ops * cfg.a.op_overhead_s / total, rel=1e-9)
    assert split["bottleneck"] == "memory" and split["fixed_op_share"] > 0.25  # the memory side is mostly fixed


def test_no_per_op_cost_no_fixed_share():
    pr = project("sohu", preset="claim", **DECODE)  # the claim preset: no per-op launch overhead
    assert pr.config.a.op_overhead_s == 0.0 and time_split(pr)["fixed_op_share"] == 0.0


def test_the_sweep_row_and_table_carry_it(capsys):
    from perfonto.cli import main

    argv = ["sweep", "--model", "llama-3.1-8b", "--chips", "1", "--isl", "128", "--osl", "1024"]
    argv += ["--concurrency", "64", "--requests", "256", "--vary", "spec.hbm.peak_bandwidth=7.2,64TB/s", "--no-cache"]
    assert main(argv + ["--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    fixed = [r["fixed_op_share"] for r in doc["points"]]
    assert doc["units"]["fixed_op_share"] == "fraction"
    assert 0 < fixed[0] < fixed[1] < 1  # faster HBM shortens the rest, never the fixed cost
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "fixed per-op" in out and "which faster HBM, links or matrix engines do not shorten" in out


def test_collectives_the_links_do_not_set_are_said_apart(capsys):
    """A sweep of the chip-to-chip bandwidth (a new user's: share_interconnect stayed at 0.224 from 4 to 16
    TB/s while tokens/s did not move, which read as "buy links"): the collectives whose HBM reads and
    writes take longer than their link transfers are the rest of the interconnect share, not link time."""
    import json

    from perfonto.cli import main

    pr = project("sohu", model="llama3-70b", chips=8, isl=2048, osl=128, num_requests=300)
    split = time_split(pr)
    l2 = split["level2"]
    assert l2["interconnect.link"] + l2["interconnect.local"] == pytest.approx(split["shares"]["interconnect"])
    argv = ["sweep", "--vary", "spec.c2c.peak_bandwidth=4,1000TB/s", "--requests", "300", "--no-cache"]
    assert main(argv + ["--json"]) == 0
    a, b = json.loads(capsys.readouterr().out)["points"]
    assert b["link_share"] < 0.01 < b["share_interconnect"]  # 1000 TB/s links: what is left is set by HBM
    assert a["link_share"] > 0.5 * a["share_interconnect"]  # at 4 TB/s the links set most of it
    assert main(argv) == 0
    assert "faster links do not shorten that part" in " ".join(capsys.readouterr().out.split())
