"""Spark local mode runs the generated Spark SQL unchanged (the export target; ``--engine spark`` runs
the kernel itself: tests/test_spark_kernel.py) and gives the window values of DuckDB and of the
embedded engine (the generated Python evaluator over pieces) on a Hive-partitioned fleet dump
whose hosts each number their chips from 0, with wraps, resets, sentinels, a null register and a
dropped sample (issue 14's acceptance: max relative difference ≤ 1e-9, nulls in the same places)."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from fleet_data import PERIOD_NS, dirty_fleet
from perfonto.analysis.engine import evaluate_capture
from perfonto.codegen.python_evaluator import generate, load
from perfonto.codegen.sql import SqlSource, dump_source, generate_sql
from perfonto.capture.dump_scan import plan_dump

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyspark")


def _frame(t, graph):
    df = t.to_pandas().sort_values(["host", "chip", "window"]).reset_index(drop=True)
    out = {}
    for name, m in graph.metrics.items():
        col = df[name]
        if m.axes:
            k = int(np.prod([s for _, s in m.axes]))
            out[name] = np.array(
                [[np.nan if x is None else x for x in v] if v is not None else [np.nan] * k for v in col], float
            )
        else:
            out[name] = np.array([np.nan if v is None else v for v in col], float)
    return df[["host", "chip", "window"]], out


def _same(got, want, what):
    for name in want:
        a, b = got[name], want[name]
        assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: nulls of {name} differ"
        m = ~np.isnan(b)
        rel = np.abs(a[m] - b[m]) / np.maximum(np.abs(b[m]), 1e-300)
        assert rel.size == 0 or rel.max() <= 1e-9, f"{what}: {name} off by {rel.max():.3g}"


@pytest.mark.slow
def test_spark_equals_duckdb_and_the_embedded_engine(tmp_path, library):
    src = dirty_fleet(tmp_path, library.generation)
    source, host = dump_source(str(src))
    assert host  # host=… folders
    duck = duckdb.sql(generate_sql(library, source, sample_period_ns=PERIOD_NS)).arrow()
    duck = duck.read_all() if hasattr(duck, "read_all") else duck
    from perfonto.analysis.spark_engine import session, window_values

    spark = session("local[2]", "perfonto-sql-test")  # the generated Spark SQL, the export target
    try:
        window_values(spark, library, src, tmp_path / "run" / "metrics", sample_period_ns=PERIOD_NS)
    finally:
        spark.stop()
    keys_d, want = _frame(duck, library)
    keys_s, got = _frame(pq.read_table(tmp_path / "run" / "metrics"), library)
    assert len(keys_d) == 3 * 2 * 150 and keys_d.drop_duplicates().shape[0] == len(
        keys_d
    )  # one row per (host, chip, window)
    assert (keys_s.values == keys_d.values).all()
    assert all(
        np.isnan(want[n]).any() for n in ("mxu.utilization", "power.temperature_mean", "dma.bandwidth")
    )  # the rules fired
    _same(got, want, "Spark vs DuckDB")
    mod = load(generate(library))
    evaluate_capture(
        library, mod, plan_dump(src, library.generation, sample_period_ns=PERIOD_NS), tmp_path / "py", chunk_rows=64
    )
    keys_p, py = _frame(pq.read_table(tmp_path / "py"), library)
    assert (keys_p.values == keys_d.values).all()
    _same(py, want, "embedded engine vs DuckDB")


@pytest.mark.slow
def test_rollup_sql_on_spark_equals_duckdb(tmp_path, library):
    """The generated fleet rollup query, Spark dialect, in a local SparkSession gives DuckDB's rollups
    at every level (chip, host, fleet) on the same dirty fleet — the group rule included."""
    from perfonto.analysis.spark_engine import counters_frame, session
    from perfonto.codegen.sql_rollup import generate_rollup_sql

    src = dirty_fleet(tmp_path, library.generation)
    source, _ = dump_source(str(src))
    duck = duckdb.sql(generate_rollup_sql(library, SqlSource(source, PERIOD_NS))).df()
    spark = session("local[1]", "perfonto-rollup-test")
    try:
        counters_frame(spark, src, library.generation).createOrReplaceTempView("counters")
        text = generate_rollup_sql(library, SqlSource("counters", PERIOD_NS, "spark"), pretty=False)
        body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("--")).rstrip().rstrip(";")
        sp = spark.sql(body).toPandas()
    finally:
        spark.stop()
    key = ["level", "node"]
    duck, sp = duck.sort_values(key).reset_index(drop=True), sp.sort_values(key).reset_index(drop=True)
    assert list(duck.level.value_counts().sort_index().items()) == [("chip", 6), ("fleet", 1), ("host", 3)]
    assert (duck[key].values == sp[key].values).all() and (duck.chips.values == sp.chips.values).all()
    scalar = [n for n, m in library.metrics.items() if not m.axes and n in duck.columns]
    assert "step_time" in scalar and len(scalar) > 50
    want = {n: np.array([np.nan if v is None else v for v in duck[n]], float) for n in scalar}
    got = {n: np.array([np.nan if v is None else v for v in sp[n]], float) for n in scalar}
    _same(got, want, "rollups, Spark vs DuckDB")
