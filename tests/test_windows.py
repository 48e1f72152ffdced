"""Window preparation: modular deltas in the register width, scale, interval from timestamps, gauges,
and the run/server levels (ratios of sums)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import DumpError, Windows, modular_delta, prepare, read_counters, run_level, server_level


def test_32_bit_wrap():
    assert modular_delta(np.array([4_294_967_000], np.uint64), np.array([200], np.uint64), 32)[0] == 496


def test_64_bit_delta_is_exact_near_2_60():
    a = np.array([2**60], np.uint64)
    assert modular_delta(a, a + np.uint64(1000), 64)[0] == 1000


def test_64_bit_wrap():
    assert modular_delta(np.array([2**64 - 10], np.uint64), np.array([5], np.uint64), 64)[0] == 15


@given(st.integers(1, 64), st.data())
def test_modular_delta_inverts_accumulation(width, data):
    """For any width, start value and increments below 2^width, deltas of the wrapped register
    give back the increments exactly."""
    mod = 1 << width
    start = data.draw(st.integers(0, mod - 1))
    incs = data.draw(st.lists(st.integers(0, mod - 1), min_size=1, max_size=20))
    regs = [start]
    for i in incs:
        regs.append((regs[-1] + i) % mod)
    r = np.array(regs, dtype=np.uint64)
    d = modular_delta(r[:-1], r[1:], width)
    assert d.tolist() == incs


def _dump(tmp_path, gen, ts, values, chips=1):
    """Write a dump where every signal is 0 except ``values`` {name: list per sample (per chip)}."""
    S = len(ts)
    cols = {
        "chip": pa.array(np.tile(np.arange(chips, dtype=np.int32), S)),
        "timestamp_ns": pa.array(np.repeat(np.asarray(ts, dtype=np.int64), chips)),
    }
    for name, sig in gen.signals.items():
        n = sig.instances
        v = np.zeros((S * chips, n), dtype=np.uint64)
        if name in values:
            v[:] = np.asarray(values[name], dtype=np.uint64).reshape(S * chips, -1)
        cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), n) if sig.axes else pa.array(v[:, 0])
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table(cols), p)
    return p


def test_scale_interval_and_wrap_from_a_dump(tmp_path, sohu):
    # seq.elapsed_cycles is 32 bits wide: 4,294,967,000 then 200 is an increase of 496
    # dma.bytes has scale 32: a raw increase of 1,000 is 32,000 bytes
    ts = [0, 100_000_000]  # 100 ms window
    p = _dump(
        tmp_path, sohu, ts, {"seq.elapsed_cycles": [4_294_967_000, 200], "dma.bytes": [[0, 0, 0, 0], [1000, 0, 0, 0]]}
    )
    w = prepare(read_counters(p, sohu), sohu)
    assert w.interval[0, 0] == pytest.approx(0.1)
    assert w.values["seq.elapsed_cycles"][0, 0] == 496
    assert w.values["dma.bytes"][0, 0].tolist() == [32000.0, 0, 0, 0]


def test_gauge_is_time_weighted_mean(tmp_path, sohu):
    # power.power has scale 0.001 (mW); 400 W then 500 W -> mean 450 W over the window
    p = _dump(tmp_path, sohu, [0, 10_000_000], {"power.power": [400_000, 500_000]})
    w = prepare(read_counters(p, sohu), sohu)
    assert w.values["power.power"][0, 0] == pytest.approx(450.0)


def test_run_level_is_a_ratio_of_sums(sohu, library):
    # Two windows of 4,096 output tokens taking 1.0 s and 1.5 s -> 3,276.8 tok/s, not 3,413.3
    vals = {n: np.zeros((2, 1) + tuple(s for _, s in sig.axes)) for n, sig in sohu.signals.items()}
    vals["seq.output_tokens"][:, 0] = 4096
    w = Windows(np.array([[1.0], [1.5]]), vals)
    run = run_level(w, sohu)
    out = evaluate(library, run, ["output_tokens_per_second"])
    assert out["output_tokens_per_second"][0, 0] == pytest.approx(3276.8)


def test_server_level_sums_counters_and_scales_peaks(sohu, library):
    # 8 chips, each at 25 % of its FP8 peak for 1 s -> server MFU 25 %, achieved FLOP/s 8 x per chip
    vals = {n: np.zeros((1, 8) + tuple(s for _, s in sig.axes)) for n, sig in sohu.signals.items()}
    per_chip = 0.25 * 9000e12
    vals["mxu.flops_fp8"][:] = per_chip / 8  # spread over 8 cores
    vals["seq.model_flops"][:] = per_chip
    srv = server_level(Windows(np.ones((1, 8)), vals, level="run"), sohu)
    out = evaluate(library, srv, ["mfu", "mxu.achieved_flops"])
    assert out["mfu"][0, 0] == pytest.approx(25.0)
    assert out["mxu.achieved_flops"][0, 0] == pytest.approx(8 * per_chip / 1e12)


def test_a_signal_absent_from_the_dump_is_listed_not_refused(tmp_path, sohu):
    p = _dump(tmp_path, sohu, [0, 1000], {})
    t = pq.read_table(p).drop(["hbm.read_bytes"])
    pq.write_table(t, p)
    dump = read_counters(p, sohu)
    assert dump.absent == ("hbm.read_bytes",) and "hbm.read_bytes" not in dump.raw
    assert "hbm.write_bytes" in prepare(dump, sohu).values


def test_a_dump_without_any_signal_is_refused(tmp_path, sohu):
    p = _dump(tmp_path, sohu, [0, 1000], {})
    t = pq.read_table(p).select(["chip", "timestamp_ns"])
    pq.write_table(t, p)
    with pytest.raises(DumpError, match="no column is a signal of generation `sohu`"):
        read_counters(p, sohu)


def test_corrupt_file_is_a_clear_error(tmp_path, sohu):
    p = tmp_path / "c.parquet"
    p.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DumpError, match="not a readable Parquet counter dump"):
        read_counters(p, sohu)


def test_non_increasing_timestamps_are_an_error(tmp_path, sohu):
    p = _dump(tmp_path, sohu, [0, 1000, 1000], {})
    with pytest.raises(DumpError, match="do not increase"):
        read_counters(p, sohu)
