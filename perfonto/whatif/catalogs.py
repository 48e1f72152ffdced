"""The catalog of a coverage study, compiled against derived generations.

``parts(target)``: the base catalog as ``metrics.catalog.load_catalog`` compiles it (it must have no
error), the metric files it reads and the other shipped generations, loaded once per process.
``compiled(target, spec, without)``: the same metric files compiled against the base generation
with the spec constants ``spec`` (``ontology.derive.with_spec``) and without the signals ``without``
(``ontology.derive.without_signals``: the metrics that read them become unavailable, with the
reason) — a scenario that changes the hardware is judged by a catalog that knows the hardware.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .knobs import KnobError
from .points import Target


@lru_cache(maxsize=8)
def parts(target: Target):
    """``(catalog, files, others)`` of ``target``.

    Raises:
        perfonto.ontology.diagnostics.CatalogError: the catalog does not compile.
    """
    from perfonto.metrics.catalog import load_catalog, shipped_others
    from perfonto.metrics.compiler import library_files
    from perfonto.ontology.diagnostics import CatalogError
    from perfonto.ontology.loader import shipped_generations

    cat = load_catalog(target.catalog, target.generation)
    if cat.errors or cat.graph is None:
        raise CatalogError(cat.diagnostics)
    gen = cat.generation
    if target.catalog is None:
        files = library_files()
    else:
        files = sorted(Path(target.catalog).glob("*.metrics"))
        has_yaml = any(Path(target.catalog).glob("*.y*ml"))
        if has_yaml and set(gen.lineage[:-1]) & set(shipped_generations()):
            files = library_files() + files
        if not files:
            files = library_files()
    return cat, files, shipped_others(gen)


def _key(spec: dict) -> tuple:
    return tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in spec.items()))


@lru_cache(maxsize=256)
def _compiled(target: Target, spec: tuple, without: tuple):
    from perfonto.metrics.compiler import compile_files
    from perfonto.ontology.derive import DeriveError, with_spec, without_signals

    cat, files, others = parts(target)
    try:
        gen = without_signals(with_spec(cat.generation, dict(spec)), list(without))
    except DeriveError as exc:
        raise KnobError(str(exc)) from None
    graph = compile_files(gen, files, others=others)
    errors = [d for d in graph.diagnostics if d.severity == "error"]
    if errors:
        raise KnobError(
            f"the catalog does not compile against `{gen.name}` with {dict(spec) or 'its own spec'}"
            f"{' without ' + ', '.join(without) if without else ''}: {errors[0].message}"
        )
    return graph


def compiled(target: Target, spec: dict | None = None, without=()):
    """The catalog's ``MetricGraph`` against the base generation with ``spec`` (full name →
    ``(value, unit)``) and without the signals ``without``, compiled once per process.

    Raises:
        KnobError: an unknown constant or signal, or a catalog that no longer compiles.
    """
    return _compiled(target, _key(spec or {}), tuple(sorted(without)))


@lru_cache(maxsize=32)
def evaluator(target: Target, spec: tuple = ()):
    """The generated evaluator of ``compiled(target, dict(spec))`` (spec as sorted pairs)."""
    from perfonto.codegen.python_evaluator import generate, load

    return load(generate(compiled(target, dict(spec))))


__all__ = ["compiled", "evaluator", "parts"]
