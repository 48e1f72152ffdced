"""A Spark standalone cluster on this machine — one master and N workers on 127.0.0.1, started from
pyspark's own ``bin/spark-class`` and stopped after — for the tests and the benchmark of ``--engine
spark`` with more than one executor (``analyze --spark-master spark://127.0.0.1:PORT``).

    with StandaloneCluster(workers=2) as url:
        ...  # session(url)

Each process is started by this object and stopped by its own id (SIGTERM, then SIGKILL after a grace
period); its log and the workers' folders go to a temporary folder removed on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from perfonto.capture.dump_io import DumpError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> Path:
    """pyspark's ``bin/spark-class``.

    Raises:
        DumpError: pyspark is not installed, or its launcher is missing."""
    try:
        import pyspark
    except ImportError:
        raise DumpError("a Spark cluster needs pyspark: pip install pyspark (Java 17 must be installed)") from None
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.is_file():
        raise DumpError(f"{path}: pyspark's launcher is missing; reinstall pyspark")
    return path


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores and ``memory`` each) on 127.0.0.1 (module
    docstring); ``pin``: each worker's processes (its executor, its Python workers) bound to ``cores``
    CPUs of their own (``_cpus``), so that a worker of one core uses one CPU: Spark's cores are task
    slots, and a task's threads (reading, the kernel, writing) would use every CPU. ``url``: the
    master's ``spark://`` URL once started; ``start`` waits (up to ``timeout_s`` s) until every worker
    has registered.

    Raises:
        DumpError: a process that exits or a cluster not up within ``timeout_s`` (its log's tail named)."""

    def __init__(
        self, workers: int = 2, cores: int = 1, memory: str = "2g", timeout_s: float = 120.0, pin: bool = False
    ):
        self.workers, self.cores, self.memory, self.timeout_s = workers, cores, memory, timeout_s
        self.pin = pin
        self.procs: list[subprocess.Popen] = []
        self.dir: Path | None = None
        self.url = ""

    def _start(self, name: str, args: list[str], cpus: set[int] | None = None) -> subprocess.Popen:
        env = dict(os.environ, SPARK_HOME=str(spark_class().parent.parent), SPARK_LOCAL_IP="127.0.0.1")
        log = open(self.dir / f"{name}.log", "wb")
        p = subprocess.Popen(
            [str(spark_class()), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        log.close()
        self.procs.append(p)
        return p

    def start(self) -> str:
        """Start the master and the workers; returns the master's URL."""
        self.dir = Path(tempfile.mkdtemp(prefix="perfonto-spark-cluster-"))
        port, ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self._start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
        )
        for i in range(self.workers):
            work = self.dir / f"worker-{i}"
            work.mkdir()
            self._start(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(_free_port()),
                    self.url,
                ],
                self._cpus(i),
            )
        self._wait(ui)
        return self.url

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the workers started (each its JVM: ``spark-class`` execs it); their executors
        and the executors' Python workers are their children."""
        return [p.pid for p in self.procs[1:]]

    def _cpus(self, i: int) -> set[int] | None:
        """With ``pin``: the CPUs of worker ``i`` (``cores`` of them, the next ones after worker ``i − 1``'s),
        which its executor and Python workers inherit; else None (any CPU)."""
        if not self.pin or not hasattr(os, "sched_setaffinity"):
            return None
        have = sorted(os.sched_getaffinity(0))
        return {have[(i * self.cores + k) % len(have)] for k in range(self.cores)}

    def _wait(self, ui: int) -> None:
        end = time.monotonic() + self.timeout_s
        while time.monotonic() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise DumpError(f"a Spark process exited ({p.args[1]}): {self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    state = json.loads(r.read())
                if int(state.get("aliveworkers", 0)) >= self.workers:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        raise DumpError(f"the Spark cluster was not up within {self.timeout_s:g} s: {self._tail()}")

    def _tail(self) -> str:
        logs = sorted(self.dir.glob("*.log")) if self.dir else []
        lines = [
            ln for f in logs for ln in f.read_text(errors="replace").splitlines() if "ERROR" in ln or "Exception" in ln
        ]
        return " | ".join(lines[-3:]) or "no error logged"

    def stop(self) -> None:
        """Stop every process started here (by its id), workers first; remove the folder."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["StandaloneCluster", "spark_class"]
