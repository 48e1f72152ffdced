"""The compiler's passes: plain functions, each from one stage (``metrics.stages``) to the next.

``declare`` → ``resolve_names`` → ``check_cycles`` → ``availability`` → ``infer_units`` (then
``metrics.compiler.classify`` builds the ``MetricGraph``). A metric with an error is left out
(``bad``) with its diagnostic, and every other metric still compiles.
"""

from __future__ import annotations

import heapq
import re

import networkx as nx

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic, Span, did_you_mean

from .infer import Typer
from .infer_scope import _reads_windows
from .infer_typed import Fail
from .optional import optional_names, optional_unknown
from .stages import Available, CompiledMetric, Declared, Graphed, Parsed, Resolved, Typed, advance, frozen
from .unavailable import names_in, removed_read, shipped_library, unavailable_reason

METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


def declare(p: Parsed) -> Declared:
    """One declaration per name: a name that is not dotted snake_case, defined twice, or taken by a
    signal, field, record field, spec constant or ``interval`` is an error."""
    gen = p.gen
    by_name: dict[str, ast.MetricDecl] = {}
    bad: set[str] = set()
    diags = list(p.diagnostics)
    for d in p.decls:
        if not METRIC_NAME.match(d.name):
            diags.append(
                Diagnostic(
                    "error",
                    "metric-name",
                    f"metric name `{d.name}` is not lower-case snake_case with dots",
                    d.span,
                    hint="use names like `hbm.read_bandwidth`",
                )
            )
        if d.name in by_name:
            first = by_name[d.name].span
            diags.append(
                Diagnostic(
                    "error",
                    "duplicate-name",
                    f"metric `{d.name}` is defined twice (first at {first})",
                    d.span,
                    hint="rename or remove one of the definitions",
                )
            )
            bad.add(d.name)
            continue
        if (
            d.name in gen.signals
            or d.name in gen.spec
            or d.name in gen.fields
            or d.name in gen.record_fields
            or d.name == "interval"
            or d.name.split(".")[0] in ("spec", "interval")
        ):
            diags.append(
                Diagnostic(
                    "error",
                    "duplicate-name",
                    f"metric `{d.name}` has the name of a signal or spec constant",
                    d.span,
                    hint="metric names must differ from signal names; add a suffix such as `_rate`",
                )
            )
            bad.add(d.name)
        by_name[d.name] = d
    return advance(Declared, p, diagnostics=tuple(diags), by_name=frozen(by_name), bad=frozenset(bad))


def _clause_errors(name: str, d, by_name) -> list[Diagnostic]:
    """A metric's clauses that name something: a declared rollup other than ``max``/``min``, a parent that
    is not a metric of the catalog."""
    out = []
    if d.rollup is not None and d.rollup not in ("max", "min"):
        out.append(
            Diagnostic(
                "error",
                "rollup",
                f"`rollup {d.rollup}` of `{name}`: a declared rollup is `max` or `min`",
                d.rollup_span or d.span,
                hint="anything else is re-derived from summed inputs; omit the clause",
            )
        )
    if d.parent is not None and d.parent not in by_name:
        out.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"unknown parent metric `{d.parent}` of `{name}`",
                d.parent_span or d.span,
                hint=did_you_mean(d.parent, by_name) or "the parent must be a metric of the catalog",
            )
        )
    return out


def resolve_names(s: Declared) -> Resolved:
    """Every name a formula reads becomes an edge of the dependency graph (dependency → user):
    renamed signals resolve through their alias (warning), deprecated ones warn, names this
    generation cannot provide make the metric unavailable (not an error; a ``removed-signal``
    warning for a user's metric reading a removed signal, ``metrics.unavailable``), unknown names
    are errors with a "did you mean"; unknown parents and undeclarable rollups are errors."""
    gen, by_name = s.gen, s.by_name
    diags, bad = list(s.diagnostics), set(s.bad)
    known = set(gen.signals) | set(gen.fields) | set(gen.record_fields) | set(gen.spec) | set(by_name) | {"interval"}
    elsewhere = names_in(s.others, gen)
    other_spec = {n for o in s.others for n in o.spec}
    unavailable: dict[str, str] = {}
    graph = nx.DiGraph()
    for n in list(gen.signals) + list(gen.fields):
        graph.add_node(n, kind="signal")
    for n in gen.record_fields:
        graph.add_node(n, kind="record field")
    for n in gen.spec:
        graph.add_node(n, kind="spec")
    ref_span: dict[tuple[str, str], Span] = {}

    def use(dep: str, user: str, span: Span) -> None:
        graph.add_edge(dep, user)
        ref_span.setdefault((dep, user), span)

    def read(name: str, d: ast.MetricDecl, node: ast.Name, optional) -> None:
        """Resolve one name metric `name` reads (see above)."""
        reason = unavailable_reason(gen, node.name, elsewhere)
        if node.name in gen.aliases and gen.aliases[node.name] not in gen.removed:
            new = gen.aliases[node.name]
            diags.append(
                Diagnostic(
                    "warning",
                    "renamed-signal",
                    f"`{node.name}` was renamed to `{new}`; metric `{name}` reads `{new}`",
                    node.span,
                    hint=f"write `{new}`",
                )
            )
            use(new, name, node.span)
        elif reason is not None:
            if node.name not in optional:
                unavailable.setdefault(name, reason)
                warning = None if shipped_library(d.span.file) else removed_read(gen, node.name, name, node.span)
                diags.extend([warning] if warning else [])
        elif node.name in gen.signals and gen.signals[node.name].stability == "deprecated":
            repl = gen.signals[node.name].renamed_to
            if repl or not shipped_library(d.span.file):  # the library reads it knowingly (sohu-only)
                diags.append(
                    Diagnostic(
                        "warning",
                        "deprecated-signal",
                        f"metric `{name}` reads deprecated signal `{node.name}`",
                        node.span,
                        hint=f"use `{repl}`" if repl else "it may be removed in a later generation",
                    )
                )
            use(node.name, name, node.span)
        elif node.name not in known and node.name in optional:  # `default(x, d)`: d here (metrics.optional)
            if node.name not in other_spec:
                diags.append(optional_unknown(node.name, name, gen.name, did_you_mean(node.name, known), node.span))
        elif node.name not in known:
            hint = did_you_mean(node.name, known) or "declare it as a signal in the generation YAML, or as a metric"
            diags.append(
                Diagnostic(
                    "error", "unknown-name", f"unknown name `{node.name}` in metric `{name}`", node.span, hint=hint
                )
            )
            bad.add(name)
        elif node.name != "interval":
            use(node.name, name, node.span)

    for name, d in by_name.items():
        graph.add_node(name, kind="metric")
        optional = optional_names(d.expr)  # read only as x of `default(x, d)`: absent here, d is used
        for node in ast.walk(d.expr):
            if isinstance(node, ast.Name):
                read(name, d, node, optional)
        errors = _clause_errors(name, d, by_name)
        diags += errors
        if errors:
            bad.add(name)
    return advance(
        Resolved,
        s,
        diagnostics=tuple(diags),
        bad=frozenset(bad),
        graph=graph,
        ref_span=frozen(ref_span),
        unavailable=frozen(unavailable),
    )


def check_cycles(s: Resolved) -> Graphed:
    """Every dependency cycle among metrics is one error naming the cycle, pointing at the reference
    that closes it inside its alphabetically first metric; the metrics on it are left out."""
    diags, bad = list(s.diagnostics), set(s.bad)
    metric_sub = s.graph.subgraph(s.by_name)
    for comp in nx.strongly_connected_components(metric_sub):
        if len(comp) == 1:
            (only,) = comp
            if not metric_sub.has_edge(only, only):
                continue
        cyc = nx.find_cycle(metric_sub.subgraph(comp))
        names = [u for u, _ in cyc] + [cyc[0][0]]
        start = min(comp)
        i = names.index(start)
        # edges run from a dependency to its user; print the cycle as "uses" links from `start`
        uses = list(reversed(names[i:-1] + names[:i] + [start]))
        span = s.ref_span.get((uses[1], start), s.by_name[start].span)
        diags.append(
            Diagnostic(
                "error",
                "cycle",
                "dependency cycle: " + " uses ".join(f"`{u}`" for u in uses),
                span,
                hint="a metric cannot depend on itself, directly or through other metrics; break the cycle",
            )
        )
        bad.update(comp)
    return advance(Graphed, s, diagnostics=tuple(diags), bad=frozenset(bad))


def availability(s: Graphed) -> Available:
    """A metric that needs an unavailable metric is unavailable too, with the reason chained."""
    unavailable = dict(s.unavailable)
    for name in list(unavailable):
        for dep in nx.descendants(s.graph, name) if name in s.graph else ():
            if dep in s.by_name:
                unavailable.setdefault(dep, f"needs metric `{name}`, unavailable: {unavailable[name]}")
    return advance(Available, s, unavailable=frozen(unavailable), bad=s.bad | frozenset(unavailable))


def _lexicographic_order(graph: nx.DiGraph, nodes: set) -> list:
    """``nodes`` in topological order, the alphabetically first ready node first (the order of
    ``nx.lexicographical_topological_sort`` on the subgraph, by Kahn's algorithm over the graph's own
    adjacency: no subgraph view to filter on every step).

    Raises:
        nx.NetworkXUnfeasible: the nodes hold a cycle (``check_cycles`` has left those out).
    """
    indegree = {n: sum(1 for p in graph.predecessors(n) if p in nodes) for n in nodes}
    ready = [n for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = heapq.heappop(ready)
        out.append(n)
        for m in graph.successors(n):
            if m in indegree:
                indegree[m] -= 1
                if indegree[m] == 0:
                    heapq.heappush(ready, m)
    if len(out) != len(nodes):
        raise nx.NetworkXUnfeasible("the metrics hold a dependency cycle")
    return out


def infer_units(s: Available) -> Typed:
    """Type every metric that is not left out, in topological order (``metrics.infer.Typer``): units
    and their conversion factors, instance axes, chip degree, bounds and threshold in the declared
    unit, and the record-population rules. A metric whose dependency failed is left out silently (the
    dependency's own diagnostic says why)."""
    gen, graph, by_name = s.gen, s.graph, s.by_name
    diags = list(s.diagnostics)
    typer = Typer(gen)
    compiled: dict[str, CompiledMetric] = {}
    order = [n for n in _lexicographic_order(graph, set(by_name) - _downstream(graph, s.bad, by_name)) if n in by_name]
    excluded = set(by_name) - set(order)
    for name in order:
        d = by_name[name]
        if any(p in excluded for p in graph.predecessors(name)):
            excluded.add(name)
            continue
        typed = _type_metric(typer, name, d, compiled, diags)
        diags += typer.warnings  # the metric's roll-up warnings (``metrics.rollup_rules``), typed or not
        typer.warnings = []
        if typed is None:
            excluded.add(name)
            continue
        node, unit, bounds, threshold = typed
        deps_m = tuple(sorted(p for p in graph.predecessors(name) if p in by_name))
        if any(dm in excluded for dm in deps_m):
            excluded.add(name)
            continue
        pop_axes = [a for a, _ in node.axes if a.startswith("population.")]
        from_records = _from_records(s, name, pop_axes, deps_m, compiled)
        if from_records and _reads_windows(node, compiled):
            diags.append(
                Diagnostic(
                    "error",
                    "population",
                    f"metric `{name}` combines request records with counter windows",
                    d.expr.span,
                    hint="metrics over request/token records stand alone (run level); combine them only with constants",
                )
            )
            excluded.add(name)
            continue
        compiled[name] = CompiledMetric(
            name=name,
            unit=unit,
            unit_text=d.unit,
            ir=node,
            axes=node.axes,
            degree=node.degree,
            formula=d.formula,
            description=d.description,
            groups=d.groups,
            bounds=bounds,
            threshold=threshold,
            parent=d.parent,
            source=d.source,
            span=d.span,
            metric_deps=deps_m,
            signal_deps=tuple(sorted(p for p in graph.predecessors(name) if p in gen.signals)),
            spec_deps=tuple(sorted(p for p in graph.predecessors(name) if p in gen.spec)),
            rollup=d.rollup,
            population=pop_axes[0].split(".", 1)[1] if pop_axes else None,
            from_records=from_records,
            group_rule=typer.group_rule and not from_records,
            reads_leader=typer.leader_of.get(name, False),
            threshold_when_parent=bool(d.threshold and d.threshold.when_parent),
        )
    diags += _parent_units(compiled, by_name) + _parent_cycles(compiled, by_name)
    return advance(Typed, s, diagnostics=tuple(diags), compiled=frozen(compiled))


def _parent_cycles(compiled: dict[str, CompiledMetric], by_name) -> list[Diagnostic]:
    """An error per loop of ``parent`` clauses (a metric its own parent, or two each other's), at the
    clause of the loop's first metric in name order: a tree walked up from a node never ended (analyze
    hung in the findings' order; check said 0 errors)."""
    out, seen_loops = [], set()
    for name in sorted(compiled):
        chain, p = [name], compiled[name].parent
        while p is not None and p in compiled and p not in chain:
            chain.append(p)
            p = compiled[p].parent
        if p is None or p not in chain:
            continue
        loop = chain[chain.index(p) :]
        key = frozenset(loop)
        if key in seen_loops:
            continue
        seen_loops.add(key)
        first = min(loop)
        d = by_name[first]
        out.append(
            Diagnostic(
                "error",
                "parent-cycle",
                f"the `parent` clauses of {' → '.join(f'`{n}`' for n in _from(loop, first))} → `{first}` form a loop: "
                "a top-down tree has a root",
                d.parent_span or d.span,
                hint=f"drop or change the `parent` clause of `{first}` (or of another metric of the loop)",
            )
        )
    return out


def _from(loop: list[str], first: str) -> list[str]:
    i = loop.index(first)
    return loop[i:] + loop[:i]


def _parent_units(compiled: dict[str, CompiledMetric], by_name) -> list[Diagnostic]:
    """A warning per top-down child whose unit is not of its parent's dimension: a node's children are
    shares of it that add up to it (a GB/s under a percent cannot)."""
    out = []
    for name, m in compiled.items():
        parent = compiled.get(m.parent) if m.parent else None
        if parent is None or m.unit.dimensionality == parent.unit.dimensionality:
            continue
        d = by_name[name]
        out.append(
            Diagnostic(
                "warning",
                "parent-unit",
                f"`{name}` [{m.unit_text}] is a child of `{m.parent}` [{parent.unit_text}]: a top-down node's children "
                "are shares of it that add up to it, in its unit",
                d.parent_span or d.span,
                hint=f"give `{name}` the unit of `{m.parent}`, or drop its `parent` clause (a group names a family)",
            )
        )
    return out


def _from_records(s: Available, name: str, pop_axes: list, deps_m: tuple, compiled: dict) -> bool:
    """Whether a metric is over records: it has a population axis, uses a metric over records, or
    reads record fields."""
    return (
        bool(pop_axes)
        or any(getattr(compiled.get(dm), "from_records", False) for dm in deps_m)
        or any(p in s.gen.record_fields for p in s.graph.predecessors(name))
    )


def _type_metric(typer: Typer, name: str, d, compiled: dict, diags: list[Diagnostic]):
    """The typer's (node, unit, bounds, threshold) for one declaration, or None when it fails (its
    diagnostic added; a metric nested too deeply for the recursion gets its own)."""
    try:
        typer.group_rule = False
        return typer.metric(d, compiled)
    except Fail as f:
        diags.append(f.diagnostic)
        return None
    except RecursionError:
        diags.append(
            Diagnostic(
                "error",
                "too-deep",
                f"metric `{name}` is nested too deeply to compile",
                d.span,
                hint="split it into several metrics",
            )
        )
        return None


# ---- helpers ----------------------------------------------------------------------------------------


def _downstream(graph: nx.DiGraph, bad, by_name) -> set[str]:
    """Bad metrics and every metric that depends on one."""
    out = set()
    for b in bad:
        if b in graph:
            out.add(b)
            out |= {n for n in nx.descendants(graph, b) if n in by_name}
    return out


__all__ = [
    "METRIC_NAME",
    "availability",
    "check_cycles",
    "declare",
    "infer_units",
    "names_in",
    "resolve_names",
    "unavailable_reason",
]
