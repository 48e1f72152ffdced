"""``perfonto analyze --engine spark`` starts the Spark session (the JVM, and a cluster's executors) on a
thread while the driver compiles the catalog and plans the dump (``spark_engine.SessionStart``): the
start overlaps the planning, a start that fails is the same clear ``DumpError`` on the driver, a master
URL that is not one fails at once, and a session started is always stopped. Spark itself is replaced
here by a stand-in (``spark_engine._start``): no JVM is started."""

import threading

import pytest

from perfonto.analysis import spark_engine
from perfonto.analysis.capture import Capture
from perfonto.capture.dump_io import DumpError
from perfonto.emulator.fleet import FleetSpec, generate_fleet

PERIOD_NS = 5_000_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, sohu):
    out = tmp_path_factory.mktemp("session-start")
    generate_fleet(sohu, FleetSpec(2, 1), out / "data", duration_s=0.1, sample_period_s=PERIOD_NS * 1e-9)
    return out / "data" / "counters"


class _Spark:
    stopped = 0

    def stop(self):
        _Spark.stopped += 1


def test_a_failed_start_is_raised_by_get_and_stop_is_quiet(monkeypatch):
    def fail(master, app, kernel=False):
        raise DumpError(f"--engine spark: Spark did not start on {master!r} (no java); Java 17 must be installed")

    monkeypatch.setattr(spark_engine, "_start", fail)
    start = spark_engine.SessionStart("local[1]")
    with pytest.raises(DumpError, match="Spark did not start on 'local\\[1\\]'"):
        start.get()
    start.stop()  # nothing started: nothing to stop, no error
    start.stop()


def test_a_session_started_is_stopped_once(monkeypatch):
    _Spark.stopped = 0
    kernels = []
    monkeypatch.setattr(spark_engine, "_start", lambda master, app, kernel=False: kernels.append(kernel) or _Spark())
    start = spark_engine.SessionStart("local[1]")
    assert isinstance(start.get(), _Spark)
    start.stop()
    start.stop()
    assert _Spark.stopped == 1
    assert kernels == [True]  # --engine spark's JVMs: KERNEL_JAVA_OPTIONS


def test_analyze_starts_spark_while_it_plans_and_raises_a_failed_start(monkeypatch, fleet, tmp_path):
    """The stand-in start waits for the driver to plan the dump: it was entered before the plan (on its
    own thread), and its DumpError is what analyze_job raises; no output folder is left."""
    import perfonto.analysis.capture as capture_mod

    from perfonto.job import analyze_job

    entered, planned = threading.Event(), threading.Event()
    seen = {}

    def start(master, app, kernel=False):
        entered.set()
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        seen["planned while starting"] = planned.wait(30)
        raise DumpError("--engine spark: Spark did not start on 'local[1]' (stand-in); Java 17 must be installed")

    plan_capture = capture_mod.plan_capture

    def plan(*a, **k):
        seen["started before the plan"] = entered.wait(30)
        try:
            return plan_capture(*a, **k)
        finally:
            planned.set()

    monkeypatch.setattr(spark_engine, "_start", start)
    monkeypatch.setattr(capture_mod, "plan_capture", plan)
    with pytest.raises(DumpError, match="Spark did not start on 'local\\[1\\]' \\(stand-in\\)"):
        analyze_job(
            Capture(fleet, sample_period_ns=PERIOD_NS), out=tmp_path / "out", engine="spark", spark_master="local[1]"
        )
    assert seen == {"thread": True, "started before the plan": True, "planned while starting": True}
    assert not (tmp_path / "out").exists()


def test_analyze_refuses_a_master_that_is_not_a_url_before_compiling(monkeypatch, fleet, tmp_path):
    import perfonto.job as job

    def compile_for(*a, **k):
        raise AssertionError("compiled before the master URL was checked")

    monkeypatch.setattr(job, "_compile_for", compile_for)
    with pytest.raises(DumpError, match="not a Spark master URL"):
        job.analyze_job(
            Capture(fleet, sample_period_ns=PERIOD_NS), out=tmp_path / "out", engine="spark", spark_master="localhost"
        )
