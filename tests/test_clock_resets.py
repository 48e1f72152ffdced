"""Issue 29, point 4: clock alignment that survives device-clock resets and says how sure it is
(``analysis.clock_fit``, ``analysis.clock_run``). Sync reads are built by hand with exact one-way
legs, so every offset, error and bound below is worked out in the comments."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.analysis.clock_fit import clocks_of_table, fit_chip, make_reads, t_crit
from perfonto.analysis.clock_run import map_counters, map_trace
from perfonto.analysis.run_files import Run

RESET_AT = 450_000_000  # host ns: the device clock restarts from 0 here
OFF0 = 5_000_000  # epoch 0: device = 5 ms + host
HALF = 1000.5  # half of every read's 2000 ns round trip, plus the 0.5 ns of an integer stamp


def device_of(host):
    """Device time of true host times: 5e6 + h before the reset, h − 450e6 after it."""
    h = np.asarray(host, np.float64)
    return np.where(h < RESET_AT, OFF0 + h, h - RESET_AT)


def reset_sync() -> pa.Table:
    """Ten reads of chip 0, host_before at 0, 100, …, 900 ms. Reads 0–4 (epoch 0): legs 1000/1000 ns,
    so the device stamp is at the host midpoint and y = d − mid = 5e6 exactly. Reads 5–9 (epoch 1):
    legs 1500 up / 500 down, so the stamp is 500 ns after the midpoint: y = −450e6 + 500, and every
    mapped time of epoch 1 is 500 ns early."""
    h0 = np.arange(10, dtype=np.int64) * 100_000_000
    up = np.where(np.arange(10) < 5, 1000, 1500)
    d = device_of(h0 + up).astype(np.int64)
    return pa.table({"chip": np.zeros(10, np.int32), "host_before_ns": h0, "device_ns": d, "host_after_ns": h0 + 2000})


def test_reset_is_split_and_the_gap_is_unmappable():
    clk = clocks_of_table(reset_sync())[0]
    # read 5's stamp 500e6 + 1500 − 450e6 = 50_001_500 is below read 4's 405_001_000: backwards
    assert [z["kind"] for z in clk.resets] == ["backwards"]
    assert clk.resets[0]["after_host_ns"] == 400_002_000 and clk.resets[0]["before_host_ns"] == 500_000_000
    s0, s1 = clk.segments
    assert s0.offset_ns == pytest.approx(5e6, abs=1e-6) and s1.offset_ns == pytest.approx(-450e6 + 500, abs=1e-6)
    # five exact reads each: slope 0, so no drift; bound = mean half round trip = 1000.5 ns, residual 0
    assert not s0.drift_fitted and not s1.drift_fitted
    assert float(s1.bound(700e6)) == pytest.approx(HALF, abs=1e-6)
    # counter samples every 50 ms, in time order: 0 … 400 ms in epoch 0, 450 ms on in epoch 1
    true = np.arange(20) * 50e6
    host, bound, why = clk.map(device_of(true), ordered=True)
    # 450 ms (device 0) and 500 ms (device 50e6) precede epoch 1's first read (device 50_001_500): the gap
    assert list(np.flatnonzero(why)) == [9, 10] and set(why[[9, 10]]) == {1}
    assert np.isnan(host[[9, 10]]).all() and np.isnan(bound[[9, 10]]).all()
    assert np.abs(host[:9] - true[:9]).max() < 1e-6  # epoch 0: exact
    err = np.abs(host[11:] - true[11:])
    assert err == pytest.approx(np.full(9, 500.0), abs=1e-6)  # the 500 ns leg asymmetry …
    assert (bound[11:] == pytest.approx(HALF, abs=1e-6)) and (err <= bound[11:]).all()  # … within ±1000.5 ns


def test_single_line_fit_is_what_goes_wrong():
    """The issue's failure: one line through both epochs maps a sample after the reset far away."""
    from perfonto.analysis.align import fit_clock

    t = reset_sync()
    fit = fit_clock(*(t.column(k).to_numpy() for k in ("host_before_ns", "device_ns", "host_after_ns")))
    assert abs(float(fit.to_host(device_of([700e6]))[0]) - 700e6) > 1e6  # tens of ms off (no warning)


def _run_folder(tmp_path) -> Run:
    """A run folder: the sync reads above, 20 counter samples, and a trace on chip 0: step 0 submitted at
    455 ms with an op at 460–470 ms (in the reset gap); step 1 submitted at host 600 ms, its host step
    slice to 700 ms, a forward pass at 610–690 ms (inside), an op at 580–590 ms (before its submission:
    outside)."""
    pq.write_table(reset_sync(), tmp_path / "sync.parquet")
    samples = np.arange(20) * 50_000_000
    pq.write_table(
        pa.table({"chip": np.zeros(20, np.int32), "timestamp_ns": device_of(samples).astype(np.int64)}),
        tmp_path / "counters.parquet",
    )
    rows = [  # kind, name, unit, clock, step, true host start, end
        ("submit", "submit", "driver", "host", 0, 455_000_000, 455_002_000),
        ("submit", "submit", "driver", "host", 1, 600_000_000, 600_002_000),
        ("step", "step", "steps", "host", 1, 600_000_000, 700_000_000),
        ("exec", "forward", "stream", "device", 1, 610_000_000, 690_000_000),
        ("op", "qkv_proj", "mxu", "device", 1, 580_000_000, 590_000_000),
        ("op", "qkv_proj", "mxu", "device", 0, 460_000_000, 470_000_000),
    ]
    dev = np.array([r[3] == "device" for r in rows])
    start = np.array([r[5] for r in rows], np.float64)
    end = np.array([r[6] for r in rows], np.float64)
    start = np.where(dev, device_of(start), start).astype(np.int64)
    end = np.where(dev, device_of(end), end).astype(np.int64)
    n = len(rows)
    pq.write_table(
        pa.table(
            {
                **{
                    k: pa.array([r[i] for r in rows]).dictionary_encode()
                    for i, k in enumerate(("kind", "name", "unit", "clock"))
                },
                "chip": pa.array(np.where(dev, 0, -1), pa.int32()),
                "start_ns": start,
                "end_ns": end,
                "step": np.array([r[4] for r in rows], np.int64),
                "layer": pa.array(np.full(n, -1), pa.int32()),
                "instance": np.full(n, -1, np.int64),
                "bytes": np.zeros(n),
                "wait_ns": np.full(n, -1, np.int64),
            }
        ),
        tmp_path / "trace.parquet",
    )
    return Run.of(tmp_path / "counters.parquet", tmp_path / "sync.parquet", tmp_path / "trace.parquet", meta={})


def test_run_counters_and_spans_outside_their_bracket(tmp_path):
    from perfonto.analysis.crosschip import fit_clocks

    run = _run_folder(tmp_path)
    clocks = fit_clocks(run)
    c = map_counters(run, clocks)
    why = c.column("unmappable").to_pylist()
    assert [i for i, w in enumerate(why) if w] == [9, 10] and why[9].startswith("reset_gap")
    t = map_trace(run, clocks)
    hs, es = t.column("host_start_ns").to_numpy()[1:], t.column("host_start_err_ns").to_numpy()[1:]
    out = t.column("outside_submit").to_pylist()[1:]
    # forward pass: device 160e6 is claimed by both epochs (epoch 0 puts it at 155 ms); the submission at
    # 600 ms picks epoch 1: 610 ms − 500 ns, bound 1000.5 ns, inside [600 ms, 700 ms]
    assert hs[2] == pytest.approx(610e6 - 500, abs=1e-6) and es[2] == pytest.approx(HALF, abs=1e-6) and not out[2]
    # the early op: 580 ms − 500 ns + 1000.5 ns < 600 ms under epoch 1 (and 125 ms under epoch 0): flagged
    assert hs[3] == pytest.approx(580e6 - 500, abs=1e-6) and out[3]
    # the op in the gap: device 10e6 … 20e6, below epoch 1's first read (50_001_500); epoch 0 would put it at
    # 5 ms, before its submission at 455 ms, so it is epoch 1's, before its first read: no host time, not flagged
    assert t.column("unmappable").to_pylist()[5].startswith("reset_gap") and np.isnan(hs[4]) and not out[4]
    assert out[:2] == [False, False] and es[0] == 0  # host slices stay as they are


def test_timeline_carries_bounds_and_leaves_out_the_gap(tmp_path):
    from perfonto.analysis.timeline import write

    _run_folder(tmp_path)
    info = write(tmp_path, tmp_path / "tl.json")
    assert info["unmappable"] == 1 and info["outside_submit"] == 1 and info["bound_ns_max"] == pytest.approx(1000.5)
    ev = [e for e in json.loads((tmp_path / "tl.json").read_text())["traceEvents"] if e["ph"] == "X"]
    args = {e["name"]: e.get("args", {}) for e in ev if e["cat"] in ("exec", "op")}
    assert args["forward"]["host_err_ns"] == 1000.5 and args["qkv_proj"]["outside_submit"] is True


def asymmetric_reads(**kw):
    """Ten reads 10 ms apart of a clock 1 ms ahead (device = 1e6 + host): up leg 1000 ns, then 3000 ns
    of device work before the stamp, down leg 1000 ns. The stamp is at h0 + 4000, the host midpoint at
    h0 + 2500: the midpoint estimate is 1e6 + 1500, biased by half the processing time."""
    h0 = np.arange(10) * 10_000_000.0
    d = 1e6 + h0 + 4000
    return make_reads(h0, d, h0 + 5000, **kw)


def test_asymmetric_sync_read_without_the_midpoint_bias():
    biased = fit_chip(asymmetric_reads()).segments[0]
    assert biased.offset_ns == pytest.approx(1e6 + 1500, abs=1e-6)  # half of 3000 ns too much
    assert biased.bound(biased.xr) == pytest.approx(2500.5)  # half the 5000 ns round trip: the truth is inside
    for kw in ({"processing_ns": 3000.0}, {"device_before": 1e6 + np.arange(10) * 1e7 + 1000, "device_after": None}):
        if kw.get("device_after", 0) is None:  # the device's own stamps at arrival (h0 + 1000) and departure
            kw["device_after"] = 1e6 + np.arange(10) * 1e7 + 4000
        seg = fit_chip(asymmetric_reads(**kw)).segments[0]
        # y = (T2 + T3)/2 − mid = (h0 + 2500 + 1e6) − (h0 + 2500) = 1e6; network trip 5000 − 3000 = 2000 ns
        assert seg.offset_ns == pytest.approx(1e6, abs=1e-6) and seg.bound(seg.xr) == pytest.approx(HALF)
        assert abs(biased.offset_ns - 1e6) > seg.bound(seg.xr)  # the midpoint bias would break this bound


def test_drift_not_fitted_on_two_reads():
    # reads at 0 and 1 s of a 50 ppm clock, legs 1000/1000: y = 5e-5 × (h0 + 1000) = 0.05 and 50000.05
    r = make_reads([0.0, 1e9], 1.00005 * np.array([1000.0, 1e9 + 1000]), [2000.0, 1e9 + 2000])
    seg = fit_chip(r).segments[0]
    assert not seg.drift_fitted and seg.b == 0 and seg.a == pytest.approx(25000.05)
    # the mapped time of the true host 1 s is 1e9 + 50000 − 25000.05 (25 µs late); its bound:
    # 1000.5 + 3 × s/√2 (s = 50000/√2: 75000) + 100 ppm × |t| (t = 1e9 + 24999.95 − 5e8 − 1000)
    host = float(seg.to_host(1.00005e9))
    assert host == pytest.approx(1e9 + 24999.95, abs=1e-3)
    assert float(seg.bound(host)) == pytest.approx(1000.5 + 75000 + 1e-4 * 500_023_999.95, rel=1e-9)
    assert host - 1e9 <= float(seg.bound(host))


def noisy_reads(drift_ppm: float, seed: int = 7):
    """50 reads 10 ms apart of device = 2e6 + (1 + drift) host, each leg uniform in 500 … 1500 ns."""
    rng = np.random.default_rng(seed)
    h0 = np.arange(50) * 1e7
    up, down = rng.uniform(500, 1500, 50), rng.uniform(500, 1500, 50)
    return make_reads(h0, 2e6 + (1 + drift_ppm * 1e-6) * (h0 + up), h0 + up + down)


def test_drift_not_fitted_on_noise_and_fitted_on_real_drift():
    # the rule's threshold with 25 kept reads (the fastest half of 50): Student's t, 23 dof, two-sided 0.27 %
    assert t_crit(23) == pytest.approx(3.36, abs=0.01)
    # Student's t table at the 0.99865 quantile: 235.8 (1 dof), 9.219 (3 dof), 3.0 for many
    assert [t_crit(1), t_crit(3), t_crit(10**6)] == pytest.approx([235.80, 9.219, 3.0], abs=0.01)
    r = noisy_reads(0.0)
    p = np.polyfit(r.x, r.y, 1)  # on all 50 reads the slope is 0.19 of its standard error: noise
    se = np.sqrt(np.sum((r.y - np.polyval(p, r.x)) ** 2) / 48 / np.sum((r.x - r.x.mean()) ** 2))
    assert abs(p[0]) / se < 1
    seg = fit_chip(r).segments[0]
    assert seg.n == 25 and not seg.drift_fitted and seg.b == 0
    assert abs(seg.offset_ns - 2e6) <= seg.bound(seg.xr)  # the truth is within the bound at the centre
    # 20 ppm over 0.49 s moves y by 9.8 µs against a leg asymmetry of ±500 ns: fitted, close to 20 ppm
    seg = fit_chip(noisy_reads(20.0)).segments[0]
    assert seg.drift_fitted and seg.b * 1e6 == pytest.approx(20.0, abs=0.5)
    assert abs(seg.offset_ns - 2e6) <= seg.bound(seg.xr)


def test_bad_sync_reads_name_row_and_column():
    t = reset_sync()
    h1 = t.column("host_after_ns").to_numpy().copy()
    h1[3] = -1
    bad = t.set_column(3, "host_after_ns", pa.array(h1))
    with pytest.raises(ValueError, match=r"x.parquet, chip 0: sync read row 3, column host_after_ns: is before"):
        clocks_of_table(bad, where="x.parquet")
    with pytest.raises(ValueError, match="no column.*device_ns"):
        clocks_of_table(t.drop(["device_ns"]), where="x.parquet")


def test_emulated_sync_reads_with_a_clock_reset():
    """The emulator's driver reads (log-normal legs around 2 µs, 1 % delayed by up to 200 µs) of a chip
    whose clock restarts from 0 at host 4.505 s; reads every 10 ms from 0, samples every 1 ms."""
    from perfonto.emulator.clocks import draw_clocks, sync_reads

    clk = draw_clocks(1, seed=3)[0].with_reset(4_505_000_000, 0)
    clocks = clocks_of_table(sync_reads([clk], 9e9, seed=3))
    c = clocks[0]
    # the reset falls between the reads taken at 4.50 s and 4.51 s: two epochs, 451 and 450 reads
    assert len(c.resets) == 1 and c.resets[0]["kind"] == "backwards"
    assert 4.50e9 < c.resets[0]["after_host_ns"] < 4.505e9 and c.resets[0]["before_host_ns"] == 4.51e9
    assert [s.total for s in c.segments] == [451, 450] and all(s.drift_fitted for s in c.segments)
    true = np.arange(9001) * 1e6
    host, bound, why = c.map(clk.device_int(true), ordered=True)
    # the samples at 4.505 … 4.510 s (six) precede the 4.51 s read's device stamp: unmappable
    assert list(np.flatnonzero(why)) == list(range(4505, 4511)) and set(why[4505:4511]) == {1}
    ok = why == 0
    err = np.abs(host[ok] - true[ok])
    assert (err <= bound[ok]).all() and err.max() < 2000 and bound[ok].max() < 10_000


def test_alignment_json_and_text(tmp_path):
    from rich.console import Console

    from perfonto.analysis.clock_run import alignment_summary
    from perfonto.analysis.crosschip import fit_clocks
    from perfonto.commands.align import _render_alignment

    run = _run_folder(tmp_path)
    clocks = fit_clocks(run)
    al = alignment_summary(run, clocks, map_counters(run, clocks), map_trace(run, clocks))
    al = json.loads(json.dumps(al, allow_nan=False))  # what alignment.json holds: no NaN
    # 20 samples + 3 device spans × (start, end) = 26 stamps; unmappable: samples at 450 and 500 ms and
    # the gap op's start and end
    assert al["samples"] == 26 and al["unmappable"] == 4 and al["chips"][0]["unmappable"] == {"reset_gap": 4}
    assert al["bound_ns"]["max"] == pytest.approx(HALF) and al["outside_submit"]["count"] == 1
    assert al["outside_submit"]["spans"][0]["row"] == 4 and len(al["chips"][0]["segments"]) == 2
    con = Console(record=True, width=200)
    _render_alignment(al, con)
    text = con.export_text()
    assert "chip 0: device clock reset (backwards) between host 0.400002 s and 0.500000 s" in text
    assert "chip 0: 4 stamp(s) unmappable (reset_gap)" in text and "1 device span(s) outside their submit" in text


def test_forward_jump_against_the_host_clock():
    """A clock that jumps 1 ms ahead between the reads at 40 and 50 ms (reads every 10 ms, legs 1000/1000):
    y goes from 0 to 1e6, far past the allowed 2 × 1000.5 + 1000 ppm × 10 ms + 2 = 12 003 ns: a 'jump'.
    A 10 µs step stays under the allowance and is left in one epoch (drift and noise could make it)."""
    h0 = np.arange(10) * 1e7
    for step, kinds in ((1e6, ["jump"]), (1e4, [])):
        d = h0 + 1000 + np.where(h0 >= 5e7, step, 0.0)
        c = fit_chip(make_reads(h0, d, h0 + 2000))
        assert [z["kind"] for z in c.resets] == kinds
        if kinds:
            assert c.resets[0]["offset_jump_ns"] == pytest.approx(step) and c.resets[0]["before_host_ns"] == 5e7


def test_the_round_trip_filter_leaves_enough_reads_for_the_drift_test():
    """Five reads 1 s apart with a 200 ppm drift and ±20 us of offset noise (review finding): the filter keeps
    the fastest half but at least 5, so the slope (SE = 20 us / sqrt(10 s^2) = 6.3 ppm, t = 32 > t_crit(3) = 9.2)
    is fitted. Keeping only the 3 fastest (SE = 20 us / sqrt(2 s^2) = 14 ppm, t = 14 < t_crit(1) = 236) would not."""
    from perfonto.analysis.clock_fit import fit_segment

    x = np.arange(5) * 1e9
    y = 1000 + 200e-6 * x + np.array([20e3, -20e3, 20e3, -20e3, 20e3])
    half = np.array([500.0, 600.0, 700.0, 800.0, 900.0])
    seg = fit_segment(x, y, half)
    assert seg.n == 5 and seg.drift_fitted and seg.b == pytest.approx(200e-6, rel=1e-9)
    assert not fit_segment(x[:3], y[:3], half[:3]).drift_fitted
