"""Write a ``SourceCatalog`` as a generation YAML and a ``.metrics`` file, and compile them.

Steps (each metric's fate is recorded; nothing is dropped silently):
1. the ontology: one block per source PMU/block (clock domain assumed, instance axes where the source
   has them), counters with unit ``event`` and width 64 (no source gives a width), constants as
   dimensionless ``spec`` entries with provenance ``assumed``; written with ``yaml.safe_dump``;
2. metrics in dependency order: the declared unit is the source's label mapped to pint when the
   formula's dimension converts to it, else the formula's own base unit (counted "without unit",
   and when a label was given, listed with the reason); the value is kept equal to the source's
   displayed value (``formula × scale``) by removing or adding a literal factor (``apply_scale``);
3. compile with ``metrics.compiler`` until clean: a metric with an error is rejected with the
   compiler's message, then every metric that uses it, and parent links to it are dropped;
4. write the ``.metrics`` file and compile it from disk with ``compile_files`` (what ``perfonto
   check`` does).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import yaml

from perfonto.metrics.compiler import MetricGraph, compile_files, compile_texts
from perfonto.ontology.diagnostics import Diagnostic
from perfonto.ontology.generation import Generation
from perfonto.ontology.loader import load_generation
from perfonto.ontology.units import UnitError, conversion_factor, parse_unit

from . import ir
from .catalog import Finding, SourceCatalog, SourceMetric
from .library import compile_with_library, library_graph, overlap, with_library
from .lint import lint_catalog
from .names import group, quote
from .ontology_doc import ontology_doc
from .translate import Printer, RefInfo, apply_scale, number
from .units import as_given, base_units, map_label, scaled_unit, unit_text
from perfonto.ontology.errors import PerfontoError

COUNTER_WIDTH = 64


class ImportFailure(PerfontoError):
    """The import could not produce a usable generation (message says why)."""

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or []


@dataclass
class Outcome:
    """What happened to one source metric."""

    key: str
    name: str
    status: str  # "with_unit", "without_unit" or "rejected"
    weight: int = 1
    unit: str = ""
    reason: str = ""  # rejection reason
    unit_note: str = ""  # a source unit that could not be applied, and why
    library: bool = False  # left out of the metrics file: the shipped library defines it alike


@dataclass
class BuiltGeneration:
    generation: str
    yaml_path: Path | None
    metrics_path: Path
    gen: Generation
    graph: MetricGraph
    outcomes: dict[str, Outcome]
    findings: list[Finding] = field(default_factory=list)
    signals: dict[str, str] = field(default_factory=dict)  # source event key -> signal name
    constants: dict[str, str] = field(default_factory=dict)  # source constant key -> spec name
    names: dict[str, str] = field(default_factory=dict)  # source metric key -> metric name
    archs: list[str] = field(default_factory=list)


def _digest(path: str) -> str:
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.is_file() else "-"


def _safe_comment(text: str) -> str:
    return re.sub(r"[^\x20-\x7e]", "?", text)


def build(cat: SourceCatalog, out_dir: Path) -> BuiltGeneration:
    """Write and compile one generation of an import (see the module docstring)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    parent = None
    if cat.extends:
        parent, diags = load_generation(cat.extends)
        if parent is None:
            raise ImportFailure(f"cannot load generation `{cat.extends}`", diags)
    yaml_path = _write_ontology(cat, ontology_doc(cat, parent), out_dir)
    gen, diags = load_generation(yaml_path)
    if gen is None:
        raise ImportFailure(f"the generated ontology {yaml_path} does not load", diags)

    signals = {ev.key: f"{ev.block}.{ev.name}" for ev in cat.events.values()}
    consts = {c.key: f"spec.{c.name}" for c in cat.constants.values()}
    names = {m.key: m.name for m in cat.metrics.values()}
    reg = gen.registry
    printer = Printer(
        reg, {n: s.unit for n, s in gen.signals.items()}, signals, consts, {n: c.unit for n, c in gen.spec.items()}, {}
    )
    findings = list(cat.findings) + lint_catalog(cat)
    outcomes: dict[str, Outcome] = {}
    order = _order_with_cycles(_dependencies(cat), cat)
    decls = _declare_all(cat, order, printer, reg, findings, outcomes)

    metrics_path = out_dir / f"{cat.generation}.metrics"
    graph = _compile_until_clean(gen, cat, decls, outcomes, findings, str(metrics_path))
    omit = _beside_library(cat, gen, graph, decls, outcomes)
    text = _file_text(cat, decls, outcomes, omit or set())
    metrics_path.write_text(text, encoding="utf-8")
    graph = compile_files(gen, [metrics_path]) if omit is None else compile_with_library(gen, metrics_path)
    for d in graph.errors:  # pragma: no cover - _compile_until_clean leaves none
        findings.append(Finding("compile", "", d.render(), "error"))
    _record_compiled(cat, decls, outcomes, graph)
    for key in omit or ():
        outcomes[key].library = True
    _tree_and_warning_findings(cat, outcomes, graph, findings)
    return BuiltGeneration(
        cat.generation, yaml_path, metrics_path, gen, graph, outcomes, findings, signals, consts, names, list(cat.archs)
    )


def _beside_library(cat: SourceCatalog, gen: Generation, graph, decls: dict, outcomes: dict) -> set[str] | None:
    """None when commands compile the folder without the shipped metric library; else the metrics the
    library defines alike, to leave out of the file; those it defines otherwise are rejected
    (``interop.library``)."""
    if not cat.extends or not with_library(gen):
        return None
    names = {k: cat.metrics[k].name for k in decls if k not in outcomes}
    same, differ = overlap(cat, names, graph, library_graph(gen))
    for key, why in differ.items():
        outcomes[key] = Outcome(key, cat.metrics[key].name, "rejected", cat.metrics[key].weight, reason=why)
    return same


def _write_ontology(cat: SourceCatalog, doc: dict, out_dir: Path) -> Path:
    """Write the generation file (a header saying where it comes from, then `doc`); returns its path."""
    yaml_path = out_dir / f"{cat.generation}.yaml"
    header = (
        f"# Generated by `perfonto import {cat.format}` from {_safe_comment(Path(cat.path).name)} "
        f"(sha256 {_digest(cat.path)}); re-import rather than edit.\n# Counters: unit `event`, width {COUNTER_WIDTH} "
        "(the source gives neither); "
        f"constants and clock: assumed.\n"
    )
    yaml_path.write_text(
        header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=False, width=100), encoding="utf-8"
    )
    return yaml_path


def _dependencies(cat: SourceCatalog) -> nx.DiGraph:
    """Metric → the metrics that use it; the metrics of a dependency cycle lose their formula (the
    cycle is their problem)."""
    deps = nx.DiGraph()
    for m in cat.metrics.values():
        deps.add_node(m.key)
        if m.expr is not None:
            for r in ir.leaves(m.expr, ir.Ref):
                deps.add_edge(r, m.key)
    for comp in nx.strongly_connected_components(deps):
        if len(comp) > 1 or any(deps.has_edge(k, k) for k in comp):
            for k in comp:
                if k in cat.metrics and cat.metrics[k].expr is not None:
                    cat.metrics[k].problem = "dependency cycle: " + " → ".join(sorted(comp))
                    cat.metrics[k].expr = None
    return deps


def _declare_all(
    cat: SourceCatalog, order: list[str], printer: Printer, reg, findings: list, outcomes: dict[str, Outcome]
) -> dict[str, dict]:
    """Each metric's declaration, in dependency order; a metric without a formula, using a rejected or
    unknown metric, or with an unsupported formula is rejected in `outcomes` instead."""
    decls: dict[str, dict] = {}
    for key in order:
        m = cat.metrics[key]
        if m.expr is None:
            outcomes[key] = Outcome(key, m.name, "rejected", m.weight, reason=m.problem or "no formula")
            continue
        bad = [r for r in ir.leaves(m.expr, ir.Ref) if r not in decls]
        if bad:
            why = "; ".join(
                f"`{r}`" + (f" ({outcomes[r].reason})" if r in outcomes else " (not in the file)") for r in sorted(bad)
            )
            outcomes[key] = Outcome(key, m.name, "rejected", m.weight, reason=f"uses rejected or unknown metric {why}")
            continue
        try:
            decls[key] = _declare(m, cat, printer, reg, findings)
        except ir.Unsupported as exc:
            outcomes[key] = Outcome(key, m.name, "rejected", m.weight, reason=str(exc))
            continue
        printer.refs[key] = RefInfo(m.name, decls[key]["unit_obj"], decls[key]["k"])
    return decls


def _record_compiled(cat: SourceCatalog, decls: dict[str, dict], outcomes: dict[str, Outcome], graph) -> None:
    """The outcome of each declared metric that the compiled file holds (its status, unit and note)."""
    for key, dcl in decls.items():
        if key in outcomes:
            continue
        m = cat.metrics[key]
        if m.name not in graph.metrics:  # pragma: no cover
            outcomes[key] = Outcome(key, m.name, "rejected", m.weight, reason="not compiled")
            continue
        outcomes[key] = Outcome(key, m.name, dcl["status"], m.weight, unit=dcl["unit"], unit_note=dcl["unit_note"])


def _tree_and_warning_findings(cat: SourceCatalog, outcomes: dict[str, Outcome], graph, findings: list) -> None:
    """Findings for imported metrics whose parent was not imported, and for the compiler's warnings."""
    for key, o in outcomes.items():
        p = cat.metrics[key].parent
        if o.status != "rejected" and p is not None and (p not in outcomes or outcomes[p].status == "rejected"):
            findings.append(
                Finding("parent-dropped", key, f"parent `{p}` is not imported; the tree link is dropped", "info")
            )
    for d in graph.diagnostics:
        if d.severity == "warning":
            findings.append(Finding(d.code, "", d.message, "warning"))


def _order_with_cycles(deps: nx.DiGraph, cat: SourceCatalog) -> list[str]:
    acyclic = deps.copy()
    for comp in list(nx.strongly_connected_components(deps)):
        if len(comp) > 1:
            acyclic.remove_nodes_from(comp)
    acyclic.remove_edges_from([(u, v) for u, v in acyclic.edges if u == v])
    order = [k for k in nx.lexicographical_topological_sort(acyclic) if k in cat.metrics]
    return order + sorted(k for k in cat.metrics if k not in order)


def _declare(m: SourceMetric, cat: SourceCatalog, printer: Printer, reg, findings: list[Finding]) -> dict:
    """The metric's declaration parts: unit decision, scaled expression text, clauses."""
    u = printer.unit(m.expr)
    if u is None:
        raise ir.Unsupported("the formula is a condition, not a value")
    base = base_units(reg, u)
    label, note = map_label(reg, m.unit_text, cat.clock)
    status, declared, k, unit_note = "without_unit", unit_text(base), 1.0, ""
    expr = m.expr
    if label is not None:
        target = parse_unit(reg, label)
        try:
            f = conversion_factor(reg, base, target)
        except UnitError:
            given = as_given(reg, base, target)
            if given is None:
                unit_note = (
                    f"source unit `{m.unit_text}` ({label}) is not the dimension the formula gives from event counts "
                    f"({unit_text(base)})"
                )
            else:
                status, declared, k = "with_unit", label, m.scale
                expr = ir.Bin("*", expr, ir.Num(1.0, unit_text(given)))
                findings.append(_as_given_finding(m, label, base, given))
        else:
            status, declared, k = "with_unit", label, m.scale / f
    elif m.unit_text:
        unit_note = note or f"source unit `{m.unit_text}` has no pint equivalent"
    if status != "with_unit" and m.scale != 1.0:
        declared, k = scaled_unit(reg, base, m.scale, m.key, findings)
    if unit_note:
        unit_note += f"; imported in [{declared}]"
        findings.append(Finding("unit-not-applied", m.key, unit_note, "info"))
    expr, how = apply_scale(expr, k)
    if how:
        sev = "warning" if declared == "percent" and "removed" not in how else "info"
        findings.append(Finding("unit-scale", m.key, f"{m.unit_text or declared}: {how}", sev))
    thr = None
    if m.threshold is not None:
        bound = m.threshold.value * m.scale  # the metric's value is the source's displayed value, formula × scale
        if declared == "percent" and m.scale == 1.0 and 0 < abs(bound) < 1:
            findings.append(
                Finding(
                    "percent-vs-fraction",
                    m.key,
                    f"threshold {m.threshold.op} {bound:g} % on a percent metric looks like a fraction "
                    f"(did the source mean {bound * 100:g} %?)",
                )
            )
        thr = (m.threshold.op, bound, m.threshold.message)
    return {
        "text": printer.text(expr),
        "unit": declared,
        "unit_obj": parse_unit(reg, declared),
        "k": k,
        "status": status,
        "unit_note": unit_note,
        "threshold": thr,
    }


def _as_given_finding(m: SourceMetric, label: str, base, given) -> Finding:
    """The note for a metric declared in the source's unit that its event counts cannot give (``as_given``)."""
    return Finding(
        "unit-as-given",
        m.key,
        f"source unit `{m.unit_text}`: the formula's event counts and durations give {unit_text(base)}, not {label}; "
        f"the value (the source's) is declared in {label} as the source states it: `× 1 [{unit_text(given)}]`",
        "info",
    )


def _decl_text(m: SourceMetric, dcl: dict, cat: SourceCatalog, parent_name: str | None) -> str:
    lines = [f"metric {m.name} [{dcl['unit']}] = {dcl['text']}"]
    if m.description:
        lines.append(f"  {quote(m.description)}")
    gs = list(dict.fromkeys(group(g) for g in m.groups))
    if gs:
        lines.append("  groups " + ", ".join(gs))
    if dcl["threshold"] is not None:
        op, v, msg = dcl["threshold"]
        # the source's condition repeats its ancestors' (TMA): crossed only under a parent past its own
        gated = " when parent" if parent_name and m.threshold is not None and m.threshold.implied else ""
        lines.append(f"  threshold {op} {'-' if v < 0 else ''}{number(v)}{gated}: {quote(msg)}")
    if parent_name:
        lines.append(f"  parent {parent_name}")
    lines.append(f"  source {quote(f'{cat.format} {Path(cat.path).name}: {m.origin or m.key} = {m.formula}')}")
    return "\n".join(lines) + "\n"


def _render(
    cat: SourceCatalog, decls: dict, outcomes: dict, omit: set[str] | frozenset[str] = frozenset()
) -> tuple[str, dict[str, tuple[int, int]]]:
    parts, spans, line = [], {}, 1
    for key, dcl in decls.items():
        if key in outcomes or key in omit:
            continue
        m = cat.metrics[key]
        pname = None
        if m.parent is not None:
            if m.parent in decls and m.parent not in outcomes:
                pname = cat.metrics[m.parent].name
        text = _decl_text(m, dcl, cat, pname)
        n = text.count("\n")
        spans[key] = (line, line + n - 1)
        parts.append(text)
        line += n + 1
    return "\n".join(parts), spans


def _file_text(cat: SourceCatalog, decls: dict, outcomes: dict, omit: set[str]) -> str:
    body, _ = _render(cat, decls, outcomes, omit)
    head = (
        f"# Generated by `perfonto import {cat.format}` from {_safe_comment(Path(cat.path).name)} "
        f"(sha256 {_digest(cat.path)}); re-import rather than edit.\n"
        f"# Values equal the source's displayed values; see the import report for each translation.\n\n"
    )
    return head + body


def _compile_until_clean(
    gen: Generation, cat: SourceCatalog, decls: dict, outcomes: dict, findings: list, fname: str
) -> MetricGraph:
    dependents = nx.DiGraph()
    for key in decls:
        dependents.add_node(key)
        for r in ir.leaves(cat.metrics[key].expr, ir.Ref):
            dependents.add_edge(r, key)
    graph = None
    for _ in range(12):
        body, spans = _render(cat, decls, outcomes)
        graph = compile_texts(gen, {fname: body})
        failing: dict[str, str] = {}
        for d in graph.errors:
            key = next((k for k, (a, b) in spans.items() if a <= d.span.line <= b), None)
            if key is not None and key not in failing:
                failing[key] = f"{d.code}: {d.message}" + (f" ({d.hint})" if d.hint else "")
        if not failing:
            missing = [k for k in spans if cat.metrics[k].name not in graph.metrics]
            if not missing:
                return graph
            failing = {k: "not compiled (depends on a metric that failed)" for k in missing}
        for key, why in failing.items():
            m = cat.metrics[key]
            outcomes[key] = Outcome(key, m.name, "rejected", m.weight, reason=why)
            for dep in nx.descendants(dependents, key):
                if dep not in outcomes:
                    outcomes[dep] = Outcome(
                        dep,
                        cat.metrics[dep].name,
                        "rejected",
                        cat.metrics[dep].weight,
                        reason=f"uses rejected metric `{key}` ({why})",
                    )
    return graph  # pragma: no cover
