"""Issue 29, point 4, hostile input: `perfonto align` (and `analysis.clock_fit`) on sync reads that are
empty, mistyped, half-declared or numerically awkward give a clear error naming the file, the column and
the row (exit 1, never a traceback), or the right value."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from perfonto.analysis.clock_fit import clocks_of_table, fit_chip, make_reads
from perfonto.cli import main


def sync(n=10, chips=2) -> pa.Table:
    """``n`` reads per chip, 100 ms apart, legs 1000/1000 ns; chip c's clock is 5 ms × c ahead."""
    h0 = np.tile(np.arange(n, dtype=np.int64) * 100_000_000, chips)
    chip = np.repeat(np.arange(chips, dtype=np.int32), n)
    return pa.table({"chip": chip, "host_before_ns": h0, "device_ns": h0 + 1000 + 5_000_000 * chip,
                     "host_after_ns": h0 + 2000})  # fmt: skip


def test_empty_sync_reads_are_an_error():
    with pytest.raises(ValueError, match=r"x.parquet: no sync read \(0 rows\)"):
        clocks_of_table(sync().slice(0, 0), where="x.parquet")


def test_one_device_stamp_column_without_the_other():
    t = sync().append_column("device_before_ns", sync().column("device_ns"))
    with pytest.raises(ValueError, match=r"x.parquet: .*device_before_ns without device_after_ns"):
        clocks_of_table(t, where="x.parquet")
    with pytest.raises(ValueError, match=r"device_after_ns without device_before_ns"):
        clocks_of_table(t.rename_columns([*t.column_names[:-1], "device_after_ns"]), where="x.parquet")


@pytest.mark.parametrize(
    "column, values, what",
    [
        ("device_ns", lambda t: pa.array([str(v) for v in t.column("device_ns").to_pylist()]), "string"),
        ("chip", lambda t: pa.array([True] * t.num_rows), "bool"),
        ("chip", lambda t: pa.array(t.column("chip").to_numpy() + 0.5), "double"),
    ],
)
def test_a_column_of_the_wrong_type_is_named(column, values, what):
    t = sync()
    t = t.set_column(t.column_names.index(column), column, values(t))
    with pytest.raises(ValueError, match=rf"x.parquet: column {column} is {what}"):
        clocks_of_table(t, where="x.parquet")


def _with_null(t: pa.Table, column: str, row: int) -> pa.Table:
    """``t`` with the value of ``column`` at ``row`` null (the column's type kept)."""
    values = t.column(column).to_pylist()
    values[row] = None
    return t.set_column(t.column_names.index(column), column, pa.array(values, t.schema.field(column).type))


def test_a_null_chip_names_its_row():
    with pytest.raises(ValueError, match=r"x.parquet: sync read row 13, column chip: is empty"):
        clocks_of_table(_with_null(sync(), "chip", 13), where="x.parquet")


def test_a_non_finite_stamp_names_its_own_column():
    with pytest.raises(ValueError, match=r"row 4, column device_ns: is not a finite number"):
        clocks_of_table(_with_null(sync(), "device_ns", 4), where="x.parquet")
    two = sync().append_column("device_before_ns", pa.array(np.full(20, np.nan)))
    two = two.append_column("device_after_ns", sync().column("device_ns"))
    with pytest.raises(ValueError, match=r"row 0, column device_before_ns: is not a finite number"):
        clocks_of_table(two, where="x.parquet")


def test_a_processing_time_longer_than_the_round_trip_names_the_option():
    # each read's host round trip is 2000 ns: 1e18 ns of device work cannot fit in it
    with pytest.raises(ValueError, match=r"row 0, column device_ns: --device-processing-ns \(1e\+18 ns\) is longer"):
        clocks_of_table(sync(), processing_ns=1e18, where="x.parquet")


def test_host_stamps_since_the_epoch_keep_their_precision():
    """Host stamps of CLOCK_REALTIME (1.76e18 ns) and a device clock near 0: y = device − host is about
    −1.76e18, where float64 keeps 256 ns. 50 reads 10 ms apart, legs 1000/1000 ns, no drift: the fit must
    find no drift and map within its bound (an uncentred slope read ~1e10 ppm and 0.25 s errors)."""
    base = 1_760_000_000_000_000_000
    h0 = base + np.arange(50, dtype=np.int64) * 10_000_000
    clk = fit_chip(make_reads(h0, h0 - base + 1000 + 1_000_000, h0 + 2000))
    seg = clk.segments[0]
    assert not seg.drift_fitted and seg.b == 0
    true = base + np.arange(0, 490_000_000, 7_000_000, dtype=np.int64)
    host, bound, why = clk.map(true - base + 1_000_000, ordered=True)
    err = np.abs(host - true.astype(np.float64))
    assert not why.any() and err.max() <= 256 and (err <= bound).all() and bound.max() < 2000


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("small")
    emulator.run("sohu", duration_s=0.2, sample_period_s=0.01, warmup_steps=5, seed=3, out_dir=out)
    return out


def _variant(small, tmp_path, table=None, raw=None):
    run = tmp_path / "run"
    shutil.copytree(small, run)
    if raw is not None:
        (run / "sync.parquet").write_bytes(raw)
    else:
        pq.write_table(table, run / "sync.parquet")
    return run


def _align(run, capsys, *extra):
    rc = main(["align", str(run), "--json", *extra])
    doc = json.loads(capsys.readouterr().out)
    return rc, doc


def test_counters_of_a_chip_without_sync_reads(small, tmp_path, capsys):
    t = pq.read_table(small / "sync.parquet")
    run = _variant(small, tmp_path, t.filter(pa.compute.not_equal(t.column("chip"), 3)))
    rc, doc = _align(run, capsys)
    assert rc == 1 and not doc["ok"]
    assert doc["error"].startswith(f"{run / 'sync.parquet'}: no sync reads for chip(s) 3 of the counters")
    assert not (run / "alignment.json").exists()


def test_empty_and_half_declared_sync_files_through_the_command(small, tmp_path, capsys):
    t = pq.read_table(small / "sync.parquet")
    run = _variant(small, tmp_path, t.slice(0, 0))
    rc, doc = _align(run, capsys)
    assert rc == 1 and doc["error"].startswith(f"{run / 'sync.parquet'}: no sync read (0 rows)")
    shutil.rmtree(run)
    run = _variant(small, tmp_path, t.append_column("device_before_ns", t.column("device_ns")))
    rc, doc = _align(run, capsys)
    assert rc == 1 and "device_before_ns without device_after_ns" in doc["error"]
    shutil.rmtree(run)
    run = _variant(small, tmp_path, raw=b"chip,host_before_ns\n0,1\n")
    rc, doc = _align(run, capsys)
    assert rc == 1 and str(run / "sync.parquet") in doc["error"] and "not a parquet file" in doc["error"].lower()


def test_device_stamps_that_do_not_follow_the_host_clock():
    """Random device stamps: nearly every read 'resets' the clock. Mapping samples through hundreds of
    one-read epochs is a guess (and an epochs × samples matrix); more than half the reads starting an
    epoch is an error naming the chip."""
    t = sync(n=40)
    d = t.column("device_ns").to_numpy().copy()
    d[:40] = np.random.default_rng(5).integers(0, 10**12, 40)
    with pytest.raises(ValueError, match=r"x.parquet, chip 0: \d+ of 40 sync reads start a new clock epoch"):
        clocks_of_table(t.set_column(2, "device_ns", pa.array(d)), where="x.parquet")
    d = t.column("device_ns").to_numpy().copy()
    d[20:40] -= 10**9  # one real reset: kept
    assert len(clocks_of_table(t.set_column(2, "device_ns", pa.array(d)))[0].resets) == 1


def test_timeline_of_a_chip_without_sync_reads(small, tmp_path, capsys):
    t = pq.read_table(small / "sync.parquet")
    run = _variant(small, tmp_path, t.filter(pa.compute.not_equal(t.column("chip"), 3)))
    out = tmp_path / "tl.json"
    assert main(["timeline", str(run), "--out", str(out)]) == 1
    assert "no sync reads for chip(s) 3" in capsys.readouterr().err.replace("\n", "") and not out.exists()


def test_a_stamp_outside_the_nanosecond_range_names_its_row():
    """1e300 ns is no nanosecond stamp (int64 ns ends at 9.2e18, 292 years): it gave NaN bounds silently."""
    h0 = np.arange(10) * 1e7
    h0[6] = 1e300
    with pytest.raises(ValueError, match=r"row 6, column host_before_ns: is outside the range of a nanosecond"):
        make_reads(h0, np.arange(10) * 1e7 + 1000, np.arange(10) * 1e7 + 2000)


def test_a_processing_time_beside_two_device_stamps_is_not_ignored():
    t = sync()
    two = t.append_column("device_before_ns", t.column("device_ns")).append_column(
        "device_after_ns", t.column("device_ns")
    )
    with pytest.raises(
        ValueError, match=r"x.parquet: .*--device-processing-ns \(3000 ns\) applies to one device stamp"
    ):
        clocks_of_table(two, processing_ns=3000.0, where="x.parquet")
    assert clocks_of_table(two, where="x.parquet")[1].segments[0].offset_ns == pytest.approx(5e6)


def test_a_reset_the_sync_reads_do_not_cover_is_never_guessed():
    """Counter samples every 50 ms from 0; the device clock restarts from 0 at host 450 ms (device = 1e12 + h
    before, h − 450e6 after) and the sync reads (every 100 ms, legs 1000/1000) cover only one side of it.
    One epoch then maps the other side's samples hundreds of ms (or 1000 s) away with a 1000.5 ns bound:
    those samples, past a backwards step of the device time that no detected reset explains, are
    unmappable ('unseen_reset')."""
    reset = 450e6

    def dev(h):
        return np.where(h < reset, 1e12 + h, h - reset)

    true = np.arange(20) * 50e6
    for h0, mapped in ((np.arange(5, 10) * 1e8, np.arange(9, 20)), (np.arange(0, 5) * 1e8, np.arange(0, 9))):
        clk = fit_chip(make_reads(h0, dev(h0 + 1000), h0 + 2000))
        host, bound, why = clk.map(dev(true), ordered=True)
        assert list(np.flatnonzero(why == 0)) == list(mapped)
        assert set(why[why != 0]) == {5} and np.isnan(host[why != 0]).all()
        assert np.abs(host[mapped] - true[mapped]).max() < 1e-6
    # rows a little out of time order, no reset: every run meets the reads, all stay mapped
    h0 = np.arange(0, 10) * 1e8
    clk = fit_chip(make_reads(h0, h0 + 1000 + 5e6, h0 + 2000))
    shuffled = true[[0, 2, 1, 3, 5, 4, 6, 7, 9, 8, 10, 11, 12, 13, 14, 15, 16, 17, 19, 18]]
    host, bound, why = clk.map(shuffled + 5e6, ordered=True)
    assert not why.any() and np.abs(host - shuffled).max() < 1e-6


def test_chips_not_numbered_from_0_without_gaps(small, tmp_path, capsys):
    """Chip 3 absent from the sync reads, the counters and the trace: the cross-chip analysis indexes
    chips 0 … N−1 (it raised IndexError); the chips present are aligned, the analysis skipped with a note
    (tests/test_align_missing_chip.py)."""
    run = tmp_path / "run"
    shutil.copytree(small, run)
    for f in ("sync", "counters", "trace"):
        t = pq.read_table(run / f"{f}.parquet")
        pq.write_table(t.filter(pa.compute.not_equal(t.column("chip"), 3)), run / f"{f}.parquet")
    rc, doc = _align(run, capsys)
    assert rc == 0 and [r["chip"] for r in doc["alignment"]["chips"]] == [0, 1, 2, 4, 5, 6, 7]
    assert "numbered 0, 1, 2, 4, 5, 6, 7" in doc["skipped"] and "numbered 0 .. 6, and chip(s) 3" in doc["skipped"]


@pytest.mark.parametrize("name, column", [("counters", "chip"), ("trace", "clock"), ("trace", "chip")])
def test_a_run_file_without_a_column_align_reads(small, tmp_path, capsys, name, column):
    run = tmp_path / "run"
    shutil.copytree(small, run)
    t = pq.read_table(run / f"{name}.parquet")
    pq.write_table(t.drop([column]).replace_schema_metadata(t.schema.metadata), run / f"{name}.parquet")
    rc, doc = _align(run, capsys)
    assert rc == 1 and doc["error"].startswith(f"{run / f'{name}.parquet'}: no column {column}")


def test_timestamp_typed_stamps_are_read_as_nanoseconds():
    """pandas writes datetime64 columns as Parquet timestamps: read as ns since the epoch (µs resolution
    too), the same fit as the integer columns."""
    t = sync()
    ref = clocks_of_table(t)[1].segments[0].offset_ns
    for unit in ("ns", "us"):
        u = t
        for k in ("host_before_ns", "host_after_ns"):
            v = u.column(k).cast(pa.timestamp("ns")).cast(pa.timestamp(unit), safe=False)
            u = u.set_column(u.column_names.index(k), k, v)
        off = clocks_of_table(u)[1].segments[0].offset_ns
        assert off == pytest.approx(ref, abs=1000 if unit == "us" else 1e-6)


def test_alignment_json_is_strict_json_when_stamps_are_unmappable(small, tmp_path, capsys):
    """A first sync read of chip 0 1000 s off (a reset after the very first read): the stamps before the
    second read are unmappable, the cross-chip waits over them NaN; alignment.json and --json hold null
    there (they held NaN, which is not JSON)."""
    t = pq.read_table(small / "sync.parquet")
    d = t.column("device_ns").to_numpy().copy()
    d[0] += 10**12  # row 0 is chip 0's first read
    run = _variant(small, tmp_path, t.set_column(2, "device_ns", pa.array(d)))
    assert main(["align", str(run), "--json"]) == 0
    out = capsys.readouterr().out

    def no(c):
        raise ValueError(f"not JSON: {c}")

    doc = json.loads(out, parse_constant=no)
    json.loads((run / "alignment.json").read_text(), parse_constant=no)
    assert doc["alignment"]["chips"][0]["resets"][0]["kind"] == "backwards" and doc["alignment"]["unmappable"] > 0
    assert main(["align", str(run)]) == 0  # the text report prints the NaN waits (a None there raised TypeError)
