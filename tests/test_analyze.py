"""`perfonto analyze` and the collector format (issue: any catalog, any dump): a run folder analysed
equals the run; a foreign collector's dump (long layout, CSV, µs timestamps, two hosts, twelve
signals) equals the reference interpreter on the same data; columns that contradict the ontology are
located DumpErrors."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.metrics import interpreter
from perfonto.metrics.catalog import select_metrics
from perfonto.metrics.levels import evaluate_levels
from perfonto.metrics.windows import DumpError, prepare, read_counters

TWELVE = [
    "mxu.busy_cycles",
    "mxu.flops_fp8",
    "mxu.flops_bf16",
    "hbm.read_bytes",
    "hbm.write_bytes",
    "seq.elapsed_cycles",
    "seq.compute_cycles",
    "seq.memory_cycles",
    "seq.collective_cycles",
    "seq.host_wait_cycles",
    "seq.idle_cycles",
    "power.energy",
]


def _strip(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("timings_s", "outputs")}


@pytest.fixture(scope="module")
def run2(tmp_path_factory):
    out = tmp_path_factory.mktemp("run2") / "run"
    assert main(["run", "--duration", "200ms", "--chips", "2", "--out", str(out), "--json"]) == 0
    return out


def test_run_folder_analysed_equals_the_run(run2, tmp_path, capsys):
    capsys.readouterr()
    ran = json.loads((run2 / "report.json").read_text())
    assert main(["analyze", str(run2), "--out", str(tmp_path / "a"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert _strip(got) == _strip(ran)
    assert pq.read_table(tmp_path / "a" / "metrics.parquet").equals(pq.read_table(run2 / "metrics.parquet"))
    manifest = json.loads((tmp_path / "a" / "perfonto.json").read_text())
    assert manifest["command"][:2] == ["perfonto", "analyze"] and manifest["inputs"]["sync.parquet"].endswith(
        "sync.parquet"
    )


def _foreign_csv(run_dir, path, gen):
    """The run's first 12 signals as a foreign collector would write them: long layout, CSV, µs
    timestamps, chip 0 of host `a` and chip 0 of host `b` (the run's chips 0 and 1)."""
    t = pq.read_table(run_dir / "counters.parquet")
    chip = t.column("chip").to_numpy()
    ts_us = t.column("timestamp_ns").to_numpy() / 1e3
    lines = ["host,chip,timestamp_us,signal,instance,value"]
    for name in TWELVE:
        col = t.column(name)
        vals = np.asarray(col.to_pylist(), dtype=np.uint64).reshape(len(chip), -1)
        for r in range(len(chip)):
            for i in range(vals.shape[1]):
                inst = "" if vals.shape[1] == 1 else str(i)
                lines.append(f"{'ab'[chip[r]]},0,{ts_us[r]:.3f},{name},{inst},{int(vals[r, i])}")
    path.write_text("\n".join(lines) + "\n")
    return t


def test_foreign_collector_dump_equals_the_reference_interpreter(run2, tmp_path, capsys, library):
    gen = library.generation
    t = _foreign_csv(run2, tmp_path / "dump.csv", gen)
    capsys.readouterr()
    assert (
        main(["analyze", str(tmp_path / "dump.csv"), "--sample-period", "1ms", "--out", str(tmp_path / "o"), "--json"])
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert [(c["host"], c["chip"]) for c in doc["per_chip"]] == [("a", 0), ("b", 0)]
    # reference: the emulator's own table, the same twelve signals, through the reference interpreter
    ref_table = t.select(["chip", "timestamp_ns", *TWELVE]).replace_schema_metadata(
        {b"perfonto": json.dumps({"sample_period_ns": 1_000_000}).encode()}
    )
    dump = read_counters(ref_table, gen)
    computable = [n for n, v in doc["metrics"].items() if "unavailable" not in v and n in library.metrics]
    assert len(computable) >= 15, computable
    g = select_metrics(library, computable)
    w = prepare(dump, gen)
    levels = evaluate_levels(g, w, lambda inp, iv, chips: interpreter.evaluate(g, _w(w, inp, iv, chips)))
    for name in computable:
        want = np.asarray(levels.server[name], dtype=np.float64)
        got = np.asarray(doc["metrics"][name]["value"], dtype=np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=name)
    unavailable = {n: v["unavailable"] for n, v in doc["metrics"].items() if "unavailable" in v}
    assert unavailable["c2c.tx_bandwidth"].startswith("not in the dump: c2c.tx_bytes")
    assert "mfu" in unavailable and "pcie.rx_bandwidth" in unavailable
    assert set(doc["unavailable"]) == set(unavailable)


def _w(w, inputs, interval, chips):
    from perfonto.metrics.windows import Windows

    return Windows(interval, inputs, chips, w.level)


def test_metrics_flag_evaluates_only_what_is_asked(run2, tmp_path, capsys):
    capsys.readouterr()
    assert (
        main(
            [
                "analyze",
                str(run2 / "counters.parquet"),
                "--metrics",
                "hbm.bandwidth_utilization",
                "--out",
                str(tmp_path / "m"),
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert "hbm.bandwidth_utilization" in doc["metrics"] and "mfu" not in doc["metrics"]
    assert (
        main(
            [
                "analyze",
                str(run2 / "counters.parquet"),
                "--metrics",
                "hbm.bandwith",
                "--out",
                str(tmp_path / "n"),
                "--json",
            ]
        )
        == 2
    )
    error = json.loads(capsys.readouterr().out)["error"]
    assert "did you mean `hbm.bandwidth" in error and not error.startswith(("'", '"'))  # the message, not a repr


def test_only_an_unknown_metric_is_a_usage_error(run2, tmp_path, capsys, monkeypatch):
    """Exit 2 is for a --metrics name the catalog lacks (``UnknownMetric``, a ``KeyError`` and a
    ``PerfontoError``); a ``KeyError`` from anywhere else in the job is a bug, said as an internal error."""
    import perfonto.job
    from perfonto.metrics.catalog import UnknownMetric
    from perfonto.ontology.errors import PerfontoError

    assert issubclass(UnknownMetric, KeyError) and issubclass(UnknownMetric, PerfontoError)

    def broken(*a, **k):
        raise KeyError("window")

    monkeypatch.setattr(perfonto.job, "analyze_job", broken)
    capsys.readouterr()
    code = main(["analyze", str(run2 / "counters.parquet"), "--out", str(tmp_path / "k"), "--json"])
    assert code == 1
    assert json.loads(capsys.readouterr().out)["error"].startswith("internal error: KeyError")


def _table(gen, n=4, **over):
    cols = {"chip": pa.array(np.zeros(n, np.int32)), "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000)}
    for name in ("mxu.busy_cycles", "hbm.read_bytes"):
        sig = gen.signals[name]
        cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(n * sig.instances, np.uint64)), sig.instances)
    cols.update(over)
    return pa.table(cols)


@pytest.mark.parametrize(
    "over, match",
    [
        (
            {"seq.elapsed_cycles": pa.array(np.arange(4, dtype=np.int32))},
            r"`seq.elapsed_cycles` is signed \(int32\); its sign bit cannot hold a 32-bit register.*uint32",
        ),
        ({"seq.elapsed_cycles": pa.array(np.arange(4, dtype=np.float64))}, r"`seq.elapsed_cycles` has type double"),
        (
            {"seq.elapsed_cycles": pa.array(np.arange(4, dtype=np.uint16))},
            r"uint16, narrower than the counter's 32-bit",
        ),
        (
            {"hbm.read_bytes": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(12, np.uint64)), 3)},
            "has 3 instances, the generation declares 6",
        ),
        ({"hbm.read_bytes": pa.array(np.zeros(4, np.uint64))}, "is a scalar but `hbm` has 6 instances"),
    ],
)
def test_columns_that_contradict_the_ontology(tmp_path, sohu, over, match):
    p = tmp_path / "d.parquet"
    pq.write_table(_table(sohu, **over), p)
    with pytest.raises(DumpError, match=match) as e:
        read_counters(p, sohu)
    assert str(p) in str(e.value)


def test_flat_per_instance_columns_equal_the_list_column(tmp_path, sohu):
    t = _table(sohu)
    vals = np.arange(24, dtype=np.uint64).reshape(4, 6) * 1000
    listed = t.set_column(
        t.column_names.index("hbm.read_bytes"),
        "hbm.read_bytes",
        pa.FixedSizeListArray.from_arrays(pa.array(vals.reshape(-1)), 6),
    )
    flat = t.drop(["hbm.read_bytes"])
    for i in range(6):
        flat = flat.append_column(f"hbm.read_bytes[{i}]", pa.array(vals[:, i]))
    a, b = read_counters(listed, sohu), read_counters(flat, sohu)
    assert np.array_equal(a.raw["hbm.read_bytes"], b.raw["hbm.read_bytes"])
    missing = flat.drop(["hbm.read_bytes[5]"])
    with pytest.raises(DumpError, match=r"declares 6 instances"):
        read_counters(missing, sohu)


def test_unknown_columns_are_noted_with_a_hint(sohu):
    t = _table(sohu).append_column("hbm.read_byte", pa.array(np.zeros(4, np.uint64)))
    dump = read_counters(t, sohu)
    assert any("hbm.read_byte" in n and "did you mean `hbm.read_bytes`" in n for n in dump.notes)


def test_hosts_with_the_same_chip_numbers_stay_apart(sohu):
    t = pa.concat_tables(
        [
            _table(sohu).append_column("host", pa.array(["x"] * 4)),
            _table(sohu).append_column("host", pa.array(["y"] * 4)),
        ]
    )
    dump = read_counters(t, sohu)
    assert dump.keys == [("x", 0), ("y", 0)] and dump.raw["mxu.busy_cycles"].shape[1] == 2


def test_newer_collector_format_is_refused(sohu):
    t = _table(sohu).replace_schema_metadata({b"perfonto": b'{"collector_format": 2}'})
    with pytest.raises(DumpError, match="collector format 2"):
        read_counters(t, sohu)


def test_hive_partitioned_folder(tmp_path, sohu):
    for h in ("x", "y"):
        d = tmp_path / f"host={h}" / "date=2026-12-01"
        d.mkdir(parents=True)
        pq.write_table(_table(sohu), d / "part-0.parquet")
    dump = read_counters(tmp_path, sohu)
    assert dump.keys == [("x", 0), ("y", 0)]
    assert not any("date" in n for n in dump.notes)  # partition columns are not signals, and not noise


def test_chip_partitions_are_chips_and_a_folder_that_contradicts_its_rows_is_refused(tmp_path, run2, sohu, capsys):
    """A data engineer's `date=…/chip=0/part-0.parquet` layout (a chip's rows, no chip column) was refused:
    "column `chip` has type string; it must be an integer column". And a `host=outer` folder holding rows
    of host `inner` was read as `inner` by analyze and as `outer` by the generated SQL, without a word."""
    t = pq.read_table(run2 / "counters.parquet")
    chips = pa.compute.unique(t["chip"]).to_pylist()
    for c in chips:
        d = tmp_path / "split" / "date=2026-12-01" / f"chip={c}"
        d.mkdir(parents=True)
        rows = t.filter(pa.compute.equal(t["chip"], c))
        pq.write_table(rows.drop(["chip"]).replace_schema_metadata(t.schema.metadata), d / "part-0.parquet")
    mfu = {}
    for engine in ("memory", "embedded"):
        for name, src in (("whole", run2 / "counters.parquet"), ("split", tmp_path / "split")):
            out = tmp_path / f"{name}-{engine}"
            assert main(["analyze", str(src), "--engine", engine, "--out", str(out), "--json"]) == 0
            mfu[name, engine] = json.loads(capsys.readouterr().out)["metrics"]["mfu"]["value"]
    assert len(chips) == 2 and len({round(v, 9) for v in mfu.values()}) == 1, mfu
    d = tmp_path / "conflict" / "host=outer"
    d.mkdir(parents=True)
    pq.write_table(t.append_column("host", pa.array(["inner"] * t.num_rows)), d / "part-0.parquet")
    for engine in ("memory", "embedded"):
        assert (
            main(["analyze", str(tmp_path / "conflict"), "--engine", engine, "--out", str(tmp_path / "c"), "--json"])
            == 1
        )
        err = json.loads(capsys.readouterr().out)["error"]
        assert "its folder says host=outer but its `host` column holds inner" in err, err
    # a chip's rows under another chip's folder (a review: only host was checked on analyze's path)
    d = tmp_path / "chipconflict" / "chip=0"
    d.mkdir(parents=True)
    pq.write_table(t.filter(pa.compute.equal(t["chip"], chips[1])), d / "part-0.parquet")
    for engine in ("memory", "embedded"):
        assert main(["analyze", str(d.parent), "--engine", engine, "--out", str(tmp_path / "c"), "--json"]) == 1
        err = json.loads(capsys.readouterr().out)["error"]
        assert f"its folder says chip=0 but its `chip` column holds {chips[1]}" in err, err
    # a folder key that names no rows is not checked against a column of that name (a date column)
    d = tmp_path / "dated" / "date=2026-12-01"
    d.mkdir(parents=True)
    pq.write_table(t.append_column("date", pa.array(["2026-12-02"] * t.num_rows)), d / "part-0.parquet")
    assert read_counters(tmp_path / "dated", sohu).keys


def test_device_files_and_missing_paths(sohu, tmp_path):
    with pytest.raises(DumpError, match="not a regular file"):
        read_counters("/dev/full", sohu)
    with pytest.raises(DumpError, match="no such file or folder"):
        read_counters(tmp_path / "nope.parquet", sohu)
    with pytest.raises(DumpError, match="no file matches"):
        read_counters(str(tmp_path / "*.csv"), sohu)


def test_counters_narrower_than_a_signed_column_are_read_as_spark_writes_them(tmp_path, run2, sohu, capsys):
    """Spark and Hive have no unsigned type: a data engineer's dump with every register that fits in
    int64 cast to it (DuckDB's BIGINT) was refused ("a signed type cannot hold a 32-bit wrap") while the
    generated SQL computed every metric from the same file. Both engines now read it, equal to the uint64
    dump; a 64-bit counter in int64 and a negative value are still refused."""
    from perfonto.ontology import kinds

    t = pq.read_table(run2 / "counters.parquet")
    cast, wide64 = t, []
    for i, f in enumerate(t.schema):
        sig = sohu.signals.get(f.name)
        if sig is None or not (pa.types.is_unsigned_integer(f.type) or pa.types.is_fixed_size_list(f.type)):
            continue
        if sig.width is not None and sig.width < 64:
            typ = pa.list_(pa.int64(), f.type.list_size) if pa.types.is_fixed_size_list(f.type) else pa.int64()
            cast = cast.set_column(i, pa.field(f.name, typ), t.column(i).cast(typ))
        elif f.type == pa.uint64() and sig.width == 64 and kinds.of(sig).counts:
            wide64.append(f.name)
    assert cast.schema != t.schema
    p = tmp_path / "signed.parquet"
    pq.write_table(cast, p)
    for engine in ("memory", "embedded"):
        assert main(["analyze", str(p), "--engine", engine, "--out", str(tmp_path / engine), "--json"]) == 0
        assert (
            main(
                [
                    "analyze",
                    str(run2 / "counters.parquet"),
                    "--engine",
                    engine,
                    "--out",
                    str(tmp_path / f"u{engine}"),
                    "--json",
                ]
            )
            == 0
        )
        capsys.readouterr()
        a = pq.read_table(
            tmp_path / engine / "metrics.parquet" if engine == "memory" else tmp_path / engine / "metrics"
        )
        b = pq.read_table(
            tmp_path / f"u{engine}" / "metrics.parquet" if engine == "memory" else tmp_path / f"u{engine}" / "metrics"
        )
        assert a.num_rows == b.num_rows > 0
        assert a.select(sorted(a.column_names)).equals(b.select(sorted(b.column_names)))
    assert wide64, "a 64-bit counter of the shipped catalog"
    name = wide64[0]
    i = cast.schema.get_field_index(name)
    bad = cast.set_column(i, pa.field(name, pa.int64()), cast.column(i).cast(pa.int64()))
    pq.write_table(bad, tmp_path / "w.parquet")
    with pytest.raises(DumpError, match=rf"`{name}` is signed \(int64\); its sign bit cannot hold a 64-bit register"):
        read_counters(tmp_path / "w.parquet", sohu)
    name = next(n for n in cast.column_names if n in sohu.signals and cast.schema.field(n).type == pa.int64())
    i = cast.schema.get_field_index(name)
    neg = cast.set_column(i, cast.schema.field(i), pa.array(np.full(cast.num_rows, -1, np.int64)))
    pq.write_table(neg, tmp_path / "n.parquet")
    with pytest.raises(DumpError, match=rf"`{name}` holds negative values"):
        read_counters(tmp_path / "n.parquet", sohu)
