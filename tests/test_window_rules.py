"""Window rules (metrics/windows.py docstring), one test per rule and the cases of issue 4."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfonto.metrics.levels import evaluate_levels, null_reasons
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import MISSING, RESET, RESET_INFERRED, SENTINEL, VALID, prepare, read_counters
from perfonto.ontology import load_generation

GEN_YAML = """\
generation: t
description: test generation for window rules
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
blocks:
  c:
    description: counters
    clock: core
    signals:
      c32: {kind: counter, unit: event, width: 32, description: a 32-bit counter}
      c64: {kind: counter, unit: event, width: 64, description: a 64-bit counter}
      c48in64: {kind: counter, unit: event, width: 64, effective_width: 32,
                description: "stored in 64 bits, wraps at 32"}
      unk: {kind: counter, unit: event, width: unknown, description: undocumented width}
      scaled: {kind: counter, unit: B, width: 32, scale: 4, description: counts 4-byte units}
      scaled_ev: {kind: counter, unit: event, width: 32, scale: 4, description: counts events in fours}
      rated: {kind: counter, unit: B, width: 48, max_rate: 1 GB/s, description: declared max rate}
      withind: {kind: counter, unit: event, width: 32, reset_indicator: c.boot, description: reset by indicator}
      boot: {kind: gauge, unit: event, description: boot count}
      sent: {kind: counter, unit: event, width: 32, sentinel: [4294967295], description: with a sentinel}
      level: {kind: gauge, unit: W, sentinel: [65535], description: a gauge}
      hist: {kind: histogram, unit: event, width: 32, buckets: [10, 100], description: a histogram}
      reg:
        kind: packed
        width: 16
        description: a packed register
        fields:
          low: {bits: [0, 3], description: low nibble}
          flag: {bits: [8, 8], description: a flag}
"""


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    p = tmp_path_factory.mktemp("g") / "t.yaml"
    p.write_text(GEN_YAML)
    g, diags = load_generation(p)
    assert g is not None, [d.render() for d in diags]
    return g


def dump(tmp_path, gen, rows, ts=None, period_ns=None):
    """rows: list of {signal: raw} per sample (one chip); missing signals are 0; None = null register."""
    n = len(rows)
    ts = ts if ts is not None else [i * 10_000_000 for i in range(n)]
    cols = {"chip": pa.array(np.zeros(n, np.int32)), "timestamp_ns": pa.array(np.asarray(ts, np.int64))}
    for name, sig in gen.signals.items():
        vals = [r.get(name, [0] * sig.instances if sig.instances > 1 else 0) for r in rows]
        if sig.instances > 1:
            cols[name] = pa.FixedSizeListArray.from_arrays(
                pa.array([x for v in vals for x in v], pa.uint64()), sig.instances
            )
        else:
            cols[name] = pa.array(vals, pa.uint64())
    t = pa.table(cols)
    if period_ns:
        t = t.replace_schema_metadata({b"perfonto": json.dumps({"sample_period_ns": period_ns}).encode()})
    p = tmp_path / "d.parquet"
    pq.write_table(t, p)
    return prepare(read_counters(p, gen), gen)


def test_case1_32bit_wrap(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.c32": 4_294_967_000}, {"c.c32": 200}])
    assert w.values["c.c32"][0, 0] == 496 and w.null["c.c32"][0, 0] == VALID


def test_case2_effective_width(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.c48in64": 4_294_967_000}, {"c.c48in64": 300}])
    assert w.values["c.c48in64"][0, 0] == 596


def test_case3_64bit_exact(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.c64": 2**60}, {"c.c64": 2**60 + 1000}])
    assert w.values["c.c64"][0, 0] == 1000


def test_case4_unknown_width_drop_is_flagged(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.unk": 3_000_000_000}, {"c.unk": 4_000_000_000}, {"c.unk": 10_000}, {"c.unk": 20_000}])
    v, r = w.values["c.unk"][:, 0], w.null["c.unk"][:, 0]
    assert v[0] == 1_000_000_000 and np.isnan(v[1]) and r[1] == RESET_INFERRED and v[2] == 10_000
    running = np.nancumsum(v)
    assert np.all(np.diff(running) >= 0)  # running totals never decrease


def test_case8_scale(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.scaled": 0}, {"c.scaled": 1000}])
    assert w.values["c.scaled"][0, 0] == 4000


def test_case14_sentinel_is_null(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.sent": 5}, {"c.sent": 4294967295}, {"c.sent": 20}])
    assert np.isnan(w.values["c.sent"][:, 0]).all() and (w.null["c.sent"][:, 0] == SENTINEL).all()
    w = dump(tmp_path, gen, [{"c.level": 100}, {"c.level": 65535}])
    assert np.isnan(w.values["c.level"][0, 0]) and w.null["c.level"][0, 0] == SENTINEL


def test_half_range_rule_without_max_rate(tmp_path, gen):
    # a 32-bit counter read as 100 then 50: the modular increase 2^32 - 50 is above half the range -> reset
    w = dump(tmp_path, gen, [{"c.c32": 100}, {"c.c32": 50}])
    assert np.isnan(w.values["c.c32"][0, 0]) and w.null["c.c32"][0, 0] == RESET_INFERRED


def test_max_rate_rule(tmp_path, gen):
    # 1 GB/s over a 10 ms window allows at most 10 MB
    ok = dump(tmp_path, gen, [{"c.rated": 0}, {"c.rated": 9_000_000}])
    assert ok.values["c.rated"][0, 0] == 9_000_000
    bad = dump(tmp_path, gen, [{"c.rated": 0}, {"c.rated": 11_000_000}])
    assert bad.null["c.rated"][0, 0] == RESET_INFERRED


def test_reset_indicator(tmp_path, gen):
    # a decrease with the indicator changed is a reset, never read as a wrap
    w = dump(
        tmp_path,
        gen,
        [{"c.withind": 4_000_000_000, "c.boot": 1}, {"c.withind": 100, "c.boot": 2}, {"c.withind": 300, "c.boot": 2}],
    )
    assert w.null["c.withind"][0, 0] == RESET and np.isnan(w.values["c.withind"][0, 0])
    assert w.values["c.withind"][1, 0] == 200


def test_histogram_decrease_in_any_bucket_is_reset(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.hist": [5, 5, 5]}, {"c.hist": [6, 4, 9]}, {"c.hist": [7, 5, 9]}])
    assert (w.null["c.hist"][0, 0] == RESET_INFERRED).all()
    assert w.values["c.hist"][1, 0].tolist() == [1, 1, 0]


def test_packed_fields_are_read_not_differenced(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.reg": 0x0105}, {"c.reg": 0x0003}])
    assert w.values["c.reg.low"][0, 0] == 3 and w.values["c.reg.flag"][0, 0] == 0


def test_gauge_time_weighted(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.level": 100}, {"c.level": 300}])
    assert w.values["c.level"][0, 0] == 200


def test_missing_sample_leaves_windows_null(tmp_path, gen):
    # samples at 0, 10, 30 ms on a 10 ms grid: the 20 ms sample is missing
    w = dump(
        tmp_path,
        gen,
        [{"c.c32": 0}, {"c.c32": 10}, {"c.c32": 30}],
        ts=[0, 10_000_000, 30_000_000],
        period_ns=10_000_000,
    )
    assert w.values["c.c32"].shape[0] == 3
    assert w.values["c.c32"][0, 0] == 10
    assert (w.null["c.c32"][1:, 0] == MISSING).all() and np.isnan(w.values["c.c32"][1:, 0]).all()


def test_null_register_is_missing(tmp_path, gen):
    w = dump(tmp_path, gen, [{"c.c32": 0}, {"c.c32": None}, {"c.c32": 30}])
    assert (w.null["c.c32"][:, 0] == MISSING).all()


def test_case13_interval_from_timestamps(tmp_path, gen):
    # 1e12 counted over a 100 ms window -> 1e13 per second whatever the wall-clock time between reads
    w = dump(tmp_path, gen, [{"c.c64": 0}, {"c.c64": 10**12}], ts=[5_000_000_000, 5_100_000_000])
    assert w.interval[0, 0] == pytest.approx(0.1) and w.values["c.c64"][0, 0] / w.interval[0, 0] == pytest.approx(1e13)


def test_run_level_leaves_out_invalid_windows_and_says_why(tmp_path, gen):
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(gen, {"m.metrics": "metric rate [event/s] = c.c32 / interval\nmetric lvl [W] = c.level"})
    rows = [{"c.c32": 0}, {"c.c32": 100}, {"c.c32": 50}, {"c.c32": 150}, {"c.c32": 250}]
    w = dump(tmp_path, gen, rows)
    window = evaluate(g, w)
    lv = evaluate_levels(g, w, lambda v, i, c: evaluate(g, type(w)(i, v, c)))
    # windows: +100, reset, +100, +100 -> 300 events over 30 ms of valid time
    assert lv.per_chip["rate"][0] == pytest.approx(300 / 0.03)
    assert lv.coverage["rate"] == pytest.approx(0.75) and lv.coverage["lvl"] == 1.0
    assert null_reasons(g, w, window) == {"rate": {"reset (implausible increase or decrease)": 1}}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**31), min_size=2, max_size=30), st.integers(0, 2**32 - 1))
def test_property_wrapped_series_sum_to_true_total(tmp_path_factory, incs, start):
    """For increments below half the range, the deltas of the wrapped 32-bit register sum to the
    true total, and no window is flagged."""
    regs = [start]
    for i in incs:
        regs.append((regs[-1] + i) % 2**32)
    from perfonto.metrics.windows import modular_delta

    r = np.array(regs, np.uint64)
    d = modular_delta(r[:-1], r[1:], 32)
    assert int(d.sum()) == sum(incs)


def test_declared_rollup_max_is_the_hottest_window(tmp_path, gen):
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(gen, {"m.metrics": "metric hot [W] = c.level\n  rollup max\nmetric mean [W] = c.level"})
    w = dump(tmp_path, gen, [{"c.level": 100}, {"c.level": 300}, {"c.level": 100}, {"c.level": 100}])
    window = evaluate(g, w)
    lv = evaluate_levels(g, w, lambda v, i, c: evaluate(g, type(w)(i, v, c)), window)
    assert window["hot"][:, 0].tolist() == [200, 200, 100]
    assert lv.per_chip["hot"][0] == 200 and lv.server["hot"] == 200
    assert lv.per_chip["mean"][0] == pytest.approx(500 / 3)  # re-derived: time-weighted over the run


def test_rollup_other_than_max_min_is_an_error(gen):
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(gen, {"m.metrics": "metric hot [W] = c.level\n  rollup avg"})
    assert [d.code for d in g.errors] == ["rollup"]


def test_window_longer_than_the_wrap_period_is_null(tmp_path, gen):
    # c.c32 counts core cycles? no: events. Use a cycle counter of a 1 GHz clock: 32 bits wrap in 4.29 s.
    from perfonto.metrics.windows import WRAP_AMBIGUOUS
    from perfonto.ontology import load_generation

    p = tmp_path / "cyc.yaml"
    p.write_text(
        GEN_YAML.replace("generation: t", "generation: cyc").replace(
            "      c64: {kind: counter, unit: event, width: 64, description: a 64-bit counter}",
            "      c64: {kind: counter, unit: event, width: 64, description: a 64-bit counter}\n"
            "      cyc: {kind: counter, unit: core_cycle, width: 32, description: core cycles}",
        )
    )
    g2, d = load_generation(p)
    assert g2 is not None, [x.render() for x in d]
    ok = dump(tmp_path, g2, [{"c.cyc": 0}, {"c.cyc": 3_000_000_000}], ts=[0, 3_000_000_000])
    assert ok.values["c.cyc"][0, 0] == 3e9
    bad = dump(tmp_path, g2, [{"c.cyc": 0}, {"c.cyc": 705_032_704}], ts=[0, 5_000_000_000])  # 5e9 mod 2^32
    assert bad.null["c.cyc"][0, 0] == WRAP_AMBIGUOUS and np.isnan(bad.values["c.cyc"][0, 0])


def test_no_valid_window_gives_null_not_zero(tmp_path, gen):
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(gen, {"m.metrics": "metric total [event] = c.sent"})
    w = dump(tmp_path, gen, [{"c.sent": 4294967295}, {"c.sent": 4294967295}, {"c.sent": 4294967295}])
    lv = evaluate_levels(g, w, lambda v, i, c: evaluate(g, type(w)(i, v, c)))
    assert np.isnan(lv.per_chip["total"][0]) and np.isnan(lv.server["total"]) and lv.coverage["total"] == 0


def _dump_table(gen, n=4):
    cols = {
        "chip": pa.array(np.zeros(n, np.int32)),
        "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 10_000_000),
    }
    for name, sig in gen.signals.items():
        if sig.instances > 1:
            cols[name] = pa.FixedSizeListArray.from_arrays(
                pa.array(np.zeros(n * sig.instances, np.uint64)), sig.instances
            )
        else:
            cols[name] = pa.array(np.zeros(n, np.uint64))
    return pa.table(cols)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (
            lambda t: t.set_column(
                t.column_names.index("c.level"), "c.level", pa.array(np.array([1, -5, 3, 4], np.int64))
            ),
            "negative",
        ),
        (
            lambda t: t.set_column(t.column_names.index("c.c32"), "c.c32", pa.array(["a", "b", "c", "d"])),
            "unsigned integers",
        ),
        (lambda t: t.append_column("c.c32", pa.array(np.zeros(4, np.uint64))), "duplicate column"),
        (lambda t: t.slice(0, 1), "a window needs two"),
        (lambda t: t.set_column(1, "timestamp_ns", pa.array(np.array([0, 10, 20, 10**15], np.int64))), None),
        (
            lambda t: t.replace_schema_metadata({b"perfonto": b'{"generation": "other"}'}),
            "written for generation `other`",
        ),
        (lambda t: t.replace_schema_metadata({b"perfonto": b'{"sample_period_ns": "abc"}'}), "not a number"),
        (lambda t: t.replace_schema_metadata({b"perfonto": b'{"sample_period_ns": 1}'}), "far off the sampling grid"),
    ],
)
def test_corrupt_dumps_are_dump_errors(tmp_path, gen, mutate, match):
    from perfonto.metrics.windows import DumpError

    p = tmp_path / "d.parquet"
    pq.write_table(mutate(_dump_table(gen)), p)
    if match is None:  # a far-off timestamp without a period is just a long window
        read_counters(p, gen)
        return
    with pytest.raises(DumpError, match=match):
        read_counters(p, gen)


def test_null_list_row_is_missing(tmp_path, gen):
    t = _dump_table(gen)
    col = t.column("c.hist").combine_chunks()
    rows = col.to_pylist()
    rows[1] = None
    t = t.set_column(t.column_names.index("c.hist"), "c.hist", pa.array(rows, type=col.type))
    p = tmp_path / "d.parquet"
    pq.write_table(t, p)
    w = prepare(read_counters(p, gen), gen)
    assert (w.null["c.hist"][:2, 0] == MISSING).all() and (w.null["c.hist"][2, 0] == VALID).all()


def test_sample_column_aligns_late_chips(tmp_path, gen):
    # chip 1 lost its first two samples: with sample numbers it still lands on the right grid rows
    rows = []
    for s_ in range(4):
        for c in (0, 1):
            if c == 1 and s_ < 2:
                continue
            rows.append((c, s_, s_ * 10_000_000 + c * 7))
    t = _dump_table(gen, len(rows))
    t = t.set_column(0, "chip", pa.array(np.array([r[0] for r in rows], np.int32)))
    t = t.set_column(1, "timestamp_ns", pa.array(np.array([r[2] for r in rows], np.int64)))
    t = t.append_column("sample", pa.array(np.array([r[1] for r in rows], np.int64)))
    p = tmp_path / "d.parquet"
    pq.write_table(t, p)
    d = read_counters(p, gen)
    assert d.present[:, 1].tolist() == [False, False, True, True]


def test_case8_scaled_counter_ratio_within_bounds(tmp_path, gen):
    from perfonto.metrics.compiler import compile_texts

    g = compile_texts(gen, {"m.metrics": "metric r [1] = c.c32 / c.scaled_ev\n  bounds 0 .. 1"})
    w = dump(tmp_path, gen, [{"c.scaled_ev": 0, "c.c32": 0}, {"c.scaled_ev": 1000, "c.c32": 3000}])
    assert w.values["c.scaled_ev"][0, 0] == 4000
    v = evaluate(g, w)["r"][0, 0]
    lo, hi = g.metrics["r"].bounds
    assert v == 0.75 and lo <= v <= hi


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**20), st.booleans()), min_size=2, max_size=25))
def test_property_resets_never_make_totals_decrease(tmp_path_factory, steps):
    """A 32-bit counter that advances, and sometimes restarts from 0 with its reset indicator bumped:
    every window is either the true increase or null (reset), and running totals never decrease."""
    tmp = tmp_path_factory.mktemp("p")
    g = _gen_for_property(tmp_path_factory)
    raw, boot, rows, truth = 0, 0, [], []
    rows.append({"c.withind": 0, "c.boot": 0})
    for inc, reset in steps:
        if reset:
            raw, boot = inc, boot + 1
            truth.append(None)
        else:
            raw = (raw + inc) % 2**32
            truth.append(inc)
        rows.append({"c.withind": raw, "c.boot": boot})
    w = dump(tmp, g, rows)
    v = w.values["c.withind"][:, 0]
    for got, want in zip(v, truth):
        assert np.isnan(got) if want is None else got == want
    assert np.all(np.diff(np.nancumsum(v)) >= 0)


_GEN = {}


def _gen_for_property(factory):
    if "g" not in _GEN:
        from perfonto.ontology import load_generation

        p = factory.mktemp("gp") / "t.yaml"
        p.write_text(GEN_YAML)
        _GEN["g"] = load_generation(p)[0]
    return _GEN["g"]


def test_a_cycle_counter_a_little_fast_against_the_host_is_no_reset(tmp_path, sohu):
    # A new user's export/import round trip dropped Sohu's declared max_rate: the default limit was the bare
    # 1.5 GHz clock, and a chip whose clock ran 85 ppm fast (1,500,128 cycles a 1 ms sample) had every
    # window of mxu.utilization called a reset. The default now allows 1 % over the clock; a reset's jump
    # (here the counter restarting below its last value) is still one.
    sig = sohu.signals["mxu.busy_cycles"]
    assert sig.max_rate is None and sig.instances > 1
    n, per = 6, 1_500_128  # cycles a 1 ms window: 85 ppm over the 1.5 GHz clock
    vals = [[k * per] * sig.instances for k in range(n)]
    vals[4] = [7] * sig.instances  # restarted from 0 (a reset), then counts on
    vals[5] = [7 + per] * sig.instances
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "mxu.busy_cycles": pa.FixedSizeListArray.from_arrays(
                pa.array([x for v in vals for x in v], pa.uint64()), sig.instances
            ),
        }
    )
    pq.write_table(t, tmp_path / "d.parquet")
    w = prepare(read_counters(tmp_path / "d.parquet", sohu), sohu)
    v, null = w.values["mxu.busy_cycles"][:, 0, 0], w.null["mxu.busy_cycles"][:, 0, 0]
    assert list(v[:3]) == [per] * 3 and (null[:3] == VALID).all()
    assert null[3] == RESET_INFERRED and np.isnan(v[3])  # 2^32 − 4,500,377 up: far beyond 1.515e6 a window
    assert v[4] == per
    # 2 % fast is beyond the headroom: a counter that cannot run that fast is not trusted
    vals2 = [[k * 1_530_000] * sig.instances for k in range(3)]
    t2 = t.slice(0, 3).set_column(
        2, "mxu.busy_cycles", pa.FixedSizeListArray.from_arrays(pa.array([x for v in vals2 for x in v], pa.uint64()), 8)
    )
    pq.write_table(t2, tmp_path / "d2.parquet")
    w2 = prepare(read_counters(tmp_path / "d2.parquet", sohu), sohu)
    assert (w2.null["mxu.busy_cycles"][:, 0, 0] == RESET_INFERRED).all()
