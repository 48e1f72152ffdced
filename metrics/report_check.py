"""The compile-time check of a generation's ``report:`` declaration (``ontology.resolved.ReportSpec``):
every metric it names (headline, groups, per_chip) must be a metric of the compiled catalog. It runs
here, not when the YAML is resolved, because the metrics come from the catalog's metric files.

A metric over instance axes is a warning (``report-axes``): the tables show scalars only. A name in the
generation's own file that is not a metric is an error (``report-unknown-metric``, at
its file:line:col); one in a declaration inherited from a parent file is a warning (the catalog may
leave out the metric files that define it, ``--no-library``): the reports show only the metrics that
evaluated either way."""

from __future__ import annotations

from pathlib import Path

from perfonto.ontology.diagnostics import Diagnostic, did_you_mean

from .graph import MetricGraph


def report_diagnostics(graph: MetricGraph, shipped: bool = False) -> list[Diagnostic]:
    """One diagnostic per name of ``graph.generation.report`` that is not a metric of ``graph`` (a
    declared metric, available on this generation or not); [] without a declaration. ``shipped``: the
    generation is a shipped one, compiled with a user's metric files (a folder without YAML): its
    declaration is not the user's, so a name it lacks is a warning too."""
    spec = graph.generation.report
    if spec is None:
        return []
    known = set(graph.declarations) | set(graph.all_metrics)
    own = (lambda _f: False) if shipped else _same_file(graph.generation.source_file)
    out: list[Diagnostic] = []
    inherited: list[tuple[str, object]] = []  # names of an inherited declaration: one warning for them all
    for name, span in spec.refs:
        m = graph.metrics.get(name)
        if m is not None and m.axes:
            out.append(_axes_warning(name, m, span))
        if name in known:
            continue
        mine = own(span.file)
        if not mine:
            inherited.append((name, span))
            continue
        out.append(
            Diagnostic(
                "error" if mine else "warning",
                "report-unknown-metric",
                f"`report:` names `{name}`, which is not a metric of this catalog"
                + ("" if mine else f" (the declaration is inherited from {span.file})"),
                span,
                hint=did_you_mean(name, known)
                or (
                    "name a metric defined by the catalog's metric files"
                    if mine
                    else "declare `report:` in this generation's file to replace the inherited one"
                ),
            )
        )
    if inherited:
        out.append(_inherited_warning(inherited))
    return out


def _inherited_warning(names: list) -> Diagnostic:
    """One warning for the names of an inherited ``report:`` that are not metrics of this catalog (a folder
    compiled with ``--no-library`` printed one warning per name: 29 for sohu's), at the first of them."""
    shown = ", ".join(f"`{n}`" for n, _ in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    span = names[0][1]
    return Diagnostic(
        "warning",
        "report-unknown-metric",
        f"`report:` names {len(names)} metric(s) this catalog does not define: {shown} (the declaration is "
        f"inherited from {span.file}); the reports show the metrics that evaluated",
        span,
        hint="declare `report:` in this generation's file to replace the inherited one",
    )


def _axes_warning(name: str, m, span) -> Diagnostic:
    """The warning for a metric over instance axes named in ``report:`` (the tables leave it out)."""
    axes = ", ".join(a for a, _ in m.axes)
    return Diagnostic(
        "warning",
        "report-axes",
        f"`report:` names `{name}`, a metric over instance axes ({axes}): the report's tables show run-level "
        "scalars only, so it is left out of them (report.json and metrics.parquet have its values)",
        span,
        hint="name a metric that rolls the axes up (sum, avg, max), or leave this one out",
    )


def _same_file(path: str):
    """A test of whether a span's file is ``path`` (compared resolved, as spans may be relative)."""

    def key(p: str) -> str:
        try:
            return str(Path(p).resolve())
        except (OSError, RuntimeError):
            return p

    mine = key(path)
    return lambda other: key(other) == mine


__all__ = ["report_diagnostics"]
