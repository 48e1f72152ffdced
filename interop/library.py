"""An import against a generation that extends a shipped one (``perfonto import perf FILE --generation
sohu``) beside the shipped metric library.

Commands compile a catalog folder whose generation extends a shipped one with the shipped metric
library too (README, "Working with catalogs"), and a metric name may be defined once. So the written
metrics file must not define again a metric the library defines (perfonto's own export re-imported
against ``sohu`` defined all 82 again, and the folder failed with 82 ``duplicate-name`` errors):

- a metric whose values equal the library's metric of that name (same unit, equal on random
  windows at chip and server level) is left out of the file: the library's definition serves;
- one whose values differ is rejected with that reason (it cannot be defined twice), and so is
  every metric of the file that reads it, which would read the library's instead.

The folder is then compiled as commands compile it, library included (``compile_with_library``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfonto.metrics.compiler import MetricGraph, compile_files, library_files
from perfonto.ontology.generation import Generation
from perfonto.ontology.units import UnitError, conversion_factor

from . import ir
from .catalog import SourceCatalog

TRIALS = 6


def with_library(gen: Generation) -> bool:
    """Whether commands compile a folder of generation ``gen`` with the shipped metric library: it
    extends a shipped generation (``metrics.catalog.load_catalog``'s rule)."""
    from perfonto.ontology.loader import shipped_generations

    return bool(set(gen.lineage[:-1]) & set(shipped_generations()))


def library_graph(gen: Generation) -> MetricGraph:
    """The shipped metric library compiled against ``gen``."""
    from perfonto.metrics.catalog import shipped_others

    return compile_files(gen, library_files(), others=shipped_others(gen))


def compile_with_library(gen: Generation, metrics_path: Path) -> MetricGraph:
    """The library and the written metrics file, compiled as ``perfonto check --catalog DIR`` compiles
    them (without the folder's other files: several imports may share one folder)."""
    from perfonto.metrics.catalog import shipped_others

    return compile_files(gen, library_files() + [metrics_path], others=shipped_others(gen))


def overlap(
    cat: SourceCatalog, names: dict[str, str], graph: MetricGraph, lib: MetricGraph
) -> tuple[set[str], dict[str, str]]:
    """(source keys whose metric the library defines with the same values, source key → why it is
    rejected) for the compiled metrics of the file (``names``: source key → metric name in ``graph``)."""
    both = {k for k, n in names.items() if n in graph.metrics and (n in lib.metrics or n in lib.record_metrics)}
    if not both:
        return set(), {}
    gen = graph.generation
    ours, theirs = _values(graph, gen), _values(lib, gen)
    same, differ = set(), {}
    for key in sorted(both):
        n = names[key]
        why = _differs(graph, lib, n, ours, theirs)
        if why is None:
            same.add(key)
        else:
            differ[key] = (
                f"the shipped metric library, which commands compile with a folder extending `{cat.extends}`, "
                f"defines `{n}` too, {why}: a metric is defined once (rename it in the file to import it beside "
                "the library's)"
            )
    users: dict[str, set[str]] = {}
    for k, m in cat.metrics.items():
        for r in ir.leaves(m.expr, ir.Ref) if m.expr is not None else ():
            users.setdefault(r, set()).add(k)
    todo = list(differ)
    while todo:  # a metric of the file that reads a rejected one would read the library's metric instead
        k = todo.pop()
        for u in sorted(users.get(k, ())):
            if u not in differ and u not in same and u in names:
                differ[u] = (
                    f"reads `{names[k]}`, which is rejected (the shipped metric library defines it with other "
                    "values, and the folder would read the library's)"
                )
                todo.append(u)
    return same, differ


def _differs(graph: MetricGraph, lib: MetricGraph, name: str, ours: list, theirs: list) -> str | None:
    """Why metric ``name`` of ``graph`` is not the library's (its unit or its values), or None."""
    if name not in lib.metrics:
        return "over request records"
    a, b = graph.metrics[name], lib.metrics[name]
    try:
        k = conversion_factor(graph.generation.registry, a.unit, b.unit)
    except UnitError:
        return f"in [{b.unit_text}], not [{a.unit_text}]"
    for x, y in zip(ours, theirs):
        if name not in x or name not in y:  # pragma: no cover - the interpreter failed on one of them
            return "with values that could not be compared"
        u, v = np.asarray(x.get(name), dtype=float) * k, np.asarray(y.get(name), dtype=float)
        if u.shape != v.shape or not np.allclose(u, v, rtol=1e-9, atol=0.0, equal_nan=True):
            return "with other values"
    return None


def _values(graph: MetricGraph, gen: Generation) -> list[dict]:
    """``graph``'s metrics on the same random windows (every signal and field a random positive value per
    instance), per chip and for a server of 8 chips (per-chip constants scale with the chips)."""
    from perfonto.metrics.interpreter import evaluate
    from perfonto.metrics.windows import Windows

    rng = np.random.default_rng(0)
    values = {}
    for name, s in list(gen.signals.items()) + list(gen.fields.items()):
        values[name] = np.exp(rng.uniform(0.0, np.log(1e5), size=(TRIALS, 1) + tuple(n for _, n in s.axes)))
    interval = rng.uniform(0.05, 2.0, size=(TRIALS, 1))
    out = []
    for w in (Windows(interval, values), Windows(interval, values, chips=8.0, level="server")):
        try:
            out.append(evaluate(graph, w))
        except Exception:  # pragma: no cover - a metric the interpreter cannot evaluate: compared as different
            out.append({})
    return out
