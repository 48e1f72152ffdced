"""Compile metric files against a resolved generation into a ``MetricGraph``.

Passes, each a pure function of the previous result:
1. parse every file (``dsl.parser``) — a syntax error skips that file only;
2. collect declarations — duplicate names, names that shadow signals or spec constants;
3. resolve names — signals, ``spec.*`` constants, metrics, ``interval``; unknown names get a
   "did you mean";
4. build the dependency graph (networkx) — every cycle is an error naming the cycle;
5. infer units (pint), instance axes and chip degree in topological order, make every unit conversion
   an explicit factor, and check the declared unit, bounds and threshold (``metrics.infer``).
Every problem is a ``Diagnostic``; a metric with an error is left out of the graph, and every other
metric still compiles.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pint

from perfonto.dsl import ast
from perfonto.dsl.parser import parse_file, parse_text
from perfonto.ontology.diagnostics import Diagnostic, Span, did_you_mean, with_source
from perfonto.ontology.generation import Generation

from . import ir
from .infer import Fail, Typer, _reads_windows
from .submetrics import expand as expand_submetrics

METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


@dataclass(frozen=True)
class CompiledMetric:
    """One metric after compilation. Values are computed in ``unit``; ``ir`` already includes the
    conversion to it. ``bounds``/``threshold`` values are in ``unit`` too."""

    name: str
    unit: pint.Unit
    unit_text: str
    ir: ir.Node
    axes: ir.Axes
    degree: int
    formula: str
    description: str
    groups: tuple[str, ...]
    bounds: tuple[float, float] | None
    threshold: tuple[str, float, str] | None
    parent: str | None
    source: str
    span: Span
    metric_deps: tuple[str, ...]
    signal_deps: tuple[str, ...]
    spec_deps: tuple[str, ...]
    rollup: str | None = None  # declared time/chip rollup ("max", "min"); None = re-derived from summed inputs
    population: str | None = None  # record type this metric has one value per record of (request, token_gap)
    from_records: bool = False  # computed from record fields (per record, or a percentile over them)


@dataclass
class MetricGraph:
    """The compiled catalog: metrics in topological order plus the dependency DAG.

    ``graph`` nodes are metric, signal and ``spec.*`` names (attribute ``kind``); an edge ``u → v``
    means v's formula uses u.
    """

    generation: Generation
    metrics: dict[str, CompiledMetric]
    graph: nx.DiGraph
    diagnostics: list[Diagnostic] = field(default_factory=list)
    content_hash: str = ""
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> why it cannot be computed here
    record_metrics: dict[str, CompiledMetric] = field(default_factory=dict)  # metrics over request/token records
    declarations: dict[str, ast.MetricDecl] = field(default_factory=dict)

    @property
    def all_metrics(self) -> dict[str, CompiledMetric]:
        """Window metrics and record metrics together."""
        return {**self.metrics, **self.record_metrics}

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def dependents(self, name: str) -> list[str]:
        return sorted(n for n in self.graph.successors(name) if n in self.metrics or n in self.record_metrics)

    def dependencies(self, name: str) -> list[str]:
        return sorted(self.graph.predecessors(name))


def library_files() -> list[Path]:
    """The shipped metric library (package data ``metrics/library/*.metrics``)."""
    from importlib import resources

    return sorted(Path(str(resources.files("perfonto.metrics").joinpath("library"))).glob("*.metrics"))


def compile_files(gen: Generation, files: list[Path] | None = None) -> MetricGraph:
    """Compile metric files from disk (default: the shipped library) against ``gen``."""
    files = library_files() if files is None else files
    decls: list[ast.MetricDecl] = []
    diags: list[Diagnostic] = []
    texts: dict[str, str] = {}
    for f in files:
        d, dg = parse_file(f)
        decls += d
        diags += dg
        try:
            texts[str(f)] = Path(f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    return _compile(gen, decls, diags, texts)


def compile_texts(gen: Generation, sources: dict[str, str]) -> MetricGraph:
    """Compile metric sources given as ``{file name: text}`` (tests, imports)."""
    decls: list[ast.MetricDecl] = []
    diags: list[Diagnostic] = []
    for name, text in sources.items():
        d, dg = parse_text(text, name)
        decls += d
        diags += dg
    return _compile(gen, decls, diags, dict(sources))


def _compile(gen: Generation, decls: list[ast.MetricDecl], diags: list[Diagnostic], texts: dict[str, str]) -> MetricGraph:
    decls, more = expand_submetrics(gen, decls)
    diags = list(diags) + more
    by_name: dict[str, ast.MetricDecl] = {}
    bad: set[str] = set()
    for d in decls:
        if not METRIC_NAME.match(d.name):
            diags.append(Diagnostic("error", "metric-name", f"metric name `{d.name}` is not lower-case snake_case with dots",
                                    d.span, hint="use names like `hbm.read_bandwidth`"))
        if d.name in by_name:
            first = by_name[d.name].span
            diags.append(Diagnostic("error", "duplicate-name", f"metric `{d.name}` is defined twice (first at {first})", d.span,
                                    hint="rename or remove one of the definitions"))
            bad.add(d.name)
            continue
        if d.name in gen.signals or d.name in gen.spec or d.name in gen.fields or d.name in gen.record_fields or d.name == "interval" \
                or d.name.split(".")[0] in ("spec", "interval"):
            diags.append(Diagnostic("error", "duplicate-name", f"metric `{d.name}` has the name of a signal or spec constant", d.span,
                                    hint="metric names must differ from signal names; add a suffix such as `_rate`"))
            bad.add(d.name)
        by_name[d.name] = d

    known = set(gen.signals) | set(gen.fields) | set(gen.record_fields) | set(gen.spec) | set(by_name) | {"interval"}
    elsewhere = _names_in_other_generations(gen)
    unavailable: dict[str, str] = {}
    graph = nx.DiGraph()
    for s in gen.signals:
        graph.add_node(s, kind="signal")
    for s in gen.fields:
        graph.add_node(s, kind="signal")
    for s in gen.record_fields:
        graph.add_node(s, kind="record field")
    for c in gen.spec:
        graph.add_node(c, kind="spec")
    ref_span: dict[tuple[str, str], Span] = {}
    for name, d in by_name.items():
        graph.add_node(name, kind="metric")
        for node in ast.walk(d.expr):
            if isinstance(node, ast.Name):
                reason = _unavailable_reason(gen, node.name, elsewhere)
                if node.name in gen.aliases:
                    new = gen.aliases[node.name]
                    diags.append(Diagnostic("warning", "renamed-signal", f"`{node.name}` was renamed to `{new}`; metric `{name}` reads `{new}`",
                                            node.span, hint=f"write `{new}`"))
                    graph.add_edge(new, name)
                    ref_span.setdefault((new, name), node.span)
                elif reason is not None:
                    unavailable.setdefault(name, reason)
                elif node.name in gen.signals and gen.signals[node.name].stability == "deprecated":
                    repl = gen.signals[node.name].renamed_to
                    diags.append(Diagnostic("warning", "deprecated-signal", f"metric `{name}` reads deprecated signal `{node.name}`",
                                            node.span, hint=f"use `{repl}`" if repl else "it may be removed in a later generation"))
                    graph.add_edge(node.name, name)
                    ref_span.setdefault((node.name, name), node.span)
                elif node.name not in known:
                    hint = did_you_mean(node.name, known) or "declare it as a signal in the generation YAML, or as a metric"
                    diags.append(Diagnostic("error", "unknown-name", f"unknown name `{node.name}` in metric `{name}`", node.span, hint=hint))
                    bad.add(name)
                elif node.name != "interval":
                    graph.add_edge(node.name, name)
                    ref_span.setdefault((node.name, name), node.span)
        if d.rollup is not None and d.rollup not in ("max", "min"):
            diags.append(Diagnostic("error", "rollup", f"`rollup {d.rollup}` of `{name}`: a declared rollup is `max` or `min`",
                                    d.rollup_span or d.span, hint="anything else is re-derived from summed inputs; omit the clause"))
            bad.add(name)
        if d.parent is not None and d.parent not in by_name:
            diags.append(Diagnostic("error", "unknown-name", f"unknown parent metric `{d.parent}` of `{name}`", d.parent_span or d.span,
                                    hint=did_you_mean(d.parent, by_name) or "the parent must be a metric of the catalog"))
            bad.add(name)

    metric_sub = graph.subgraph(by_name)
    for comp in nx.strongly_connected_components(metric_sub):
        if len(comp) == 1:
            (only,) = comp
            if not metric_sub.has_edge(only, only):
                continue
        cyc = nx.find_cycle(metric_sub.subgraph(comp))
        names = [u for u, _ in cyc] + [cyc[0][0]]
        start = min(comp)
        # point at the reference that closes the cycle inside the first metric (alphabetically)
        i = names.index(start)
        # edges run from a dependency to its user; print the cycle as "uses" links from `start`
        uses = list(reversed(names[i:-1] + names[:i] + [start]))
        span = ref_span.get((uses[1], start), by_name[start].span)
        diags.append(Diagnostic("error", "cycle", "dependency cycle: " + " uses ".join(f"`{u}`" for u in uses), span,
                                hint="a metric cannot depend on itself, directly or through other metrics; break the cycle"))
        bad.update(comp)

    for name in list(unavailable):
        for dep in nx.descendants(graph, name) if name in graph else ():
            if dep in by_name:
                unavailable.setdefault(dep, f"needs metric `{name}`, unavailable: {unavailable[name]}")
    bad |= set(unavailable)
    typer = Typer(gen)
    compiled: dict[str, CompiledMetric] = {}
    order = [n for n in nx.lexicographical_topological_sort(graph.subgraph(set(by_name) - _downstream(graph, bad, by_name))) if n in by_name]
    excluded = set(by_name) - set(order)
    for name in order:
        d = by_name[name]
        if any(p in excluded for p in graph.predecessors(name)):
            excluded.add(name)  # a dependency failed; its own diagnostic says why
            continue
        try:
            typed = typer.metric(d, compiled)
        except Fail as f:
            diags.append(f.diagnostic)
            excluded.add(name)
            continue
        except RecursionError:
            diags.append(Diagnostic("error", "too-deep", f"metric `{name}` is nested too deeply to compile", d.span,
                                    hint="split it into several metrics"))
            excluded.add(name)
            continue
        if typed is None:
            excluded.add(name)
            continue
        node, unit, bounds, threshold = typed
        deps_m = tuple(sorted(p for p in graph.predecessors(name) if p in by_name))
        if any(dm in excluded for dm in deps_m):
            excluded.add(name)
            continue
        pop_axes = [a for a, _ in node_axes(node) if a.startswith("population.")]
        from_records = bool(pop_axes) or any(getattr(compiled.get(dm), "from_records", False) for dm in deps_m) or \
            any(p in gen.record_fields for p in graph.predecessors(name))
        if from_records and _reads_windows(node, compiled):
            diags.append(Diagnostic("error", "population", f"metric `{name}` combines request records with counter windows", d.expr.span,
                                    hint="metrics over request/token records stand alone (run level); combine them only with constants"))
            excluded.add(name)
            continue
        compiled[name] = CompiledMetric(
            name=name, unit=unit, unit_text=d.unit, ir=node, axes=node_axes(node), degree=node_degree(node),
            formula=d.formula, description=d.description, groups=d.groups, bounds=bounds, threshold=threshold,
            parent=d.parent, source=d.source, span=d.span, metric_deps=deps_m,
            signal_deps=tuple(sorted(p for p in graph.predecessors(name) if p in gen.signals)),
            spec_deps=tuple(sorted(p for p in graph.predecessors(name) if p in gen.spec)), rollup=d.rollup,
            population=pop_axes[0].split(".", 1)[1] if pop_axes else None, from_records=from_records)
    diags = [with_source(dg, texts.get(dg.span.file)) if not dg.source_line else dg for dg in diags]
    diags.sort(key=lambda dg: (dg.span.file, dg.span.line, dg.span.col))
    h = hashlib.sha256()
    h.update(gen.content_hash.encode())
    for name in sorted(texts):
        h.update(Path(name).name.encode())  # the file name, not where the checkout lives
        h.update(texts[name].encode())
    window_metrics = {n: m for n, m in compiled.items() if not m.from_records}
    record_metrics = {n: m for n, m in compiled.items() if m.from_records}
    return MetricGraph(gen, window_metrics, graph, diags, h.hexdigest()[:16], unavailable=unavailable,
                       declarations=dict(by_name), record_metrics=record_metrics)


def _unavailable_reason(gen: Generation, name: str, elsewhere: dict[str, list[str]]) -> str | None:
    """Why a signal name that this generation cannot provide makes a metric unavailable (not an error):
    removed in this generation's lineage, listed but broken here, or defined only on other generations."""
    if name in gen.removed:
        return f"signal `{name}` was removed in generation `{gen.removed[name]}`"
    sig = gen.signals.get(name)
    if sig is not None and sig.broken:
        return f"signal `{name}` is listed on `{gen.name}` but known not to count (broken_on)"
    if sig is None and name not in gen.fields and name in elsewhere:
        return f"signal `{name}` does not exist on `{gen.name}` (it exists on: {', '.join(elsewhere[name])})"
    return None


def _names_in_other_generations(gen: Generation) -> dict[str, list[str]]:
    """Signal names of the shipped generations other than ``gen`` (name -> generations)."""
    from perfonto.ontology.loader import load_generation, shipped_generations

    out: dict[str, list[str]] = {}
    for g in shipped_generations():
        if g == gen.name:
            continue
        other = _cached_generation(g)
        if other is None:
            continue
        for s in list(other.signals) + list(other.fields):
            out.setdefault(s, []).append(g)
    return out


_GEN_CACHE: dict[str, Generation | None] = {}


def _cached_generation(name: str) -> Generation | None:
    from perfonto.ontology.loader import load_generation

    if name not in _GEN_CACHE:
        _GEN_CACHE[name] = load_generation(name)[0]
    return _GEN_CACHE[name]


def _downstream(graph: nx.DiGraph, bad: set[str], by_name) -> set[str]:
    """Bad metrics and every metric that depends on one."""
    out = set()
    for b in bad:
        if b in graph:
            out.add(b)
            out |= {n for n in nx.descendants(graph, b) if n in by_name}
    return out


def node_axes(n: ir.Node) -> ir.Axes:
    return n.axes


def node_degree(n: ir.Node) -> int:
    return n.degree
