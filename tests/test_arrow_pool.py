"""The ``perfonto`` process allocates Arrow's buffers from jemalloc for the commands that decode a dump
(``perfonto.cli._arrow_pool``), unless ``ARROW_DEFAULT_MEMORY_POOL`` names a pool; other commands, and
``main`` called in-process, leave pyarrow's default. Each case runs in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa

_CODE = """
import sys
sys.argv = ["perfonto", *{argv!r}]
import perfonto.cli as cli
cli._dispatch = lambda args: cli._arrow_pool(args.command) or 0  # parse and choose the pool; run nothing
assert {call} == 0
import pyarrow as pa
pa.array([1, 2, 3])
print(pa.default_memory_pool().backend_name)
"""


def _pool(argv: list[str], call: str = "cli.entry()", **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
    code = _CODE.format(argv=argv, call=call)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[-1]


def _have_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


def test_dump_commands_use_jemalloc_unless_told_otherwise():
    default = _pool(["explain", "mfu"])  # a command that decodes no dump: pyarrow's own default
    assert _pool(["analyze", "x.parquet", "--out", "o"]) == ("jemalloc" if _have_jemalloc() else default)
    assert _pool(["analyze", "x.parquet", "--out", "o"], ARROW_DEFAULT_MEMORY_POOL="system") == "system"
    assert (
        _pool(["analyze", "x.parquet", "--out", "o"], call="cli.main(sys.argv[1:])") == default
    )  # in-process: left alone
