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

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Ident = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
DottedIdent = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")]
IDENT_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=False)


class Provenance(str, Enum):
    """How a spec figure is known: measured on hardware, claimed by a vendor, estimated from public
    data, or assumed (a modelling choice with no public basis)."""

    measured = "measured"
    claimed = "claimed"
    estimated = "estimated"
    assumed = "assumed"


class Scope(str, Enum):
    """What a spec constant is a quantity *of*.

    ``chip``: one chip's amount (peak FLOP/s, HBM bandwidth, capacity, clock cycles per second); a
    server of N chips has N times it. ``global``: independent of the number of chips (bytes per
    element, a ratio)."""

    chip = "chip"
    global_ = "global"


class SpecConstant(_Model):
    """One figure of a generation's datasheet, with its unit and how it is known."""

    value: float = Field(description="Magnitude in `unit`.")
    unit: str = Field(description="pint unit string, e.g. `TFLOP/s`, `GB`, `GB/s`.")
    provenance: Provenance = Field(description="measured, claimed, estimated or assumed.")
    source: str = Field(default="", description="Where the figure comes from (datasheet, paper, or the reasoning behind an assumption).")
    description: str = Field(default="", description="What the figure is.")
    scope: Scope = Field(default=Scope.chip, description="`chip` (per-chip amount; N chips have N times it) or `global`.")


class ClockDomain(_Model):
    """A clock domain; it defines the cycle unit `<name>_cycle` used by the counters of its blocks."""

    frequency: SpecConstant = Field(description="Clock frequency (unit convertible to Hz).")
    description: str = Field(default="", description="What runs on this clock.")


class SignalKind(str, Enum):
    """``counter``: a monotonic register of `width` bits that wraps modulo 2^width; inside a metric its
    name means its increase over the window. ``gauge``: an instantaneous level; inside a metric its
    name means its time-weighted mean over the window."""

    counter = "counter"
    gauge = "gauge"


class ChipRollup(str, Enum):
    """How a gauge combines across chips at server level: `sum` (power, occupancy in bytes),
    `avg` (batch size of a tensor-parallel group) or `max` (temperature)."""

    sum = "sum"
    avg = "avg"
    max = "max"


class Signal(_Model):
    """A base hardware signal of a block."""

    kind: SignalKind = Field(description="counter or gauge.")
    unit: str = Field(description="Unit of the scaled value (raw × scale), a pint unit string.")
    description: str = Field(min_length=1, description="What the signal counts or measures.")
    width: int | None = Field(default=None, ge=1, le=64, description="Counters: register width in bits; the raw value wraps modulo 2^width.")
    scale: float = Field(default=1.0, gt=0, description="raw × scale = value in `unit`.")
    across_chips: ChipRollup | None = Field(default=None, description="Gauges: how the level combines across chips (default avg). Counters always sum.")


class Block(_Model):
    """A hardware unit family (mxu, vpu, sram, hbm, dma, c2c, pcie, seq, power)."""

    description: str = Field(min_length=1, description="What the block is.")
    clock: Ident = Field(description="Clock domain of the block's cycle counters.")
    instances: dict[Ident, Annotated[int, Field(ge=1)]] = Field(default_factory=dict, description="Named instance axes and their sizes, e.g. `{stack: 6}`; empty for a single instance per chip.")
    signals: dict[Ident, Signal] = Field(description="Signals by short name; the full name is `<block>.<name>`.")


class GenerationFile(_Model):
    """One generation's YAML file: `ontology/catalog/<name>.yaml`."""

    generation: Ident = Field(description="Generation name, e.g. `sohu`.")
    description: str = Field(min_length=1, description="What this generation is.")
    extends: Ident | None = Field(default=None, description="Parent generation (not yet supported by this loader).")
    clock_domains: dict[Ident, ClockDomain] = Field(description="Clock domains by name.")
    spec: dict[DottedIdent, SpecConstant] = Field(default_factory=dict, description="Spec constants; `hbm.peak_bandwidth` is referenced as `spec.hbm.peak_bandwidth`.")
    blocks: dict[Ident, Block] = Field(description="Blocks by name.")


Kind = Literal["counter", "gauge"]
