"""Hardware parameters of one chip, read from a resolved ``ontology.Generation``.

Nothing here is a Sohu figure: every rate, size and clock is read from the generation's ``spec``
constants and converted to base SI units (s, Hz, B, B/s, FLOP/s, W) with the generation's own pint
registry; instance counts come from the blocks' instance axes (``gen.blocks[b]["axes"]``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfonto.ontology import Generation
from perfonto.ontology.errors import PerfontoError


class HardwareSpecError(PerfontoError, ValueError):
    """The generation lacks a spec constant the emulator needs, or it has the wrong dimension."""


@dataclass(frozen=True)
class Hardware:
    """Per-chip hardware parameters in base SI units.

    Attributes:
        generation: generation name.
        clock_hz: clock frequency per clock domain, in cycles/s (``{"core": 1.5e9, ...}``).
        peak_fp8, peak_bf16: dense matrix-engine peak, FLOP/s.
        peak_fp4: dense FP4 matrix-engine peak, FLOP/s; None when the generation has no FP4 math
            (no ``spec.mxu.peak_flops_fp4``): FP4 weights then run FP8 math (dequantised on load).
        vpu_peak: vector-unit peak, FLOP/s.
        hbm_capacity: bytes; hbm_bw: read+write peak, B/s.
        sram_capacity: bytes; sram_bw: B/s.
        c2c_bw: chip-to-chip transmit bandwidth over all links, B/s.
        pcie_bw: host interface bandwidth per direction, B/s.
        tdp, idle_power: W.
        cores, banks, stacks, dma_engines, links: instance counts of mxu/vpu, sram, hbm, dma, c2c.
    """

    generation: str
    clock_hz: dict[str, float]
    peak_fp8: float
    peak_bf16: float
    vpu_peak: float
    hbm_capacity: float
    hbm_bw: float
    sram_capacity: float
    sram_bw: float
    c2c_bw: float
    pcie_bw: float
    tdp: float
    idle_power: float
    cores: int
    banks: int
    stacks: int
    dma_engines: int
    links: int
    peak_fp4: float | None = None

    def peak(self, math: str) -> float:
        """Dense matrix peak for math dtype ``math`` (``"fp4"``, ``"fp8"``, ``"bf16"``), FLOP/s.

        Raises:
            HardwareSpecError: ``fp4`` on a generation without FP4 math.
        """
        if math == "fp4":
            if self.peak_fp4 is None:
                raise HardwareSpecError(
                    f"generation `{self.generation}` has no FP4 matrix math (spec.mxu.peak_flops_fp4)"
                )
            return self.peak_fp4
        return {"fp8": self.peak_fp8, "bf16": self.peak_bf16}[math]

    def math_dtype(self, dtype: str) -> str:
        """Math dtype of a GEMM whose weights are ``dtype``: FP4 falls back to FP8 without FP4 math."""
        return "fp8" if dtype == "fp4" and self.peak_fp4 is None else dtype

    @property
    def core_hz(self) -> float:
        return self.clock_hz["core"]

    @property
    def link_bw(self) -> float:
        """Transmit bandwidth of one chip-to-chip link, B/s (``c2c_bw / links``)."""
        return self.c2c_bw / self.links


def _spec(gen: Generation, name: str, to: str, allow_zero: bool = False) -> float:
    """Magnitude of spec constant ``name`` converted to unit ``to``.

    Raises:
        HardwareSpecError: missing, wrong dimension, or not a finite positive number (``allow_zero``:
            finite and ≥ 0) — a zero, negative, NaN or infinite peak or clock would make every time
            in the model meaningless.
    """
    const = gen.spec.get(name)
    if const is None:
        raise HardwareSpecError(
            f"generation `{gen.name}` has no spec constant `{name}`; the emulator needs it "
            f"(declare it under `spec:` in {gen.source_file})"
        )
    try:
        v = float(gen.registry.Quantity(const.value, const.unit).to(to).magnitude)
    except Exception as exc:  # pint DimensionalityError and friends
        raise HardwareSpecError(
            f"spec constant `{name}` of `{gen.name}` is in {const.unit_text}, which does not convert to {to}: {exc}"
        ) from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        need = "a finite number ≥ 0" if allow_zero else "a finite number > 0"
        raise HardwareSpecError(
            f"{_where(gen, name)}: spec constant `{name}` of `{gen.name}` is {const.value} {const.unit_text}; the "
            f"emulator needs {need} (fix it under `spec:`)"
        )
    floor = FLOOR.get(to, FLOOR.get("cycle/s") if to.endswith("_cycle/s") else None)
    if floor is not None and 0 < v < floor[0]:
        raise HardwareSpecError(
            f"{_where(gen, name)}: spec constant `{name}` of `{gen.name}` is {const.value} {const.unit_text}, below "
            f"the {floor[1]} the emulator models (one forward pass would take hours or years, past what a run can "
            "sample); fix it under `spec:`"
        )
    return v


#: The smallest figure the emulator models, by the unit a constant converts to: below it one forward pass
#: takes hours (a breaker's HBM at 1e-9 TB/s asked for 1.4 TiB of samples, at 1e-20 crashed the timeline).
FLOOR = {
    "FLOP/s": (1e9, "1 GFLOP/s"),
    "B/s": (1e9, "1 GB/s"),
    "B": (1e6, "1 MB"),
    "cycle/s": (1e6, "1 MHz"),
}


def _where(gen: Generation, name: str) -> str:
    """Where constant ``name`` is written — its own file, the child's or an inherited parent's, and line —
    else the generation's file."""
    c = gen.spec.get(name)
    span = getattr(c, "span", None)
    if span is not None and span.file and span.line:
        return f"{span.file}:{span.line}"
    return str(gen.source_file)


#: The spec constants the emulator reads and the ``Hardware`` field each sets (besides the clocks,
#: ``spec.clock.<domain>`` → ``clock_hz[domain]``): what a what-if study can vary.
SPEC_FIELDS: dict[str, str] = {
    "spec.mxu.peak_flops_fp8": "peak_fp8",
    "spec.mxu.peak_flops_bf16": "peak_bf16",
    "spec.mxu.peak_flops_fp4": "peak_fp4",
    "spec.vpu.peak_flops": "vpu_peak",
    "spec.hbm.capacity": "hbm_capacity",
    "spec.hbm.peak_bandwidth": "hbm_bw",
    "spec.sram.capacity": "sram_capacity",
    "spec.sram.peak_bandwidth": "sram_bw",
    "spec.c2c.peak_bandwidth": "c2c_bw",
    "spec.pcie.peak_bandwidth": "pcie_bw",
    "spec.power.tdp": "tdp",
    "spec.power.idle": "idle_power",
}


def _instances(gen: Generation, block: str, default: int = 1) -> int:
    """Product of a block's instance axis sizes (``default`` when the block is absent)."""
    b = gen.blocks.get(block)
    if b is None:
        return default
    return int(math.prod(size for _, size in b["axes"])) if b["axes"] else 1


def hardware_from_generation(gen: Generation) -> Hardware:
    """Build the per-chip ``Hardware`` of ``gen``.

    Reads ``spec.clock.<domain>`` for every clock domain, ``spec.mxu.peak_flops_fp4`` when present, and
    ``spec.mxu.peak_flops_fp8``,
    ``spec.mxu.peak_flops_bf16``, ``spec.vpu.peak_flops``, ``spec.hbm.capacity``,
    ``spec.hbm.peak_bandwidth``, ``spec.sram.capacity``, ``spec.sram.peak_bandwidth``,
    ``spec.c2c.peak_bandwidth``, ``spec.pcie.peak_bandwidth``, ``spec.power.tdp``, ``spec.power.idle``.

    Raises:
        HardwareSpecError: a constant is missing or has the wrong dimension.
    """
    from perfonto.ontology.lint import misspelt_overrides

    for new, old in misspelt_overrides(gen):  # the emulator would use the parent's value in silence
        if old in SPEC_FIELDS and new not in SPEC_FIELDS:
            raise HardwareSpecError(
                f"{_where(gen, new)}: spec constant `{new}` is new in `{gen.name}` and no part of the emulator "
                f"reads it, while `{old}` keeps its parent's {gen.spec[old].value} {gen.spec[old].unit_text}: did "
                f"you mean `{old.removeprefix('spec.')}`?"
            )
    clocks = {}
    for dom in gen.clock_domains:
        clocks[dom] = _spec(gen, f"spec.clock.{dom}", f"{dom}_cycle/s")
    if "core" not in clocks:
        raise HardwareSpecError(f"generation `{gen.name}` has no `core` clock domain")
    tdp, idle = _spec(gen, "spec.power.tdp", "W"), _spec(gen, "spec.power.idle", "W", allow_zero=True)
    if idle > tdp:
        raise HardwareSpecError(
            f"generation `{gen.name}`: idle power {idle:g} W exceeds the TDP {tdp:g} W "
            f"(spec.power.idle, spec.power.tdp in {gen.source_file})"
        )
    for block in ("mxu", "vpu", "sram", "hbm", "dma", "c2c"):
        if block in gen.blocks and _instances(gen, block) < 1:
            raise HardwareSpecError(f"generation `{gen.name}`: block `{block}` has no instances")
    return Hardware(
        generation=gen.name,
        clock_hz=clocks,
        peak_fp8=_spec(gen, "spec.mxu.peak_flops_fp8", "FLOP/s"),
        peak_bf16=_spec(gen, "spec.mxu.peak_flops_bf16", "FLOP/s"),
        vpu_peak=_spec(gen, "spec.vpu.peak_flops", "FLOP/s"),
        hbm_capacity=_spec(gen, "spec.hbm.capacity", "B"),
        hbm_bw=_spec(gen, "spec.hbm.peak_bandwidth", "B/s"),
        sram_capacity=_spec(gen, "spec.sram.capacity", "B"),
        sram_bw=_spec(gen, "spec.sram.peak_bandwidth", "B/s"),
        c2c_bw=_spec(gen, "spec.c2c.peak_bandwidth", "B/s"),
        pcie_bw=_spec(gen, "spec.pcie.peak_bandwidth", "B/s"),
        tdp=tdp,
        idle_power=idle,
        cores=_instances(gen, "mxu"),
        banks=_instances(gen, "sram"),
        stacks=_instances(gen, "hbm"),
        dma_engines=_instances(gen, "dma"),
        links=_instances(gen, "c2c"),
        peak_fp4=_spec(gen, "spec.mxu.peak_flops_fp4", "FLOP/s") if "spec.mxu.peak_flops_fp4" in gen.spec else None,
    )
