"""Shared machinery of the differential tests (``test_differential*.py``): random generations, raw
counter series, every backend's evaluation of a catalog over them, and the oracle that decides which
differences are legitimate.

Backends: the reference interpreter over ``metrics.windows.prepare`` (the semantics), the generated
Python evaluator (``evaluate`` over prepared windows, and at server level), ``Stream.push`` sample by
sample, ``Stream.push_block`` in two blocks, and the generated SQL on DuckDB. They must agree: the same
nulls, values within 1e-9 relative plus 1e-12 × the sum of the operands' magnitudes (issue 5). Where
two implementations may legitimately differ — a comparison whose operands are within that tolerance
of each other, a denominator within it of zero — the value is ambiguous and left out (``Oracle``).
"""

from __future__ import annotations

import atexit
import json
from decimal import Decimal, localcontext
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfonto.codegen.python_evaluator import generate, load
from perfonto.codegen.sql import generate_sql
from helpers import compile_src
from perfonto.metrics import ir
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import prepare, read_counters, run_level, server_level
from perfonto.ontology import load_generation
from perfonto.ontology.diagnostics import Span
from perfonto.ontology.generation import Generation, ResolvedConstant, ResolvedField, ResolvedSignal
from perfonto.ontology.model import Scope
from perfonto.ontology.units import parse_unit, registry_for

duckdb = pytest.importorskip("duckdb")

PERIOD = 1_000_000


# -- generations ------------------------------------------------------------------------------------------
@dataclass
class Sig:
    name: str
    kind: str
    unit: str
    axes: tuple[tuple[str, int], ...]
    width: int | str | None = None
    eff: int | None = None
    scale: float = 1.0
    sentinel: tuple[int, ...] = ()
    max_rate: float | None = None
    indicator: str | None = None
    across: str = "avg"
    buckets: int = 0
    fields: dict = field(default_factory=dict)
    modulus: int | None = None  # wrap_range in raw counts (written as modulus × scale in the unit)
    uptime: bool = False  # the reset indicator is an uptime (a decrease is a reset)
    scale_field: str | None = None  # a packed field giving the unit per sample (base 0.5: 2^-field)
    full: tuple[tuple[str, int], ...] | None = None  # the block's full axes when `slots` leaves some out
    slots: tuple[tuple[int, ...], ...] | None = None  # present slots per axis of `full`
    every_slot: bool = (
        False  # the dump holds every slot of the axis (garbage where not populated), not the present ones only
    )

    @property
    def flat_slots(self) -> tuple[int, ...] | None:
        """Flat indices over the full axes (and buckets) of the present instances."""
        if self.slots is None:
            return None
        import itertools

        nb = self.buckets + 1 if self.kind == "histogram" else 1
        sizes = [n for _, n in self.full] + [nb]
        out = []
        for combo in itertools.product(*self.slots, range(nb)):
            flat = 0
            for i, n in zip(combo, sizes):
                flat = flat * n + i
            out.append(flat)
        return tuple(out)

    @property
    def full_instances(self) -> int:
        return (
            0
            if self.full is None
            else int(np.prod([n for _, n in self.full])) * (self.buckets + 1 if self.kind == "histogram" else 1)
        )

    @property
    def wrap(self) -> int | None:
        return None if self.width == "unknown" else (self.eff or self.width)

    @property
    def stored(self) -> int:
        return 64 if self.width in (None, "unknown") else self.width


RANGES = (
    1000,
    3 * 2**20 + 7,
    10**9 + 7,
    262_143_328_850,
    2**62 + 12345,
    2**64 - 59,
)  # wrap_range moduli, none a power of two


@st.composite
def generations(draw):
    blocks = {"a": (), "b": (("i", draw(st.integers(2, 3))),)}
    slots = None
    if draw(st.integers(0, 2)) == 0:  # a SKU: some of block b's slots are not populated
        n_full = draw(st.integers(3, 4))
        present = tuple(sorted(draw(st.sets(st.integers(0, n_full - 1), min_size=1, max_size=n_full - 1))))
        slots = ((("i", n_full),), (present,), draw(st.booleans()))
        blocks["b"] = (("i", len(present)),)
    if draw(st.booleans()):
        blocks["c"] = (("j", 2),)
    sigs: list[Sig] = []
    boot = Sig(BOOT, "gauge", "event", (), across="max")
    up = Sig(UPTIME, "gauge", "s", (), across="max")  # an uptime: only a decrease is a reset
    unit = Sig(UNIT, "packed", "1", (), 16, fields={"esu": (0, 4, 1.0)})  # a unit register: 2^-esu per count
    used = set()
    for blk, axes in blocks.items():
        for k in range(draw(st.integers(1, 3))):
            name = f"{blk}.s{k}"
            kind = draw(st.sampled_from(["counter"] * 5 + ["gauge", "gauge", "packed", "histogram"]))
            s = DRAW_SIG[kind](draw, name, axes, used)
            if blk == "b" and slots is not None:
                s.full, s.slots, s.every_slot = slots
            sigs.append(s)
    sigs += [x for x in (boot, up, unit) if x.name in used]
    return sigs


BOOT, UPTIME, UNIT = "a.boot", "a.up", "a.unit"  # a boot counter, an uptime and a unit register


def _draw_counter(draw, name: str, axes, used: set) -> Sig:
    """A counter: width (some narrower in effect, some with a wrap range), scale, and maybe a
    sentinel, a maximum rate, a reset indicator (noted in ``used``) or a per-sample unit field."""
    width = draw(st.sampled_from([8, 16, 32, 48, 64, "unknown"]))
    s = Sig(
        name,
        "counter",
        draw(st.sampled_from(["B", "FLOP", "event", "core_cycle", "token", "J"])),
        axes,
        width,
        scale=draw(st.sampled_from([1.0, 4.0, 0.5, 64.0, 0.001, 1024.0])),
    )
    if isinstance(width, int) and width > 8 and draw(st.booleans()):
        s.eff = draw(st.integers(8, width - 1))
    elif isinstance(width, int) and width >= 16 and draw(st.integers(0, 2)) == 0:
        s.modulus = draw(st.sampled_from([m for m in RANGES if m <= 1 << width]))
    if draw(st.integers(0, 3)) == 0:
        s.sentinel = ((1 << s.stored) - 1,)
    if s.wrap is not None and draw(st.integers(0, 3)) == 0:
        s.max_rate = float(draw(st.sampled_from([1e3, 1e6, 1e9])))
    if draw(st.integers(0, 3)) == 0:
        s.indicator = draw(st.sampled_from([BOOT, UPTIME]))
        s.uptime = s.indicator == UPTIME
        used.add(s.indicator)
    if draw(st.integers(0, 4)) == 0:
        s.scale_field = "a.unit.esu"
        used.add(UNIT)
    return s


def _draw_gauge(draw, name: str, axes, used: set) -> Sig:
    """A gauge: unit, scale, rule across chips, maybe a sentinel."""
    s = Sig(
        name,
        "gauge",
        draw(st.sampled_from(["W", "B", "request", "event"])),
        axes,
        scale=draw(st.sampled_from([1.0, 0.001, 4096.0])),
        across=draw(st.sampled_from(["sum", "avg", "max"])),
    )
    if draw(st.booleans()):
        s.sentinel = (65535,)
    return s


def _draw_packed(draw, name: str, axes, used: set) -> Sig:
    """A packed register of two fields, maybe with a sentinel."""
    s = Sig(name, "packed", "1", axes, 16, fields={"lo": (0, 3, 1.0), "hi": (4, 9, 0.5)})
    if draw(st.booleans()):
        s.sentinel = (65535,)
    return s


def _draw_histogram(draw, name: str, axes, used: set) -> Sig:
    """A histogram of two bounds (three buckets)."""
    return Sig(name, "histogram", "event", axes + (("bucket", 3),), draw(st.sampled_from([16, 32])), buckets=2)


#: signal kind → the step drawing one signal of it
DRAW_SIG = {"counter": _draw_counter, "gauge": _draw_gauge, "packed": _draw_packed, "histogram": _draw_histogram}


def generation_yaml(sigs: list[Sig]) -> str:
    blocks: dict[str, list[str]] = {}
    block_axes, block_slots = {}, {}
    for s in sigs:
        blk, short = s.name.split(".")
        block_axes[blk] = s.full if s.full is not None else tuple(a for a in s.axes if a[0] != "bucket")
        if s.slots is not None:
            block_slots[blk] = dict(zip((a for a, _ in s.full), s.slots))
        p = _storage_props(s, short) + _meaning_props(s)
        blocks.setdefault(blk, []).append(f"      {short}: {{{', '.join(p)}}}")
    out = [
        "generation: dt",
        "description: differential test generation",
        "clock_domains:",
        "  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}",
        "spec:",
        "  k0: {value: 2.5, unit: B/s, provenance: assumed, scope: chip}",
        "  k1: {value: 4, unit: '1', provenance: assumed, scope: system}",
        "blocks:",
    ]
    for blk, lines in blocks.items():
        out += [f"  {blk}:", f"    description: block {blk}", "    clock: core"]
        if block_axes[blk]:
            out.append("    instances: {" + ", ".join(f"{a}: {n}" for a, n in block_axes[blk]) + "}")
        if blk in block_slots:
            out.append("    slots: {" + ", ".join(f"{a}: {list(v)}" for a, v in block_slots[blk].items()) + "}")
        out += ["    signals:"] + lines
    return "\n".join(out) + "\n"


def _storage_props(s: Sig, short: str) -> list[str]:
    """A signal's YAML keys up to its rate limit: kind, description, unit, width, effective width,
    scale, sentinel, maximum rate."""
    p = [f"kind: {s.kind}", f"description: {s.kind} {short}"]
    if s.kind != "packed":
        p.append(f"unit: {json.dumps(s.unit)}")
    if s.width is not None:
        p.append(f"width: {s.width}")
    if s.eff:
        p.append(f"effective_width: {s.eff}")
    if s.scale != 1.0:
        p.append(f"scale: {s.scale!r}")
    if s.sentinel:
        p.append(f"sentinel: {list(s.sentinel)}")
    if s.max_rate:
        p.append(f"max_rate: {json.dumps(f'{s.max_rate:g} {s.unit}/s')}")
    return p


def _meaning_props(s: Sig) -> list[str]:
    """The rest of a signal's YAML keys: reset indicator, wrap range, unit field, rule across chips,
    buckets, fields."""
    p = []
    if s.indicator:
        p.append(f"reset_indicator: {s.indicator}")
    if s.uptime:
        p.append("reset_indicator_kind: uptime")
    if s.modulus:
        p.append(f"wrap_range: {json.dumps(f'{_decimal(s.modulus, s.scale)} {s.unit}')}")
    if s.scale_field:
        p.append(f"scale_field: {{field: {s.scale_field}, base: 0.5}}")
    if s.kind == "gauge":
        p.append(f"across_chips: {s.across}")
    if s.buckets:
        p.append("buckets: [10, 100]")
    if s.fields:
        p.append(
            "fields: {"
            + ", ".join(
                f"{f}: {{bits: [{lo}, {hi}], scale: {sc!r}, description: field {f}}}"
                for f, (lo, hi, sc) in s.fields.items()
            )
            + "}"
        )
    return p


def build_generation(sigs: list[Sig]) -> Generation:
    """The resolved generation of ``generation_yaml(sigs)``, built directly (the YAML loader costs more
    than the rest of a case; ``test_direct_generation_matches_the_loader`` keeps the two equal)."""
    reg = registry_for(("core",))
    span = Span("dt.yaml", 1, 1)
    signals, fields, blocks = {}, {}, {}
    for s in sigs:
        blk = s.name.split(".")[0]
        axes = tuple(a for a in s.axes if a[0] != "bucket")
        blocks[blk] = {"clock": "core", "axes": axes, "description": f"block {blk}"}
        if s.slots is not None:
            blocks[blk].update(slots=s.slots, full_axes=s.full)
        unit = reg.dimensionless if s.kind == "packed" else parse_unit(reg, s.unit)
        counting = s.kind in ("counter", "histogram")
        width, wrap = (64, None) if s.width == "unknown" else (s.width, (s.eff or s.width) if s.width else None)
        signals[s.name] = ResolvedSignal(
            s.name,
            blk,
            s.kind,
            unit,
            "" if s.kind == "packed" else s.unit,
            f"{s.kind} {s.name.split('.')[1]}",
            width,
            s.scale,
            s.axes,
            "core",
            "sum" if counting else (s.across if s.kind == "gauge" else "avg"),
            span,
            wrap_width=wrap,
            sentinel=s.sentinel,
            reset_indicator=s.indicator,
            max_rate=s.max_rate,
            buckets=(10.0, 100.0) if s.buckets else (),
            since="dt",
            modulus=s.modulus,
            reset_kind="decrease" if s.uptime else "change",
            scale_field=(s.scale_field, 0.5) if s.scale_field else None,
            slots=s.flat_slots,
            full_instances=s.full_instances,
        )
        for f, (lo, hi, sc) in s.fields.items():
            fields[f"{s.name}.{f}"] = ResolvedField(
                f"{s.name}.{f}", s.name, lo, hi, reg.dimensionless, "1", sc, f"field {f}", s.axes, blk, span
            )
    clock = ResolvedConstant(
        "spec.clock.core",
        1e9,
        reg.parse_units("core_cycle/s"),
        "core_cycle/s",
        "assumed",
        "",
        "core clock frequency",
        Scope.chip,
        span,
    )
    spec = {
        "spec.clock.core": clock,
        "spec.k0": ResolvedConstant("spec.k0", 2.5, parse_unit(reg, "B/s"), "B/s", "assumed", "", "", Scope.chip, span),
        "spec.k1": ResolvedConstant("spec.k1", 4.0, reg.dimensionless, "1", "assumed", "", "", Scope.system, span),
    }
    return Generation(
        "dt",
        "differential test generation",
        reg,
        blocks,
        signals,
        spec,
        "dt.yaml",
        "0" * 16,
        {"core": clock},
        fields,
        ("dt",),
    )


# -- counter series ------------------------------------------------------------------------------------------
def series(sigs: list[Sig], seed: int, S: int, C: int, rates: dict) -> pa.Table:
    """Raw registers on a jittered grid with absent samples; rows for present samples only."""
    rng = np.random.default_rng(seed)
    present = rng.random((S, C)) > rates["absent"]
    present[0] = True
    present[-1] = True  # every chip has two samples or more, and the grid keeps S samples
    t0 = rng.integers(0, 10**9, size=C)
    jitter = rng.integers(-PERIOD // 4, PERIOD // 4, size=(S, C))
    jitter[0] = 0
    ts = t0[None, :] + np.arange(S)[:, None] * PERIOD + jitter
    cols = {"chip": [], "timestamp_ns": []}
    raw = {}
    for s in sigs:
        n = int(np.prod([k for _, k in s.axes])) if s.axes else 1
        if s.kind in ("counter", "histogram"):
            w = s.wrap or 64
            mod = s.modulus or 1 << w
            steps = rng.choice([0, 1, 2, 3, 4], size=(S, C, n), p=[0.15, 0.45, 0.2, 0.1, 0.1])
            inc = np.where(steps == 1, rng.integers(0, 1000, size=(S, C, n)), 0).astype(object)
            inc = np.where(steps == 2, rng.integers(0, 1 << 30, size=(S, C, n)).astype(object) % (mod // 2 or 1), inc)
            inc = np.where(
                steps == 3, (mod // 2) + rng.integers(1, 1 << 20, size=(S, C, n)).astype(object), inc
            )  # implausible
            inc = np.where(
                steps == 4, mod - rng.integers(1, 50, size=(S, C, n)).astype(object), inc
            )  # a decrease / wrap
            start = rng.integers(0, 1 << 62, size=(1, C, n)).astype(object) % mod
            vals = (np.cumsum(np.concatenate([start, inc[1:]]), axis=0)) % mod
            if s.modulus:  # raw values at or beyond the declared range (not readings of the register)
                vals = np.where(
                    rng.random((S, C, n)) < 0.05, s.modulus + rng.integers(0, 3, size=(S, C, n)).astype(object), vals
                )
                vals = np.minimum(vals, (1 << s.stored) - 1)
        else:
            vals = rng.integers(0, 1 << 16, size=(S, C, n)).astype(object)
            if s.name == "a.boot":
                vals = np.cumsum(rng.random((S, C, n)) < 0.2, axis=0).astype(object)
            elif s.name == "a.up":  # grows by about the period, and drops back at a reset
                up = np.cumsum(rng.integers(0, 3, size=(S, C, n)), axis=0)
                drop = np.maximum.accumulate(np.where(rng.random((S, C, n)) < 0.15, up, 0), axis=0)
                vals = (up - drop + rng.integers(0, 2, size=(S, C, n))).astype(object)
            elif s.name == "a.unit":  # the unit field: mostly constant, sometimes changes; other bits vary
                esu = (8 + np.cumsum(rng.random((S, C, n)) < 0.15, axis=0)) % 32
                vals = (esu + (rng.integers(0, 1 << 11, size=(S, C, n)) << 5)).astype(object)
        for v in s.sentinel:
            vals[rng.random((S, C, n)) < rates["sentinel"]] = v
        raw[s.name] = vals
    order = [(i, c) for i in range(S) for c in range(C) if present[i, c]]
    cols["chip"] = pa.array([c for _, c in order], pa.int32())
    cols["timestamp_ns"] = pa.array([int(ts[i, c]) for i, c in order], pa.int64())
    for s in sigs:
        n = raw[s.name].shape[2]
        nulls = rng.random((S, C, n)) < rates["missing"]
        vals = raw[s.name]
        if (
            s.slots is not None and s.every_slot
        ):  # a SKU's dump may hold every slot of the axis  # slots that are not populated read garbage (or null)
            n = s.full_instances
            wide = rng.integers(0, 1 << 16, size=(S, C, n)).astype(object)
            wide[:, :, list(s.flat_slots)] = vals
            gone = rng.random((S, C, n)) < 0.3
            gone[:, :, list(s.flat_slots)] = nulls
            vals, nulls = wide, gone
        flat = [None if nulls[i, c, k] else int(vals[i, c, k]) for i, c in order for k in range(n)]
        arr = pa.array(flat, pa.uint64())
        cols[s.name] = pa.FixedSizeListArray.from_arrays(arr, n) if s.axes else arr
    meta = {b"perfonto": json.dumps({"sample_period_ns": PERIOD}).encode()}
    return pa.table(cols).replace_schema_metadata(meta)


# -- the oracle: value, magnitude and ambiguity of every metric ----------------------------------------------------
class Oracle:
    """Evaluates the typed IR like the reference interpreter, alongside each value's magnitude (the sum
    of its operands' magnitudes, scaled through products and quotients) and whether it is ambiguous."""

    K = 1e-11  # ambiguity threshold relative to magnitudes: far above rounding, far below the tolerance's scale

    def __init__(self, graph, w):
        self.w = w
        self.done = {}
        base = w.interval.shape
        with np.errstate(all="ignore"):
            for name, m in graph.metrics.items():
                v, mag, amb = self.eval(m.ir)
                shape = base + tuple(s for _, s in m.axes)
                v = np.where(np.isinf(v), np.nan, v)
                self.done[name] = tuple(np.broadcast_to(self.lift(x, m.ir.axes, m.axes), shape) for x in (v, mag, amb))

    @staticmethod
    def lift(v, src, dst):
        v = np.asarray(v)
        if src == dst or not dst or v.ndim == 0:
            return v
        return v.reshape(v.shape + (1,) * len(dst))

    def eval(self, n):
        """(value, magnitude, ambiguous) of IR node ``n``."""
        leaf = self._leaf(n)
        if leaf is not None:
            return leaf
        if isinstance(n, ir.Rollup):
            return self._rollup(n)
        ev = [self.eval(a) for a in n.args]
        vs = [self.lift(e[0], a.axes, n.axes) for e, a in zip(ev, n.args)]
        ms = [self.lift(e[1], a.axes, n.axes) for e, a in zip(ev, n.args)]
        amb = np.zeros((), bool)
        for e, a in zip(ev, n.args):
            amb = amb | self.lift(e[2], a.axes, n.axes)
        handler = self.OPS.get(n.op)
        if handler is None:
            raise AssertionError(n.op)
        return getattr(self, handler)(n.op, vs, ms, amb)

    def _leaf(self, n):
        """A constant, input, interval or metric reference; None for any other node."""
        if isinstance(n, ir.Const):
            v = np.float64(n.value * self.w.chips**n.chip_power)
            return v, np.abs(v), np.False_
        if isinstance(n, ir.Input):
            v = self.w.values[n.signal]
            return v, np.abs(v), np.zeros(v.shape, bool)
        if isinstance(n, ir.Interval):
            return self.w.interval, self.w.interval, np.zeros(self.w.interval.shape, bool)
        if isinstance(n, ir.MetricRef):
            return self.done[n.metric]
        return None

    def _rollup(self, n):
        """A reduction over the argument's instance axes (magnitudes summed, or the largest for min/max)."""
        v, mag, amb = self.eval(n.arg)
        axes = tuple(range(np.ndim(v) - len(n.arg.axes), np.ndim(v)))
        fn = {"sum": np.sum, "avg": np.mean, "min": np.min, "max": np.max}[n.func]
        magr = np.sum(mag, axis=axes) if n.func in ("sum", "avg") else np.max(mag, axis=axes)
        if n.func == "avg":
            magr = magr / np.prod([s for _, s in n.arg.axes])
        return fn(v, axis=axes), magr, np.any(amb, axis=axes)

    def _arith(self, op, vs, ms, amb):
        """add, sub, mul, neg, abs."""
        if op in ("add", "sub"):
            return (vs[0] + vs[1]) if op == "add" else (vs[0] - vs[1]), ms[0] + ms[1], amb
        if op == "mul":
            return vs[0] * vs[1], ms[0] * ms[1], amb
        return (-vs[0] if op == "neg" else np.abs(vs[0])), ms[0], amb

    def _div(self, op, vs, ms, amb):
        """A quotient (NaN over zero), ambiguous where the divisor is within rounding of zero."""
        a, b = np.broadcast_arrays(np.asarray(vs[0], float), np.asarray(vs[1], float))
        out = np.full(a.shape, np.nan)
        np.divide(a, b, out=out, where=(b != 0))
        near0 = np.abs(b) <= self.K * ms[1]
        mag = ms[0] / np.abs(b) + np.abs(out) * ms[1] / np.abs(b)
        return out, np.where(b != 0, mag, 0.0), amb | (near0 & (ms[1] > 0))

    def _pow(self, op, vs, ms, amb):
        """A power."""
        p = vs[1]
        v = np.power(np.asarray(vs[0], float), p)
        return v, np.abs(p) * ms[0] * np.abs(np.asarray(vs[0], float)) ** (p - 1) + np.abs(v), amb

    def _extreme(self, op, vs, ms, amb):
        """min, max, clamp (the largest operand magnitude)."""
        v = {
            "min": lambda: np.minimum(vs[0], vs[1]),
            "max": lambda: np.maximum(vs[0], vs[1]),
            "clamp": lambda: np.minimum(np.maximum(vs[0], vs[1]), vs[2]),
        }[op]()
        return v, np.maximum.reduce([np.broadcast_to(m, np.shape(v)) for m in ms]), amb

    def _compare(self, op, vs, ms, amb):
        """A comparison (NaN with a NaN operand), ambiguous at a tie within rounding."""
        a, b = np.asarray(vs[0], float), np.asarray(vs[1], float)
        res = {
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
            "eq": np.equal,
            "ne": np.not_equal,
        }[op](a, b)
        v = np.where(np.isnan(a) | np.isnan(b), np.nan, res.astype(float))
        tie = np.abs(a - b) <= self.K * (ms[0] + ms[1])
        return v, np.zeros(np.shape(v)), amb | tie

    def _logic(self, op, vs, ms, amb):
        """and, or, not (NaN with a NaN operand)."""
        a = np.asarray(vs[0], float)
        if op == "not":
            return np.where(np.isnan(a), np.nan, (a == 0).astype(float)), np.zeros(np.shape(a)), amb
        b = np.asarray(vs[1], float)
        r = ((a != 0) & (b != 0)) if op == "and" else ((a != 0) | (b != 0))
        return np.where(np.isnan(a) | np.isnan(b), np.nan, r.astype(float)), np.zeros(np.shape(r)), amb

    def _where(self, op, vs, ms, amb):
        """A selection (NaN where the condition is NaN)."""
        c = np.asarray(vs[0], float)
        v = np.where(np.isnan(c), np.nan, np.where(c != 0, vs[1], vs[2]))
        return v, np.where(c != 0, ms[1], ms[2]), amb

    #: op → the method evaluating it
    OPS = {
        **dict.fromkeys(("add", "sub", "mul", "neg", "abs"), "_arith"),
        "div": "_div",
        "pow": "_pow",
        **dict.fromkeys(("min", "max", "clamp"), "_extreme"),
        **dict.fromkeys(("lt", "le", "gt", "ge", "eq", "ne"), "_compare"),
        **dict.fromkeys(("and", "or", "not"), "_logic"),
        "where": "_where",
    }


def agree(name: str, what: str, got: np.ndarray, want: np.ndarray, oracle: Oracle, ambiguous_ok: bool = True) -> None:
    _, mag, amb = oracle.done[name]
    got = np.asarray(got, dtype=float)
    assert got.shape == want.shape, f"{what} {name}: shape {got.shape} != {want.shape}"
    keep = ~np.asarray(amb, bool) if ambiguous_ok else np.ones(want.shape, bool)
    gn, wn = np.isnan(got), np.isnan(want)
    bad_null = keep & (gn != wn)
    assert not bad_null.any(), (
        f"{what} {name}: nulls differ at {np.argwhere(bad_null)[:3].tolist()}: got {got[bad_null][:3]}, want "
        f"{want[bad_null][:3]}"
    )
    both = keep & ~gn & ~wn
    tol = 1e-9 * np.abs(want) + 1e-12 * np.nan_to_num(mag, posinf=np.inf) + 1e-300
    err = np.abs(got - want)
    bad = both & ~(err <= tol)
    assert not bad.any(), (
        f"{what} {name}: values differ at {np.argwhere(bad)[:3].tolist()}: got {got[bad][:3]}, want {want[bad][:3]}"
    )


# -- the backends ------------------------------------------------------------------------------------------------
_DIR = Path(tempfile.mkdtemp(prefix="perfonto-diff-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
_CON = duckdb.connect()
_CON.execute("SET threads = 1")  # tiny tables: no parallel overhead


def _compile(sigs: list[Sig], src: str):
    from hypothesis import assume
    from hypothesis.control import currently_in_test_context

    gen = build_generation(sigs)
    graph = compile_src(gen, src)
    # formulas the lint pass refuses by design (metrics.lint: a total times a ratio, a literal division
    # by zero, reversed clamp bounds) are not backend cases
    if currently_in_test_context():
        assume(not any(d.code in ("total-times-ratio", "div-zero", "clamp-order") for d in graph.errors))
    errors = [d.render() for d in graph.errors]
    assert not errors, "\n".join(errors) + "\n" + src
    return gen, graph


def _sql_values(graph, tables: list[pa.Table], shapes: list[tuple[int, int]]) -> list[dict[str, np.ndarray]]:
    """Run the generated SQL once over all series (each series on its own host, its chips numbered
    from 0 as every host numbers them: windows are partitioned by (host, chip), so the series stay
    independent) and split the result back per series, as (W, C, *sizes) arrays."""
    offset, parts = 0, []
    for i, (t, (_, C)) in enumerate(zip(tables, shapes)):
        parts.append(t.append_column("host", pa.array([f"h{i:04d}"] * t.num_rows, pa.string())))
        offset += C
    _CON.register("counters", pa.concat_tables(parts).replace_schema_metadata(tables[0].schema.metadata))
    out = _CON.sql(generate_sql(graph, "counters", sample_period_ns=PERIOD, pretty=False)).arrow()
    out = out.read_all() if hasattr(out, "read_all") else out
    Wmax = max(W for W, _ in shapes)
    assert out.num_rows == Wmax * offset, (out.num_rows, shapes)
    assert out.column("window").to_pylist()[:Wmax] == list(range(Wmax))
    cols = {}
    for name, m in graph.metrics.items():
        col = out.column(name)
        if m.axes:
            col = pa.concat_arrays([c.flatten() for c in col.chunks])
        cols[name] = np.array([np.nan if v is None else v for v in col.to_pylist()], float).reshape(
            (offset, Wmax) + tuple(s for _, s in m.axes)
        )
    res, first = [], 0
    for W, C in shapes:
        res.append({name: v[first : first + C, :W].swapaxes(0, 1) for name, v in cols.items()})
        first += C
    return res


def _stream(mod, dump, split: int):
    names = [r[0] for r in mod._REGS]
    S = dump.timestamps_ns.shape[0]
    miss = {n: dump.missing[n] for n in names if n in dump.missing}
    one = mod.Stream()
    outs = []
    for i in range(S):
        r = one.push(
            dump.timestamps_ns[i],
            {n: dump.raw[n][i] for n in names},
            dump.present[i],
            {n: m[i] for n, m in miss.items()},
        )
        assert (r is None) == (i == 0)
        if r is not None:
            outs.append(r)
    per_sample = {k: np.stack([o[k] for o in outs]) for k in mod.METRICS}
    blk = mod.Stream()
    parts = []
    for lo, hi in ((0, split), (split, S)):
        r = blk.push_block(
            dump.timestamps_ns[lo:hi],
            {n: dump.raw[n][lo:hi] for n in names},
            dump.present[lo:hi],
            {n: m[lo:hi] for n, m in miss.items()},
        )
        if r is not None:
            parts.append(r)
    block = {k: np.concatenate([p[k] for p in parts]) for k in mod.METRICS}
    return per_sample, block


def run_backends(gen, graph, tables: list[pa.Table], splits: list[int]) -> list[dict]:
    """Every backend over each counter table: ``{backend: {metric: (W, C, *sizes)}}`` per table, plus
    ``windows`` (the prepared windows) and ``server`` (reference and generated values at server level)."""
    mod = load(generate(graph))
    prepared = []
    for table in tables:
        path = _DIR / "counters.parquet"
        pq.write_table(table, path)
        dump = read_counters(path, gen)
        prepared.append((dump, prepare(dump, gen)))
    sql = _sql_values(graph, tables, [w.interval.shape for _, w in prepared])
    out = []
    for (dump, w), sql_values, split in zip(prepared, sql, splits):
        per_sample, block = _stream(mod, dump, max(1, min(split, dump.timestamps_ns.shape[0] - 1)))
        srv = server_level(run_level(w, gen), gen)  # chip-scaled spec constants
        out.append(
            {
                "windows": w,
                "reference": evaluate(graph, w),
                "evaluate": mod.evaluate(w.values, w.interval, w.chips),
                "Stream.push": per_sample,
                "Stream.push_block": block,
                "SQL": sql_values,
                "server": (srv, evaluate(graph, srv), mod.evaluate(srv.values, srv.interval, srv.chips)),
            }
        )
    return out


BACKENDS = ("evaluate", "Stream.push", "Stream.push_block", "SQL")


def check_all(sigs, src, runs):
    """One catalog, several independent series (each a case): every backend against the reference."""
    gen, graph = _compile(sigs, src)
    tables = [series(sigs, seed, S, C, rates) for seed, S, C, rates, _ in runs]
    for res in run_backends(gen, graph, tables, [r[4] for r in runs]):
        ref = res["reference"]
        oracle = Oracle(graph, res["windows"])
        for name in graph.metrics:  # the oracle's own values are the interpreter's
            agree(name, "oracle", oracle.done[name][0], ref[name], oracle, ambiguous_ok=False)
            for b in BACKENDS:
                agree(name, b, res[b][name], ref[name], oracle)
        srv, srv_ref, srv_got = res["server"]
        srv_oracle = Oracle(graph, srv)
        for name in graph.metrics:
            agree(name, "evaluate (server level)", srv_got[name], srv_ref[name], srv_oracle)


def _decimal(modulus: int, scale: float) -> str:
    """modulus × scale written out exactly (a float would drop the last digits of a range past 2^53)."""
    with localcontext() as ctx:
        ctx.prec = 80
        return format(Decimal(modulus) * Decimal(repr(float(scale))), "f")


def _comparable(gen: Generation) -> tuple:
    sig = {
        n: (
            s.block,
            s.kind,
            str(s.unit),
            s.width,
            s.scale,
            s.axes,
            s.across_chips,
            s.wrap_width,
            s.sentinel,
            s.reset_indicator,
            s.max_rate,
            s.buckets,
            s.modulus,
            s.reset_kind,
            s.scale_field,
            s.slots,
            s.full_instances,
        )
        for n, s in gen.signals.items()
    }
    fld = {n: (f.register, f.lo, f.hi, f.scale, f.axes, str(f.unit)) for n, f in gen.fields.items()}
    spec = {n: (c.value, str(c.unit), c.scope) for n, c in gen.spec.items()}
    return sig, fld, spec, gen.blocks


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generations())
def test_direct_generation_matches_the_loader(sigs):
    path = _DIR / "loaded.yaml"
    path.write_text(generation_yaml(sigs))
    loaded, diags = load_generation(path)
    assert loaded is not None, [d.render() for d in diags]
    assert _comparable(build_generation(sigs)) == _comparable(loaded)
