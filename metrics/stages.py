"""What the compiler knows after each pass: one frozen stage type per pass (``metrics.passes``).

Each stage holds everything of the previous one plus what its pass added, and no pass mutates an
earlier stage: ``diagnostics`` and ``bad`` (metrics left out of the graph) are new tuples/sets at every
step. The order, with what each stage adds:

- ``Parsed``: declarations of every file (generated submetrics expanded), syntax diagnostics, the
  files' texts, the generation and the other generations (for availability reasons);
- ``Declared``: ``by_name`` (one declaration per metric name; duplicates and bad names refused);
- ``Resolved``: the dependency graph (metric, signal, record field and spec nodes), the span of each
  reference, and the metrics that read a name this generation cannot provide (``unavailable``);
- ``Graphed``: dependency cycles refused;
- ``Available``: unavailability propagated to every metric that needs an unavailable one;
- ``Typed``: every remaining metric typed (units, axes, chip degree) in topological order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Mapping

import networkx as nx
import pint

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.resolved import Generation

from . import ir
from .ir import Axes  # by name: in CompiledMetric the field `ir` hides the module


@dataclass(frozen=True)
class CompiledMetric:
    """One metric after compilation. Values are computed in ``unit``; ``ir`` already includes the
    conversion to it. ``bounds``/``threshold`` values are in ``unit`` too."""

    name: str
    unit: pint.Unit
    unit_text: str
    ir: ir.Node
    axes: Axes
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
    group_rule: bool = (
        False  # a per-chip time over a leader-counted count: server times are the groups' (metrics.levels)
    )
    reads_leader: bool = False  # reads a leader-counted signal (counted_by: leader), directly or through a metric
    threshold_when_parent: bool = False  # `threshold … when parent:` crossed only under a parent past its own


@dataclass(frozen=True)
class Parsed:
    gen: Generation
    decls: tuple[ast.MetricDecl, ...]
    diagnostics: tuple[Diagnostic, ...]
    texts: Mapping[str, str]
    others: tuple[Generation, ...] = ()


@dataclass(frozen=True)
class Declared(Parsed):
    by_name: Mapping[str, ast.MetricDecl] = field(default_factory=lambda: MappingProxyType({}))
    bad: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resolved(Declared):
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    ref_span: Mapping[tuple[str, str], Span] = field(default_factory=lambda: MappingProxyType({}))
    unavailable: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Graphed(Resolved):
    pass


@dataclass(frozen=True)
class Available(Graphed):
    pass


@dataclass(frozen=True)
class Typed(Available):
    compiled: Mapping[str, CompiledMetric] = field(default_factory=lambda: MappingProxyType({}))


def advance(cls, prev, **changes):
    """The next stage ``cls`` from ``prev``: every field of ``prev`` carried over, ``changes`` added or
    replaced (``prev`` itself is left as it was)."""
    carried = {f.name: getattr(prev, f.name) for f in fields(prev)}
    return cls(**(carried | changes))


def frozen(d: dict) -> Mapping:
    """A read-only view of a fresh dict (stages never share a mutable mapping)."""
    return MappingProxyType(dict(d))
