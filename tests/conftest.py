import functools
import os
import sys
import tempfile
from pathlib import Path

# Python's bytecode for this process, its xdist workers and the perfonto processes the tests start, where the
# shell sets PYTHONDONTWRITEBYTECODE: without it every one of those ~200 processes compiles perfonto's modules
# from source (an import of the CLI and the main job: 1.5 s instead of 0.85 s here). The bytecode goes under a
# folder of this user's in the temporary directory (PYTHONPYCACHEPREFIX), never into the checkout, which
# stays as the setting meant it to; a shell that sets PYTHONPYCACHEPREFIX itself is left alone.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    _pyc = Path(tempfile.gettempdir()) / f"perfonto-test-pycache-{os.getuid()}"
    _pyc.mkdir(mode=0o700, exist_ok=True)
    if _pyc.is_symlink() or _pyc.stat().st_uid != os.getuid() or _pyc.stat().st_mode & 0o022:
        _pyc = Path(tempfile.mkdtemp(prefix="perfonto-test-pycache-"))  # someone else's folder: a fresh one
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(_pyc)
    sys.dont_write_bytecode = False

import pytest  # noqa: E402

from perfonto.metrics.catalog import shipped_others
from perfonto.metrics.compiler import compile_files
from perfonto.ontology import load_generation

# Generated evaluators take their NumPy path in the suite: the compiled kernel (numba) costs seconds of
# compilation per generated module, and the differential tests generate thousands. The kernel has its
# own differential test (tests/test_kernel_differential.py), which turns it back on.
os.environ.setdefault("PERFONTO_NO_JIT", "1")
# perfonto's cache (compiled catalogs, generated evaluators) in a folder of the session's own: the suite
# neither reads nor fills the user's cache, and every test after the first finds the shipped catalog
# compiled. The process that made the folder (the controller, under xdist) removes it when it exits.
if not os.environ.get("PERFONTO_CACHE_DIR"):
    import atexit
    import shutil

    os.environ["PERFONTO_CACHE_DIR"] = tempfile.mkdtemp(prefix="perfonto-test-cache-")
    atexit.register(shutil.rmtree, os.environ["PERFONTO_CACHE_DIR"], ignore_errors=True)

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


# -- the shipped catalog's graph and generated evaluator, and an emulated dump cut into parts: the live tests'
# (test_live.py, test_serve_trial_fixes.py, test_follow_review_fixes.py); a module's own fixture of a name wins


@pytest.fixture(scope="module")
def graph():
    """The shipped sohu catalog's compiled graph."""
    from perfonto.metrics.catalog import load_catalog

    return load_catalog(None, "sohu").graph


@pytest.fixture(scope="module")
def evaluator(graph, tmp_path_factory):
    """The generated evaluator of ``graph``, loaded as a module."""
    from perfonto.analysis.evaluate import load_evaluator
    from perfonto.codegen.python_evaluator import generate

    p = tmp_path_factory.mktemp("ev") / "ev.py"
    p.write_text(generate(graph), encoding="utf-8")
    return load_evaluator(p)


@pytest.fixture(scope="module")
def ref(graph, tmp_path_factory):
    """(table, batch evaluation of it, three part tables in time order) of an emulated dump."""
    import pyarrow.parquet as pq

    from live_helpers import publish, reference_dump, write_parts

    d = tmp_path_factory.mktemp("emu")
    table, _, ev = reference_dump(graph, d)
    parts = [pq.read_table(str(publish(p))) for p in write_parts(table, d / "cut", 3)]
    return table, ev, parts
