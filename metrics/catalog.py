"""Load a generation and compile a metric catalog: the shipped one, or a folder of a user's files."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfonto.metrics.compiler import MetricGraph, compile_files, library_files
from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.generation import Generation
from perfonto.ontology.lint import lint_generation
from perfonto.ontology.loader import load_generation, load_generation_files, shipped_generations


@dataclass
class Catalog:
    """Result of loading and compiling: ``graph`` is None when the ontology itself failed."""

    generation: Generation | None
    graph: MetricGraph | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def shipped_others(gen: Generation | str | None = None) -> tuple[Generation, ...]:
    """The shipped generations other than ``gen`` (a generation or its name), for the compiler's
    "exists on …" availability reasons. Generations that do not load are left out."""
    name = gen.name if isinstance(gen, Generation) else gen
    out = []
    for g in shipped_generations():
        if g != name:
            loaded, _ = load_generation(g)
            if loaded is not None:
                out.append(loaded)
    return tuple(out)


def load_catalog(catalog_dir: str | Path | None = None, generation: str = "sohu", *, others=None) -> Catalog:
    """Compile ``catalog_dir`` (ontology ``*.yaml`` and metric ``*.metrics`` files) for ``generation``.

    Without ``catalog_dir``: the shipped generation and metric library. A folder with metric files but
    no YAML uses the shipped generation (noted in ``notes``); a folder with neither is an error.
    ``others``: the other generations a metric may need (default: ``shipped_others``), so that a
    metric over a signal of another generation is unavailable here rather than an error.
    """
    notes: list[str] = []
    if catalog_dir is None:
        gen, diags = load_generation(generation)
        files = library_files()
    else:
        d = Path(catalog_dir)
        if not d.is_dir():
            return Catalog(None, None, [Diagnostic("error", "io", "not a folder", Span(str(d)),
                                                   hint="give a folder holding *.yaml ontology and *.metrics files")])
        yamls = sorted(p for p in list(d.glob("*.yaml")) + list(d.glob("*.yml")) if not p.name.endswith((".vectors.yaml", ".vectors.yml")))
        files = sorted(d.glob("*.metrics"))
        if not yamls and not files:
            return Catalog(None, None, [Diagnostic("error", "empty-catalog", "the folder holds no *.yaml or *.metrics files", Span(str(d)),
                                                   hint="put ontology YAML and metric files in it")])
        if yamls:
            gen, diags = load_generation_files(yamls, generation)
        else:
            gen, diags = load_generation(generation)
            notes.append(f"no ontology YAML in {d}; using the shipped generation `{generation}`")
    if gen is None:
        return Catalog(None, None, diags, notes)
    graph = compile_files(gen, files, others=shipped_others(gen) if others is None else others)
    lint = lint_generation(gen) + lint_metrics(graph)
    return Catalog(gen, graph, diags + lint + graph.diagnostics, notes)


def lint_metrics(graph: MetricGraph) -> list[Diagnostic]:
    out = []
    for name, d in graph.declarations.items():
        if not d.description.strip():
            out.append(Diagnostic("warning", "lint-description", f"metric `{name}` has no description", d.span,
                                  hint='add a quoted description after the formula: "What it measures."'))
    return out
