"""Generated evaluators in perfonto's cache (``ontology.cache``), so that a second process on the same
catalog neither generates the evaluator again nor compiles its kernel again.

The entry of a compiled catalog is a folder named by the digest of the catalog (its content hash and
the metrics it evaluates) and of the code that generates the evaluator (``ontology``, ``dsl``,
``metrics``, ``codegen`` and perfonto's version): it holds ``evaluator.py``, written once, and numba's
on-disk cache of the compiled kernel beside it (``__pycache__``), which numba fills on the first
compile and reads on every later one. The kernel's thread count (``PERFONTO_KERNEL_THREADS``) is
compiled into it, so each count has a sub-folder of its own. A process that imports the evaluator from
the entry pays the kernel's JIT (tens of seconds for the shipped catalog) only the first time on a
machine; ``kernel_cached`` tells whether numba's cache already holds it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from perfonto.ontology import cache as _cache

if TYPE_CHECKING:
    from perfonto.metrics.graph import MetricGraph

# ``python_evaluator`` (the generator: the kernel's planner, the ontology's pydantic model) is imported
# only when an evaluator has to be generated: a warm run imports the cached file and nothing of it


def generate(graph: MetricGraph) -> str:
    """``python_evaluator.generate``: the evaluator's source for ``graph``."""
    from .python_evaluator import generate as _generate

    return _generate(graph)


def load(src: str):
    """``python_evaluator.load``: the evaluator module of ``src``, loaded in memory."""
    from .python_evaluator import load as _load

    return _load(src)


def key(graph: MetricGraph) -> str:
    """The entry's digest (module docstring)."""
    return _cache.digest(
        [
            _cache.code_digest("ontology", "dsl", "metrics", "codegen"),
            graph.content_hash,
            graph.generation.content_hash,
            "\n".join(graph.metrics),
            "\n".join(graph.record_metrics),
        ]
    )


def _threads() -> int:
    try:
        return max(1, int(os.environ.get("PERFONTO_KERNEL_THREADS", "1")))
    except ValueError:
        return 1


def entry_folder(graph: MetricGraph) -> Path:
    """The folder of ``graph``'s evaluator in the cache (not created here)."""
    return _cache.entry("evaluators", key(graph)) / f"threads-{_threads()}"


def evaluator(graph: MetricGraph, use: bool | None = None, log: Callable[[str], None] | None = None):
    """``(module, source)``: the generated evaluator of ``graph``, imported from its cache entry (its
    kernel compiled with numba's cache there) — or, with the cache off (``use`` False, or
    ``PERFONTO_NO_CACHE``) or not writable, generated and loaded in memory as
    ``python_evaluator.load`` does (the kernel then compiles in every process). ``log``: told, before
    anything compiles, when the kernel will have to be compiled (``compiling_notice``)."""
    mod, src = _evaluator(graph, use)
    if log is not None and key(graph) not in _SAID:
        notice = compiling_notice(graph, mod, use)
        if notice:
            _SAID.add(key(graph))  # said once per process: a second caller of the same kernel waits on it
            log(notice)
    return mod, src


_SAID: set[str] = set()  # the evaluators whose compile this process has announced
_IN_MEMORY: dict[str, object] = {}  # with the cache off: each evaluator loaded once per process, compiled once


def compiling_notice(graph: MetricGraph, mod, use: bool | None = None) -> str | None:
    """The line that says the kernel of ``graph``'s evaluator ``mod`` must be compiled before it runs
    (tens of seconds, once per catalog and machine; in every process with the cache off), or None when
    numba's cache holds it or there is no kernel to compile (no numba, ``PERFONTO_NO_JIT``)."""
    on = use is not False and (use is not None or _cache.enabled())
    if getattr(mod, "_jit", None) is None or os.environ.get("PERFONTO_NO_JIT"):
        return None
    if importlib.util.find_spec("numba") is None or (on and kernel_cached(graph)):
        return None
    if not on:
        when = "in every process (--no-cache: not kept)"
    elif getattr(mod, "_KCACHE", False):
        when = f"once per catalog, metric set and machine, and cached in {_cache.root()}"
    else:  # the cache is on, but its folder refused the evaluator's file: every process compiles again
        when = (
            f"in every process (the cache folder {_cache.root()} cannot be written: not kept; set "
            f"{_cache.CACHE_ENV} to one)"
        )
    return (
        f"compiling the evaluator's kernel for {len(graph.metrics)} metrics of catalog {graph.content_hash}: {when}, "
        "tens of seconds"
    )


def _evaluator(graph: MetricGraph, use: bool | None):
    if use is False or (use is None and not _cache.enabled()):
        src = generate(graph)
        k = key(graph)
        if k not in _IN_MEMORY:
            _IN_MEMORY[k] = load(src)
        return _IN_MEMORY[k], src
    folder = entry_folder(graph)
    path = folder / "evaluator.py"
    src = None
    try:
        src = path.read_text(encoding="utf-8")
    except OSError:
        pass
    if src is None or not src.endswith("\n"):
        src = generate(graph)
        if not _cache.write_atomic(path, src.encode("utf-8")):
            return load(src), src
    name = f"perfonto_evaluator_{key(graph)[:20]}_t{_threads()}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, str(path))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mod._KCACHE = True  # numba caches the compiled kernel beside the file
        sys.modules[name] = mod
    return mod, src


def kernel_cached(graph: MetricGraph) -> bool:
    """Whether numba's cache in ``graph``'s entry holds a compiled kernel (a later process loads it
    instead of compiling): an index file of the kernel's entry point exists."""
    cache = entry_folder(graph) / "__pycache__"
    try:
        return any(p.name.startswith("evaluator._kernel_call-") and p.suffix == ".nbi" for p in cache.iterdir())
    except OSError:
        return False


def warm_kernel(mod):
    """Start loading ``mod``'s compiled kernel (numba's cache: about a second, most of it numba's own
    start-up; or its first compile) on a background thread, so that it overlaps reading the capture;
    returns the thread (None when the kernel is not used: no numba, ``PERFONTO_NO_JIT``). The kernel
    is loaded for the argument types every later call has (C-contiguous uint64 registers, int64
    timestamps), so the first real piece finds it ready."""
    import threading

    if os.environ.get("PERFONTO_NO_JIT") or importlib.util.find_spec("numba") is None:
        return None

    def run():
        import numpy as np

        try:
            _numba_without_blas_probe()
            n = sum(b - a for _, a, b in mod._REGS)
            st = mod.Stream()
            st.push_flat(
                np.array([[0], [1]], np.int64), np.zeros((n, 2), np.uint64), np.arange(n, dtype=np.int64), sums=True
            )
        except Exception:  # noqa: BLE001 - the real call reports whatever this one met
            pass

    th = threading.Thread(target=run, name="perfonto-kernel-load", daemon=True)
    th.start()
    return th


class _NoBlasProbe:
    """A meta-path finder that refuses ``scipy.linalg`` to numba's BLAS probe only (``numba.np.linalg.
    ensure_blas`` on the importing thread's stack): any other import of it, on any thread, goes on as usual."""

    def find_spec(self, name, path=None, target=None):
        """None (not this finder's) except for the probe's ``scipy.linalg``, which it refuses."""
        if name != "scipy.linalg" and not name.startswith("scipy.linalg."):
            return None
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_name == "ensure_blas" and f.f_globals.get("__name__") == "numba.np.linalg":
                raise ModuleNotFoundError("scipy.linalg: not probed for the evaluator's kernel", name=name)
            f = f.f_back
        return None


def _numba_without_blas_probe() -> None:
    """Import numba's array implementations without their BLAS probe: ``numba.np.arraymath`` imports
    ``scipy.linalg`` at import time (0.3-0.7 s, a third of loading the cached kernel) only to pick the
    inner product of ``np.correlate``/``np.convolve``, which the generated kernel does not call; numba's
    linear algebra still imports it when something compiles it. Nothing to do when either is already
    imported."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    probe = _NoBlasProbe()
    sys.meta_path.insert(0, probe)
    try:
        import numba.np.arraymath  # noqa: F401
    except Exception:  # noqa: BLE001 - the kernel's own load reports whatever this met
        pass
    finally:
        sys.meta_path.remove(probe)


__all__ = ["entry_folder", "evaluator", "kernel_cached", "key", "warm_kernel"]
