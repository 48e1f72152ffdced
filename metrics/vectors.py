"""Catalog test vectors: inputs of one window → expected metric values, in YAML next to the metrics.

Format (JSON Schema: ``schemas/vectors.schema.json``)::

    generation: sohu
    vectors:
      - name: busy window                 # what the case is
        interval: 1 ms                    # window duration (a quantity)
        chips: 1                          # per-chip spec constants are multiplied by this (server level)
        inputs:                           # window values in each signal's unit: a counter's increase,
          seq.elapsed_cycles: 1500000     # a gauge's mean; a number is the same on every instance,
          hbm.read_bytes: [8e8, 8e8, 8e8, 8e8, 8e8, 8e8]   # a list gives each instance; "1 GB" converts
        expect:                           # metric → value in the metric's unit, a quantity, or null
          hbm.read_bandwidth: 4800 GB/s
          energy_per_token: null
        rel: 1e-9                         # relative tolerance (default 1e-9)

Signals not listed are 0. ``run_vectors`` evaluates with the reference interpreter and with the
generated evaluator, and both must match every expectation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.diagnostics import with_source
from perfonto.ontology.loader import validate_model
from perfonto.ontology.units import UnitError, parse_quantity
from perfonto.ontology.yaml_source import read_yaml

from .compiler import MetricGraph
from .interpreter import evaluate
from .population import evaluate_records, records_from_columns
from .windows import Windows

Value = float | int | str | None


class Vector(BaseModel):
    """One window and what each metric must give for it."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="What the case is (shown when it fails).")
    interval: str = Field(default="1 s", description="Window duration, a quantity such as `1 ms`.")
    chips: float = Field(
        default=1.0, ge=1, description="Factor for per-chip spec constants (1 per chip; N for a server-level window)."
    )
    inputs: dict[str, float | int | str | list[float | int | str]] = Field(
        default_factory=dict, description="Signal → window value (number, quantity string, or a list per instance)."
    )
    records: dict[str, list] = Field(
        default_factory=dict,
        description="Record fields → one value per record (`request.arrival_time: [0, 0.1]`); a `times` field takes "
        "a list per record. Derived populations (token gaps) are made from them.",
    )
    expect: dict[str, Value | list[Value]] = Field(
        description="Metric → expected value (number in the metric's unit, quantity string, or null; a list for a "
        "per-record metric)."
    )
    rel: float = Field(default=1e-9, ge=0, description="Relative tolerance.")
    abs: float = Field(default=1e-12, ge=0, description="Absolute tolerance.")


class VectorFile(BaseModel):
    """A file of test vectors for one generation."""

    model_config = ConfigDict(extra="forbid")
    generation: str = Field(description="Generation the vectors are written for.")
    vectors: list[Vector] = Field(description="The cases.")


@dataclass
class Outcome:
    file: str
    vector: str
    metric: str
    ok: bool
    message: str
    span: Span


def vector_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.vectors.yaml")) if path.is_dir() else [path]


def _quantity(reg, value, unit) -> float:
    """A number (in ``unit``) or a quantity string converted to ``unit``."""
    return parse_quantity(reg, value, unit)


def run_vectors(graph: MetricGraph, path: Path, evaluator=None) -> tuple[list[Outcome], list[Diagnostic]]:
    """Evaluate every vector of the file (or folder) ``path``; returns outcomes and file diagnostics."""
    outcomes: list[Outcome] = []
    diags: list[Diagnostic] = []
    for f in vector_files(Path(path)):
        loaded = _load_vector_file(f, graph.generation.name, diags)
        if loaded is None:
            continue
        src, vf = loaded
        for i, v in enumerate(vf.vectors):
            _run_vector(_Case(graph, str(f), src, ("vectors", i), v), evaluator, outcomes, diags)
    return outcomes, diags


@dataclass
class _Case:
    """One vector being run: the metric graph, the file it is in (name and source, for locations),
    its location in the file and the vector as written."""

    graph: MetricGraph
    file: str
    src: Any
    vloc: tuple
    v: Vector

    def span(self, *keys) -> Span:
        """Where a key under this vector is written."""
        return self.src.span(self.vloc + keys)


def _load_vector_file(f: Path, generation: str, diags: list[Diagnostic]):
    """The file's source and its validated vectors, or None when it does not parse, does not validate
    (diagnostics added) or is written for another generation."""
    src = read_yaml(f)
    if src.diagnostics:
        diags += src.diagnostics
        return None
    if not isinstance(src.data, dict):
        diags.append(
            Diagnostic(
                "error",
                "schema",
                "a vector file is a mapping with `generation` and `vectors`",
                Span(str(f), 1, 1),
                hint="see schemas/vectors.schema.json",
            )
        )
        return None
    vf = validate_model(src, VectorFile)
    if vf is None:
        diags += [with_source(d, src.text) for d in src.diagnostics]
        return None
    if vf.generation != generation:
        return None
    return src, vf


def _run_vector(case: _Case, evaluator, outcomes: list[Outcome], diags: list[Diagnostic]) -> None:
    """Evaluate one vector with each engine and compare every expectation (nothing runs after an input error)."""
    v = case.v
    interval = _interval(case, diags)
    if interval is None:
        return
    values = _window_inputs(case, diags)
    if values is None:
        return
    w = Windows(np.array([[interval]]), values, v.chips)
    results = [("interpreter", evaluate(case.graph, w))]
    if evaluator is not None:
        results.append(("generated evaluator", evaluator.evaluate(values, w.interval, v.chips)))
    if v.records:
        with_records = _with_records(case, results, diags)
        if with_records is None:
            return
        results = with_records
    if not v.expect:
        diags.append(
            Diagnostic(
                "error",
                "vector-expect",
                f"vector `{v.name}` expects nothing: it checks nothing",
                case.span("expect"),
                hint="give the metric values the inputs must produce",
            )
        )
    for metric, want in v.expect.items():
        _check_expectation(case, metric, want, results, outcomes, diags)


def _interval(case: _Case, diags: list[Diagnostic]):
    """The window duration in seconds, or None after reporting it is not a positive duration."""
    reg, v = case.graph.generation.registry, case.v
    try:
        interval = parse_quantity(reg, v.interval, reg.second)
        if interval <= 0:
            raise UnitError("not positive")
        return interval
    except UnitError as exc:
        diags.append(
            Diagnostic(
                "error",
                "unit-mismatch",
                f"interval `{v.interval}` is not a positive duration ({exc})",
                case.span("interval"),
                hint="write e.g. `interval: 1 ms`",
            )
        )
        return None


def _window_inputs(case: _Case, diags: list[Diagnostic]) -> dict | None:
    """One window's value array per signal and packed field (0 where not given), or None when an input
    is wrong or names no signal (each reported)."""
    gen, v = case.graph.generation, case.v
    values = {}
    bad = False
    for name, sig in list(gen.signals.items()) + list(gen.fields.items()):
        sizes = tuple(s for _, s in sig.axes)
        arr = np.zeros((1, 1) + sizes)
        if name in v.inputs:
            raw = v.inputs[name]
            try:
                if isinstance(raw, list):
                    vals = [_quantity(gen.registry, x, sig.unit) for x in raw]
                    arr[0, 0] = np.asarray(vals, dtype=float).reshape(sizes)
                else:
                    arr[:] = _quantity(gen.registry, raw, sig.unit)
            except (ValueError, UnitError) as exc:  # wrong length, wrong unit
                diags.append(Diagnostic("error", "vector-input", f"input `{name}`: {exc}", case.span("inputs", name)))
                bad = True
        values[name] = arr
    unknown = [n for n in v.inputs if n not in values]
    for n in unknown:
        diags.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"input `{n}` is not a signal of `{gen.name}`",
                case.span("inputs", n),
            )
        )
    if bad or unknown:
        return None
    return values


def _with_records(case: _Case, results: list, diags: list[Diagnostic]) -> list | None:
    """Each engine's results with the record metrics of the vector's records added, or None when the
    records name an undeclared field or do not make a population (reported)."""
    gen, v = case.graph.generation, case.v
    unknown_f = [k for k in v.records if k not in gen.record_fields]
    for k in unknown_f:
        diags.append(
            Diagnostic(
                "error",
                "unknown-name",
                f"record field `{k}` is not declared",
                case.span("records", k),
            )
        )
    if unknown_f:
        return None
    try:
        rec = evaluate_records(case.graph, records_from_columns(gen, v.records))
    except ValueError as exc:
        diags.append(
            Diagnostic(
                "error",
                "vector-records",
                f"records: {exc}",
                case.span("records"),
                hint="one value per record in every field; a `times` field takes a list per record",
            )
        )
        return None
    as_window = {k: np.asarray(x).reshape(1, 1, -1) if np.ndim(x) else np.full((1, 1), x) for k, x in rec.items()}
    return [(engine, {**res, **as_window}) for engine, res in results]


def _check_expectation(
    case: _Case, metric: str, want, results: list, outcomes: list[Outcome], diags: list[Diagnostic]
) -> None:
    """Compare one expected metric value with each engine's result (one outcome per engine)."""
    graph, v = case.graph, case.v
    span = case.span("expect", metric)
    m = graph.metrics.get(metric) or graph.record_metrics.get(metric)
    if metric in graph.record_metrics and not v.records:
        diags.append(
            Diagnostic(
                "error",
                "vector-expect",
                f"vector `{v.name}` expects record metric `{metric}` but gives no records: nothing would be checked",
                span,
                hint="add `records:` (request fields, one value per request), or drop the expectation",
            )
        )
        return
    if m is None:
        msg = graph.unavailable.get(metric)
        outcomes.append(
            Outcome(case.file, v.name, metric, False, f"unavailable: {msg}" if msg else "no such metric", span)
        )
        return
    try:
        target = _target(graph.generation.registry, want, m.unit)
    except (UnitError, ValueError) as exc:
        diags.append(
            Diagnostic(
                "error",
                "vector-expect",
                f"expected value of `{metric}`: {exc}",
                span,
                hint=f"a number in [{m.unit_text}], a quantity such as `5 {m.unit_text}`, or null",
            )
        )
        return
    if m.bounds is not None and target is not None:
        _check_bounds(case, metric, m, target, span, diags)
    for engine, res in results:
        if metric not in res:
            continue  # record metrics without records in this vector
        got = np.asarray(res[metric])[0, 0]
        ok = _matches(got, target, v)
        outcomes.append(
            Outcome(
                case.file,
                v.name,
                metric,
                ok,
                f"{engine}: got {_shown(got)} {m.unit_text}, expected {_shown_target(target)}",
                span,
            )
        )
        if metric in graph.record_metrics:
            break  # record metrics are evaluated once, by the reference path


def _target(reg, want, unit):
    """The expected value in the metric's unit: None (null), a number, or an array (null → NaN) for a list."""
    if isinstance(want, list):
        return np.array([np.nan if x is None else _quantity(reg, x, unit) for x in want])
    return None if want is None else _quantity(reg, want, unit)


def _check_bounds(case: _Case, metric: str, m, target, span: Span, diags: list[Diagnostic]) -> None:
    """An expected value lies within the metric's declared bounds (the first one outside is reported)."""
    lo, hi = m.bounds
    vals = np.atleast_1d(np.asarray(target, dtype=float))
    outside = vals[np.isfinite(vals) & ((vals < lo) | (vals > hi))]
    if outside.size:
        diags.append(
            Diagnostic(
                "error",
                "vector-bounds",
                f"vector `{case.v.name}` expects `{metric}` = {outside[0]:g} "
                f"{m.unit_text}, outside its declared bounds {lo:g} .. {hi:g}",
                span,
                hint="the expectation or the metric's bounds is wrong; fix the one that is",
            )
        )


def _matches(got, target, v: Vector) -> bool:
    """Whether an engine's value meets the expectation: all NaN for null, else within the tolerances
    (an array: same shape, NaN where NaN is expected)."""
    if target is None:
        return bool(np.isnan(got).all())
    if isinstance(target, np.ndarray):
        return got.shape == target.shape and bool(
            np.all((np.isnan(got) & np.isnan(target)) | (np.abs(got - target) <= v.abs + v.rel * np.abs(target)))
        )
    return bool(np.all(np.abs(got - target) <= v.abs + v.rel * abs(target)))


def _shown(got) -> str:
    """An engine's value as the outcome message shows it."""
    return np.array2string(np.asarray(got), precision=10) if np.ndim(got) else f"{float(got):.10g}"


def _shown_target(target) -> str:
    """An expected value as the outcome message shows it."""
    if target is None:
        return "null"
    return np.array2string(target, precision=10) if isinstance(target, np.ndarray) else f"{target:.10g}"
