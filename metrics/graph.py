"""The compiled catalog (``MetricGraph``), the compiler's result, in a module of its own: what a cached
catalog is made of loads without the parser and the compiler passes."""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic
from perfonto.ontology.resolved import Generation

from .stages import CompiledMetric


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
    findings: list = field(default_factory=list)  # metrics.findings.FindingRule of the catalog

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


__all__ = ["MetricGraph"]
