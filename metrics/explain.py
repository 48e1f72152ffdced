"""``perfonto explain METRIC`` and ``perfonto graph METRIC``: what a metric is, how its unit is
derived step by step, what it depends on down to signals, where it is available, and its source."""

from __future__ import annotations

import networkx as nx

from perfonto.dsl.printer import to_text
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.infer import Typer
from perfonto.metrics.infer_typed import Fail
from perfonto.ontology import kinds
from perfonto.ontology.units import fmt_unit

STEP_WIDTH = 48  # characters of the "unit, step by step" expression column (an 80-100 column terminal)


def window_meaning(kind: str) -> str:
    """What a signal's name means inside a metric (its kind's row in ``ontology/kinds.py``)."""
    return kinds.of(kind).meaning


def input_of(gen, name: str) -> tuple[str | None, object]:
    """What ``name`` is among the generation's inputs, with its definition: ``("signal", ResolvedSignal)``,
    ``("field", ResolvedField)`` (a packed register's field), ``("record_field", ResolvedRecordField)``,
    ``("spec", spec constant)`` or ``("interval", None)``; ``(None, None)`` for anything else (a metric)."""
    for kind, table in (
        ("signal", gen.signals),
        ("field", gen.fields),
        ("record_field", gen.record_fields),
        ("spec", gen.spec),
    ):
        if name in table:
            return kind, table[name]
    return ("interval", None) if name == "interval" else (None, None)


def limits(m, esc=str) -> list[tuple[str, str]]:
    """A metric's bounds and threshold, those it has, as (fact, text), each catalog text through ``esc``
    (the Markdown reference escapes it; ``explain`` writes it as it is)."""
    out = []
    if m.bounds:
        out.append(("bounds", f"{m.bounds[0]:g} .. {m.bounds[1]:g}{_unit(m, esc)}"))
    if m.threshold:
        op, v, msg = m.threshold
        gated = " when parent" if getattr(m, "threshold_when_parent", False) else ""  # as the metric file says it
        out.append(("threshold", f"{esc(op)} {v:g}{_unit(m, esc)}{gated}: {esc(msg)}"))
    return out


def _unit(m, esc) -> str:
    """`` <unit>`` after a number, nothing for a plain ratio (``[1]``: "0 .. 3", not "0 .. 3 1")."""
    return "" if m.unit_text.strip() in ("", "1") else f" {esc(m.unit_text)}"


def _level_kind(graph: MetricGraph, name: str) -> str:
    """What a metric whose server value is an extreme over chips reads: gauges, packed fields or both."""
    from .across_chips import field_deps

    fields = bool(field_deps(graph, name))
    gauges = any(s in graph.generation.signals for s in graph.all_metrics[name].signal_deps)
    what = " and ".join(w for w, on in (("gauge", gauges), ("packed field", fields)) if on)
    return f"{what} combined across chips"


def availability(name: str, catalog_dir=None) -> dict[str, str]:
    """Generation → "available" or the reason the metric is unavailable there: the shipped generations
    and library, or (``catalog_dir``) the generations and metric files of a user's catalog."""
    from importlib import resources
    from pathlib import Path

    from .catalog import load_catalog

    out = {}
    names = sorted(
        p.stem for p in Path(str(resources.files("perfonto.ontology").joinpath("catalog"))).glob("*.yaml")
    )  # the shipped ones
    if catalog_dir is not None:
        import yaml

        found = []
        for p in sorted(Path(catalog_dir).glob("*.yaml")):
            if p.name.endswith(".vectors.yaml"):
                continue
            try:
                g = (yaml.safe_load(p.read_text(encoding="utf-8")) or {}).get("generation")
            except Exception:
                g = None
            if isinstance(g, str):
                found.append(g)
        names = found or names
    for g in names:
        cat = load_catalog(
            catalog_dir, g
        )  # the other shipped generations give the reasons (cached when compiled before)
        if cat.graph is None:
            out[g] = "generation does not load"
            continue
        graph = cat.graph
        if name in graph.all_metrics:
            out[g] = "available"
        elif name in graph.unavailable:
            out[g] = f"unavailable: {graph.unavailable[name]}"
        else:
            out[g] = "does not compile"
    return out


# What each kind of input is, as a step of ``unit_steps`` (a packed field cannot stand in a formula).
_STEP_NOTES = {
    "signal": lambda s: f"{s.kind}: {window_meaning(s.kind)}",
    "spec": lambda c: f"spec constant {c.value:g} {c.unit_text} ({c.provenance}, {c.scope.value} scope)",
    "record_field": lambda f: f"record field: one value per `{f.record}` record",
    "interval": lambda _: "window duration from the sample timestamps",
}


def unit_steps(graph: MetricGraph, name: str) -> list[tuple[str, str, str]]:
    """(sub-expression, unit, note) for every sub-expression, innermost first, then the conversion."""
    decl = graph.declarations[name]
    typer = Typer(graph.generation)
    typer.trace = []
    deps = {n: graph.all_metrics[n] for n in nx.ancestors(graph.graph, name) if n in graph.all_metrics}
    try:
        typer.metric(decl, deps)
    except Fail as f:
        return [("(error)", "", f.diagnostic.message)]
    gen = graph.generation
    steps = []
    for node, unit, axes, degree in typer.trace:
        text = to_text(node)
        kind, what = input_of(gen, text)
        note = ["metric"] if text in graph.all_metrics else [_STEP_NOTES[kind](what)] if kind in _STEP_NOTES else []
        if axes:
            note.append("over " + ", ".join(f"{a}[{n}]" for a, n in axes))
        note.append(
            "adds up across chips"
            if degree == 1
            else ("independent of chip count" if degree == 0 else f"chips^{degree}")
        )
        steps.append((text, "condition" if unit is None else fmt_unit(unit), "; ".join(note)))
    m = graph.all_metrics[name]
    last_unit = typer.trace[-1][1]
    factor = graph.generation.registry.Quantity(1, last_unit).to(m.unit).magnitude if last_unit is not None else 1
    steps.append((f"declared [{m.unit_text}]", fmt_unit(m.unit), f"conversion factor {factor:g}"))
    return steps


def dependency_tree(graph: MetricGraph, name: str, prefix: str = "", seen: set | None = None) -> list[str]:
    """Indented tree of what ``name`` depends on, down to signals and spec constants."""
    seen = set() if seen is None else seen
    gen = graph.generation
    lines = []
    deps = sorted(graph.graph.predecessors(name))
    from perfonto.dsl import ast as dast

    decl = graph.declarations.get(name)
    if decl is not None and any(isinstance(n, dast.Name) and n.name == "interval" for n in dast.walk(decl.expr)):
        deps.append("interval")
    for i, d in enumerate(deps):
        last = i == len(deps) - 1
        branch = "└── " if last else "├── "
        if d in graph.all_metrics:
            m = graph.all_metrics[d]
            lines.append(f"{prefix}{branch}{d} [{m.unit_text}] = {m.formula}")
            if d not in seen:
                seen.add(d)
                lines += dependency_tree(graph, d, prefix + ("    " if last else "│   "), seen)
            continue
        kind, what = input_of(gen, d)
        if kind is not None:
            lines.append(f"{prefix}{branch}{d}{_TREE_LEAVES[kind](what)}")
    return lines


def _signal_leaf(s) -> str:
    """A signal's kind, unit, width, scale and instances."""
    inst = ", ".join(f"{a} x{n}" for a, n in s.axes) or "per chip"
    width = f"{s.width}-bit" if s.width else "level"
    return f" ({s.kind}, {s.unit_text}, {width}, scale {s.scale:g}, {inst})"


# What each kind of input is, after its name, as a leaf of ``dependency_tree``.
_TREE_LEAVES = {
    "signal": _signal_leaf,
    "field": lambda f: f" (bits {f.lo}..{f.hi} of {f.register})",
    "record_field": lambda rf: f" (record field, {rf.unit_text}, one per {rf.record})",
    "interval": lambda _: " (window duration from the sample timestamps, s)",
    "spec": lambda c: f" = {c.value:g} {c.unit_text} ({c.provenance}{': ' + c.source if c.source else ''})",
}


def explain_input(gen, name: str) -> str | None:
    """What a signal, packed field, record field or spec constant is (None if ``name`` is none of them)."""
    kind, what = input_of(gen, name)
    if kind not in _INPUT_TEXTS:
        return None
    lines = _INPUT_TEXTS[kind](name, what)
    fields = [f for f in gen.fields.values() if f.register == name]
    if fields:  # a packed register is read through its fields: name them (an architect found none listed)
        lines.append("fields:")
        lines += [
            f"  {f.name}: bits {f.lo}..{f.hi} [{f.unit_text or '1'}]" + (f" — {f.description}" if f.description else "")
            for f in sorted(fields, key=lambda f: f.lo)
        ]
    return "\n".join(lines)


def _signal_text(name: str, s) -> list[str]:
    """A signal: kind, block, unit, width and wrap, instances, sentinels, resets, stability, meaning."""
    out = [f"{name}: {s.kind} signal of block `{s.block}` [{s.unit_text}] — defined at {s.span}"]
    out.append(f"  {s.description}")
    wraps = (
        f"wraps at {s.wrap_width or 'unknown'} bits"
        if kinds.of(s).counts
        else f"read as it is, no wrap ({'a packed register' if s.kind == 'packed' else 'a ' + s.kind})"
    )  # a gauge or a packed register is no count
    width = f"{s.width} bits" if s.width is not None else "not declared"
    out.append(f"width: {width}; {wraps}; scale {s.scale:g} (raw × scale = value)")
    out.append("instances: " + (", ".join(f"{a} x{n}" for a, n in s.axes) or "one per chip") + f"; clock `{s.clock}`")
    if s.sentinel:
        out.append(f"sentinel raw values (no data): {', '.join(str(v) for v in s.sentinel)}")
    if s.modulus is not None:
        out.append(
            f"wraps at a declared range: {s.modulus} raw counts (increase mod {s.modulus}; raw values at or "
            "beyond it are null)"
        )
    if s.scale_field is not None:
        out.append(
            f"unit per sample: raw × {s.scale:g} × {s.scale_field[1]:g} ^ {s.scale_field[0]} (a window across a "
            "change is null)"
        )
    if s.slots is not None:
        out.append(
            f"instances: {s.instances} present of {s.full_instances} slots (flat slot indices "
            f"{', '.join(map(str, s.slots[:16]))}"
            f"{' …' if len(s.slots) > 16 else ''})"
        )
    if s.reset_indicator:
        out.append(
            f"reset indicator: {s.reset_indicator}"
            + (" (an uptime: a decrease is a reset)" if s.reset_kind == "decrease" else " (any change is a reset)")
        )
    if s.max_rate:
        out.append(f"max rate: {s.max_rate:g} {s.unit_text}/s")
    out.append(
        f"stability: {s.stability}{' → ' + s.renamed_to if s.renamed_to else ''}; since `{s.since}`"
        + ("; BROKEN on this generation" if s.broken else "")
    )
    out.append(f"in a metric: {window_meaning(s.kind)}")
    return out


def _spec_text(name: str, c) -> list[str]:
    """A spec constant: value, provenance, scope, description, precision and source."""
    out = [f"{name} = {c.value:g} {c.unit_text} ({c.provenance}, {c.scope.value} scope) — defined at {c.span}"]
    if c.description:
        out.append(f"  {c.description}")
    if c.precision or c.sparsity:
        out.append(f"precision: {c.precision or '—'}; sparsity: {c.sparsity or '—'}")
    out.append(f"source: {c.source or '—'}")
    return out


# Each kind of input -> its lines in ``explain_input`` (``interval`` has none: it is not a declaration).
_INPUT_TEXTS = {
    "signal": _signal_text,
    "field": lambda name, f: [
        f"{name}: bits {f.lo}..{f.hi} of packed register `{f.register}` [{f.unit_text}] — {f.description}"
    ],
    "record_field": lambda name, f: [f"{name}: field of `{f.record}` records [{f.unit_text}] — {f.description}"],
    "spec": _spec_text,
}


def explain(graph: MetricGraph, name: str, catalog_dir=None) -> str:
    m = graph.all_metrics[name]
    out = [f"{name} [{m.unit_text}]  — defined at {m.span}"]
    if m.description:
        out.append(f"  {m.description}")
    out.append("")
    out.append(f"formula: {m.formula}")
    out += [f"{fact}: {text}" for fact, text in limits(m)]
    if m.parent:
        out.append(f"parent (top-down tree): {m.parent}")
    children = sorted(n for n, x in graph.metrics.items() if x.parent == name)
    if children:
        out.append(f"children: {', '.join(children)}")
    if m.from_records:
        out.append(
            "population: "
            + (
                "one value per " + m.population + " record"
                if m.population
                else "one value over the run (a reduction over records)"
            )
        )
    else:
        from .across_chips import chip_extreme

        extreme = chip_extreme(graph, name)
        out.append(
            "server level: "
            + (
                f"the {extreme} over chips (a {'declared rollup' if m.rollup else _level_kind(graph, name)}"
                f" by {extreme}), not a ratio of totals"
                if extreme
                else "sum over chips (a total)"
                if m.degree == 1
                else "ratio of server totals, from summed base quantities"
            )
        )
    out.append("")
    out.append("unit, step by step:")
    steps = unit_steps(graph, name)
    w = min(max(len(s[0]) for s in steps), STEP_WIDTH)  # a longer step stands on its own line, the unit below it
    uw = max(len(s[1]) for s in steps)
    for text, unit, note in steps:
        if len(text) > w:
            out.append(f"  {text}")
            text = ""
        out.append(f"  {text:<{w}}  {unit:<{uw}}  {note}")
    out.append("")
    out.append("depends on:")
    out.append(f"  {name}")
    out += ["  " + line for line in dependency_tree(graph, name)]
    out.append("")
    out.append("availability:")
    for g, what in availability(name, catalog_dir).items():
        out.append(f"  {g}: {what}")
    out.append("")
    out.append(f"source: {m.source or '—'}")
    return "\n".join(out)


def graph_text(graph: MetricGraph, name: str, fmt: str = "mermaid") -> str:
    """The dependency graph of ``name`` (its ancestors) as Mermaid or DOT; ids are indices, names are
    quoted labels, so catalog text cannot break the syntax."""
    nodes = sorted(nx.ancestors(graph.graph, name) | {name})
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    kind = nx.get_node_attributes(graph.graph, "kind")
    edges = sorted((u, v) for u, v in graph.graph.subgraph(nodes).edges())

    def label(n: str) -> str:
        k = kind.get(n, "metric")
        unit = graph.all_metrics[n].unit_text if n in graph.all_metrics else ""
        text = f"{n} [{unit}]" if unit else n
        return f"{text} ({k})" if k != "metric" else text

    if fmt == "dot":

        def q(s: str) -> str:
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = ["digraph perfonto {", "  rankdir=LR;"]
        for n in nodes:
            shape = {"signal": "box", "spec": "note"}.get(kind.get(n, "metric"), "ellipse")
            lines.append(f"  {ids[n]} [label={q(label(n))}, shape={shape}];")
        lines += [f"  {ids[u]} -> {ids[v]};" for u, v in edges]
        lines.append("}")
        return "\n".join(lines) + "\n"

    def mq(s: str) -> str:
        return '"' + s.replace('"', "#quot;") + '"'

    lines = ["flowchart LR"]
    for n in nodes:
        k = kind.get(n, "metric")
        open_, close = {"signal": ("[", "]"), "spec": ("[(", ")]")}.get(k, ("(", ")"))
        lines.append(f"  {ids[n]}{open_}{mq(label(n))}{close}")
    lines += [f"  {ids[u]} --> {ids[v]}" for u, v in edges]
    return "\n".join(lines) + "\n"
