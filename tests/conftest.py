import functools
import os
from pathlib import Path

import pytest

from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import compile_files
from perfonto.ontology import load_generation

# Generated evaluators take their NumPy path in the suite: the compiled kernel (numba) costs seconds of
# compilation per generated module, and the differential tests generate thousands. The kernel has its
# own differential test (tests/test_kernel_differential.py), which turns it back on.
os.environ.setdefault("PERFONTO_NO_JIT", "1")

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@functools.lru_cache(maxsize=None)
def _sohu():
    gen, diags = load_generation("sohu")
    assert gen is not None, [d.render() for d in diags]
    return gen


@pytest.fixture(scope="session")
def sohu():
    return _sohu()


@pytest.fixture(scope="session")
def library(sohu):
    graph = compile_files(sohu, others=shipped_others(sohu))
    assert not graph.errors, [d.render() for d in graph.errors]
    return graph
