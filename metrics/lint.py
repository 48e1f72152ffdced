"""The ``lint`` compiler pass: formulas that type but that a reviewer would refuse or flag.

Run after ``units`` on the typed metrics (``Typed`` → ``Typed``); an error leaves the metric (and
every metric that uses it) out of the graph, a warning keeps it. The rules:

- ``packed-word`` (error): a packed register's whole word is not a number — only its fields
  (``power.status.pstate``) mean something; reading ``power.status`` itself is refused.
- ``clamp-order`` (error): ``clamp(x, lo, hi)`` with literal bounds ``lo > hi`` always gives ``hi``.
- ``div-zero`` (error): a division whose divisor is a literal expression equal to zero is always null.
- ``threshold-bounds`` (warning): a threshold outside the metric's declared bounds can never fire
  (or always fires).
- ``total-times-ratio`` (error): a metric that is a per-chip total (it adds up across chips: bytes,
  FLOPs, energy) made by multiplying or dividing a measured total by a measured ratio (a share, an
  average level): the server value of such a product is neither a total nor a ratio of totals, so it
  means nothing (README: "refuses mixing per-chip totals with ratios"). Constants, ``interval`` and
  literals are not ratios; a metric that is itself a ratio may be scaled by ratios (Intel's
  ``(1 - a / b) * c / d`` is a product of server ratios).
- ``percent-times-100`` (error): a metric declared ``[percent]`` whose formula multiplies by a bare
  ``100`` (or divides by ``0.01``) as its last step: perfonto converts the formula's value to the
  declared unit itself — a ratio 0.32 is shown as 32 % — so the ``* 100`` that other tools' formulas
  carry (perf's ``100 *``, TMA's, rocprof's) makes it 100 × too large (a new user's
  ``mxu.utilization * 100`` read 4,967.7 %).
- ``lint-flop-coverage`` (warning): a metric that reads some of a block's FLOP counters (unit FLOP,
  a declared ``precision``) but not all of them — e.g. on caelius, a formula that reads fp8 and bf16
  but not ``mxu.flops_fp4``: FP4 work would be left out of utilisation (the shipped library reads it as
  ``default(mxu.flops_fp4, 0 FLOP)``, which every generation compiles).
"""

from __future__ import annotations

import networkx as nx

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic
from perfonto.ontology import kinds

from . import ir
from .infer_typed import POP
from .stages import Typed, advance, frozen


def lint(s: Typed) -> Typed:
    """Apply the rules of the module docstring to every typed metric (see there)."""
    gen = s.gen
    diags = list(s.diagnostics)
    bad: set[str] = set()
    for name, m in s.compiled.items():
        d = s.by_name[name]
        found = _ast_rules(gen, d) + _ir_rules(gen, s, name, m, d) + _bounds_rules(d, m)
        diags += found
        if any(x.severity == "error" for x in found):
            bad.add(name)
    diags += _flop_coverage(gen, s)
    if not bad:
        return advance(Typed, s, diagnostics=tuple(diags))
    gone = set(bad)
    for b in bad:
        gone |= {n for n in nx.descendants(s.graph, b) if n in s.compiled}
    compiled = {n: m for n, m in s.compiled.items() if n not in gone}
    return advance(Typed, s, diagnostics=tuple(diags), bad=s.bad | frozenset(gone), compiled=frozen(compiled))


# --- rules on the formula as written ---------------------------------------------------------------


def _ast_rules(gen, d: ast.MetricDecl) -> list[Diagnostic]:
    out = _percent_times_100(d)
    reg = gen.registry
    for node in ast.walk(d.expr):
        if isinstance(node, ast.Name):
            sig = gen.signals.get(gen.aliases.get(node.name, node.name))
            if sig is not None and "fields" in kinds.of(sig).options:  # a packed register
                fields = sorted(f for f in gen.fields if f.startswith(sig.name + "."))
                out.append(
                    Diagnostic(
                        "error",
                        "packed-word",
                        f"`{node.name}` is a packed register: its whole word is not a number",
                        node.span,
                        hint="read one of its fields: " + ", ".join(f"`{f}`" for f in fields),
                    )
                )
        elif isinstance(node, ast.Call) and node.func == "clamp" and len(node.args) == 3:
            lo, hi = _const(reg, node.args[1]), _const(reg, node.args[2])
            if lo is not None and hi is not None and lo > hi:
                out.append(
                    Diagnostic(
                        "error",
                        "clamp-order",
                        f"`clamp` bounds are reversed: the low bound is above the high one "
                        f"in metric `{d.name}`, so the result is always the high bound",
                        node.span,
                        hint="write clamp(x, LOW, HIGH)",
                    )
                )
        elif isinstance(node, ast.Binary) and node.op == "/":
            v = _const(reg, node.right)
            if v is not None and v == 0:
                out.append(
                    Diagnostic(
                        "error",
                        "div-zero",
                        f"division by a literal zero in metric `{d.name}`: the value is always null",
                        node.right.span,
                        hint="divide by the quantity meant, or drop the division",
                    )
                )
    return out


PERCENT_UNITS = ("percent", "%")


def _factors(e) -> list:
    """The factors of a product as written (``a * b / c``: a, b and the divisor ``/ c`` as ("/", c))."""
    if isinstance(e, ast.Binary) and e.op == "*":
        return _factors(e.left) + _factors(e.right)
    if isinstance(e, ast.Binary) and e.op == "/":
        return _factors(e.left) + [("/", e.right)]
    return [e]


def _percent_times_100(d: ast.MetricDecl) -> list[Diagnostic]:
    """The ``percent-times-100`` rule (module docstring): a bare ``100`` factor (or ``/ 0.01``) at the
    top of a metric declared in percent."""
    if d.unit.strip() not in PERCENT_UNITS:
        return []
    for f in _factors(d.expr):
        div = isinstance(f, tuple)
        node = f[1] if div else f
        if isinstance(node, ast.Number) and node.unit is None and node.value == (0.01 if div else 100):
            return [
                Diagnostic(
                    "error",
                    "percent-times-100",
                    f"metric `{d.name}` is declared [{d.unit.strip()}] and its formula "
                    f"{'divides by 0.01' if div else 'multiplies by 100'}: perfonto shows a ratio in the declared "
                    "unit itself (0.32 is 32 %), so the value would be 100 × too large",
                    node.span,
                    hint=f"drop the `{'/ 0.01' if div else '* 100'}` (other tools' formulas carry it, perfonto's not)",
                )
            ]
    return []


def _const(reg, e) -> float | None:
    """The value of a literal sub-expression in base units (None when it reads anything, or cannot
    be folded); a product with a literal zero factor is zero whatever the other factor reads."""
    if isinstance(e, ast.Number):
        if e.unit is None:
            return e.value
        try:
            q = reg.Quantity(e.value, reg.parse_units(e.unit)).to_base_units()
            return float(q.magnitude)
        except Exception:  # an offset unit or one the compiler already refused
            return None
    if isinstance(e, ast.Unary) and e.op == "-":
        v = _const(reg, e.operand)
        return None if v is None else -v
    if isinstance(e, ast.Binary) and e.op in ("+", "-", "*", "/"):
        a, b = _const(reg, e.left), _const(reg, e.right)
        if e.op == "*" and (a == 0 or b == 0):  # anything times a literal zero (interval * 0)
            return 0.0
        if a is None or b is None:
            return None
        if e.op == "/":
            return None if b == 0 else a / b
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    return None


# --- rules on the typed form -----------------------------------------------------------------------


def _reads_signals(n: ir.Node, compiled) -> bool:
    """Does the value come from measured counters or gauges (not only constants and ``interval``)?"""
    if isinstance(n, ir.Input):
        return not any(a.startswith(POP) for a, _ in n.axes)
    if isinstance(n, ir.MetricRef):
        m = compiled.get(n.metric)
        return m is not None and not m.from_records and any(_reads_signals(c, compiled) for c in ir.walk(m.ir))
    return any(_reads_signals(c, compiled) for c in ir.children(n))


def _ir_rules(gen, s: Typed, name: str, m, d: ast.MetricDecl) -> list[Diagnostic]:
    if m.from_records or m.degree != 1:  # a ratio may scale by ratios: (1 - a / b) * c / d is a product of ratios
        return []
    for n in ir.walk(m.ir):
        if isinstance(n, ir.Op) and n.op in ("mul", "div") and len(n.args) == 2:
            a, b = n.args
            for total, ratio in ((a, b), (b, a)):
                if (
                    total.degree >= 1
                    and ratio.degree == 0
                    and _reads_signals(total, s.compiled)
                    and _reads_signals(ratio, s.compiled)
                ):
                    what = "multiplies" if n.op == "mul" else "divides"
                    return [
                        Diagnostic(
                            "error",
                            "total-times-ratio",
                            f"metric `{name}` {what} a per-chip total by a ratio: its "
                            "server value would be neither a total nor a ratio of totals",
                            d.expr.span,
                            hint="multiply totals by constants only; combine ratios with ratios, or "
                            "rewrite the ratio from its totals (a / b * c as a * c / b)",
                        )
                    ]
    return []


def _bounds_rules(d: ast.MetricDecl, m) -> list[Diagnostic]:
    if m.bounds is None or m.threshold is None:
        return []
    lo, hi = m.bounds
    op, value, _ = m.threshold
    if lo <= value <= hi:
        return []
    never = (op in (">", ">=") and value > hi) or (op in ("<", "<=") and value < lo)
    return [
        Diagnostic(
            "warning",
            "threshold-bounds",
            f"the threshold of `{d.name}` ({op} {value:g} {d.unit}) lies outside its "
            f"bounds {lo:g} .. {hi:g}: it {'can never fire' if never else 'fires in every window'}",
            d.threshold.span if d.threshold else d.span,
            hint="move the threshold inside the bounds, or widen the bounds",
        )
    ]


def _flop_coverage(gen, s: Typed) -> list[Diagnostic]:
    """Per block, the FLOP counters with a declared precision; a metric reading some but not all."""
    reg = gen.registry
    flop = reg.Quantity(1, reg.parse_units("FLOP")).dimensionality
    family: dict[str, set[str]] = {}
    for n, sig in gen.signals.items():
        if (
            kinds.of(sig).window == "increase"
            and sig.precision
            and not sig.broken
            and reg.Quantity(1, sig.unit).dimensionality == flop
        ):
            family.setdefault(sig.block, set()).add(n)
    out = []
    for name, m in s.compiled.items():
        read = ir.signals_of(m.ir)
        for block, members in family.items():
            got = read & members
            if got and got != members:
                missing = sorted(members - got)
                users = sorted(u for u in nx.descendants(s.graph, name) if u in s.compiled)
                out.append(
                    Diagnostic(
                        "warning",
                        "lint-flop-coverage",
                        f"metric `{name}` reads {', '.join(sorted(got))} but not {', '.join(missing)} of generation "
                        f"`{gen.name}`: that work is left out"
                        + (f" (and out of {', '.join(users[:6])})" if users else ""),
                        s.by_name[name].expr.span,
                        hint=f"add {' + '.join(missing)} to the formula, or say in the description why it is left out",
                    )
                )
    return out


__all__ = ["lint"]
