"""pandas stays unloaded in perfonto's own processes (``capture.no_pandas``): the CLI, and the Python
workers of the Spark sessions the CLI starts (``analysis.spark_kernel._worker``), while pyarrow still
builds and converts arrays; ``PERFONTO_PANDAS=1`` and a process that already holds pandas are left
alone. Each case runs in a fresh interpreter (an import finder changes the whole process)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

_HAVE_PANDAS = importlib.util.find_spec("pandas") is not None


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "PERFONTO_PANDAS"}
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e, timeout=120
    )


_READ = """
    import sys
    import pyarrow as pa
    assert pa.array([1, 2, 3], pa.uint64()).to_numpy().tolist() == [1, 2, 3]
    try:
        import pandas  # noqa: F401
        print("loaded", "pandas" in sys.modules)
    except ModuleNotFoundError as exc:
        print("refused", "pandas" in sys.modules, "PERFONTO_PANDAS=1" in str(exc))
"""


def test_a_blocked_process_reads_arrow_without_pandas():
    r = _run("from perfonto.capture.no_pandas import block_pandas\nassert block_pandas()\n" + textwrap.dedent(_READ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["refused", "False", "True"]


@pytest.mark.skipif(not _HAVE_PANDAS, reason="pandas is not installed here: nothing to let load")
def test_perfonto_pandas_and_a_process_holding_pandas_are_left_alone():
    r = _run(
        "from perfonto.capture.no_pandas import block_pandas\nassert not block_pandas()\n" + textwrap.dedent(_READ),
        PERFONTO_PANDAS="1",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["loaded", "True"]
    r = _run("import pandas\nfrom perfonto.capture.no_pandas import block_pandas\nassert not block_pandas()\n")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("flag", [True, False])
def test_a_spark_python_worker_follows_the_driver(flag):
    """``_worker`` with the ship's ``no_pandas``: set when the driver is the CLI (pandas blocked there),
    unset for a user's own session, whose workers may run pandas UDFs afterwards."""
    code = f"""
        from perfonto.analysis import spark_kernel as SK
        SK._WORKER["d"] = ("graph", "evaluator")  # already loaded: only the pandas rule is exercised
        assert SK._worker({{"digest": "d", "no_pandas": {flag}}}, b"") == ("graph", "evaluator")
        from perfonto.capture.no_pandas import pandas_blocked
        print("blocked" if pandas_blocked() else "open")
    """
    r = _run(textwrap.dedent(code) + textwrap.dedent(_READ))
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert words[0] == ("blocked" if flag else "open")
    if flag:
        assert words[1:] == ["refused", "False", "True"]
    elif _HAVE_PANDAS:
        assert words[1:] == ["loaded", "True"]


def test_the_cli_process_keeps_pandas_out(tmp_path):
    """``perfonto`` (``cli.entry``) in a process of its own: the finder is installed before any command."""
    r = _run(
        "import sys\nfrom perfonto import cli\nsys.argv = ['perfonto', '--version']\n"
        "code = 0\ntry:\n    cli.entry()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "from perfonto.capture.no_pandas import pandas_blocked\nprint(pandas_blocked())\n"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "True"
