"""The ``perfonto`` process allocates Arrow's buffers from jemalloc on Linux (``perfonto.cli._arrow_pool``),
unless ``ARROW_DEFAULT_MEMORY_POOL`` names another pool; ``main`` called in-process changes nothing.
Each case runs in a fresh interpreter (the pool is chosen when pyarrow first allocates)."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the jemalloc choice is Linux-only")

_CODE = """
import sys
sys.argv = ["perfonto", "--version"]
from perfonto.cli import {call}
try:
    {call}({args})
except SystemExit:
    pass
import pyarrow as pa
pa.array([1, 2, 3])
print(pa.default_memory_pool().backend_name)
"""


def _pool(call: str, args: str = "", **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
    code = _CODE.format(call=call, args=args)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[-1]


def _have_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


@pytest.mark.skipif(not _have_jemalloc(), reason="this pyarrow is built without jemalloc")
def test_the_cli_process_uses_jemalloc_unless_told_otherwise():
    assert _pool("entry") == "jemalloc"
    assert _pool("entry", ARROW_DEFAULT_MEMORY_POOL="system") == "system"


def test_main_in_process_leaves_the_pool_alone():
    assert _pool("main", '["--version"]') == _pool("build_parser")  # pyarrow's own default, whatever it is
