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

import re
import sys

from pathlib import Path

from perfonto.codegen.sql import generate_sql
from perfonto.metrics.graph import MetricGraph
from perfonto.capture.dump_io import DumpError


_LOCAL = re.compile(r"^local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?$")
_REMOTE = re.compile(r"^(spark|mesos)://(?P<hosts>[^/\s]+)$|^k8s://\S+$|^yarn$")
CONNECT_TIMEOUT_S = 5.0


def check_master(master: str) -> str:
    """``master`` as a Spark master URL perfonto can use: ``local``, ``local[N]``, ``local[*]``,
    ``local[N,F]``, ``spark://HOST:PORT[,HOST:PORT…]``, ``mesos://…``, ``k8s://…`` or ``yarn``; for
    ``spark://`` at least one master must accept a TCP connection within ``CONNECT_TIMEOUT_S`` (Spark
    itself would retry for minutes).

    Raises:
        DumpError: another form, or no master answering (naming the URL and what to do).
    """
    import socket

    m = _REMOTE.match(master)
    if not _LOCAL.match(master) and not m:
        raise DumpError(
            f"--spark-master {master!r}: not a Spark master URL; write local[N], local[*], spark://HOST:PORT, "
            "k8s://…, mesos://… or yarn"
        )
    if m and master.startswith("spark://"):
        errors = []
        for hp in m.group("hosts").split(","):
            host, _, port = hp.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise DumpError(
                    f"--spark-master {master!r}: `{hp}` is not HOST:PORT (a standalone master listens on 7077)"
                )
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
                    return master
            except OSError as exc:
                errors.append(f"{hp}: {exc.strerror or exc}")
        raise DumpError(
            f"--spark-master {master!r}: no master answers ({'; '.join(errors)}); start the master "
            "(sbin/start-master.sh) or check the URL"
        )
    return master


def session(master: str = "local[2]", app: str = "perfonto", *, kernel: bool = False):
    """A SparkSession for the generated SQL (UI off, few shuffle partitions in local mode); ``kernel``:
    for ``--engine spark`` (``spark_jvm.KERNEL_JAVA_OPTIONS`` for the driver's and the executors' JVMs).

    Raises:
        DumpError: pyspark missing, or ``master`` refused by ``check_master``.
    """
    check_master(master)
    return _start(master, app, kernel)


def _start(master: str, app: str, kernel: bool = False):
    """``session``'s SparkSession on ``master`` (already checked).

    Raises:
        DumpError: pyspark missing, or a JVM that does not start."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:  # pragma: no cover - pyspark comes with the test extras
        raise DumpError("--engine spark needs pyspark: pip install pyspark (Java 17 must be installed)") from None
    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.parquet.enableVectorizedReader", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")  # host=007 stays "007"
        .config("spark.pyspark.python", sys.executable)  # executors run perfonto's interpreter
        .config("spark.pyspark.driver.python", sys.executable)
    )
    if master.startswith("local"):
        b = b.config("spark.sql.shuffle.partitions", "8").config("spark.driver.memory", "2g")
    if kernel:
        from .spark_jvm import KEYS, java_options, spark_defaults

        defaults = spark_defaults()  # read once for both keys
        for key in KEYS:
            value = java_options(key, defaults=defaults)
            if value is not None:
                b = b.config(key, value)
    try:
        s = b.getOrCreate()
    except Exception as exc:  # no Java, a JVM that does not start: one line, not the gateway's traceback
        msg = " ".join(str(exc).split())[:300]
        hint = (
            "a YARN master needs HADOOP_CONF_DIR or YARN_CONF_DIR set to the cluster's configuration"
            if master.startswith("yarn")
            else "is the master URL right (local[N], spark://HOST:PORT, yarn, k8s://…)? Java 17 must be installed "
            "(the Java messages above say which)"
        )
        raise DumpError(f"--engine spark: Spark did not start on {master!r} ({msg}); {hint}") from None
    s.sparkContext.setLogLevel("ERROR")
    return s


class SessionStart:
    """``session(master, kernel=True)`` started on a thread of its own, so that the JVM and, on a cluster, the
    executors start while the driver compiles the catalog, loads the kernel and plans the dump.
    ``check_master`` runs at once (a wrong URL, or no master answering, fails before anything else);
    ``get`` waits for the session and raises what ``session`` raised (``DumpError``); ``stop`` stops it
    (after waiting for its start), and may be called more than once.

    Raises:
        DumpError: ``master`` refused by ``check_master``."""

    def __init__(self, master: str = "local[2]", app: str = "perfonto"):
        import threading

        check_master(master)
        self.master = master
        self._spark = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(app,), name="perfonto-spark-start", daemon=True)
        self._thread.start()

    def _run(self, app: str) -> None:
        try:
            self._spark = _start(self.master, app, True)
        except BaseException as exc:  # noqa: BLE001 - raised again by get(), on the driver's thread
            self._error = exc

    def get(self):
        """The SparkSession, once started.

        Raises:
            DumpError: pyspark missing, or Spark did not start (``session``)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._spark

    def stop(self) -> None:
        """Stop the session (once started; nothing when it did not start)."""
        self._thread.join()
        spark, self._spark = self._spark, None
        if spark is not None:
            spark.stop()


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


def window_values(
    spark,
    graph: MetricGraph,
    source: str | Path,
    out: str | Path | None,
    *,
    sample_period_ns: int | None,
    host: bool = True,
    view: str = "counters",
):
    """Run the generated Spark SQL over ``source``; write the result to ``out`` (partitioned by host)
    when given, and return the DataFrame."""
    counters_frame(spark, source, graph.generation).createOrReplaceTempView(view)
    text = generate_sql(
        graph, view, sample_period_ns=sample_period_ns, dialect="spark", pretty=False, order=False, host=host
    )
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--")).rstrip().rstrip(";")
    df = spark.sql(body)
    if out is not None:
        df.write.mode("overwrite").partitionBy("host").parquet(str(out))
    return df
