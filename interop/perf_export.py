"""Export a compiled catalog as Linux perf pmu-events metrics JSON.

Each metric becomes ``{"MetricName", "MetricExpr", "ScaleUnit", "MetricGroup", "BriefDescription",
"MetricThreshold"}`` in the form ``tools/perf/pmu-events/jevents.py`` reads and ``metric.py`` writes.
The rules follow perf's expression language (``tools/perf/util/expr.y``):

- perf evaluates a metric in plain numbers and shows ``value × scale`` with the ScaleUnit's label;
  metric references and thresholds use the *unscaled* value, and an event in a metric is its *raw*
  count (perf reverses an event's ScaleUnit before computing metrics, ``prepare_metric`` in
  ``util/stat-shadow.c``). So every expression is written in the registry's base units (bytes,
  seconds, FLOPs, cycles of each clock, events): an event stands for its raw count times its scale
  (``hbm.read_bytes * 64``: 64-byte bursts), a literal with a unit is converted (``80 %`` → ``0.8``), and the
  ScaleUnit is ``<factor from base units to the declared unit><declared unit>`` (``1e-09GB/s``,
  ``100%``); a threshold ``> 80 %`` becomes ``name > 0.8``;
- ``interval`` is ``duration_time`` (seconds);
- every event a metric reads is defined too (``EventName``, ``Unit`` = its block, ``ScaleUnit`` =
  ``<scale><unit>``, so a perf user's raw counts mean the same thing), its description ending with
  ``[perfonto: kind=…; width=…; instances=axis:n; counted_by=…; across_chips=…]`` so that ``perfonto
  import perf`` rebuilds the same signals without any flag;
- spec constants become constant metrics ``spec.<name>`` (their base-unit value, ScaleUnit back to
  their unit, ``[perfonto: scope=…]`` then provenance and source at the end of the description as
  ``[assumed: …]``), referenced by name — perf has no named constants besides its run-time
  ``#literals``; a clock domain's frequency is the constant ``spec.clock.<domain>``;
- ``sum(x)`` is ``x`` (perf sums the instances of an uncore PMU into one count), ``avg(x)`` is
  ``x / source_count(x)``; both only over linear expressions of signals, where that is exact;
- ``a if c else b`` → ``(a if c else b)``; ``<``/``>`` as such, ``<=``, ``>=``, ``==``, ``!=``, ``not`` through
  ``1 - …`` and ``|`` (perf's comparisons give 1/0); ``and``/``or`` → ``&``/``|``;
- element-wise ``min``/``max`` nest perf's two-argument forms, ``abs(x)`` → ``max(x, -x)``,
  ``clamp(x, lo, hi)`` → ``min(max(x, lo), hi)``, ``x ** n`` (integer n) → repeated products;
- ``/`` by zero: perfonto's null and perf's NaN are the same outcome; nothing to translate;
- the parent is the group ``<parent>_group`` (perf's convention for the TMA tree).
Not expressible, so the metric is skipped with the reason: per-instance ``min``/``max`` rollups, a metric
that varies over instances, metrics over request records (percentiles), fractional powers, offset
units (degC). Lost but listed per metric: bounds, ``source``, the threshold message, ``rollup``,
``peak`` (its generated submetrics are exported as metrics).

The metadata comes from the compiled metrics (``graph.metrics``: unit, threshold, axes, dependencies); the
expression is written from the declaration the compiled catalog keeps (``graph.declarations``), not from
the compiled IR (``CompiledMetric.ir``), because the IR has already dropped what this format keeps: a spec
constant is a bare ``ir.Const`` value (no name, so no ``spec.<name>`` constant metric to reference), a
literal's unit and every unit conversion are folded into ``Const`` factors indistinguishable from the
formula's own numbers, and server-level chip factors (``Const(1, chip_power=…)``) are multiplied in. Writing
base units from the IR needs those constants tagged by the compiler (issue 32, left open).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import pint

from perfonto.dsl import ast
from perfonto.dsl.precedence import PERF_BINARY, PerfPrec, bracket
from perfonto.metrics.compiler import MetricGraph
from perfonto.metrics.infer import Fail, Typer
from perfonto.ontology.units import UnitError, conversion_factor
from perfonto.ontology import kinds

NEG, ATOM = PerfPrec.NEG, PerfPrec.ATOM  # perf's precedence levels (dsl.precedence)


class _Unsupported(Exception):
    pass


@dataclass
class PerfExport:
    """The JSON entries (constants first, then metrics by name), skipped metrics with reasons, and per
    exported metric the attributes perf cannot hold."""

    entries: list[dict] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)  # the EventName definitions (also in entries, first)
    lost: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.entries, indent=4, ensure_ascii=True) + "\n"


def number(v: float) -> str:
    """A number perf's lexer reads: ``[0-9.]+(e-?[0-9]+)?``, so no ``+`` in the exponent."""
    if not math.isfinite(v):
        raise _Unsupported(f"the value {v} is not finite")
    v = abs(float(v))
    if v.is_integer() and v < 1e15:
        return str(int(v))
    for digits in range(1, 18):  # the shortest %g form that reads back exactly
        s = f"{v:.{digits}g}"
        if float(s) == v:
            break
    return s.replace("e+", "e")


def unit_label(unit_text: str) -> str:
    """The ScaleUnit label of a declared unit (``percent`` is written ``%``, as perf's own files do)."""
    return "%" if unit_text.strip() in ("percent", "%") else unit_text.strip()


def export(graph: MetricGraph) -> PerfExport:
    """Translate every window metric of ``graph`` (see the module docstring)."""
    from perfonto.metrics.optional import resolve_defaults

    gen = graph.generation
    reg = gen.registry
    out = PerfExport()
    typer = Typer(gen)
    typer.compiled = graph.metrics
    used_specs: set[str] = set()
    used_events: set[str] = set()
    done: list[dict] = []
    for name in graph.record_metrics:
        out.skipped[name] = (
            "computed over request records (a population percentile or count): perf metrics are over counter windows"
        )
    for name, m in graph.metrics.items():
        d = graph.declarations.get(name)
        why = _skip_reason(m, d, out.skipped)
        if why is not None:
            out.skipped[name] = why
            continue
        try:
            specs: set[str] = set()
            emitter = _Emitter(graph, reg, specs)
            text = emitter.expr(resolve_defaults(d.expr, gen, graph.metrics))[0]  # `default(x, d)`: x or d
            scale = _scale(reg, typer, m, d)
        except (_Unsupported, UnitError) as exc:
            out.skipped[name] = str(exc)
            continue
        except Fail as exc:  # pragma: no cover - the metric compiled, so it types
            out.skipped[name] = exc.diagnostic.message
            continue
        used_specs |= specs
        used_events |= emitter.events
        done.append(_metric_entry(name, m, d, text, scale, out.lost))
    consts = [_constant_entry(gen, s) for s in sorted(used_specs)]
    out.events = [event_entry(gen, n) for n in sorted(used_events)]
    out.entries = out.events + consts + sorted(done, key=lambda e: e["MetricName"])
    return out


def _skip_reason(m, d, skipped: dict[str, str]) -> str | None:
    """Why a metric is not exported (no declaration, uses a skipped metric, varies per instance), or None."""
    bad = [dep for dep in m.metric_deps if dep in skipped]
    if d is None:  # pragma: no cover - every compiled metric has a declaration
        return "no declaration"
    if bad:
        return f"uses `{bad[0]}`, which is not exported"
    if m.axes:
        return "varies per instance (" + ", ".join(a for a, _ in m.axes) + "): perf aggregates PMU instances"
    return None


def _scale(reg, typer: Typer, m, d) -> float:
    """perf's ScaleUnit factor: from the expression's base units to the metric's unit (an offset unit
    cannot be a factor: unsupported)."""
    u = typer.expr(d.expr).unit
    base = reg.Quantity(1.0, u).to_base_units().units
    if _offset(reg, m.unit):
        raise _Unsupported(f"[{m.unit_text}] is an offset unit: a ScaleUnit is a factor, not an offset")
    return conversion_factor(reg, base, m.unit)


def _metric_entry(name: str, m, d, text: str, scale: float, lost_by_metric: dict[str, list[str]]) -> dict:
    """A metric's perf entry (expression, scale unit, groups, description, threshold); what perf has no
    field for is listed in `lost_by_metric`."""
    entry = {"MetricName": name, "MetricExpr": text, "ScaleUnit": f"{number(scale)}{unit_label(m.unit_text)}"}
    groups = list(m.groups) + ([f"{m.parent}_group"] if m.parent else [])
    if groups:
        entry["MetricGroup"] = ";".join(groups)
    if m.description:
        entry["BriefDescription"] = m.description
    lost = []
    if m.threshold is not None:
        op, value, msg = m.threshold
        raw = value / scale
        entry["MetricThreshold"] = _compare(name, op, number(raw) if raw >= 0 else f"-{number(raw)}")
        lost.append(f"threshold message {msg!r}")
    if m.bounds is not None:
        lost.append(f"bounds {m.bounds[0]:g} .. {m.bounds[1]:g}")
    if m.source:
        lost.append("source")
    if m.rollup:
        lost.append(f"rollup {m.rollup}")
    if getattr(d, "peak", None):
        lost.append(f"peak {d.peak} (its submetrics are exported)")
    if lost:
        lost_by_metric[name] = lost
    return entry


def _constant_entry(gen, s: str) -> dict:
    """A spec constant the metrics use, as a perf metric giving its value in base units."""
    reg = gen.registry
    c = gen.spec[s]
    q = reg.Quantity(c.value, c.unit)
    base = q.to_base_units()
    scale = conversion_factor(reg, base.units, c.unit)
    desc = (c.description or s).strip()
    return {
        "MetricName": s,
        "MetricExpr": number(base.magnitude) if base.magnitude >= 0 else f"-{number(base.magnitude)}",
        "ScaleUnit": f"{number(scale)}{unit_label(c.unit_text)}",
        "BriefDescription": f"{desc} [perfonto: scope={c.scope.value}] [{c.provenance}: {c.source}]".strip(),
    }


def event_entry(gen, name: str) -> dict:
    """The perf event definition of signal ``name``: raw count × ScaleUnit = its value, and the
    perfonto attributes perf has no field for in a trailing ``[perfonto: …]`` tag."""
    s = gen.signals[name]
    tag = [f"kind={s.kind}"]
    if s.width is not None:
        tag.append(f"width={s.width}")
    if s.axes:
        tag.append("instances=" + ",".join(f"{a}:{n}" for a, n in s.axes))
    if kinds.of(s).counts and s.counted_by != "chip":
        tag.append(f"counted_by={s.counted_by}")
    if kinds.of(s).across == "declared" and "across_chips" in kinds.of(s).options:
        tag.append(f"across_chips={s.across_chips}")
    return {
        "EventName": name,
        "Unit": s.block,
        "ScaleUnit": f"{number(s.scale)}{unit_label(s.unit_text)}",
        "BriefDescription": f"{s.description.strip()} [perfonto: {'; '.join(tag)}]",
    }


def _offset(reg: pint.UnitRegistry, u: pint.Unit) -> bool:
    """An offset unit (degC): zero in it is not zero in base units."""
    return float(reg.Quantity(0.0, u).to_base_units().magnitude) != 0.0


def _compare(a: str, op: str, b: str) -> str:
    if op in ("<", ">"):
        return f"{a} {op} {b}"
    if op == "<=":
        return f"1 - ({a} > {b})"
    if op == ">=":
        return f"1 - ({a} < {b})"
    if op == "==":
        return f"1 - ({a} < {b} | {a} > {b})"
    return f"{a} < {b} | {a} > {b}"


class _Emitter:
    """perfonto AST → perf expression text (with the precedence of the result)."""

    def __init__(self, graph: MetricGraph, reg: pint.UnitRegistry, specs: set[str]):
        self.graph, self.gen, self.reg, self.specs = graph, graph.generation, reg, specs
        self.events: set[str] = set()

    def p(self, e, need: int, rollup: bool = False) -> str:
        s, prec = self.expr(e, rollup)
        return bracket(s, prec, need)

    def expr(self, e, rollup: bool = False) -> tuple[str, int]:
        if isinstance(e, ast.Number):
            v = e.value
            if e.unit is not None:
                try:
                    v = float(self.reg.Quantity(e.value, self.reg.parse_units(e.unit)).to_base_units().magnitude)
                except Exception as exc:
                    raise _Unsupported(f"literal `{e.value} {e.unit}`: {exc}") from None
            return (number(v), ATOM) if v >= 0 else (f"-{number(v)}", NEG)
        if isinstance(e, ast.Name):
            return self.name(e.name, rollup), ATOM
        if isinstance(e, ast.Unary):
            if e.op == "-":
                return "-" + self.p(e.operand, NEG, rollup), NEG
            return f"1 - {self.p(e.operand, PerfPrec.TERM, rollup)}", PerfPrec.SUM
        if isinstance(e, ast.IfElse):
            return (
                f"({self.p(e.then, PerfPrec.OR, rollup)} if {self.p(e.cond, PerfPrec.OR, rollup)} "
                f"else {self.p(e.otherwise, PerfPrec.OR, rollup)})",
                ATOM,
            )
        if isinstance(e, ast.Call):
            return self.call(e, rollup)
        if isinstance(e, ast.Binary):
            return self.binary(e, rollup)
        raise _Unsupported(f"construct {type(e).__name__} has no perf form")  # pragma: no cover

    def name(self, n: str, rollup: bool) -> str:
        n = self.gen.aliases.get(n, n)
        if n == "interval":
            return "duration_time"
        if n in self.gen.signals:
            s = self.gen.signals[n]
            if s.axes and not rollup:
                raise _Unsupported(f"`{n}` per instance: perf aggregates PMU instances; roll it up with sum() or avg()")
            if kinds.of(s).window not in ("increase", "mean"):
                raise _Unsupported(f"`{n}` is a {s.kind} register; perf events are counts")
            q = self.reg.Quantity(s.scale, s.unit)
            if _offset(self.reg, s.unit):
                raise _Unsupported(f"`{n}` is in an offset unit ({s.unit_text})")
            k = float(q.to_base_units().magnitude)  # the raw count's value in base units
            self.events.add(n)
            return n if k == 1.0 else f"({n} * {number(k)})"
        if n in self.gen.spec:
            self.specs.add(n)
            return n
        if n in self.graph.metrics:
            return n
        raise _Unsupported(f"`{n}` is not a counter, constant or window metric perf can read")

    def binary(self, e: ast.Binary, rollup: bool) -> tuple[str, int]:
        op = e.op
        if op == "**":
            if not (
                isinstance(e.right, ast.Number)
                and e.right.unit is None
                and float(e.right.value).is_integer()
                and abs(e.right.value) <= 8
            ):
                raise _Unsupported("a power with a non-integer exponent has no perf form")
            n = int(e.right.value)
            if n == 0:
                return "1", ATOM
            base = self.p(e.left, ATOM, rollup)
            prod = " * ".join([base] * abs(n))
            return (prod, PerfPrec.TERM) if n > 0 else (f"1 / ({prod})", PerfPrec.TERM)
        if op in ("+", "-", "*", "/"):
            prec = PERF_BINARY[op]
            return f"{self.p(e.left, prec, rollup)} {op} {self.p(e.right, prec + 1, rollup)}", prec
        a, b = self.p(e.left, PerfPrec.SUM, rollup), self.p(e.right, PerfPrec.SUM, rollup)
        if op in ("<", ">"):
            return f"{a} {op} {b}", PerfPrec.CMP
        if op == "<=":
            return f"1 - ({a} > {b})", PerfPrec.SUM
        if op == ">=":
            return f"1 - ({a} < {b})", PerfPrec.SUM
        if op == "==":
            return f"1 - ({a} < {b} | {a} > {b})", PerfPrec.SUM
        if op == "!=":
            return f"{a} < {b} | {a} > {b}", PerfPrec.OR
        if op in ("and", "or"):
            sym = "&" if op == "and" else "|"
            prec = PERF_BINARY[sym]
            return f"{self.p(e.left, prec, rollup)} {sym} {self.p(e.right, prec + 1, rollup)}", prec
        raise _Unsupported(f"operator `{op}` has no perf form")  # pragma: no cover

    def call(self, e: ast.Call, rollup: bool) -> tuple[str, int]:
        f, args = e.func, e.args
        if f in ("sum", "avg") and len(args) == 1:
            arg = args[0]
            sigs = [n.name for n in ast.walk(arg) if isinstance(n, ast.Name) and n.name in self.gen.signals]
            if not _linear(arg, self.gen) or not sigs:
                raise _Unsupported(f"`{f}()` of a non-linear expression: perf can only sum instance counts")
            if f == "sum":
                return self.expr(arg, rollup=True)
            return f"{self.p(arg, PerfPrec.TERM, rollup=True)} / source_count({sigs[0]})", PerfPrec.TERM
        if f in ("min", "max") and len(args) == 1:
            raise _Unsupported(f"`{f}()` over instances: perf aggregates PMU instances by summing them")
        if f in ("min", "max"):
            acc = self.p(args[-1], PerfPrec.ANY, rollup)
            for a in reversed(args[:-1]):
                acc = f"{f}({self.p(a, PerfPrec.ANY, rollup)}, {acc})"
            return acc, ATOM
        if f == "abs":
            x = self.p(args[0], PerfPrec.ANY, rollup)
            return f"max({x}, -({x}))", ATOM
        if f == "clamp":
            x, lo, hi = (self.p(a, PerfPrec.ANY, rollup) for a in args)
            return f"min(max({x}, {lo}), {hi})", ATOM
        raise _Unsupported(f"`{f}()` has no perf form")


def _linear(e, gen) -> bool:
    """Sums and differences of signals and literal multiples of them: a sum over instances distributes."""
    if isinstance(e, ast.Name):
        return e.name in gen.signals
    if isinstance(e, ast.Binary) and e.op in ("+", "-"):
        return _linear(e.left, gen) and _linear(e.right, gen)
    if isinstance(e, ast.Binary) and e.op == "*":
        return (isinstance(e.left, ast.Number) and _linear(e.right, gen)) or (
            isinstance(e.right, ast.Number) and _linear(e.left, gen)
        )
    if isinstance(e, ast.Binary) and e.op == "/":
        return isinstance(e.right, ast.Number) and _linear(e.left, gen)
    if isinstance(e, ast.Unary) and e.op == "-":
        return _linear(e.operand, gen)
    return False
