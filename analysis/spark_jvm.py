"""JVM options for the Spark session of ``--engine spark`` (``analysis.spark_kernel``).

On that path the driver's and the executors' JVMs only schedule tasks and pass each host's plan and state
to Python: no counter goes through them, so the optimising JIT compiler (C2) only costs CPU there.
Measured on one and two pinned one-core standalone workers, 4 hosts (1.15M rows), ``perfonto analyze`` as
a process: an executor's JVM used 7.1 CPU-s with the defaults and 3.9-4.7 with C1 only; two workers took
28.6 s -> 24.6-25.0 s, one worker 28.1 s -> 23.7-27.4 s (issue 33). The serial collector as well gave
19.9-22.8 s, but see below.

Only the JIT level is set. A collector is not: a second collector flag anywhere in the JVM's command line
(an administrator's ``defaultJavaOptions``, ``JAVA_TOOL_OPTIONS`` on a worker) stops the JVM, while a
repeated ``TieredStopAtLevel`` is harmless (the last one counts). Setting ``extraJavaOptions`` replaces
the value a cluster's ``spark-defaults.conf`` gives it, so that value is kept and the flag is added only
when it does not set the option itself; a value perfonto cannot read back exactly (one with a
backslash, an escape in Java's properties syntax) is left alone.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

KERNEL_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1",)
KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
_GC = re.compile(r"-XX:[+-]Use(Serial|Parallel|ParallelOld|G1|Z|Shenandoah|Epsilon|ConcMarkSweep)GC")


def option_name(flag: str) -> str:
    """What a JVM flag sets: ``GC`` for a collector choice (``-XX:+UseG1GC``), else an ``-XX`` option's
    name (``TieredStopAtLevel`` for ``-XX:TieredStopAtLevel=1``), else the flag itself."""
    if _GC.fullmatch(flag):
        return "GC"
    m = re.fullmatch(r"-XX:[+-]?(\w+)(=.*)?", flag)
    return m.group(1) if m else flag


def _conf_file() -> Path | None:
    """Spark's ``spark-defaults.conf``: in ``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf`` (pyspark's own
    folder when ``SPARK_HOME`` is unset, as ``pyspark.find_spark_home``); None when there is none."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
        home = str(Path(spec.origin).parent) if spec and spec.origin else ""
    folder = os.environ.get("SPARK_CONF_DIR") or (str(Path(home) / "conf") if home else "")
    path = Path(folder) / "spark-defaults.conf" if folder else None
    return path if path is not None and path.is_file() else None


def spark_defaults(path: Path | None = None) -> dict[str, str]:
    """The properties of ``spark-defaults.conf`` (``path``, else ``_conf_file``; none without a file), read
    as Java reads a properties file for what matters here: ``#`` and ``!`` comment lines, a line ending in
    an odd number of backslashes continued on the next (its leading blanks dropped), a key ended by
    whitespace, ``=`` or ``:``. Other escapes are kept as written (``java_options`` leaves such a value
    alone); none when the file cannot be read."""
    path = path or _conf_file()
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:  # Spark cannot read it either, and says so itself: nothing of it to keep
        return {}
    lines, buf = [], None
    for raw in text.splitlines():
        line = raw.lstrip() if buf is not None else raw
        if buf is None and (not line.strip() or line.lstrip()[0] in "#!"):
            continue
        slashes = len(line) - len(line.rstrip("\\"))
        if slashes % 2:
            buf = (buf or "") + line[:-1]
            continue
        lines.append((buf or "") + line)
        buf = None
    if buf is not None:
        lines.append(buf)
    props = {}
    for line in lines:
        m = re.match(r"\s*([^\s=:]+)\s*[\s=:]\s*(.*?)\s*$", line)
        if m:
            props[m.group(1)] = m.group(2)
    return props


def java_options(key: str, wanted: tuple[str, ...] = KERNEL_JAVA_OPTIONS, defaults: dict | None = None) -> str | None:
    """The value to give ``key`` (one of ``KEYS``): what ``spark-defaults.conf`` sets for it
    (``spark_defaults``; setting the key replaces that value), then each of ``wanted`` whose option it
    does not set already; None (leave the key alone) when that value holds a backslash, or when nothing
    is to be added."""
    value = (defaults if defaults is not None else spark_defaults()).get(key, "")
    if "\\" in value:
        return None
    have = value.split()
    names = {option_name(f) for f in have}
    add = [f for f in wanted if option_name(f) not in names]
    return " ".join(have + add) if add else None


__all__ = ["KERNEL_JAVA_OPTIONS", "KEYS", "java_options", "option_name", "spark_defaults"]
