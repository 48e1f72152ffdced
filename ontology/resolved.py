"""The resolved model of a generation: what every later stage reads (flat, every name resolved), kept
apart from the model as written (``ontology.model``, pydantic) and from the resolver
(``ontology.generation``), so that a compiled catalog loads from perfonto's cache without importing
the YAML model or the resolver."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pint

from .diagnostics import Span


class Scope(str, Enum):
    """What a spec constant is a quantity *of*.

    ``instance``: one instance's amount of the block the constant is named after (``spec.die.peak_bw``
    with ``die: 8`` instances is per die); it carries the block's instance axes, so it can only meet
    per-instance values, or be rolled up first (``sum(spec.die.peak_bw)`` is the chip's total).
    ``chip``: one chip's amount (peak FLOP/s, HBM bandwidth, capacity, clock cycles per second); a
    server of N chips has N times it. ``system``: independent of the number of chips (bytes per
    element, a ratio, a server-wide budget)."""

    instance = "instance"
    chip = "chip"
    system = "system"


@dataclass(frozen=True)
class ResolvedBinding:
    """One signal's emulator binding, resolved.

    kind: ``linear``, ``impulse``, ``gauge``, ``events`` or ``constant``.
    terms: ``linear``: ((quantity, coefficient), ...); term_spans: where each quantity is written.
    name: ``impulse`` / ``gauge``: the quantity; name_span: where it is written.
    split: instance split (``one`` for blocks without instances).
    leader_only: counted on the leader chip of each scheduler rank only.
    rate: ``events``: events per instance per second.
    constant: ``constant``: the raw register value.
    span: where the binding is written (the ``emulator:`` key's value).
    """

    kind: str
    span: Span
    terms: tuple[tuple[str, float], ...] = ()
    term_spans: tuple[Span, ...] = ()
    name: str = ""
    name_span: Span | None = None
    split: str = "one"
    leader_only: bool = False
    rate: float = 0.0
    constant: int = 0

    @property
    def quantities(self) -> tuple[str, ...]:
        """Every emulator quantity the binding reads."""
        return tuple(q for q, _ in self.terms) + ((self.name,) if self.name else ())

    def describe(self) -> str:
        """One line, e.g. ``linear: 1 × hbm_read (jitter)``."""
        if self.kind == "linear":
            body = " + ".join(f"{c:g} × {q}" for q, c in self.terms)
        elif self.kind in ("impulse", "gauge"):
            body = self.name
        elif self.kind == "events":
            body = f"{self.rate:g} per instance per s"
        else:
            body = str(self.constant)
        extra = [self.split] if self.kind in ("linear", "gauge", "events") else []
        if self.leader_only:
            extra.append("leader only")
        return f"{self.kind}: {body}" + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class ResolvedSignal:
    """One signal of a resolved generation.

    ``axes`` are the block's instance axes as ``((name, size), ...)``; the signal's prepared values
    have shape ``(windows, chips, *sizes)``.
    """

    name: str  # full name, "hbm.read_bytes"
    block: str
    kind: str  # a row of ontology/kinds.py (kinds.of(signal) gives it)
    unit: pint.Unit
    unit_text: str
    description: str
    width: int | None
    scale: float
    axes: tuple[tuple[str, int], ...]
    clock: str
    across_chips: str  # "sum" for counters; the gauge's rule otherwise
    span: Span
    wrap_width: int | None = None  # effective wrap width (effective_width, else width)
    sentinel: tuple[int, ...] = ()
    reset_indicator: str | None = None
    max_rate: float | None = None  # in unit/s
    buckets: tuple[float, ...] = ()
    since: str = ""
    stability: str = "stable"
    renamed_to: str | None = None
    broken: bool = False  # listed on this generation but known not to count (broken_on)
    precision: str | None = None
    sparsity: str | None = None
    modulus: int | None = None  # raw modulus of a counter that wraps at a declared range (wrap_range / scale)
    reset_kind: str = (
        "change"  # how the reset indicator marks a reset: "change" (boot counter, start time) or "decrease" (uptime)
    )
    scale_field: tuple[str, float] | None = (
        None  # (packed field full name, base): value = raw × scale × base ^ field, per sample
    )
    slots: tuple[int, ...] | None = (
        None  # flat indices, over the block's full axes, of the present instances (None: all)
    )
    full_instances: int = 0  # instance count over the full axes (a dump may hold them all); 0: same as ``instances``
    counted_by: str = "chip"  # counters: "chip", or "leader" (one chip of each group counts the group's events)
    id: int = -1  # C header id (append-only along the extends chain; ontology.model.Signal.id)
    emulator: ResolvedBinding | None = (
        None  # what the reference emulator counts for it (None: absent from emulated dumps)
    )
    sources: tuple[tuple[str, str], ...] = ()  # (tool, its name for the signal): what real tools' captures call it
    averaging_window: float | None = None  # gauges: the sensor's trailing-average window, s (issue 29)
    cross_check: tuple[str, float] | None = None  # energy counters: (power gauge of the same rail, tolerance)

    @property
    def instances(self) -> int:
        n = 1
        for _, size in self.axes:
            n *= size
        return n


@dataclass(frozen=True)
class ResolvedField:
    """A bit field of a packed register, referenced as ``<block>.<register>.<field>``; its window value
    is the field at the window's end sample, × scale."""

    name: str
    register: str
    lo: int
    hi: int
    unit: pint.Unit
    unit_text: str
    scale: float
    description: str
    axes: tuple[tuple[str, int], ...]
    block: str
    span: Span


@dataclass(frozen=True)
class ResolvedRecordField:
    """``<record>.<field>``: a value per record of population ``record``."""

    name: str
    record: str
    field: str
    unit: pint.Unit
    unit_text: str
    description: str
    times: bool
    span: Span
    measure: str | None = None  # derived populations of gaps: "duration" (default) or "tokens"


@dataclass(frozen=True)
class ResolvedConstant:
    """A spec constant, referenced in metrics as ``spec.<name>`` (``name`` here includes ``spec.``)."""

    name: str
    value: float
    unit: pint.Unit
    unit_text: str
    provenance: str
    source: str
    description: str
    scope: Scope
    span: Span
    precision: str | None = None
    sparsity: str | None = None


@dataclass(frozen=True)
class ReportSpec:
    """A generation's ``report:`` (``ontology.model.ReportDecl``) resolved: the server table's metrics
    (``headline``), titled sections of the per-chip tables (``groups``), the per-chip table's columns
    (``per_chip``, metric → header), the fleet tables' metrics (``fleet``), and where each named metric
    is written (``refs``: (name, span)), for the compile-time check that every name is a metric of the
    catalog."""

    headline: tuple[str, ...] = ()
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    per_chip: dict[str, str] = field(default_factory=dict)
    refs: tuple[tuple[str, Span], ...] = ()
    fleet: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generation:
    """A resolved generation: blocks, flat signal table, spec constants, and its unit registry."""

    name: str
    description: str
    registry: pint.UnitRegistry
    blocks: dict[str, dict]  # name -> {"clock", "axes", "description"}
    signals: dict[str, ResolvedSignal]
    spec: dict[str, ResolvedConstant]
    source_file: str
    content_hash: str
    clock_domains: dict[str, ResolvedConstant] = field(default_factory=dict)
    fields: dict[str, ResolvedField] = field(default_factory=dict)
    lineage: tuple[str, ...] = ()  # root first, this generation last
    aliases: dict[str, str] = field(default_factory=dict)  # old signal name -> current name
    removed: dict[str, str] = field(default_factory=dict)  # signal -> generation that removed it
    record_fields: dict[str, ResolvedRecordField] = field(default_factory=dict)
    records: dict[str, dict] = field(default_factory=dict)  # record type -> {"description", "derived_from"}
    report: ReportSpec | None = None  # the catalog's `report:` (None: the default, analysis.report_model)
    inherited_spec: frozenset[str] = frozenset()  # spec constants (full names) a parent declares

    def signal(self, name: str) -> ResolvedSignal:
        return self.signals[name]


__all__ = [
    "Generation",
    "ResolvedBinding",
    "ResolvedConstant",
    "ResolvedField",
    "ResolvedRecordField",
    "ReportSpec",
    "ResolvedSignal",
    "Scope",
]
