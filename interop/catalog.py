"""What an importer reads out of a source file, before anything is written: a ``SourceCatalog``.

The catalog is source-neutral: events (base counters, by block), machine constants, and metrics
whose formulas are already in ``perfonto.importers.ir`` form with the source's semantics decided.
A metric the importer cannot translate keeps ``expr=None`` and a ``problem`` saying why, so nothing
is dropped silently: it is reported as rejected with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ir


@dataclass
class SourceEvent:
    """A base counter of the source. ``block``/``name`` are perfonto identifiers (already valid)."""

    key: str  # the source's own name, e.g. "CPU_CLK_UNHALTED.THREAD" or "SQ_WAVES"
    block: str
    name: str
    description: str
    defined: bool = True  # False: the file references it but does not define it
    unit: str = "event"  # the source's unit of raw × scale (perf: an event's ScaleUnit label)
    scale: float = 1.0  # raw count × scale = value in unit
    kind: str = "counter"
    width: int | str = 64
    axes: dict = field(default_factory=dict)  # instance axes, when the source gives them
    across_chips: str | None = None  # gauges
    counted_by: str = "chip"
    effective_width: int | None = None  # a counter stored wider than it wraps (perfonto's own export)
    max_rate: float | None = None  # fastest increase, unit per second (perfonto's own export)
    sources: dict = field(
        default_factory=dict
    )  # tool -> the tool's own name for the event (perf: as perf stat prints it)


@dataclass
class SourceConstant:
    """A machine constant (dimensionless in every source): ``value`` is an assumption unless given."""

    key: str
    name: str  # perfonto spec name without "spec."
    value: float
    description: str
    source: str  # why this value
    provenance: str = "assumed"
    unit: str = "1"
    may_be_zero: bool = False  # a flag (smt_on), or a property the tool reads as 0 when unknown
    scope: str = "system"  # instance, chip or system (perfonto's own export says which)
    given: bool = False  # the value was given on the command line (--constant NAME=VALUE)
    importer_default: bool = False  # the value is the importer's guess (the file does not give it)


#: The ``source`` of a constant whose value was given on the command line.
GIVEN = "given on the command line (--constant)"


@dataclass
class Threshold:
    """The metric's own comparison (``op``, ``value`` in the space the source compares: perf's raw
    expression value, Intel's displayed value), plus what could not be carried over."""

    op: str
    value: float
    message: str
    implied: list[str] = field(default_factory=list)  # conjuncts on ancestors, carried by `parent`


@dataclass
class SourceMetric:
    key: str  # the source's name (unique in the catalog)
    name: str  # perfonto metric name
    formula: str  # original text, for the report and the `source` clause
    expr: ir.Node | None
    problem: str = ""  # why expr is None (a rejection reason)
    unit_text: str | None = None  # the source's unit label as written
    scale: float = 1.0  # displayed value = formula value × scale (perf ScaleUnit)
    description: str = ""
    groups: list[str] = field(default_factory=list)
    parent: str | None = None  # source key of the parent metric
    threshold: Threshold | None = None
    threshold_problem: str = ""  # a threshold that exists but cannot be expressed
    weight: int = 1  # how many source definitions this metric stands for (rocprof archs)
    origin: str = ""  # where in the file (for the `source` clause)


@dataclass
class Finding:
    """A lint finding on an imported formula (or a note about the translation)."""

    code: str
    metric: str  # source key, or "" for file-level findings
    message: str
    severity: str = "warning"

    def to_json(self) -> dict:
        return {"code": self.code, "metric": self.metric, "message": self.message, "severity": self.severity}


@dataclass
class SourceCatalog:
    """Everything one generation of an import needs."""

    format: str
    path: str
    generation: str
    description: str
    clock: str = "core"
    clock_description: str = "Clock of the imported PMU (its frequency is not in the source file)."
    events: dict[str, SourceEvent] = field(default_factory=dict)
    constants: dict[str, SourceConstant] = field(default_factory=dict)
    metrics: dict[str, SourceMetric] = field(default_factory=dict)
    block_instances: dict[str, int] = field(default_factory=dict)  # block -> instances (rocprof)
    block_descriptions: dict[str, str] = field(default_factory=dict)
    clocks: dict[str, tuple[float, str, str]] = field(default_factory=dict)  # domain -> (Hz, provenance, source)
    findings: list[Finding] = field(default_factory=list)
    translations: list[str] = field(default_factory=list)  # semantics applied, for the report
    extends: str | None = None  # import against an existing generation (perf --generation)
    archs: list[str] = field(default_factory=list)

    def event(self, key: str, block: str, name: str, description: str, defined: bool = True) -> SourceEvent:
        """Register (once) and return the event ``key``."""
        ev = self.events.get(key)
        if ev is None:
            ev = self.events[key] = SourceEvent(key, block, name, description, defined)
        return ev

    def assumed_constant(
        self,
        key: str,
        name: str,
        description: str,
        default: tuple[float, str],
        overrides: dict[str, float],
        may_be_zero: bool = False,
    ) -> SourceConstant:
        """Register (once) and return the machine constant ``key``, spec name ``name`` (no ``spec.``):
        the importer's ``default`` (value, why) is ``assumed``; a value for ``name`` in ``overrides``
        (the command line's ``--constant``) is ``claimed`` instead."""
        c = self.constants.get(key)
        if c is None:
            (value, why), prov = default, "assumed"
            given = name in overrides
            if given:
                value, why, prov = overrides[name], GIVEN, "claimed"
            c = self.constants[key] = SourceConstant(
                key,
                name,
                value,
                description,
                why,
                prov,
                may_be_zero=may_be_zero,
                given=given,
                importer_default=not given,
            )
        return c
