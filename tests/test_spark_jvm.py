"""The JVM options of ``--engine spark``'s session (``analysis.spark_jvm``): C1 only, added to what a
cluster's ``spark-defaults.conf`` sets, never replacing an option the file sets, never touching a value
it cannot read back exactly; and ``spark_engine._start`` passes them only for the kernel path."""

import sys
import types

import pytest

from perfonto.analysis import spark_engine, spark_jvm

DRIVER, EXECUTOR = spark_jvm.KEYS


def _conf(tmp_path, monkeypatch, text: str):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(text)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))


def test_the_files_options_are_kept_and_its_jit_level_wins(tmp_path, monkeypatch):
    _conf(
        tmp_path,
        monkeypatch,
        "# site settings\n"
        "! also a comment\n"
        "spark.executor.extraJavaOptions   -Dlog4j.configurationFile=/etc/spark/log4j2.xml -XX:+UseG1GC\n"
        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=4\n"
        "spark.executor.memory 8g\n",
    )
    assert spark_jvm.java_options(EXECUTOR) == (
        "-Dlog4j.configurationFile=/etc/spark/log4j2.xml -XX:+UseG1GC -XX:TieredStopAtLevel=1"
    )
    assert spark_jvm.java_options(DRIVER) is None  # the file sets the JIT level itself: the key is left alone
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))  # no file: the kernel path's flag alone
    assert spark_jvm.java_options(DRIVER) == "-XX:TieredStopAtLevel=1"


def test_a_continued_line_is_one_value(tmp_path, monkeypatch):
    """A value split over lines with a trailing backslash (Java's properties syntax) is read whole; read
    line by line it would give the launcher an escaped space and the driver would not start."""
    _conf(
        tmp_path,
        monkeypatch,
        "spark.driver.extraJavaOptions -Dlog4j.configurationFile=/etc/spark/log4j2.xml \\\n"
        "    -XX:+UseG1GC\n"
        "spark.executor.extraJavaOptions -Da=1 \\\n"
        "    -XX:TieredStopAtLevel=2\n",
    )
    assert spark_jvm.spark_defaults()[DRIVER] == "-Dlog4j.configurationFile=/etc/spark/log4j2.xml -XX:+UseG1GC"
    assert "-XX" not in spark_jvm.spark_defaults()  # the continuation is not a key of its own
    assert spark_jvm.java_options(DRIVER) == (
        "-Dlog4j.configurationFile=/etc/spark/log4j2.xml -XX:+UseG1GC -XX:TieredStopAtLevel=1"
    )
    assert spark_jvm.java_options(EXECUTOR) is None


def test_a_value_with_an_escape_is_left_alone(tmp_path, monkeypatch):
    _conf(tmp_path, monkeypatch, "spark.driver.extraJavaOptions -Dpath=C\\:\\\\spark\n")
    assert spark_jvm.java_options(DRIVER) is None


def test_an_unreadable_file_is_none(tmp_path, monkeypatch):
    _conf(tmp_path, monkeypatch, "spark.driver.extraJavaOptions -XX:+UseG1GC\n")

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(spark_jvm.Path, "read_text", refuse)
    assert spark_jvm.spark_defaults() == {}
    assert spark_jvm.java_options(DRIVER) == "-XX:TieredStopAtLevel=1"


@pytest.mark.parametrize(
    "flag, name",
    [
        ("-XX:+UseG1GC", "GC"),
        ("-XX:-UseSerialGC", "GC"),
        ("-XX:+UseZGC", "GC"),
        ("-XX:+UseShenandoahGC", "GC"),
        ("-XX:TieredStopAtLevel=1", "TieredStopAtLevel"),
        ("-XX:ConcGCThreads=2", "ConcGCThreads"),
        ("-XX:+UseAdaptiveSizePolicyWithSystemGC", "UseAdaptiveSizePolicyWithSystemGC"),
        ("-Xmx4g", "-Xmx4g"),
    ],
)
def test_option_names(flag, name):
    assert spark_jvm.option_name(flag) == name


class _Builder:
    def __init__(self):
        self.conf = {}

    def master(self, m):
        return self

    def appName(self, a):
        return self

    def config(self, k, v):
        self.conf[k] = v
        return self

    def getOrCreate(self):
        return types.SimpleNamespace(sparkContext=types.SimpleNamespace(setLogLevel=lambda level: None))


@pytest.mark.parametrize("kernel", [True, False])
def test_only_the_kernel_path_sets_the_options(monkeypatch, tmp_path, kernel):
    """``_start`` hands the options to Spark's builder for ``--engine spark`` and not for the generated
    SQL's session (its JVM does the SQL's work: C2 pays off there). Spark is a stand-in: no JVM starts."""
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # no spark-defaults.conf
    builder = _Builder()
    fake = types.ModuleType("pyspark.sql")
    fake.SparkSession = types.SimpleNamespace(builder=builder)
    monkeypatch.setitem(sys.modules, "pyspark.sql", fake)
    spark_engine._start("local[1]", "t", kernel)
    got = {k: builder.conf.get(k) for k in spark_jvm.KEYS}
    assert got == (
        {k: "-XX:TieredStopAtLevel=1" for k in spark_jvm.KEYS} if kernel else {k: None for k in spark_jvm.KEYS}
    )
