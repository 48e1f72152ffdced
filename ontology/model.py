"""The ontology as written: pydantic models of one generation's YAML file.

A generation file declares clock domains, spec constants, and blocks (hardware unit families with
named instance axes and a clock domain) holding signals (counters and gauges). These models check
types and forbid unknown keys; cross-references (a block's clock domain, a signal's unit) are checked
when the generation is resolved (``ontology.resolve``).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictInt, StringConstraints, field_validator

from .resolved import Scope  # noqa: F401  (the resolved model's; written as the YAML's `scope:`)

Ident = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
DottedIdent = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")]
IDENT_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=False, allow_inf_nan=False)


class Provenance(str, Enum):
    """How a spec figure is known: measured on hardware, claimed by a vendor, estimated from public
    data, or assumed (a modelling choice with no public basis)."""

    measured = "measured"
    claimed = "claimed"
    estimated = "estimated"
    assumed = "assumed"


class Sparsity(str, Enum):
    """Whether a FLOP count or peak assumes structured sparsity (vendors quote 2:4-sparse peaks at twice
    the dense figure)."""

    dense = "dense"
    sparse = "sparse"


class SpecConstant(_Model):
    """One figure of a generation's datasheet, with its unit and how it is known."""

    value: float = Field(description="Magnitude in `unit`.")
    unit: str = Field(description="pint unit string, e.g. `TFLOP/s`, `GB`, `GB/s`.")
    provenance: Provenance = Field(description="measured, claimed, estimated or assumed.")
    source: str = Field(
        default="", description="Where the figure comes from (datasheet, paper, or the reasoning behind an assumption)."
    )
    description: str = Field(default="", description="What the figure is.")
    scope: Scope = Field(
        default=Scope.chip,
        description="`instance` (per instance of the block it is named after), `chip` (per-chip amount; N chips have "
        "N times it) or `system` (independent of the chip count).",
    )
    precision: str | None = Field(
        default=None, description="For peak rates: the number format (`fp8`, `bf16`, `fp4`, ...)."
    )
    sparsity: Sparsity | None = Field(
        default=None,
        description="For peak FLOP rates: `dense`, or `sparse` (2:4 structured sparsity doubles vendor peaks); dense "
        "work over a sparse peak is a compile error.",
    )


class ClockDomain(_Model):
    """A clock domain; it defines the cycle unit `<name>_cycle` used by the counters of its blocks."""

    frequency: SpecConstant = Field(description="Clock frequency (unit convertible to Hz).")
    description: str = Field(default="", description="What runs on this clock.")


class SignalKind(str, Enum):
    """The shipped kinds of signal (``ontology/kinds.py`` holds what each means to every layer; a kind
    added there is accepted too). How a signal's raw register is read:

    - ``counter``: a monotonic register of ``width`` bits that wraps modulo 2^width (or 2^effective_width);
      inside a metric its name means its increase over the window.
    - ``gauge``: an instantaneous level; inside a metric its name means its time-weighted mean.
    - ``packed``: one register holding several bit ranges (``fields``), each with its own meaning; never
      differenced. A field ``f`` of signal ``blk.s`` is referenced as ``blk.s.f`` and means its value
      at the window's end sample.
    - ``histogram``: a vector of counters, one per bucket (``buckets`` gives the upper edges; one more
      bucket holds the overflow); each bucket is read like a counter, and a decrease in any bucket
      marks a reset.
    """

    counter = "counter"
    gauge = "gauge"
    packed = "packed"
    histogram = "histogram"


class ChipRollup(str, Enum):
    """How a gauge combines across chips at server level: `sum` (power, occupancy in bytes),
    `avg` (batch size of a tensor-parallel group) or `max` (temperature)."""

    sum = "sum"
    avg = "avg"
    max = "max"


class Stability(str, Enum):
    """Lifecycle of a signal, as in OpenTelemetry semantic conventions: experimental signals may change;
    stable ones may only change through deprecation (``renamed_to``) — a compatibility rule that
    ``perfonto diff`` enforces."""

    experimental = "experimental"
    stable = "stable"
    deprecated = "deprecated"


class PackedField(_Model):
    """One bit range of a packed register: bits ``lo``..``hi`` inclusive, value = field × scale in unit."""

    bits: tuple[StrictInt, StrictInt] = Field(description="[lo, hi] bit positions, inclusive, 0 = least significant.")
    unit: str = Field(default="1", description="Unit of the scaled field value.")
    scale: float = Field(default=1.0, gt=0, description="field × scale = value in `unit`.")
    description: str = Field(min_length=1, description="What the field means.")


class ResetIndicatorKind(str, Enum):
    """What a counter's ``reset_indicator`` is, and so which change of it marks a reset.

    - ``boot_counter``: a count of boots (or resets) — any change is a reset;
    - ``start_time``: the time the device (or its firmware) started — any change is a reset;
    - ``uptime``: time since the device started — it grows by itself, so only a decrease is a reset
      (a reset followed by more uptime than the previous sample showed, inside one window, cannot be
      seen: sample faster than the shortest time between two resets).
    """

    boot_counter = "boot_counter"
    start_time = "start_time"
    uptime = "uptime"


class ScaleField(_Model):
    """A counter whose unit is given per sample by a field of another register (RAPL's energy-status-units
    field: the energy counter counts 2^-ESU J): value = raw × ``scale`` × ``base`` ^ field."""

    field: DottedIdent = Field(
        description="Full name of a packed field, `<block>.<register>.<field>` (e.g. `power.rapl_unit.energy`)."
    )
    base: float = Field(
        default=0.5, gt=0, description="The per-sample multiplier is base ^ (field value); 0.5 for RAPL (2^-field)."
    )


class InstanceSplit(str, Enum):
    """How an emulator binding spreads a per-chip amount over the signal's instances.

    - ``one``: a block without instances gets the whole amount;
    - ``each``: every instance sees the whole amount (per-core busy time when the work is spread evenly);
    - ``even``: the amount is divided evenly (FLOPs over cores);
    - ``jitter``: divided near-evenly, with a per-chip split drawn once from the run's seed (bytes over
      HBM stacks, SRAM banks and DMA engines: address interleaving is close to uniform);
    - ``links`` / ``links_each``: divided over / given to each of the chip-to-chip links the ring
      collectives use (the block's single instance axis is the links), 0 on the others.
    """

    one = "one"
    each = "each"
    even = "even"
    jitter = "jitter"
    links = "links"
    links_each = "links_each"


class EmulatorBinding(_Model):
    """What the reference emulator counts for a signal, in terms of the emulator's named quantities
    (listed with unit and meaning by ``perfonto emulator-quantities``). Exactly one of ``linear``,
    ``impulse``, ``gauge``, ``event_rate`` or ``constant``. A signal without a binding is absent from an
    emulated dump. A generation that writes a binding replaces its parent's whole binding."""

    linear: dict[Ident, float] | None = Field(
        default=None,
        description="Counters: Σ coefficient × quantity over the emulator's cumulative amounts (`{hbm_read: 1}`), "
        "converted to the signal's unit (seconds become cycles of the block's clock), then divided by "
        "`scale`.",
    )
    impulse: Ident | None = Field(
        default=None,
        description="Counters: a count the emulator adds when a step ends (`steps`, `input_tokens`, `output_tokens`, "
        "`requests_completed`, ...); exact integers.",
    )
    gauge: Ident | None = Field(
        default=None,
        description="Gauges: the level the emulator holds during each step (`batch`, `kv_tokens`, `hbm_alloc_bytes`, "
        "`power`, ...), converted to the signal's unit.",
    )
    event_rate: float | None = Field(
        default=None,
        ge=0,
        description="Counters: random events (a Poisson process drawn from the run's seed), this many per instance "
        "per second.",
    )
    constant: StrictInt | None = Field(
        default=None,
        ge=0,
        description="Any kind: the raw register value, held for the whole run (a counter that never counts, a status "
        "register that never changes).",
    )
    split: InstanceSplit | None = Field(
        default=None,
        description="`linear`, `gauge`, `event_rate`: how the per-chip amount spreads over the block's instances "
        "(`one`, `each`, `even`, `jitter`, `links`, `links_each`); required for blocks with instances, "
        "`one` otherwise.",
    )
    leader_only: bool = Field(
        default=False,
        description="`linear`, `impulse`: count on the leader chip of each scheduler rank only (the chip that sends "
        "tokens to the host), 0 on the others, so that a server total counts each token once.",
    )


class CrossCheck(_Model):
    """An energy counter's pairing with the power gauge of the same rail (issue 29): over the run the
    counter's increase is compared with the gauge's power integrated over time (analysis.energy_checks)."""

    power: str = Field(min_length=1, description="Full name of the power gauge of the same rail (`power.power`).")
    tolerance: float = Field(
        gt=0,
        lt=1,
        description="Largest relative disagreement |E_counter - E_power| / E_counter accepted (0.1 = 10 %); a larger "
        "one is reported.",
    )


class Signal(_Model):
    """A base hardware signal of a block."""

    kind: str = Field(
        description="counter, gauge, packed or histogram (the rows of ontology/kinds.py).",
        json_schema_extra={"enum": [k.value for k in SignalKind]},
    )

    @field_validator("kind")
    @classmethod
    def _a_known_kind(cls, v: str) -> str:
        from .kinds import KINDS

        if v not in KINDS:
            from .diagnostics import did_you_mean

            hint = did_you_mean(v, KINDS)
            raise ValueError(
                f"no signal kind `{v}`" + (f" ({hint})" if hint else "") + f"; the kinds are {', '.join(KINDS)}"
            )
        return v

    unit: str = Field(
        default="",
        description="Unit of the scaled value (raw × scale), a pint unit string; required except for packed registers.",
    )
    description: str = Field(min_length=1, description="What the signal counts or measures.")
    width: Annotated[StrictInt, Field(ge=1, le=64)] | Literal["unknown"] | None = Field(
        default=None,
        description="Register width in bits (counters, packed registers, histogram buckets); `unknown` when the "
        "hardware does not document it (then any decrease is read as a reset, never a wrap).",
    )
    effective_width: StrictInt | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Counters: bits at which the value actually wraps, when narrower than the stored `width` (e.g. a "
        "48-bit counter in a 64-bit register).",
    )
    wrap_range: str | StrictInt | float | None = Field(
        default=None,
        description="Counters that wrap at a range that is not a power of two, as a quantity in the signal's unit "
        "(`262143.328850 J`, as Linux powercap's max_energy_range_uj gives it): raw values run 0 … "
        "range/scale − 1 and increases are taken modulo range/scale; a raw value at or beyond it is null.",
    )
    scale: float = Field(default=1.0, gt=0, description="raw × scale = value in `unit`.")
    scale_field: ScaleField | None = Field(
        default=None,
        description="Counters: a field of another register that gives the unit per sample (value = raw × scale × "
        "base ^ field); a window across which the field changes is null.",
    )
    sentinel: Annotated[list[StrictInt], Strict()] = Field(
        default_factory=list,
        description="Raw values meaning 'no data' (e.g. 0xFFFFFFFF); a window touching one is null.",
    )
    reset_indicator: str | None = Field(
        default=None,
        description="Full name of a signal whose change marks a device reset; a decrease of this counter across such "
        "a change is a reset, never a wrap.",
    )
    reset_indicator_kind: ResetIndicatorKind | None = Field(
        default=None,
        description="What the reset indicator is: `boot_counter` or `start_time` (any change is a reset; the "
        "default) or `uptime` (only a decrease is a reset).",
    )
    max_rate: str | None = Field(
        default=None,
        description="Counters: the fastest the value can grow, as a quantity (`2 TB/s`); a window's increase beyond "
        "max_rate × interval is read as a reset.",
    )
    across_chips: ChipRollup | None = Field(
        default=None, description="Gauges: how the level combines across chips (default avg). Counters always sum."
    )
    averaging_window: str | None = Field(
        default=None,
        description="Gauges: the sensor's own averaging window, a time (`1 s`): each reading is the trailing mean "
        "over it, so a window shorter than it reads the sensor's average, not the window's (marked in reports).",
    )
    cross_check: CrossCheck | None = Field(
        default=None,
        description="Energy counters: the power gauge of the same rail and the tolerance within which the counter's "
        "increase and the integrated power must agree over the run (`{power: power.power, tolerance: 0.1}`).",
    )
    counted_by: Literal["chip", "leader"] = Field(
        default="chip",
        description="Counters: `chip` (every chip counts its own share: bytes, cycles, energy) or `leader` (one chip "
        "of each tensor-parallel group counts the group's events once: forward passes, tokens, "
        "requests). A metric that divides a time measured on every chip (cycles, seconds) by a "
        "leader-counted count reads the group's time at server level (see metrics.infer).",
    )
    fields: dict[Ident, PackedField] = Field(default_factory=dict, description="Packed registers: the bit fields.")
    buckets: Annotated[list[float], Strict()] = Field(
        default_factory=list,
        description="Histograms: ascending upper edges of the buckets (in `bucket_unit`); one more bucket counts "
        "values above the last edge.",
    )
    bucket_unit: str = Field(default="1", description="Histograms: unit of the bucket edges.")
    since: Ident | None = Field(
        default=None, description="First generation with this signal (derived from `extends` when omitted)."
    )
    removed_in: Ident | None = Field(
        default=None,
        description="Generation that removes the signal (informational; removal itself is `removed:` in that "
        "generation).",
    )
    broken_on: Annotated[list[Ident], Strict()] = Field(
        default_factory=list,
        description="Generations where the signal is listed but known not to count; metrics that need it are "
        "unavailable there.",
    )
    stability: Stability = Field(default=Stability.stable, description="experimental, stable or deprecated.")
    precision: str | None = Field(
        default=None, description="FLOP counters: the number format counted (`fp8`, `bf16`, ...)."
    )
    sparsity: Sparsity | None = Field(
        default=None, description="FLOP counters: `dense` (every multiply counted) or `sparse`."
    )
    renamed_to: str | None = Field(
        default=None, description="Deprecated signals: the full name that replaces this one."
    )
    sources: dict[
        Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]*$", max_length=40)],
        Annotated[str, StringConstraints(min_length=1, max_length=200)],
    ] = Field(
        default_factory=dict,
        description="What real tools call this signal, by tool: `{perf: task-clock}` — the event, metric or field name "
        "a capture of that tool holds it under (`perfonto analyze --format perf-stat` reads perf's `task-clock` "
        "lines into it). For perf, alternatives are separated by `|`, the first the capture counts is read "
        "(`task-clock|cpu-clock`: `perf stat -a` counts cpu-clock). A value in a time unit is converted to the "
        "signal's unit; a count is read as it is.",
    )
    id: Annotated[StrictInt, Field(ge=0, le=65535)] | None = Field(
        default=None,
        description="The signal's id in the generated C header (its ABI). Default: append-only — a generation's "
        "signals are numbered in file order, a child generation's new signals after its parent's, a "
        "renamed signal keeps its id and a removed one's id is never reused. Give an id to add a signal "
        "in the middle of a released file without renumbering the ones after it.",
    )
    emulator: EmulatorBinding | None = Field(
        default=None,
        description="What the reference emulator counts for this signal (see EmulatorBinding); without it the signal "
        "is absent from an emulated dump.",
    )


class CounterSlots(_Model):
    """How many of a block's counters its performance-monitoring unit reads at once (issue 29): ``programmable``
    slots, each of which can count any one of the block's counters, and ``fixed`` counters that always count
    (free-running or fixed-function, like x86's fixed counters). A block without ``counter_slots`` reads every
    counter at once. ``perfonto plan`` packs the counters a set of metrics needs into passes."""

    programmable: StrictInt = Field(ge=0, le=4096, description="Programmable counter slots per instance of the block.")
    fixed: Annotated[list[Ident], Strict()] = Field(
        default_factory=list, description="Short names of the block's counters that always count (no slot needed)."
    )
    provenance: Provenance = Field(
        default=Provenance.assumed, description="measured, claimed, estimated or assumed (as for spec constants)."
    )
    source: str = Field(default="", description="Where the figure comes from, or the reasoning behind an assumption.")


class GroupConstraint(_Model):
    """A rule of a block's counter groups: ``together`` counters are read in one group whenever one of them is
    (an event that needs a companion, like a leader), ``apart`` counters never share a group (they need the
    same physical counter). Exactly one of the two, with two or more short signal names."""

    together: Annotated[list[Ident], Strict()] = Field(
        default_factory=list, description="Counters that must share a group."
    )
    apart: Annotated[list[Ident], Strict()] = Field(
        default_factory=list, description="Counters no two of which may share a group."
    )
    reason: str = Field(default="", description="Why (the hardware rule behind it).")


class Block(_Model):
    """A hardware unit family (mxu, vpu, sram, hbm, dma, c2c, pcie, seq, power)."""

    description: str = Field(min_length=1, description="What the block is.")
    clock: Ident = Field(description="Clock domain of the block's cycle counters.")
    instances: dict[Ident, Annotated[StrictInt, Field(ge=1, le=1_000_000)] | Literal["from_data"]] = Field(
        default_factory=dict,
        description="Named instance axes and their sizes, e.g. `{stack: 6}`; empty for a single instance per chip. "
        "`from_data` (`{cpu: from_data}`): the size is the number of instances a capture holds (the CPUs of "
        "`perf stat -A`, node_exporter's `cpu` label), fixed per capture when it is read; without a capture "
        "(`check`, `docs`) the axis has 1 instance as a placeholder.",
    )
    slots: dict[Ident, Annotated[list[StrictInt], Strict()]] = Field(
        default_factory=dict,
        description="Instance slots that exist, per axis, when fewer than the axis size are populated (a SKU with 4 "
        "of 8 memory channels: `{channel: [0, 1, 2, 3]}`); rollups run over these only, and a dump of "
        "all the axis' slots or of these only is read.",
    )
    counter_slots: CounterSlots | None = Field(
        default=None,
        description="Counters read at once: `{programmable: N, fixed: [signal, ...]}` (not the instance `slots` "
        "above); without it every counter of the block counts at once.",
    )
    group_constraints: list[GroupConstraint] = Field(
        default_factory=list,
        description="Counters that must (`together`) or must not (`apart`) share a group (`perfonto plan`).",
    )
    signals: dict[Ident, Signal] = Field(description="Signals by short name; the full name is `<block>.<name>`.")


class RecordField(_Model):
    """One field of a record type: a value per record, or (``times``) a list of instants per record."""

    unit: str = Field(description="Unit of the field, e.g. `s`, `token`.")
    description: str = Field(min_length=1, description="What the field holds.")
    times: bool = Field(
        default=False,
        description="True for a list of instants per record (e.g. the emission time of every output token).",
    )
    measure: Literal["duration", "tokens"] | None = Field(
        default=None,
        description="Fields of a derived population of gaps: `duration` (the time from one emission to the next; the "
        "default) or `tokens` (how many instants share the gap's closing emission, e.g. tokens accepted "
        "in one speculative-decoding step).",
    )


class DerivedPopulation(_Model):
    """A population derived from a ``times`` field: one record per gap between consecutive *emissions*
    (distinct instants). Several tokens emitted at one instant (speculative or multi-token decoding,
    chunked streaming) are one emission: the zero gaps inside it are not records."""

    consecutive_gaps_of: DottedIdent = Field(
        description="`<record>.<times field>`; each record with k distinct instants (emissions) gives k - 1 gaps."
    )


class RecordType(_Model):
    """Event records written beside the counters (one row per request, say). Metrics over record fields
    have that record type as their *population*; percentiles are taken over it."""

    description: str = Field(min_length=1, description="What one record is.")
    fields: dict[Ident, RecordField] = Field(description="Fields by name; referenced as `<record>.<field>`.")
    derived: DerivedPopulation | None = Field(
        default=None, description="For derived populations (token gaps): how records are made."
    )


class ReportDecl(_Model):
    """What the reports (terminal, HTML, ``report.json``) show of a catalog's metrics. Without it: every
    metric that evaluated, grouped by block (``analysis.report_model``). A generation that extends another
    inherits its parent's ``report:``; a child that writes one replaces it whole."""

    headline: Annotated[list[DottedIdent], Strict()] = Field(
        default_factory=list,
        description="The server-level table's metrics, in this order (those that evaluated on the capture).",
    )
    groups: dict[
        Annotated[str, StringConstraints(min_length=1, max_length=80)], Annotated[list[DottedIdent], Strict()]
    ] = Field(
        default_factory=dict,
        description="Titled sections of the per-chip tables (terminal and HTML): `{title: [metric, ...]}`.",
    )
    per_chip: dict[DottedIdent, Annotated[str, StringConstraints(min_length=1, max_length=40)]] = Field(
        default_factory=dict,
        description="The per-chip table's columns, metric → column header (`{mfu: MFU %}`), in this order.",
    )
    fleet: Annotated[list[DottedIdent], Strict()] = Field(
        default_factory=list,
        description="The fleet tables' metrics (per pod, rack and host, and their spread across chips), in this "
        "order; default: the first eight of `headline`.",
    )


class GenerationFile(_Model):
    """One generation's YAML file: `ontology/catalog/<name>.yaml`."""

    generation: Ident = Field(description="Generation name, e.g. `sohu`.")
    description: str = Field(min_length=1, description="What this generation is.")
    extends: Ident | None = Field(
        default=None,
        description="Parent generation: this file overrides and adds to the parent's clock domains, spec constants, "
        "blocks and signals.",
    )
    removed: Annotated[list[DottedIdent], Strict()] = Field(
        default_factory=list, description="Full names of the parent's signals that this generation removes."
    )
    renamed: dict[DottedIdent, DottedIdent] = Field(
        default_factory=dict,
        description="Parent signals renamed here, old full name → new full name; the old name stays as a deprecated "
        "alias.",
    )
    clock_domains: dict[Ident, ClockDomain] = Field(description="Clock domains by name.")
    spec: dict[DottedIdent, SpecConstant] = Field(
        default_factory=dict,
        description="Spec constants; `hbm.peak_bandwidth` is referenced as `spec.hbm.peak_bandwidth`.",
    )
    blocks: dict[Ident, Block] = Field(description="Blocks by name.")
    records: dict[Ident, RecordType] = Field(
        default_factory=dict, description="Record types written beside the counters (serving runtime events)."
    )
    report: ReportDecl | None = Field(
        default=None,
        description="The metrics the reports show: `headline` (server table), `groups` and `per_chip`; inherited by "
        "a generation that extends this one, replaced whole by one that declares its own. Metric names are checked "
        "when the catalog is compiled.",
    )
