"""``perfonto codegen --target sql --counters DUMP`` writes a query that runs on that dump: one with only some
of the signals, and one in the flat layout (a column per instance, ``name[i]``), both of which the collector
format allows and ``perfonto analyze`` reads. The query named every signal as a list column, and DuckDB
refused it ("Referenced column "mxu.busy_cycles" not found"); now it reads the columns the dump has, leaves
out the metrics the dump cannot feed (named in its header, as analyze lists them unavailable) and gives the
metric table analyze gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from helpers import MEM8_YAML
from perfonto.cli import main

duckdb = pytest.importorskip("duckdb")

KEPT = ("mxu", "hbm", "seq")  # the blocks the partial dump keeps


@pytest.fixture(scope="module")
def run(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("emu")
    return emulator.run(sohu, model="llama3-70b", chips=2, duration_s=0.1, sample_period_s=2e-3, seed=3, out_dir=out)


def _flat_partial(table: pa.Table) -> pa.Table:
    """``table`` with the signals of ``KEPT`` blocks only, every list column split into ``name[i]`` columns."""
    cols: dict[str, pa.Array] = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if "." in name and name.split(".")[0] not in KEPT:
            continue
        if pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type):
            n = len(col[0].as_py())
            values = np.asarray(col.flatten()).reshape(len(col), n)
            for k in range(n):
                cols[f"{name}[{k}]"] = pa.array(values[:, k])
        else:
            cols[name] = col
    return pa.Table.from_pydict(cols, metadata=table.schema.metadata)


def test_the_query_fits_a_flat_partial_dump_and_equals_analyze(run, tmp_path, capsys):
    dump = tmp_path / "flat.parquet"
    t = _flat_partial(pq.read_table(run.counters_path))
    assert any(c.endswith("[1]") for c in t.column_names) and "c2c.tx_bytes" not in str(t.column_names)
    pq.write_table(t, dump)
    assert (
        main(
            [
                "codegen",
                "--target",
                "sql",
                "--counters",
                str(dump),
                "--sample-period",
                "2ms",
                "--out",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    sql = (tmp_path / "g" / "sohu.sql").read_text()
    header = [line for line in sql.splitlines() if line.startswith("--")]
    assert any("Not here:" in h and "c2c.bandwidth_utilization" in h and "c2c.tx_bytes" in h for h in header)
    assert any("one column per instance" in h and "hbm.read_bytes" in h for h in header)
    got = duckdb.sql(sql).df().sort_values(["chip", "window"]).reset_index(drop=True)

    assert main(["analyze", str(dump), "--out", str(tmp_path / "a"), "--json"]) == 0
    capsys.readouterr()
    table = tmp_path / "a" / "metrics.parquet"
    want = (
        pq.read_table(table if table.exists() else tmp_path / "a" / "metrics")
        .to_pandas()
        .sort_values(["chip", "window"])
        .reset_index(drop=True)
    )
    metrics = [c for c in got.columns if c not in ("window", "host", "chip", "start_ns", "interval_s")]
    assert "mfu" in metrics and "hbm.read_bandwidth" in metrics and "c2c.bandwidth_utilization" not in metrics
    assert len(got) == len(want) > 40
    compared = 0
    for m in metrics:
        assert m in want.columns, m
        a = (
            np.array([np.nan if v is None else v for v in got[m]], dtype=float)
            if got[m].dtype == object
            else got[m].to_numpy(float)
        )
        if want[m].dtype == object:  # per-instance metrics: lists
            continue
        np.testing.assert_allclose(a, want[m].to_numpy(float), rtol=1e-9, equal_nan=True, err_msg=m)
        compared += np.isfinite(a).any()
    assert compared > 10


def test_a_dump_that_feeds_no_metric_is_refused_naming_it(tmp_path, capsys):
    dump = tmp_path / "keys.parquet"
    pq.write_table(pa.table({"chip": [0, 0], "timestamp_ns": [0, 1_000_000], "unknown.x": [1, 2]}), dump)
    assert main(["codegen", "--target", "sql", "--counters", str(dump), "--out", str(tmp_path / "g")]) == 1
    err = capsys.readouterr().err
    assert f"{dump}: the dump feeds none of the metrics" in err and "generation `sohu`" in err
    assert not (tmp_path / "g").exists()


def test_a_whole_dump_gets_the_unfitted_query(run, tmp_path, capsys):
    """A dump with every signal as list columns: the query is the one written without a dump (no notes)."""
    assert main(["codegen", "--target", "sql", "--counters", str(run.counters_path), "--out", str(tmp_path / "g")]) == 0
    sql = (tmp_path / "g" / "sohu.sql").read_text()
    assert "Not here" not in sql and "one column per instance" not in sql


def test_a_glob_over_a_hive_tree_keeps_its_hosts(tmp_path, sohu, capsys, monkeypatch):
    """``--counters 'fleet/counters/*/*.parquet'``: the query read the glob without its ``host=`` partitions,
    so the hosts' chip 0 became one chip (1,502 windows per chip instead of 500, windows numbered -1, 4,008
    of 0 s); it now reads them as the folder given whole does, and gives the same table."""
    from perfonto.emulator.fleet import FleetSpec, generate_fleet

    generate_fleet(sohu, FleetSpec(2, 2), tmp_path / "fleet", duration_s=0.1, sample_period_s=2e-3, warmup_steps=50)
    monkeypatch.chdir(tmp_path)  # a relative glob, as a user types it
    tables = []
    for i, counters in enumerate(("fleet/counters/*/*.parquet", "fleet/counters")):
        args = ["codegen", "--target", "sql", "--counters", counters, "--sample-period", "2ms", "--out", f"g{i}"]
        assert main(args) == 0
        tables.append(duckdb.sql((tmp_path / f"g{i}" / "sohu.sql").read_text()).df())
    capsys.readouterr()
    glob_t, folder_t = tables
    sizes = glob_t.groupby(["host", "chip"]).size().to_dict()
    assert set(sizes) == {("h000", 0), ("h000", 1), ("h001", 0), ("h001", 1)} and len(set(sizes.values())) == 1
    assert (glob_t.window >= 0).all() and (glob_t.interval_s > 0).all()
    key = ["host", "chip", "window"]
    a, b = glob_t.sort_values(key).reset_index(drop=True), folder_t.sort_values(key).reset_index(drop=True)
    assert list(a.columns) == list(b.columns)
    np.testing.assert_allclose(a["mfu"].to_numpy(float), b["mfu"].to_numpy(float), rtol=1e-12, equal_nan=True)


def test_spark_counters_is_a_table_name_not_a_path(run, tmp_path, capsys):
    """``--dialect spark --counters run/counters.parquet`` became the table `run/counters`.`parquet` without a
    word; a path is now refused, saying how to make the view the query reads (registers as LONG)."""
    args = ["codegen", "--target", "sql", "--dialect", "spark", "--counters", str(run.counters_path)]
    assert main([*args, "--out", str(tmp_path / "g")]) == 1
    err = capsys.readouterr().err
    assert "takes the name of a table or view, not a path" in err and "counters_frame(spark" in err
    assert not (tmp_path / "g").exists()
    assert (
        main(
            [
                "codegen",
                "--target",
                "sql",
                "--dialect",
                "spark",
                "--counters",
                "lake.counters",
                "--out",
                str(tmp_path / "h"),
            ]
        )
        == 0
    )
    assert "FROM `lake`.`counters`" in (tmp_path / "h" / "sohu.spark.sql").read_text()


def test_spark_default_table_in_a_folder_holding_counters(tmp_path, capsys, monkeypatch):
    """The default table `counters` is no path, whatever the working folder holds: the query was refused in
    any folder with a `counters/` folder (a fleet's layout), its advice to give the default it had."""
    (tmp_path / "counters").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["codegen", "--target", "sql", "--dialect", "spark", "--out", "g"]) == 0
    assert main(["codegen", "--target", "sql", "--dialect", "spark", "--counters", "counters", "--out", "h"]) == 0
    capsys.readouterr()


def test_one_host_folder_keeps_its_host(tmp_path, sohu, capsys):
    """A fleet's `host=h001` folder (or a file in it) given alone: analyze names its rows' host h001, and the
    query named it ''."""
    from perfonto.emulator.fleet import FleetSpec, generate_fleet

    generate_fleet(sohu, FleetSpec(2, 2), tmp_path / "fleet", duration_s=0.05, sample_period_s=2e-3, warmup_steps=50)
    folder = tmp_path / "fleet" / "counters" / "host=h001"
    for i, counters in enumerate((folder, next(folder.glob("*.parquet")))):
        args = [
            "codegen",
            "--target",
            "sql",
            "--counters",
            str(counters),
            "--sample-period",
            "2ms",
            "--out",
            str(tmp_path / f"g{i}"),
        ]
        assert main(args) == 0
        got = duckdb.sql((tmp_path / f"g{i}" / "sohu.sql").read_text()).df()
        assert set(got.host) == {"h001"} and set(got.chip) == {0, 1}, counters
    capsys.readouterr()


SLOT_SKU = """\
generation: sku
description: 4 of 8 channels
extends: base
blocks:
  mem:
    slots: {channel: [0, 2, 4, 6]}
"""


@pytest.mark.parametrize("form", ["every slot", "present slots"])
def test_a_slotted_signal_in_the_flat_layout_reads_its_slots(tmp_path, capsys, form):
    """A binned part (channels 0, 2, 4, 6 of 8) in the flat layout: `name[s]` is slot s, in a dump of every
    slot or of the present ones. The query read columns 0-3 (1, 2, 3, 4 MB/s where analyze read 1, 3, 5,
    7), or refused the present-slots dump as feeding no metric."""
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "base.yaml").write_text(MEM8_YAML)
    (cat / "sku.yaml").write_text(SLOT_SKU)
    (cat / "m.metrics").write_text(
        'metric mem.bw [B/s] = mem.read_bytes / interval\n  "Bytes per second per channel."\n'
    )
    n = 20
    cols = {"chip": np.zeros(n, np.int32), "timestamp_ns": np.arange(n, dtype=np.int64) * 1_000_000}
    for c in range(8) if form == "every slot" else (0, 2, 4, 6):  # channel c reads (c + 1) kB per ms
        cols[f"mem.read_bytes[{c}]"] = (np.arange(n) * (c + 1) * 1000).astype(np.uint32)
    dump = tmp_path / "d.parquet"
    pq.write_table(pa.table(cols), dump)
    common = ["--catalog", str(cat), "--generation", "sku", "--no-library"]
    args = [
        "codegen",
        "--target",
        "sql",
        "--counters",
        str(dump),
        "--sample-period",
        "1ms",
        "--out",
        str(tmp_path / "g"),
    ]
    assert main([*args, *common]) == 0
    got = duckdb.sql((tmp_path / "g" / "sku.sql").read_text()).df()
    assert main(["analyze", str(dump), "--out", str(tmp_path / "a"), *common]) == 0
    capsys.readouterr()
    want = pq.read_table(tmp_path / "a" / "metrics.parquet").to_pandas()
    by_hand = [1e6, 3e6, 5e6, 7e6]  # slots 0, 2, 4, 6: (s + 1) kB per ms
    assert [list(v) for v in want["mem.bw"]] == [by_hand] * (n - 1)
    assert [list(v) for v in got.sort_values("window")["mem.bw"]] == [by_hand] * (n - 1)
