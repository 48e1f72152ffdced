"""Compile metric files against a resolved generation into a ``MetricGraph``.

The compiler is ``PASSES``, a tuple of named plain functions, each from one stage
(``metrics.stages``) to the next:

0. ``parse`` every file (``dsl.parser``; a syntax error skips that declaration only) and expand the
   generated submetrics (``metrics.submetrics``) → ``Parsed``;
1. ``declare`` — duplicate names, names that shadow signals or spec constants → ``Declared``;
2. ``resolve`` names — signals, ``spec.*`` constants, metrics, ``interval``; unknown names get a
   "did you mean"; the dependency graph (networkx) → ``Resolved``;
3. ``graph`` — every dependency cycle is an error naming the cycle → ``Graphed``;
4. ``availability`` — metrics that need what this generation cannot provide → ``Available``;
5. ``units`` — units (pint), instance axes and chip degree in topological order, every unit
   conversion an explicit factor, the declared unit, bounds and threshold checked
   (``metrics.infer``) → ``Typed``;
6. ``lint`` — formulas that type but are wrong or suspicious (``metrics.lint``: a packed register's
   whole word, reversed clamp bounds, a literal division by zero, a total times a ratio, a threshold
   outside the bounds, FLOP counters left out) → ``Typed``;
7. ``classify`` — window metrics and record metrics apart, diagnostics sorted with their source
   lines, the content hash → ``MetricGraph``.
Every problem is a ``Diagnostic``; a metric with an error is left out of the graph, and every other
metric still compiles. Other generations (for "exists on …" availability reasons) are passed in.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
from pathlib import Path
from typing import Any, Callable

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_file, parse_text
from perfonto.ontology.diagnostics import Diagnostic, with_source
from perfonto.ontology.files import FileReadError, newlines, read_text
from perfonto.ontology.generation import Generation

from . import ir
from . import passes
from .graph import MetricGraph  # noqa: F401  (re-exported: the compiler's result)
from .stages import Parsed, Typed, frozen
from .lint import lint
from .submetrics import expand as expand_submetrics


def library_files() -> list[Path]:
    """The shipped metric library (package data ``metrics/library/*.metrics``)."""
    from importlib import resources

    return sorted(Path(str(resources.files("perfonto.metrics").joinpath("library"))).glob("*.metrics"))


def parse(
    gen: Generation, files: list[Path] | None = None, *, sources: dict[str, str] | None = None, others=()
) -> Parsed:
    """Stage 0: parse metric files from disk (default: the shipped library) or ``sources``
    (``{file name: text}``), and expand generated submetrics. ``others``: the other generations whose
    signals make a metric unavailable here rather than unknown."""
    decls: list[ast.MetricDecl] = []
    diags: list[Diagnostic] = []
    texts: dict[str, str] = {}
    if sources is not None:
        for name, text in sources.items():
            d, dg = parse_text(text, name)
            decls += d
            diags += dg
        texts = {name: newlines(text) for name, text in sources.items()}
    else:
        for f in library_files() if files is None else files:
            d, dg = parse_file(f)
            decls += d
            diags += dg
            try:
                texts[str(f)] = newlines(read_text(f, "metric file"))  # as the parser read it
            except FileReadError:
                pass
    decls, more = expand_submetrics(gen, decls)
    return Parsed(gen, tuple(decls), tuple(diags) + tuple(more), frozen(texts), tuple(others))


def classify(s: Typed) -> MetricGraph:
    """Last stage: window metrics and record metrics apart, diagnostics with their source lines and
    in file order, and the catalog's content hash (generation hash, then each metric file's name and
    text — the file name, not where the checkout lives)."""
    diags = [with_source(dg, s.texts.get(dg.span.file)) if not dg.source_line else dg for dg in s.diagnostics]
    diags.sort(key=lambda dg: (dg.span.file, dg.span.line, dg.span.col))
    h = hashlib.sha256()
    h.update(s.gen.content_hash.encode())
    for name in sorted(s.texts):
        h.update(Path(name).name.encode())
        h.update(s.texts[name].encode())
    window_metrics = {n: m for n, m in s.compiled.items() if not m.from_records}
    record_metrics = {n: m for n, m in s.compiled.items() if m.from_records}
    return MetricGraph(
        s.gen,
        window_metrics,
        s.graph,
        diags,
        h.hexdigest()[:16],
        unavailable=dict(s.unavailable),
        declarations=dict(s.by_name),
        record_metrics=record_metrics,
    )


#: The compiler: each pass is a plain function of the previous stage (see the module docstring). Each
#: pass is typed stage to stage (Parsed -> Declared -> ... -> MetricGraph); a tuple type cannot say that
#: one pass takes what the one before it gives, so here a pass is a function of any stage.
PASSES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("declare", passes.declare),
    ("resolve", passes.resolve_names),
    ("graph", passes.check_cycles),
    ("availability", passes.availability),
    ("units", passes.infer_units),
    ("lint", lint),
    ("classify", classify),
)


def run_passes(parsed: Parsed, until: str | None = None):
    """Run ``PASSES`` on ``parsed``, stopping after the pass named ``until`` (default: all, giving a
    ``MetricGraph``). Raises ``KeyError`` for an unknown pass name."""
    if until is not None and until not in dict(PASSES):
        raise KeyError(f"no compiler pass `{until}`; passes: {', '.join(n for n, _ in PASSES)}")
    stage: object = parsed
    for name, fn in PASSES:
        stage = fn(stage)
        if name == until:
            break
    return stage


def compile_files(gen: Generation, files: list[Path] | None = None, *, others=()) -> MetricGraph:
    """Compile metric files from disk (default: the shipped library) against ``gen``; ``others``
    are the other generations (``metrics.catalog.shipped_others`` gives the shipped ones)."""
    with _no_gc():
        return run_passes(parse(gen, files, others=others))


@contextlib.contextmanager
def _no_gc():
    """The compiler makes many small objects and no cycles worth collecting while it runs: the cyclic
    collector would only rescan them (a large share of a 10,000-metric compile)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def compile_texts(gen: Generation, sources: dict[str, str], *, others=()) -> MetricGraph:
    """Compile metric sources given as ``{file name: text}`` (tests, imports)."""
    with _no_gc():
        return run_passes(parse(gen, sources=sources, others=others))


def node_axes(n: ir.Node) -> ir.Axes:
    return n.axes


def node_degree(n: ir.Node) -> int:
    return n.degree
