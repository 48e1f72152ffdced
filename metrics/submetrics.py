"""Generated submetrics, in the spirit of Nsight Compute's metric suffixes.

A metric that declares ``peak spec.X`` (an amount over the window, or a rate) gets, without being
written by hand:
- ``NAME.per_second`` = NAME / interval (only for amounts);
- ``NAME.per_cycle`` = NAME / (spec.clock.<domain> × interval), the domain being the clock of the
  block NAME is named after (``hbm.bytes`` → the hbm clock);
- ``NAME.pct_of_peak`` = NAME / peak, or NAME / (peak × interval) for an amount, in percent, bounded
  to 0..100 % so that a wrong peak shows up as a bounds violation.
Source: Nsight Compute Kernel Profiling Guide, "Metrics Structure" (``.per_second``,
``.per_cycle_elapsed``, ``.pct_of_peak_sustained_elapsed``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pint

from perfonto.dsl import ast
from perfonto.dsl.printer import to_text
from perfonto.ontology.diagnostics import Diagnostic
from perfonto.ontology.generation import Generation
from perfonto.ontology.units import UnitError, fmt_unit, parse_unit


def _unit_over(unit: str, by: str) -> str:
    u = unit.strip()
    return f"{u}/{by}" if "/" not in u and " " not in u and "*" not in u else f"({u})/{by}"


def expand(gen: Generation, decls: list[ast.MetricDecl]) -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """The declarations plus the generated submetrics of every declaration with a ``peak``."""
    out = list(decls)
    diags: list[Diagnostic] = []
    reg = gen.registry
    for d in decls:
        if d.peak is None:
            continue
        span = d.peak_span or d.span
        peak = gen.spec.get(d.peak)
        if peak is None:
            diags.append(
                Diagnostic(
                    "error",
                    "unknown-name",
                    f"`peak {d.peak}` of `{d.name}` is not a spec constant",
                    span,
                    hint="name a spec constant, e.g. `peak spec.hbm.peak_bandwidth`",
                )
            )
            continue
        try:
            mu = parse_unit(reg, d.unit)
        except UnitError:
            continue  # the declaration's own unit error is reported by the compiler
        dm = reg.Quantity(1, mu).dimensionality
        rate = dm == reg.Quantity(1, peak.unit).dimensionality
        amount = dm == reg.Quantity(1, peak.unit * reg.second).dimensionality
        if not (rate or amount):
            diags.append(
                Diagnostic(
                    "error",
                    "unit-mismatch",
                    f"`{d.name}` [{d.unit}] is neither a rate nor an amount of its peak `{d.peak}` [{peak.unit_text}]",
                    span,
                    hint="the peak must be the metric's unit, or its unit per second",
                )
            )
            continue
        me = ast.Name(d.name, span)
        interval = ast.Name("interval", span)
        pk = ast.Name(d.peak, span)
        block = d.name.split(".")[0]
        gen_src = f"generated from `peak` of {d.name} (Nsight Compute metric-suffix convention)"

        def make(suffix: str, unit: str, expr: ast.Expr, desc: str, bounds=None) -> ast.MetricDecl:
            return replace(
                d,
                name=f"{d.name}.{suffix}",
                unit=unit,
                expr=expr,
                formula=to_text(expr),
                span=span,
                unit_span=span,
                description=desc,
                bounds=bounds,
                threshold=None,
                parent=None,
                parent_span=None,
                source=gen_src,
                peak=None,
                peak_span=None,
            )

        pct_expr = ast.Binary("/", me, pk if rate else ast.Binary("*", pk, interval, span), span)
        hundred = ast.Bound(100.0, "%", span)
        out.append(
            make(
                "pct_of_peak",
                "percent",
                pct_expr,
                f"{d.name} as a share of {d.peak}.",
                (ast.Bound(0.0, "%", span), hundred),
            )
        )
        if amount:
            out.append(
                make(
                    "per_second", _unit_over(d.unit, "s"), ast.Binary("/", me, interval, span), f"{d.name} per second."
                )
            )
        if block in gen.blocks and amount:
            clock = gen.blocks[block]["clock"]
            expr = ast.Binary("/", me, ast.Binary("*", ast.Name(f"spec.clock.{clock}", span), interval, span), span)
            # pint annotates .units as a PlainUnit; it is the registry's Unit (self._REGISTRY.Unit)
            base = fmt_unit(cast(pint.Unit, reg.Quantity(1, mu).to_base_units().units))
            out.append(
                make("per_cycle", _unit_over(base, f"{clock}_cycle"), expr, f"{d.name} per {clock} clock cycle.")
            )
    return out, diags
