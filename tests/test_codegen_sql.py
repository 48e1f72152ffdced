"""The SQL target: DuckDB runs the generated query over an emulator dump and matches the generated
Python evaluator; the CLI writes it; the Spark dialect is one call away; catalog names are quoted."""

import shlex

import numpy as np
import pytest
import sqlglot

from perfonto import emulator
from perfonto.codegen.python_evaluator import generate, load
from perfonto.codegen.sql import generate_sql, parquet_source
from perfonto.metrics.windows import prepare, read_counters
from perfonto.cli import main

duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def dump(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("emu")
    return emulator.run(sohu, model="llama3-70b", chips=2, duration_s=0.2, sample_period_s=2e-3, seed=5, out_dir=out)


def _as_arrays(table, graph, W, C):
    out = {}
    for name, m in graph.metrics.items():
        col = table.column(name)
        if m.axes:
            col = col.combine_chunks().flatten()
        flat = np.array([np.nan if v is None else v for v in col.to_pylist()], float)
        out[name] = flat.reshape((C, W) + tuple(s for _, s in m.axes)).swapaxes(0, 1)
    return out


@pytest.mark.parametrize("period", [None, 2_000_000])
def test_duckdb_matches_the_python_evaluator(dump, sohu, library, period):
    sql = generate_sql(library, parquet_source(str(dump.counters_path)), sample_period_ns=period, host=False)
    table = duckdb.sql(sql).arrow()
    table = table.read_all() if hasattr(table, "read_all") else table
    w = prepare(read_counters(dump.counters_path, sohu), sohu)
    W, C = w.interval.shape
    assert table.num_rows == W * C
    got = _as_arrays(table, library, W, C)
    want = load(generate(library)).evaluate(w.values, w.interval, w.chips)
    for name in library.metrics:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=0, equal_nan=True, err_msg=name)
    assert sum(np.isfinite(want[n]).any() for n in want) >= len(want) - 2  # real values, not all null
    np.testing.assert_allclose(np.array(table.column("interval_s").to_pylist()).reshape(C, W).T, w.interval, rtol=1e-12)


def test_cli_writes_duckdb_and_spark_sql(tmp_path, dump, sohu, capsys):
    assert (
        main(
            [
                "codegen",
                "--target",
                "sql",
                "--out",
                str(tmp_path),
                "--counters",
                str(dump.counters_path),
                "--sample-period",
                "2ms",
            ]
        )
        == 0
    )
    text = (tmp_path / "sohu.sql").read_text()
    assert text.startswith("-- perfonto generated metrics query (duckdb); generation sohu")
    assert "READ_PARQUET(" in text.upper() and "LAG(" in text and "OVER (" in text
    n = duckdb.sql(text.rstrip().rstrip(";")).aggregate("count(*)").fetchall()[0][0]
    assert n == prepare(read_counters(dump.counters_path, sohu), sohu).interval.size
    assert (
        main(["codegen", "--target", "sql", "--dialect", "spark", "--generation", "caelius", "--out", str(tmp_path)])
        == 0
    )
    spark = (tmp_path / "caelius.spark.sql").read_text()
    body = spark.split("\n", 2)[2]
    sqlglot.parse_one(body.rstrip().rstrip(";"), read="spark")  # valid Spark SQL
    assert "HUGEINT" not in spark and "INT128" not in spark and "READ_PARQUET" not in spark.upper()
    query = "\n".join(ln for ln in spark.splitlines() if not ln.startswith("--"))
    assert "`hbm.read_bandwidth`" in query and "DECIMAL" not in query  # 64-bit integers with explicit wraps
    assert "read as LONG" in spark.split("WITH", 1)[0]  # the header says how to read the registers
    assert "EXPLODE(SEQUENCE(" not in spark or "_u(" not in spark


def test_names_are_quoted_identifiers(sohu):
    from helpers import compile_src

    g = compile_src(
        sohu, 'metric select.from [GB/s] = sum(hbm.read_bytes) / interval\n  "a metric named like SQL keywords"\n'
    )
    sql = generate_sql(g, "counters")
    assert "PARTITION BY host, chip" in sql  # a chip is (host, chip)
    assert 'AS "select.from"' in sql and '"hbm.read_bytes"[1]' in sql
    parsed = sqlglot.parse_one(sql.split("\n", 2)[2].rstrip().rstrip(";"), read="duckdb")
    assert "select.from" in [e.alias_or_name for e in parsed.expressions]


def test_the_rollup_header_says_what_the_query_leaves_out(library):
    """A `rollup max`/`min` metric is not in the fleet rollup query (its node value is an extreme, not a
    ratio of totals): the header names it, and says when there is no rack or pod level; the counts and
    the regenerate line follow the query (a new user's trial found the metric silently missing)."""
    from perfonto.codegen.sql import SqlSource, generated_text
    from perfonto.codegen.sql_rollup import build_rollup_query, generate_rollup_sql

    extremes = [m for m, c in library.metrics.items() if c.rollup in ("max", "min")]
    assert extremes == ["power.temperature_peak"]
    text = generate_rollup_sql(library, SqlSource(dialect="spark"))
    head = [ln for ln in text.splitlines() if ln.startswith("--")]
    assert f"{len(library.metrics) - 1} metrics." in head[0] and "--rollup --dialect spark`" in head[1]
    assert head[2].startswith("-- Not here: power.temperature_peak (rollup max/min")
    assert head[3].startswith("-- No --topology-table")
    assert head[4].startswith("-- Gaps: a window null from a missing sample") and len(head) == 5
    with_topo = generate_rollup_sql(library, SqlSource(), topology="topo")
    assert "--rollup --topology-table topo`" in with_topo and "No --topology-table" not in with_topo
    q = build_rollup_query(library, SqlSource())
    odd = generated_text(library, "q", "", q, 1, "duckdb", False, ("fine", "two\nlines; DROP TABLE x"))
    assert "-- fine\n" in odd and "DROP TABLE" not in odd  # a note is one printable line or nothing


def test_user_table_names_are_names_never_sql(library):
    """``--counters`` (Spark) and ``--topology-table`` are table names: split on dots, each part quoted
    unless plain ASCII, so Spark gets ``tôpo`` back-quoted and no text of a name is read as SQL (a
    bad-input breaker: ``it's`` was an internal error, ``x --y`` turned the rest into a comment)."""
    from perfonto.codegen.sql import SqlSource, table_name
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    assert table_name("counters").sql("spark") == "`counters`" and table_name("order").sql("spark") == "`order`"
    assert table_name("db.counters").sql("spark") == "`db`.`counters`"
    assert table_name("tôpo", "t").sql("spark") == "`tôpo` AS t"
    assert table_name("it's").sql("spark") == "`it's`" and table_name("x --y").sql("duckdb") == '"x --y"'
    for bad in ("", "a..b", "a.b.c.d", "two\nlines"):
        with pytest.raises(ValueError, match="is not a table name"):
            table_name(bad)
    text = generate_rollup_sql(library, SqlSource("x --y", dialect="spark"), topology="my topo", pretty=False)
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("--"))
    assert "FROM `x --y`" in body and "FROM `my topo`" in body and "LEFT JOIN topo AS t1" in body
    assert "--topology-table 'my topo'`" in text.splitlines()[1]  # the regenerate line, shell-quoted


def test_the_regenerate_line_carries_every_option_that_shaped_the_query(tmp_path):
    """`perfonto codegen --target sql`'s header gives the command that makes the same query: the dump,
    the sampling period, the dialect, the rollup and its topology (a breaker found --counters and
    --sample-period left out); a value with a line break never reaches the comment."""
    from perfonto.cli import main

    out = tmp_path / "q"
    argv = ["codegen", "--target", "sql", "--dialect", "spark", "--counters", "cnt", "--sample-period", "1ms"]
    assert main([*argv, "--rollup", "--topology-table", "my topo", "--out", str(out)]) == 0
    line = (out / "sohu.rollup.spark.sql").read_text().splitlines()[1]
    want = "--rollup --dialect spark --counters cnt --sample-period 1000000ns --topology-table 'my topo'`"
    assert line.endswith(want + ".")
    before = (out / "sohu.rollup.spark.sql").read_text()
    (out / "sohu.rollup.spark.sql").unlink()
    words = shlex.split(line.split("`")[1])  # the line's whole command, --out included, gives the same query
    assert words[:2] == ["perfonto", "codegen"] and f"--out {shlex.quote(str(out))}" in line
    assert main(words[1:]) == 0 and (out / "sohu.rollup.spark.sql").read_text() == before


def test_a_counters_file_that_is_not_parquet_is_named(tmp_path, capsys):
    bad = tmp_path / "notpq.csv"
    bad.write_text("a,b\n")
    assert main(["codegen", "--target", "sql", "--counters", str(bad), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err
    assert f"{bad}: not a Parquet file" in " ".join(err.split()) and "internal error" not in err


def test_the_default_query_reads_a_dump_with_or_without_a_host(tmp_path, dump, sohu, library, capsys, monkeypatch):
    """`codegen --target sql` without --counters reads counters.parquet: it referenced `host`, so on a
    `perfonto run` dump (no host column) DuckDB said 'Referenced column "host" not found' (a data
    engineer's trial). It now takes the table's host if it has one, else '': both dumps give the same
    values, the second under its host's name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert main(["codegen", "--target", "sql", "--out", str(tmp_path / "g")]) == 0
    capsys.readouterr()
    sql = (tmp_path / "g" / "sohu.sql").read_text()
    with_host = tmp_path / "h"
    with_host.mkdir()
    t = pq.read_table(dump.counters_path)
    pq.write_table(t.append_column("host", pa.array(["node-7"] * t.num_rows)), with_host / "counters.parquet")

    def rows(query):
        t = duckdb.sql(query).arrow()
        t = t.read_all() if hasattr(t, "read_all") else t
        return t.sort_by([("chip", "ascending"), ("window", "ascending")])

    monkeypatch.chdir(dump.counters_path.parent)
    a = rows(sql)
    monkeypatch.chdir(with_host)
    b = rows(sql)
    assert set(a.column("host").to_pylist()) == {""} and set(b.column("host").to_pylist()) == {"node-7"}
    assert a.num_rows == b.num_rows > 0
    assert a.drop(["host"]).equals(b.drop(["host"]))
    want = rows(generate_sql(library, parquet_source(str(dump.counters_path)), host=False))
    assert want.equals(a)
