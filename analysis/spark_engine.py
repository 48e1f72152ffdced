"""Run the generated Spark SQL on Spark (local mode, or a cluster's master URL) over a counter dump.

``counters_frame`` reads a Parquet dump — a file or a folder tree, Hive partitions (``host=…``) as
columns — with every register column declared ``LONG``: Spark then hands the query the register's
64 bits as a two's-complement ``BIGINT`` (what ``codegen.sql_spark`` expects) instead of the
``DECIMAL(20, 0)`` it infers for ``uint64``. The row-based Parquet reader is used
(``spark.sql.parquet.enableVectorizedReader=false``): the vectorized one refuses a dictionary-encoded
``uint64`` column read as ``LONG``. ``window_values`` runs the query text exactly as
``codegen.sql.generate_sql(dialect="spark")`` prints it and writes one row per (host, chip, window)
as Parquet partitioned by host. pyspark is imported only here.
"""
from __future__ import annotations

from pathlib import Path

from perfonto.codegen.sql import generate_sql
from perfonto.metrics.graph import MetricGraph
from perfonto.capture.dump_io import DumpError


def session(master: str = "local[2]", app: str = "perfonto"):
    """A SparkSession for the generated SQL (UI off, few shuffle partitions in local mode)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - pyspark comes with the test extras
        raise DumpError("--engine spark needs pyspark: pip install pyspark (Java 17 must be installed)") from None
    b = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
         .config("spark.sql.parquet.enableVectorizedReader", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local"):
        b = b.config("spark.sql.shuffle.partitions", "8").config("spark.driver.memory", "2g")
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def counters_frame(spark, source: str | Path, gen):
    """The dump as a DataFrame with registers as ``LONG`` (module docstring)."""
    from pyspark.sql.types import ArrayType, LongType, StructField, StructType

    path = str(source)
    df = spark.read.option("recursiveFileLookup", "false").parquet(path)
    fields = []
    for f in df.schema.fields:
        if f.name in gen.signals:
            t = ArrayType(LongType()) if isinstance(f.dataType, ArrayType) else LongType()
            fields.append(StructField(f.name, t, True))
        else:
            fields.append(f)
    return spark.read.schema(StructType(fields)).parquet(path)


def window_values(spark, graph: MetricGraph, source: str | Path, out: str | Path | None, *, sample_period_ns: int | None,
                  host: bool = True, view: str = "counters"):
    """Run the generated Spark SQL over ``source``; write the result to ``out`` (partitioned by host)
    when given, and return the DataFrame."""
    counters_frame(spark, source, graph.generation).createOrReplaceTempView(view)
    text = generate_sql(graph, view, sample_period_ns=sample_period_ns, dialect="spark", pretty=False, order=False, host=host)
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--")).rstrip().rstrip(";")
    df = spark.sql(body)
    if out is not None:
        df.write.mode("overwrite").partitionBy("host").parquet(str(out))
    return df
