import functools
from pathlib import Path

import pytest

from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import compile_files
from perfonto.ontology import load_generation

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
