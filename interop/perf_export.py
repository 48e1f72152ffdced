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
  ``[perfonto: kind=…; width=…; instances=axis:n; counted_by=…; across_chips=…; effective_width=…;
  max_rate=… (its unit per second)]`` so that ``perfonto
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

Everything comes from the compiled catalog (``graph.metrics``): unit, threshold, axes, dependencies and
the expression, written from the compiled IR (``CompiledMetric.ir``) by ``perf_ir``, whose ``Const``
nodes say where each number came from (a spec constant by name, a literal with its unit, a unit
conversion, a chip factor), so base units and named constants need no second reading of the formula.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field


from perfonto.metrics.compiler import MetricGraph
from perfonto.ontology.units import UnitError, conversion_factor
from perfonto.ontology import kinds

from .perf_ir import PerfIR, Unsupported, check_chip_degrees, comparison, number, offset_unit, signed


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


def unit_label(unit_text: str) -> str:
    """The ScaleUnit label of a declared unit (``percent`` is written ``%``, as perf's own files do; a
    plain number, ``1``, has none)."""
    t = unit_text.strip()
    return "%" if t in ("percent", "%") else "" if t == "1" else t


def scale_unit(scale: float, unit_text: str) -> str:
    """perf's ``ScaleUnit``: the factor, then the label. A label that starts like a number is set off by
    a space, or perf (and ``split_scale_unit``) would read its digits as part of the factor: a plain
    number's ``1`` label once made ``"11"``, a scale of 11."""
    label = unit_label(unit_text)
    if label and (label[0].isdigit() or label[0] in ".+-"):
        label = " " + label
    return f"{number(scale)}{label}"


def export(graph: MetricGraph) -> PerfExport:
    """Translate every window metric of ``graph`` (see the module docstring)."""
    gen = graph.generation
    reg = gen.registry
    out = PerfExport()
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
            check_chip_degrees(gen, m.ir)
            writer = PerfIR(graph)
            text = writer.text(m.ir)
            scale = _scale(reg, m)
        except (Unsupported, UnitError) as exc:
            out.skipped[name] = str(exc)
            continue
        used_specs |= writer.specs
        used_events |= writer.events
        done.append(_metric_entry(name, m, d, text, scale, out.lost))
    _with_parents_conditions(graph, done)
    consts = [_constant_entry(gen, s) for s in sorted(used_specs)]
    out.events = [event_entry(gen, n) for n in sorted(used_events)]
    out.entries = out.events + consts + sorted(done, key=lambda e: e["MetricName"])
    return out


def _with_parents_conditions(graph: MetricGraph, entries: list[dict]) -> None:
    """A ``threshold … when parent`` as perf writes a TMA node's: its own comparison and, joined by ``&``, its
    parent's whole ``MetricThreshold`` (``tma_fetch_latency > 0.1 & tma_frontend_bound > 0.15``), so that
    perf highlights it only under a parent past its own, and the re-import reads it back ``when parent``."""
    by_name = {e["MetricName"]: e for e in entries}
    own = {n: e["MetricThreshold"] for n, e in by_name.items() if "MetricThreshold" in e}
    done: dict[str, str] = {}

    def whole(name: str, seen: frozenset = frozenset()) -> str:
        if name in done:
            return done[name]
        m, text = graph.metrics[name], own[name]
        p = m.parent
        if m.threshold_when_parent and p in own and p not in seen:
            text = f"{text} & {whole(p, seen | {name})}"
        done[name] = text
        return text

    for name in own:
        by_name[name]["MetricThreshold"] = whole(name)


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


def _scale(reg, m) -> float:
    """perf's ScaleUnit factor: from the base units of the metric's dimension (what ``perf_ir`` writes)
    to its declared unit (an offset unit cannot be a factor: unsupported)."""
    if offset_unit(reg, m.unit):
        raise Unsupported(f"[{m.unit_text}] is an offset unit: a ScaleUnit is a factor, not an offset")
    base = reg.Quantity(1.0, m.unit).to_base_units().units
    return conversion_factor(reg, base, m.unit)


def _metric_entry(name: str, m, d, text: str, scale: float, lost_by_metric: dict[str, list[str]]) -> dict:
    """A metric's perf entry (expression, scale unit, groups, description, threshold); what perf has no
    field for is listed in `lost_by_metric`."""
    entry = {"MetricName": name, "MetricExpr": text, "ScaleUnit": scale_unit(scale, m.unit_text)}
    groups = list(m.groups) + ([f"{m.parent}_group"] if m.parent else [])
    if groups:
        entry["MetricGroup"] = ";".join(groups)
    if m.description:
        entry["BriefDescription"] = m.description
    lost = []
    if m.threshold is not None:
        op, value, msg = m.threshold
        raw = value / scale
        entry["MetricThreshold"] = comparison(name, op, signed(raw)[0])[0]
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
        "MetricExpr": signed(base.magnitude)[0],
        "ScaleUnit": scale_unit(scale, c.unit_text),
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
    if s.wrap_width is not None and s.wrap_width != s.width:
        tag.append(f"effective_width={s.wrap_width}")
    if s.max_rate is not None:  # the window rules' reset limit (the unit's per second)
        tag.append(f"max_rate={number(s.max_rate)}")
    return {
        "EventName": name,
        "Unit": s.block,
        "ScaleUnit": scale_unit(s.scale, s.unit_text),
        "BriefDescription": f"{s.description.strip()} [perfonto: {'; '.join(tag)}]",
    }
