"""How a catalog metric looks outside perfonto: its instrument, its unit and its names in Prometheus
(OpenMetrics) and OpenTelemetry. ``perfonto serve`` and ``perfonto export semconv`` read this one
table, so a scraped series, an OTLP stream and the semantic-conventions registry agree.

Rules:
- **Instrument.** A metric whose window value is an *amount* that grows with the window (bytes moved,
  FLOPs done, cycles counted: "time degree" 1, built from counter increases by sums, products and
  quotients of non-negative terms) is exported as a **counter**, the running total of its window
  values; every other metric (rates, ratios, levels, time-weighted means) is a **gauge** holding the
  latest window's value. Time degree: a counter or histogram signal and ``interval`` have degree 1,
  gauges, packed fields and constants 0; ``*`` adds degrees and ``/`` subtracts them.
- **Unit.** Values are converted to base units, as the Prometheus and OpenTelemetry conventions ask:
  bytes, seconds, joules, watts, Celsius, counts of flops, tokens, requests, … and ``percent`` becomes
  a 0..1 ratio. The Prometheus family name ends with the unit in words (``_bytes_per_second``, never
  doubled when the metric name already ends with it); the OpenTelemetry unit is UCUM (``By/s``,
  ``{token}/s``, ``1``). Source: OpenMetrics 1.0 ("Units and base units"), Prometheus "Metric and label
  naming", OpenTelemetry "Metrics semantic conventions: instrument units".
- **Labels.** ``host`` and ``chip`` on every series, one label per instance axis (``stack`` for
  ``hbm.stack``; the full axis name with ``_`` when the short one is taken); in OpenTelemetry the
  attributes are ``perfonto.chip`` and ``perfonto.<axis>`` (``perfonto.hbm.stack``), the host being the
  resource attribute ``host.name``.
"""

from __future__ import annotations

from perfonto.ontology import kinds

import re
from dataclasses import dataclass
from typing import Iterable, cast

import pint

from . import ir
from .compiler import MetricGraph

PREFIX = "perfonto"
RESERVED_LABELS = {"chip", "host", "instance", "job", "le", "quantile"}

# base unit -> (Prometheus word, plural for a numerator, UCUM symbol)
_BASE = {
    "second": ("second", "seconds", "s"),
    "byte": ("byte", "bytes", "By"),
    "flop": ("flop", "flops", "{flop}"),
    "op": ("op", "ops", "{op}"),
    "token": ("token", "tokens", "{token}"),
    "request": ("request", "requests", "{request}"),
    "instruction": ("instruction", "instructions", "{instruction}"),
    "transaction": ("transaction", "transactions", "{transaction}"),
    "event": ("event", "events", "{event}"),
    "joule": ("joule", "joules", "J"),
    "kelvin": ("kelvin", "kelvin", "K"),
}


@dataclass(frozen=True)
class Unit:
    """An exported unit: ``value_exported = value × factor``; ``words`` is the Prometheus unit suffix
    (``bytes_per_second``, ``ratio``), ``ucum`` the OpenTelemetry unit (``By/s``, ``1``)."""

    factor: float
    words: str
    ucum: str


@dataclass(frozen=True)
class Exposition:
    """One catalog metric as telemetry. ``instrument``: ``gauge`` or ``counter``; ``prom_name``: the
    OpenMetrics family name (unit suffix included, ``_total`` excluded); ``otel_name``: the dotted
    OpenTelemetry name; ``axes``: the metric's instance axes ((name, size), …) and ``labels`` /
    ``attributes`` their label and attribute names."""

    metric: str
    instrument: str
    unit: Unit
    prom_name: str
    otel_name: str
    axes: ir.Axes
    labels: tuple[str, ...]
    attributes: tuple[str, ...]
    description: str


def export_unit(reg: pint.UnitRegistry, unit: pint.Unit) -> Unit:
    """The base-unit form of ``unit`` (a unit of the project's registry, ``ontology.units``).

    ``percent`` → ratio (× 0.01, UCUM ``1``); ``degC`` stays Celsius (an offset unit, never scaled);
    ``J/s`` → watts; other units are products of base units (``GB/s`` → × 1e9 ``bytes_per_second``
    ``By/s``; ``J/token`` → ``joules_per_token`` ``J/{token}``; ``core_cycle`` → ``core_cycles``
    ``{core_cycle}``). A dimensionless unit is a ``ratio``.
    """
    if str(unit) in ("degree_Celsius", "degC"):
        return Unit(1.0, "celsius", "Cel")
    q = reg.Quantity(1.0, unit).to_base_units()
    factor = float(q.magnitude)
    # pint types an exponent as any scalar, complex included; a unit's exponents are int or float
    exponents = cast("Iterable[tuple[str, float]]", q.unit_items())
    items = sorted(
        ((str(u), int(e) if float(e).is_integer() else float(e)) for u, e in exponents),
        key=lambda kv: (kv[1] < 0, kv[0]),
    )
    if not items:
        return Unit(factor, "ratio", "1")
    if dict(items) == {"joule": 1, "second": -1}:
        return Unit(factor, "watts", "W")
    num = [(u, e) for u, e in items if e > 0]
    den = [(u, -e) for u, e in items if e < 0]

    def word(u: str, plural: bool) -> str:
        if u in _BASE:
            return _BASE[u][1 if plural else 0]
        return u + "s" if plural and not u.endswith("s") else u

    def ucum(u: str) -> str:
        return _BASE[u][2] if u in _BASE else "{" + u + "}"

    def power(text: str, e) -> str:
        return (
            text
            if e == 1
            else f"{text}_{'squared' if e == 2 else 'cubed' if e == 3 else 'pow' + str(e).replace('.', '_')}"
        )

    words = "_".join(power(word(u, True), e) for u, e in num)
    if den:
        words = (words + "_" if words else "") + "_".join("per_" + power(word(u, False), e) for u, e in den)

    def ucum_term(u, e):
        return ucum(u) + ("" if e == 1 else str(e))

    text = ".".join(ucum_term(u, e) for u, e in num) or "1"
    if den:
        text += "/" + ".".join(ucum_term(u, e) for u, e in den)
    return Unit(factor, words, text)


def time_degree(graph: MetricGraph, name: str, _memo: dict | None = None) -> int | None:
    """How metric ``name``'s window value scales with the window length (module docstring): 1 for an
    amount, 0 for a rate, ratio or level; None when its terms disagree (it is then no amount)."""
    memo = {} if _memo is None else _memo
    if name in memo:
        return memo[name]
    for dep in _metrics_read_first(graph, name, memo):  # a chain of metrics is walked here, not recursed
        memo[dep] = _degree(graph, dep, memo)
    return memo[name]


def _metrics_read_first(graph: MetricGraph, name: str, memo: dict) -> list[str]:
    """``name`` and the metrics it reads (not yet in ``memo``), each after every metric it reads: an
    iterative depth-first post-order, so that a long chain of metrics never deepens the recursion."""
    order: list[str] = []
    seen = set(memo)
    stack: list[tuple[str, bool]] = [(name, False)]
    while stack:
        m, done = stack.pop()
        if done:
            order.append(m)
            continue
        if m in seen:
            continue
        seen.add(m)
        stack.append((m, True))
        refs = {n.metric for n in ir.walk(graph.metrics[m].ir) if isinstance(n, ir.MetricRef)}
        stack += [(r, False) for r in sorted(refs) if r not in seen and r in graph.metrics]
    return order


def _degree(graph: MetricGraph, name: str, memo: dict) -> int | None:
    """``time_degree`` of ``name`` once the metrics it reads are in ``memo``."""
    gen = graph.generation

    def deg(n) -> int | None:
        if isinstance(n, ir.Const):
            return 0
        if isinstance(n, ir.Interval):
            return 1
        if isinstance(n, ir.Input):
            sig = gen.signals.get(n.signal)
            return 1 if sig is not None and kinds.of(sig).counts else 0
        if isinstance(n, ir.MetricRef):
            return memo.get(n.metric)
        if isinstance(n, ir.Rollup):
            return deg(n.arg)
        ds = [d for d in (deg(a) for a in n.args) if d is not None]
        if len(ds) != len(n.args):  # an argument of unknown degree
            return None
        if n.op in ir.BOOL_OPS:
            return 0
        if n.op == "mul":
            return ds[0] + ds[1]
        if n.op == "div":
            return ds[0] - ds[1]
        if n.op == "pow":
            return ds[0] if ds[0] == 0 else None
        non_const = [d for a, d in zip(n.args, ds) if not isinstance(a, ir.Const)]
        return non_const[0] if non_const and len(set(non_const)) == 1 else (0 if not non_const else None)

    return deg(graph.metrics[name].ir)


def _non_negative(graph: MetricGraph, node) -> bool:
    """True when the expression cannot go below zero: counter increases (never negative) and
    non-negative constants combined by +, ×, ÷ and sum/avg/min/max rollups, through the metrics it reads
    (walked iteratively: a long chain of metrics never deepens the recursion)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Const):
            if not n.value >= 0:
                return False
        elif isinstance(n, ir.MetricRef):
            m = graph.metrics.get(n.metric)
            if m is None:
                return False
            if n.metric not in seen:
                seen.add(n.metric)
                stack.append(m.ir)
        elif isinstance(n, ir.Rollup):
            stack.append(n.arg)
        elif isinstance(n, ir.Op):
            if n.op not in ("add", "mul", "div"):
                return False
            stack += list(n.args)
        elif not isinstance(n, (ir.Interval, ir.Input)):
            return False
    return True


def instrument(graph: MetricGraph, name: str) -> str:
    """``counter`` for a metric whose window value is a non-negative amount (module docstring), else
    ``gauge``. A metric with a declared ``rollup`` (a hottest-window value) is always a gauge."""
    m = graph.metrics[name]
    if m.rollup is None and time_degree(graph, name) == 1 and _non_negative(graph, m.ir):
        return "counter"
    return "gauge"


def sanitize(name: str) -> str:
    """A Prometheus metric/label name from a dotted catalog name: ``[a-zA-Z_:][a-zA-Z0-9_:]*``."""
    s = re.sub(r"[^a-zA-Z0-9_]", "_", name)
    return s if re.match(r"[a-zA-Z_]", s) else "_" + s


def axis_labels(axes: ir.Axes) -> tuple[str, ...]:
    """Prometheus label names of instance axes: the axis's short name (``stack``), or the full name
    with ``_`` (``hbm_stack``) when the short one is reserved or used twice."""
    short = [a.split(".")[-1] for a, _ in axes]
    return tuple(
        sanitize(s) if s not in RESERVED_LABELS and short.count(s) == 1 else sanitize(a)
        for s, (a, _) in zip(short, axes)
    )


def _prom_name(prefix: str, name: str, unit: Unit, dots: str) -> str:
    base = f"{prefix}_{sanitize(name.replace('.', dots))}"
    return base if base.endswith("_" + unit.words) else f"{base}_{unit.words}"


def _samples(prom: str, kind: str) -> list[str]:
    return [prom] if kind == "gauge" else [prom, prom + "_total", prom + "_created"]


def expositions(graph: MetricGraph, prefix: str = PREFIX) -> dict[str, Exposition]:
    """Every window metric of ``graph`` as an ``Exposition``, in catalog order.

    A name's dots become ``_``. Where two names would then collide (``mxu.flops.per_cycle``, a
    generated submetric, and ``mxu.flops_per_cycle``), the one with more dots keeps them as ``__``
    (``perfonto_mxu__flops__per_cycle_flops_per_core_cycle``), so every family stays unique and stable.

    Raises:
        ValueError: two metrics that still map to the same Prometheus name (or one metric's ``_total``
            / ``_created`` sample that would collide with another family); the message names both.
    """
    reg = graph.generation.registry
    info = {name: (export_unit(reg, m.unit), instrument(graph, name)) for name, m in graph.metrics.items()}
    plain: dict[str, list[str]] = {}
    for name, (unit, kind) in info.items():
        for s in _samples(_prom_name(prefix, name, unit, "_"), kind):
            plain.setdefault(s, []).append(name)
    clash = {n for names in plain.values() if len(names) > 1 for n in names}
    keep_dots = set()
    for names in plain.values():
        if len(names) > 1:
            keep_dots.add(max(names, key=lambda n: (n.count("."), n)))
    out: dict[str, Exposition] = {}
    taken: dict[str, str] = {}
    for name, m in graph.metrics.items():
        unit, kind = info[name]
        prom = _prom_name(prefix, name, unit, "__" if name in keep_dots and name in clash else "_")
        for s in _samples(prom, kind):
            if s in taken:
                raise ValueError(f"metrics `{taken[s]}` and `{name}` both export as Prometheus name `{s}`; rename one")
            taken[s] = name
        out[name] = Exposition(
            name,
            kind,
            unit,
            prom,
            f"{prefix}.{name}",
            m.axes,
            axis_labels(m.axes),
            tuple(f"{prefix}.{a}" for a, _ in m.axes),
            m.description,
        )
    return out
