"""A generation's ``report:`` declaration resolved (``ontology.resolved.ReportSpec``), with the place of
every metric name it writes, so that the catalog's compile step (``metrics.catalog``) can name the
file, line and column of a name that is not a metric (``report-unknown-metric``). The names can only
be checked there: the metrics are defined by the catalog's metric files, not by the YAML."""

from __future__ import annotations

from .model import GenerationFile
from .resolved import ReportSpec
from .yaml_source import YamlSource


def resolve_report(gf: GenerationFile, src: YamlSource) -> ReportSpec | None:
    """``gf.report`` as a ``ReportSpec`` (None when the generation, and every parent, declares none).
    Positions come from the merged source, so an inherited declaration points into the parent's file."""
    r = gf.report
    if r is None:
        return None
    refs = [(n, src.span(("report", "headline", i))) for i, n in enumerate(r.headline)]
    for title, names in r.groups.items():
        refs += [(n, src.span(("report", "groups", title, i))) for i, n in enumerate(names)]
    refs += [(n, src.span(("report", "per_chip", n, "<key>"))) for n in r.per_chip]
    refs += [(n, src.span(("report", "fleet", i))) for i, n in enumerate(r.fleet)]
    return ReportSpec(
        headline=tuple(r.headline),
        groups={t: tuple(ns) for t, ns in r.groups.items()},
        per_chip=dict(r.per_chip),
        refs=tuple(refs),
        fleet=tuple(r.fleet),
    )


__all__ = ["resolve_report"]
