"""What the reports show of a run's metrics — one model for the terminal report (``perfonto.report``),
the HTML page (``analysis.html_report``) and ``report.json`` (its ``report`` section, which the page is
rendered from).

``headline``: the server-level table's metrics, in order; ``groups``: titled sections of the per-chip
tables, {title: [metric, ...]}; ``per_chip``: the per-chip table's columns, {metric: header};
``fleet``: the fleet tables' metrics (per pod, rack and host; their first eight of ``headline`` unless
declared). Each holds only metrics that evaluated to a run-level scalar on the capture (a metric over instance axes,
or one unavailable here, is left out: ``report.json`` still has every metric).

Rule (``choose``): a catalog that declares ``report:`` in its generation YAML (``ontology.model.ReportDecl``,
inherited through ``extends``; Sohu's lineage declares Sohu's) shows exactly what it declares. A catalog
that declares none shows every metric that evaluated, grouped by block (``metric_block``): the headline
lists them block by block, one group per block, and no separate per-chip columns (the groups are the
per-chip tables).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

FLEET_DEFAULT = 8  # metrics of the fleet tables when the catalog names none: the headline's first
EXTRA_HEADLINE = 8  # a child generation's own metrics its inherited report names nowhere: the headline's share


@dataclass
class ReportModel:
    """The metrics each table of a report shows (module docstring); ``declared``: from the catalog's
    ``report:`` rather than the default."""

    headline: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    per_chip: dict[str, str] = field(default_factory=dict)
    declared: bool = False
    fleet: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The ``report`` section of ``report.json``."""
        return {
            "headline": list(self.headline),
            "groups": {t: list(ns) for t, ns in self.groups.items()},
            "per_chip": dict(self.per_chip),
            "declared": self.declared,
            "fleet": list(self.fleet),
        }

    @classmethod
    def from_json(cls, doc: dict) -> ReportModel:
        """The model a ``report.json`` section (``to_json``) holds."""
        return cls(
            [str(n) for n in doc.get("headline") or []],
            {str(t): [str(n) for n in ns] for t, ns in (doc.get("groups") or {}).items()},
            {str(n): str(h) for n, h in (doc.get("per_chip") or {}).items()},
            bool(doc.get("declared")),
            [str(n) for n in doc.get("fleet") or []],
        )


def metric_block(name: str, signals=()) -> str:
    """The block a metric is grouped under by default: its name's first dotted part (``hbm`` for
    ``hbm.read_bandwidth``); for an undotted name, the block most of the signals it reads belong to
    (``signals``: their full names; ties go to the first in sorted order), else ``other``."""
    if "." in name:
        return name.split(".", 1)[0]
    blocks = Counter(s.split(".", 1)[0] for s in signals if "." in s)
    if not blocks:
        return "other"
    return sorted(blocks.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def choose(
    scalar: list[str], per_chip: list[str], spec, blocks: dict[str, str], extra: tuple[str, list[str]] | None = None
) -> ReportModel:
    """The report model from the scalar metrics that evaluated (``scalar``, in the catalog's order),
    those with a per-chip value (``per_chip``), the generation's ``report:`` (``spec``, an
    ``ontology.resolved.ReportSpec`` or None) and each metric's block (``blocks``, for the default);
    ``extra``: (title, metrics) a declared report is shown with after what it declares (``_unreported``)."""
    chip = set(per_chip)
    by_block: dict[str, list[str]] = {}
    for n in scalar:
        by_block.setdefault(blocks.get(n, "other"), []).append(n)
    default_headline = [n for ns in by_block.values() for n in ns]
    default_groups = {b: [n for n in ns if n in chip] for b, ns in by_block.items()}
    default_groups = {b: ns for b, ns in default_groups.items() if ns}
    if spec is not None:
        return _declared(spec, scalar, chip, default_headline, default_groups, extra)
    return ReportModel(default_headline, default_groups, {}, False, default_headline[:FLEET_DEFAULT])


def _declared(spec, scalar: list[str], chip: set, default_headline, default_groups, extra) -> ReportModel:
    """``choose`` for a catalog that declares ``report:`` (``spec``), with ``extra`` after what it declares."""
    have = set(scalar)
    groups = {t: [n for n in ns if n in chip] for t, ns in spec.groups.items()}
    groups = {t: ns for t, ns in groups.items() if ns}
    columns = {n: h for n, h in spec.per_chip.items() if n in chip}
    # a capture that feeds none of the declared metrics still shows what evaluated (the default)
    headline = [n for n in spec.headline if n in have] or default_headline
    fallback = not groups and not columns
    if fallback:
        groups = default_groups
    if extra and extra[1]:  # the headline takes the first EXTRA_HEADLINE of them; the group, all
        headline += [n for n in extra[1] if n not in headline][:EXTRA_HEADLINE]
        mine = [n for n in extra[1] if n in chip]
        if mine and not fallback:  # the default groups already hold every metric with a per-chip value
            groups[extra[0]] = mine
    fleet = [n for n in spec.fleet if n in have] if spec.fleet else headline[:FLEET_DEFAULT]
    return ReportModel(headline, groups, columns, True, fleet)


def report_model(graph, ev) -> ReportModel:
    """The report model of an evaluated graph (``graph``: the compiled catalog; ``ev``: its evaluation,
    with ``server`` and ``per_chip`` values by metric); the metrics in the order the catalog writes them."""
    import networkx as nx

    written = {n: i for i, n in enumerate(graph.declarations)}  # graph.metrics is in dependency order
    scalar = [n for n, m in graph.metrics.items() if not m.axes and n in ev.server]
    scalar.sort(key=lambda n: written.get(n, len(written)))
    chip = [n for n in scalar if n in ev.per_chip]
    blocks = {}
    if graph.generation.report is None:
        kinds = graph.graph.nodes
        for n in scalar:
            reads = () if "." in n else [a for a in nx.ancestors(graph.graph, n) if kinds[a].get("kind") == "signal"]
            blocks[n] = metric_block(n, reads)
    return choose(scalar, chip, graph.generation.report, blocks, _unreported(graph, scalar))


def _unreported(graph, scalar: list[str]) -> tuple[str, list[str]] | None:
    """(title, metrics): the scalar metrics defined in the metric files of the generation's own folder (beside
    its YAML) that the ``report:`` it inherits names nowhere — an architect's new `noc.*` metrics appeared in
    neither the terminal report nor the page of a generation extending Sohu, whose report Sohu declares.
    Metrics of the parent's catalog that its report leaves out stay out (a child of `node` does not list
    `cpu.total_time`). None where the generation declares its own report (it shows what it says) or
    declares none (every metric is shown)."""
    from pathlib import Path

    spec, gen = graph.generation.report, graph.generation
    if spec is None or not spec.refs or _same_file(spec.refs[0][1].file, gen.source_file) or not gen.source_file:
        return None
    own = _resolved(Path(str(gen.source_file)).parent)
    named = set(spec.headline) | set(spec.per_chip) | set(spec.fleet) | {n for ns in spec.groups.values() for n in ns}
    new = [
        n
        for n in scalar
        if n not in named
        and (f := getattr(graph.metrics[n].span, "file", None))
        and _resolved(Path(str(f)).parent) == own
    ]
    return (f"{gen.name}'s own metrics", new) if new else None


def _resolved(f) -> str:
    from pathlib import Path

    try:
        return str(Path(str(f)).resolve())
    except OSError:
        return str(f)


def _same_file(a, b) -> bool:
    return bool(a) and bool(b) and _resolved(a) == _resolved(b)


def page_model(doc: dict) -> ReportModel:
    """The report model of a ``report.json`` document: its ``report`` section; for a document written
    before there was one, the shipped generation's declaration (by the document's ``generation``) over
    its scalar metrics, or the default grouped by the metrics' dotted names."""
    if isinstance(doc.get("report"), dict):
        return ReportModel.from_json(doc["report"])
    metrics = doc.get("metrics") or {}
    scalar = [
        n
        for n, m in metrics.items()
        if isinstance(m, dict)
        and "unavailable" not in m
        and "population" not in m
        and not isinstance(m.get("value"), list)
    ]
    chip_names = set().union(*[set(r.get("metrics") or {}) for r in doc.get("per_chip") or [{}]])
    return choose(
        scalar, [n for n in scalar if n in chip_names], _shipped_report(doc), {n: metric_block(n) for n in scalar}
    )


def _shipped_report(doc: dict) -> object | None:
    """The ``report:`` a document's catalog had, as far as the shipped generations tell: that of its
    generation when shipped, else of the last shipped one of its ``lineage``; a document written before
    ``lineage`` with Sohu's ``mfu`` metric is read as Sohu's. None when none applies or it declares none."""
    from perfonto.ontology.loader import load_generation, shipped_generations

    shipped = set(shipped_generations())
    lineage = doc.get("lineage")
    if isinstance(lineage, list):
        names = [g for g in lineage if isinstance(g, str) and g in shipped]
    else:
        gen = doc.get("generation")
        names = (
            [gen]
            if isinstance(gen, str) and gen in shipped
            else ["sohu"]
            if "mfu" in (doc.get("metrics") or {})
            else []
        )
    if not names:
        return None
    gen, _ = load_generation(names[-1])
    return gen.report if gen is not None else None


__all__ = ["ReportModel", "choose", "metric_block", "page_model", "report_model"]
