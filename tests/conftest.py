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
# perfonto's cache (compiled catalogs, generated evaluators) in a folder of the session's own: the suite
# neither reads nor fills the user's cache, and every test after the first finds the shipped catalog
# compiled.
if not os.environ.get("PERFONTO_CACHE_DIR"):
    import tempfile

    os.environ["PERFONTO_CACHE_DIR"] = tempfile.mkdtemp(prefix="perfonto-test-cache-")

# Randomised tests replay the same examples on every run of the same commit (CI and the README's test
# command): hypothesis derives each test's examples from the test itself, not from a clock or a saved
# database. Open-ended exploration is a separate campaign: HYPOTHESIS_PROFILE=explore (random, more
# examples, the database kept in .hypothesis/), whose failures are added as fixed examples.
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True, database=None, print_blob=True)
_hsettings.register_profile("explore", derandomize=False, max_examples=2000, print_blob=True)
_hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

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
