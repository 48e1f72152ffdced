"""Load a generation and compile a metric catalog: the shipped one, or a folder of a user's files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.errors import PerfontoError
from perfonto.ontology.resolved import Generation

from .graph import MetricGraph


@dataclass
class Catalog:
    """Result of loading and compiling: ``graph`` is None when the ontology itself failed."""

    generation: Generation | None
    graph: MetricGraph | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    from_cache: bool = False  # read from perfonto's cache (metrics.catalog_cache), not compiled in this process

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def shipped_others(gen: Generation | str | None = None) -> tuple[Generation, ...]:
    """The shipped generations other than ``gen`` (a generation or its name), for the compiler's
    "exists on …" availability reasons. Generations that do not load are left out."""
    from perfonto.ontology.loader import load_generation, shipped_generations

    name = gen.name if isinstance(gen, Generation) else gen
    out = []
    for g in shipped_generations():
        if g != name:
            loaded, _ = load_generation(g)
            if loaded is not None:
                out.append(loaded)
    return tuple(out)


def load_catalog(
    catalog_dir: str | Path | None = None,
    generation: str | None = "sohu",
    *,
    others=None,
    library: bool = True,
    cache: bool | None = None,
    instances: dict[str, tuple[str, ...]] | None = None,
) -> Catalog:
    """Compile ``catalog_dir`` (ontology ``*.yaml`` and metric ``*.metrics`` files) for ``generation``.

    Without ``catalog_dir``: the shipped generation and metric library. A folder with metric files but
    no YAML uses the shipped generation (noted in ``notes``); a folder with neither is an error.
    ``others``: the other generations a metric may need (default: ``shipped_others``), so that a
    metric over a signal of another generation is unavailable here rather than an error.
    A folder whose generation extends a shipped one, or that has no YAML (the shipped generation),
    gets the shipped metric library as well as its own metric files, unless ``library`` is False;
    ``notes`` says which metric files were compiled. ``generation=None``: the
    folder's generation (the one no other file of the folder extends; several such are an error naming
    them, ``ontology.loader.load_generation_files``), ``sohu`` for a folder without ontology YAML.

    ``cache``: read and write the compiled catalog in perfonto's cache (``metrics.catalog_cache``;
    None: unless ``PERFONTO_NO_CACHE`` is set). A hit returns what compiling the same files with the
    same perfonto gave, without parsing them.

    ``instances``: the sizes of the generation's ``from_data`` instance axes, as a capture gives them
    (axis → the instances' labels: ``{"cpu": ("0", "1")}``; ``ontology.derive.with_instances``); the
    catalog is compiled against the generation so sized, and cached under a key that holds them.
    Without it a ``from_data`` axis has 1 instance, a placeholder (``notes`` says so).
    """
    if others is None:
        from .catalog_cache import cached

        return cached(catalog_dir, generation, library, cache, _compile, instances=instances)
    return _compile(catalog_dir, generation, others=others, library=library, instances=instances)


def _sized(gen: Generation, instances, notes: list[str]) -> Generation:
    """``gen`` with its ``from_data`` axes sized by ``instances``, or a note that they have the
    placeholder size 1 (``ontology.derive``).

    Raises:
        DeriveError: ``instances`` does not fit the generation's ``from_data`` axes.
    """
    from perfonto.ontology.derive import describe_instances, from_data_axes, with_instances

    todo = from_data_axes(gen)
    if not todo:
        return gen
    if instances:
        sized = with_instances(gen, instances)
        notes.append(describe_instances(instances))
        return sized
    axes = ", ".join(f"{b}.{a}" for b, v in todo.items() for a in v)
    notes.append(
        f"instance axes sized by the data (`from_data`: {axes}) have 1 instance here, a placeholder: "
        "a capture read by `perfonto analyze` gives their size"
    )
    return gen


def _compile(
    catalog_dir: str | Path | None,
    generation: str | None,
    *,
    others=None,
    library: bool = True,
    instances: dict[str, tuple[str, ...]] | None = None,
) -> Catalog:
    """``load_catalog`` without the cache."""
    from perfonto.ontology.files import FileReadError, check_path, is_dir
    from perfonto.ontology.lint import lint_generation
    from perfonto.ontology.loader import folder_yamls, load_generation, load_generation_files, shipped_generations

    from .compiler import compile_files, library_files
    from .report_check import report_diagnostics

    notes: list[str] = []
    if catalog_dir is None:
        generation = generation or "sohu"
        gen, diags = load_generation(generation)
        files = library_files()
    else:
        d = Path(catalog_dir)
        if not is_dir(d):
            reason = "not a folder"
            try:
                check_path(d, "catalog folder")
            except FileReadError as exc:
                reason = exc.reason
            return Catalog(
                None,
                None,
                [
                    Diagnostic(
                        "error",
                        "io",
                        reason,
                        Span(str(d)),
                        hint="give a folder holding *.yaml ontology and *.metrics files",
                    )
                ],
            )
        yamls = folder_yamls(d)
        files = sorted(d.glob("*.metrics"))
        rules_only = any(p.name.endswith((".findings.yaml", ".findings.yml")) for p in d.glob("*.y*ml"))
        if not yamls and not files and not rules_only:  # a folder of finding rules: the shipped catalog, its rules
            return Catalog(
                None,
                None,
                [
                    Diagnostic(
                        "error",
                        "empty-catalog",
                        "the folder holds no ontology *.yaml or *.metrics files (a *.findings.yaml or *.vectors.yaml "
                        "is read beside them)",
                        Span(str(d)),
                        hint="put ontology YAML and metric files in it",
                    )
                ],
            )
        if yamls:  # generation None: the folder's own, or an error naming its generations when it holds several
            gen, diags = load_generation_files(yamls, generation)
        else:
            generation = generation or "sohu"
            gen, diags = load_generation(generation)
            notes.append(f"no ontology YAML in {d}; using the shipped generation `{generation}`")
    if gen is None:
        return Catalog(None, None, diags, notes)
    gen = _sized(gen, instances, notes)
    if catalog_dir is not None:
        notes.append(_library_note(gen, d, yamls, files, library))
        if library and (not yamls or set(gen.lineage[:-1]) & set(shipped_generations())):
            files = library_files() + files
    graph = compile_files(gen, files, others=shipped_others(gen) if others is None else others)
    lint = lint_generation(gen) + lint_metrics(graph)
    found = _findings(graph, files, catalog_dir, notes)
    report = report_diagnostics(graph, shipped=catalog_dir is not None and not yamls) if not graph.errors else []
    return Catalog(gen, graph, diags + lint + graph.diagnostics + found + report, notes)


def _findings(graph: MetricGraph, files: list[Path], catalog_dir, notes: list[str]) -> list[Diagnostic]:
    """Attach the catalog's finding rules (``metrics.findings``) to ``graph``: the shipped library's
    when its metric files were compiled, then the folder's ``*.findings.yaml`` (a rule for the same
    metric replaces the library's); their diagnostics."""
    from .compiler import library_files
    from .findings import is_findings_file, library_findings, load_findings

    paths = library_findings() if set(library_files()) & set(files) else []
    if catalog_dir is not None:
        paths += sorted(p for p in Path(catalog_dir).glob("*.y*ml") if is_findings_file(p))
    if not paths or graph.errors:
        return []
    rules, diags, more = load_findings(paths, graph)
    graph.findings = rules
    notes += more
    return diags


def _library_note(gen: Generation, d: Path, yamls: list[Path], files: list[Path], library: bool) -> str:
    """Which metric files a catalog folder is compiled with: its own, the shipped library's, or both; and
    whether the folder's generation takes the name of a shipped one (which it then replaces)."""
    from perfonto.ontology.loader import shipped_generations

    own = (
        f"the folder's {len(files)} metric file(s) ({', '.join(p.name for p in files)})"
        if files
        else "no metric file of the folder"
    )
    replaces = (
        f"; the folder's generation `{gen.name}` replaces the shipped one of that name (rename it to compare the two)"
        if yamls and gen.name in shipped_generations()
        else ""
    )
    shipped = not yamls or set(gen.lineage[:-1]) & set(shipped_generations())
    if not shipped:
        return (
            f"metric files compiled: {own} (`{gen.name}` extends no shipped generation: the shipped library does "
            f"not apply){replaces}"
        )
    if not library:
        return f"metric files compiled: {own} only (--no-library: the shipped metric library is left out){replaces}"
    base = gen.name if not yamls else [g for g in gen.lineage[:-1] if g in shipped_generations()][-1]
    written = f"written for `{base}`" if base == gen.name else f"written for `{base}`, which `{gen.name}` extends"
    return (
        f"metric files compiled: the shipped metric library ({written}) and {own}; --no-library leaves the "
        f"library out{replaces}"
    )


def lint_metrics(graph: MetricGraph) -> list[Diagnostic]:
    out = []
    for name, d in graph.declarations.items():
        if not d.description.strip():
            out.append(
                Diagnostic(
                    "warning",
                    "lint-description",
                    f"metric `{name}` has no description",
                    d.span,
                    hint='add a quoted description after the formula: "What it measures."',
                )
            )
    return out


class UnknownMetric(PerfontoError, KeyError):
    """A metric name asked for (``--metrics``, ``select_metrics``) that the compiled catalog does not
    hold, or holds as unavailable (``Catalog.explain``: a name that is no metric, signal or constant);
    ``str()`` is the message itself (a did-you-mean or the reason), not ``KeyError``'s quoted repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def select_metrics(graph: MetricGraph, names) -> MetricGraph:
    """The part of ``graph`` that computes ``names`` (window or record metrics) and the metrics they
    need, in the same order; the dependency graph, generation and hash are shared.

    Raises:
        UnknownMetric: a name that is not a compiled metric of ``graph`` (the message has a did-you-mean);
            a ``KeyError`` too.
    """
    import networkx as nx

    from perfonto.ontology.diagnostics import did_you_mean

    every = graph.all_metrics
    need: set[str] = set()
    bad = []  # every name that is not a metric, so that a list with two typos is fixed in one go
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"a metric name is a string, not {type(n).__name__} ({n!r})")
        if n not in every:
            why = graph.unavailable.get(n)
            bad.append(
                f"`{n}` is unavailable: {why}"
                if why
                else f"no metric `{n}` in the catalog"
                + (f"; {did_you_mean(n, every)}" if did_you_mean(n, every) else "")
            )
    if bad:
        raise UnknownMetric("; ".join(bad) if len(bad) < 2 else f"{len(bad)} names: " + "; ".join(bad))
    for n in names:
        need.add(n)
        need |= {a for a in nx.ancestors(graph.graph, n) if a in every}
    return MetricGraph(
        graph.generation,
        {k: v for k, v in graph.metrics.items() if k in need},
        graph.graph,
        graph.diagnostics,
        graph.content_hash,
        dict(graph.unavailable),
        {k: v for k, v in graph.record_metrics.items() if k in need},
        graph.declarations,
    )
