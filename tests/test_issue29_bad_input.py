"""Issue 29's new inputs fed bad and odd values as a hostile user would: multiplex side columns, perf stat's
run-time columns, request records for the steady state, and the metric language's ``default()``. Each
case is either a clear error naming the file and the row, line or column, or the right value worked by hand;
never a traceback or a silently wrong value."""

from __future__ import annotations

import re
import warnings

import pyarrow as pa
import pytest
from test_multiplex import RATIO, S, mux_catalog

from perfonto.capture.dump_io import DumpError
from perfonto.capture.multiplex import split_multiplex


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    from perfonto.metrics.catalog import load_catalog

    return load_catalog(mux_catalog(tmp_path_factory.mktemp("muxbad")), None, library=False).graph.generation


def _table(**over):
    """One chip read at 0, 1 and 2 s: 900 misses per window in group 1, 200 loads in group 2, each ran half."""
    cols = {
        "chip": pa.array([0, 0, 0], pa.int32()),
        "timestamp_ns": pa.array([0, S, 2 * S], pa.int64()),
        "core.misses": pa.array([0, 900, 1800], pa.uint64()),
        "core.loads": pa.array([0, 200, 400], pa.uint64()),
        "core.misses@enabled_ns": [0, S, 2 * S],
        "core.misses@running_ns": [0, S // 2, S],
        "core.misses@group": [1, 1, 1],
        "core.loads@enabled_ns": [0, S, 2 * S],
        "core.loads@running_ns": [0, S // 2, S],
        "core.loads@group": [2, 2, 2],
    }
    cols.update(over)
    return pa.table({k: v for k, v in cols.items() if v is not None})


def _split(gen, t):
    notes: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (NaN cast to an integer) is a bug
        out, mux = split_multiplex(t, gen, notes)
    return out, mux, notes


def test_a_float_group_id_is_read_when_whole_and_refused_with_its_row_when_not(gen):
    out, mux, _ = _split(gen, _table(**{"core.misses@group": [1.0, 1.0, 1.0]}))
    assert mux.series[("core.misses", 0)][0].group.tolist() == [1, 1, 1]
    with pytest.raises(DumpError, match=r"row 1, column `core.misses@group`: 1.5 is not a whole group id"):
        _split(gen, _table(**{"core.misses@group": [1.5, 1.5, 1.5]}))
    with pytest.raises(DumpError, match=r"row 2, column `core.misses@group`: 1e\+30 is not a whole group id"):
        _split(gen, _table(**{"core.misses@group": [1.0, 1e30, 1.0]}))
    # NaN, like null: the group is not known
    _, mux, _ = _split(gen, _table(**{"core.misses@group": [float("nan")] * 3}))
    assert mux.series[("core.misses", 0)][0].group.tolist() == [-1, -1, -1]


def test_a_nan_or_infinite_time_is_refused_with_its_row(gen):
    # rows are numbered from 1 in the file's order, as the dump reader numbers them (they were from 0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(DumpError, match=r"row 2, column `core.misses@enabled_ns`: .*not a finite number of ns"):
            _split(gen, _table(**{"core.misses@enabled_ns": [0.0, bad, 2e9]}))


def test_a_counter_that_was_never_enabled_nor_running_is_null_not_counted_raw(gen):
    # enabled and running stay 0 while the register grows 900 a window: perf's run == 0 is <not counted>;
    # counted raw, misses / loads (scaled x2) would read 900 / 400 = 225 % with no mark
    out, _, _ = _split(gen, _table(**{"core.misses@enabled_ns": [0, 0, 0], "core.misses@running_ns": [0, 0, 0]}))
    assert out.column("core.misses").to_pylist() == [0, None, None]


def test_timestamps_in_float_seconds_keep_their_fractions(gen):
    # read at 0, 0.5 and 1 s: cast to int64 before scaling, 0.5 s became 0 and no window matched its side data
    t = _table(timestamp_ns=None).append_column("timestamp_s", pa.array([0.0, 0.5, 1.0]))
    _, mux, _ = _split(gen, t)
    assert mux.series[("core.misses", 0)][0].t_ns.tolist() == [0, S // 2, S]


def test_the_scaling_note_never_prints_nan(gen):
    # every window of misses touches a null read: no raw count to scale
    _, _, notes = _split(gen, _table(**{"core.misses": pa.array([0, None, 1800], pa.uint64())}))
    assert "nan" not in notes[-1] and "core.misses ran 50.00 % (no window counted)" in notes[-1]


PERF_HEAD = "# started on Wed Dec  2 10:00:00 2026\n\n"
MISS, LOAD = "L1-dcache-load-misses", "L1-dcache-loads"


def _perf(tmp_path, first_miss: str) -> str:
    """perf stat -I CSV: misses and loads in two groups (45 % and 50 %), the first misses line as given."""
    lines = [
        f"     1.000000000,{first_miss}\n",
        f"     1.000000000,400,,{LOAD},500000000,50.00,,\n",
        f"     2.000000000,1800,,{MISS},450000000,45.00,,\n",
        f"     2.000000000,400,,{LOAD},500000000,50.00,,\n",
    ]
    p = tmp_path / "perf.csv"
    p.write_text(PERF_HEAD + "".join(lines))
    return str(p)


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return mux_catalog(tmp_path_factory.mktemp("muxcat"))


def _perf_analyze(cat, path, out):
    import json

    import pyarrow.parquet as pq

    from perfonto.cli import main

    args = ["analyze", path, "--format", "perf-stat", "--out", str(out), "--catalog", str(cat), "--no-library"]
    rc = main(args)
    if rc != 0:
        return rc, None, None
    return rc, pq.read_table(out / "metrics.parquet").to_pydict(), json.loads((out / "report.json").read_text())


def test_perf_run_percentage_0_with_a_count_is_still_multiplexed(cat, tmp_path):
    # perf prints %.2f of 100 x run / enabled: 0.00 means under 0.005 %, not "ran the whole interval"; the
    # window was left unmarked and the ratio read 1800 / 400 = 450 % beside a bound violation
    p = _perf(tmp_path, f"1800,,{MISS},450000000,0.00,,")
    rc, m, _ = _perf_analyze(cat, p, tmp_path / "o")
    assert rc == 0 and m[RATIO] == [None, None] and m["mismeasured"] == [[RATIO], [RATIO]]


@pytest.mark.parametrize(
    ("first", "what"),
    [
        (f"1800,,{MISS},0,50.00,,", r"a count with a run time of 0"),
        (f"1800,,{MISS},-450000000,45.00,,", r"run time -4.5e\+08 ns is negative or past 2\^63 ns"),
        (f"1800,,{MISS},1e30,45.00,,", r"run time 1e\+30 ns is negative or past 2\^63 ns"),
        (f"1800,,{MISS},,45.00,,", r"ran 45.00 % of the interval but has no run time"),
    ],
)
def test_perf_run_times_perf_never_prints_are_refused_with_their_line(cat, tmp_path, capsys, first, what):
    p = _perf(tmp_path, first)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rc, _, _ = _perf_analyze(cat, p, tmp_path / "o")
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and "internal error" not in err
    assert re.search(rf"perf stat output, line 3: `{MISS}`.*{what}", " ".join(err.split())), err


def test_steady_state_without_arrival_times_runs_from_the_first_admission(library):
    from test_steady_state import _trace

    from perfonto.analysis.steady_state import steady_state

    c = _trace()
    c["request.arrival_time"] = [None] * len(c["request.arrival_time"])  # admissions 0, 5, 10 still known
    s = steady_state(library, c, 0.9)
    assert (s.start, s.end) == (10.0, 50.0)
    # the run is (0, 60], as with arrivals: it started at 50 s (the first completion), the window lay before
    # it and its share of the run read 4.0
    assert s.run_start == 0.0 and s.to_json()["share_of_run"] == pytest.approx(40 / 60)
    assert s.full["output_tokens_per_second"] == pytest.approx(475 / 60)


def test_steady_state_names_a_column_that_holds_text(library):
    from test_steady_state import _trace

    from perfonto.analysis.steady_state import steady_state

    c = _trace()
    c["request.completion_time"] = ["late"] * len(c["request.completion_time"])
    with pytest.raises(ValueError, match=r"`request.completion_time` holds 'late', not a time in seconds"):
        steady_state(library, c, 0.9)


def test_steady_state_of_requests_that_finish_where_they_begin_says_so(library):
    from perfonto.analysis.steady_state import steady_state

    c = {"request.arrival_time": [1.0], "request.admission_time": [1.0], "request.completion_time": [1.0]}
    with pytest.raises(ValueError, match=r"no request is in flight for any time"):
        steady_state(library, c, 0.9)


# -- default(): optional inputs over a capture that lacks them ----------------------------------------------


@pytest.fixture(scope="module")
def dgen(tmp_path_factory):
    from helpers import generation_from_yaml, one_block_yaml
    from test_definitions import SIGNALS

    return generation_from_yaml(tmp_path_factory.mktemp("dgen") / "t.yaml", one_block_yaml("t", SIGNALS))


def test_a_default_over_a_field_of_an_absent_register_reads_the_default(dgen, tmp_path):
    from helpers import compile_src
    from test_definitions import _backends, _table

    import numpy as np

    # no `b.rapl` column: 2 ** default(b.rapl.esu, 3) is 2 ** 3 = 8 in each window; it was left
    # "not in the dump: b.rapl.esu" (a field's edge was kept in the dependency graph)
    graph = compile_src(dgen, "metric t.scale [1] = 2 ** default(b.rapl.esu, 3)\n")
    assert not graph.errors, [d.render() for d in graph.errors]
    got = _backends(graph, dgen, _table({"b.err": [0, 5, 12, 20]}), tmp_path)
    for backend, v in got.items():
        np.testing.assert_allclose(np.asarray(v["t.scale"], float)[:, 0], [8.0, 8.0, 8.0], err_msg=backend)


def test_warm_up_requests_before_time_0_are_not_part_of_the_full_run(library):
    """The emulator lists the warm-up's requests still decoding at t = 0 with their (negative) warm-up
    times; the requests the warm-up finished are not listed, so the records before 0 are a partial view.
    The run is (0, 60]: with it starting at the first warm-up instant, `perfonto run`'s full-run tok/s
    read a quarter of the report's own counter-based figure."""
    from test_steady_state import _trace

    from perfonto.analysis.steady_state import steady_state

    c = _trace()
    w = [float(t) for t in range(-29, 21)]  # W: admitted at -30 s, 50 tokens at -29 … 20 s, completes at 20 s
    for k, v in (
        ("request.arrival_time", -30.0),
        ("request.admission_time", -30.0),
        ("request.first_token_time", -29.0),
        ("request.completion_time", 20.0),
        ("request.input_tokens", 100),
        ("request.output_tokens", 50),
        ("request.token_times", w),
    ):
        c[k].append(v)
    s = steady_state(library, c, 0.9)
    # in flight from 0: [0, 5) 3, [5, 10) 6, [10, 20) 11, [20, 50) 10 ...; at 0.9 x 11 = 9.9: [10, 50)
    assert (s.start, s.end, s.peak, s.run_start, s.run_end) == (10.0, 50.0, 11.0, 0.0, 60.0)
    assert s.to_json()["share_of_run"] == pytest.approx(40 / 60)
    # (0, 60]: the trace's 475 output tokens + W's 20 (1 … 20 s); W's prompt was prefilled before 0
    assert s.full["output_tokens_per_second"] == pytest.approx(495 / 60)
    assert s.full["tokens_per_second"] == pytest.approx((495 + 1000) / 60)
    assert s.full["requests_per_second"] == pytest.approx(11 / 60)
    assert s.requests_in_window == 5  # W entered flight before the window: not in its latency population


def _parts(rows, with_side):
    t = {
        "chip": pa.array([0] * len(rows), pa.int32()),
        "timestamp_ns": pa.array([r * S for r in rows], pa.int64()),
        "core.misses": pa.array([900 * r for r in rows], pa.uint64()),
        "core.loads": pa.array([200 * r for r in rows], pa.uint64()),
    }
    if with_side:
        for c, g in (("core.misses", 1), ("core.loads", 2)):
            t |= {f"{c}@enabled_ns": [r * S for r in rows], f"{c}@running_ns": [r * S // 2 for r in rows]}
            t[f"{c}@group"] = [g] * len(rows)
    return pa.table(t)


def test_side_columns_in_a_later_part_of_a_dump_folder_are_read(cat, tmp_path, capsys):
    import pyarrow.parquet as pq

    # part 0 without side columns, part 1 with them: only part 0's schema was looked at, so the side data
    # was dropped and the ratio read 900 / 200 = 450 % with no mark; the error names the part and its row
    d = tmp_path / "dump"
    d.mkdir()
    pq.write_table(_parts([0, 1], False), d / "part-0.parquet")
    pq.write_table(_parts([2, 3], True), d / "part-1.parquet")
    rc, _, _ = _perf_analyze_dump(cat, d, tmp_path / "o")
    assert rc == 1  # part 0's reads have no times: refused with the row, never read as unmultiplexed
    err = " ".join(capsys.readouterr().err.split())
    assert "part-0.parquet: row 1, column `core.misses@enabled_ns`: null; every read records its times" in err


def test_a_csv_dump_with_side_columns_reads_its_registers_as_counters(cat, tmp_path):
    import pyarrow.csv as pc

    p = tmp_path / "mux.csv"
    pc.write_csv(_parts([0, 1, 2], True), p)
    rc, m, _ = _perf_analyze_dump(cat, p, tmp_path / "o")  # CSV infers int64; was "<table>: … is signed"
    assert rc == 0 and m[RATIO] == [None, None] and m["core.load_rate"] == [400.0, 400.0]


def _perf_analyze_dump(cat, path, out):
    import json

    import pyarrow.parquet as pq

    from perfonto.cli import main

    rc = main(["analyze", str(path), "--out", str(out), "--catalog", str(cat), "--no-library"])
    if rc != 0:
        return rc, None, None
    return rc, pq.read_table(out / "metrics.parquet").to_pydict(), json.loads((out / "report.json").read_text())


def test_a_sentinel_read_of_a_multiplexed_register_is_null_not_a_count(gen):
    import dataclasses

    # core.loads (48-bit) declared with a sentinel, as a PMU that writes all ones while the counter is
    # off the PMU: the read after the sentinel came out (200 - (2^48 - 1)) mod 2^48 = 201, scaled x2 = 402
    sig = gen.signals["core.loads"]
    sentinel = (1 << 48) - 1
    g2 = dataclasses.replace(gen, signals=gen.signals | {"core.loads": dataclasses.replace(sig, sentinel=[sentinel])})
    t = _table(**{"core.loads": pa.array([0, sentinel, 200], pa.uint64())})
    out, _, _ = _split(g2, t)
    # the sentinel read is null: both windows that touch it are null; the total restarts from the raw 200
    assert out.column("core.loads").to_pylist() == [0, None, 200]


@pytest.mark.parametrize(
    ("over", "what"),
    [
        ({"chip": None}, r"d.parquet: no `chip` column"),  # was an internal ArrowInvalid
        ({"chip": ["a", "a", "a"]}, r"d.parquet: column `chip` has type string"),  # was int('a')
        ({"timestamp_ns": pa.array([0, None, 2 * S], pa.int64())}, r"d.parquet: row 2: `timestamp_ns` is empty"),
        ({"core.misses": [0.0, 900.5, 1800.0]}, r"d.parquet: column `core.misses` has type double"),  # was <table>
    ],
)
def test_the_keys_and_registers_of_a_multiplexed_dump_are_checked_with_its_file(gen, tmp_path, over, what):
    import pyarrow.parquet as pq

    pq.write_table(_table(**over), tmp_path / "d.parquet")
    with pytest.raises(DumpError, match=what):
        _split(gen, tmp_path / "d.parquet")


def test_a_multiplexed_register_value_past_its_width_is_refused_not_masked(gen):
    # core.stores is a 16-bit register: 70,000 does not fit (the dump reader refuses it without side columns);
    # masked to 16 bits before scaling it read 70,000 mod 65,536 = 4,464
    t = _table(**{"core.stores": pa.array([0, 70_000, 70_100], pa.uint64())})
    t = t.append_column("core.stores@enabled_ns", pa.array([0, S, 2 * S])).append_column(
        "core.stores@running_ns", pa.array([0, S // 2, S])
    )
    with pytest.raises(DumpError, match=r"row 2, column `core.stores`: value 70000 does not fit the 16-bit register"):
        _split(gen, t)
