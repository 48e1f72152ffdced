"""``perfonto sensitivity``: which spec constant buys the most throughput at one operating point.

For each spec constant ``x`` the emulator reads (``knobs.emulated_spec``; those the point's preset
sets itself are listed as fixed; clocks and power, which set no projected time, only when asked), the elasticity of each
figure ``y`` (tokens/s, ITL, TTFT, …) is a central difference on ``ln x``::

    e = d ln y / d ln x ≈ (ln y(x·e^h) − ln y(x·e^−h)) / 2h

with the step ``h`` (default 0.05: x × 1.051 and x ÷ 1.051). An elasticity of 1 means +1 % of the
constant gives +1 % of the figure (the memory-bound roofline in HBM bandwidth); 0, that the
constant does not set the figure here. ``marginal`` is the same slope in the figure's and the
constant's own units, ``e · y / x`` (tokens/s per TB/s): what one more unit buys. The roofline is
piecewise linear in ln-space, so a point within ``h`` of a kink gets the average of both slopes;
the report says which bottleneck each side has when they differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .knobs import KnobError, Point, emulated_spec
from .points import Cache, Target, base_generation, workload
from .sweep import run_points

#: Constants that do not set a projected time (the peaks are per second, not per cycle; power sets
#: energy only): left out unless asked for.
UNTIMED = ("spec.clock.", "spec.power.")

#: Figures whose elasticities are reported: row name → (label, higher is better). The ranking is by
#: the whole benchmark's tokens/s: its schedule is the same on both sides of a rate constant, so the
#: ratio is the model's own, while the steady window (``serving.steady_window``: the full-load plateau) may hold one
#: prompt burst more on one side (a few % at these steps).
FIGURES = {
    "benchmark_tokens_per_second": ("tokens/s", True),
    "tokens_per_second": ("steady tokens/s", True),
    "itl_p50_s": ("ITL p50", False),
    "ttft_p50_s": ("TTFT p50", False),
    "tpot_p50_s": ("TPOT p50", False),
}
RANK_BY = "benchmark_tokens_per_second"


@dataclass
class Sensitivity:
    """The base row, the step, and one entry per constant, ranked by the tokens/s elasticity (``RANK_BY``):
    ``{"constant", "value", "unit", "elasticity": {figure: e}, "marginal": {figure: per unit},
    "bottleneck_down", "bottleneck_up"}``; ``fixed``: constants the preset sets (not varied)."""

    base: dict
    step: float
    ranked: list[dict]
    fixed: list[str]

    def to_json(self) -> dict:
        return {
            "base": self.base,
            "step_ln": self.step,
            "factor": math.exp(self.step),
            "ranked": self.ranked,
            "fixed_by_preset": self.fixed,
            "definition": "elasticity = (ln y(x·e^h) − ln y(x·e^−h)) / 2h, central difference on ln x; "
            "marginal = elasticity · y / x, in the figure's unit per the constant's unit",
        }


def _log_ratio(hi, lo) -> float | None:
    if hi is None or lo is None or not (hi > 0 and lo > 0):
        return None
    return math.log(hi) - math.log(lo)


def sensitivity(
    target: Target,
    base: Point,
    *,
    step: float = 0.05,
    constants: list[str] | None = None,
    jobs: int | None = None,
    cache: Cache | None = None,
    progress=None,
) -> Sensitivity:
    """Elasticities of ``base``'s figures to each spec constant (module docstring).

    Raises:
        KnobError: a step outside (0, 1], an unknown constant, or a base point the emulator cannot
            run (its error).
    """
    from perfonto.emulator.hardware import SPEC_FIELDS
    from perfonto.emulator.presets import PresetError, resolve

    if not (0 < step <= 1.0):
        raise KnobError(f"--step must be in (0, 1] (a step on ln x; 0.05 is ±5 %), got {step}")
    gen = base_generation(target)
    names = constants or [n for n in emulated_spec(gen) if not n.startswith(UNTIMED)]
    for n in names:
        if n not in emulated_spec(gen):
            from perfonto.ontology.diagnostics import did_you_mean

            raise KnobError(
                f"no spec constant `{n}` the emulator reads; "
                + (did_you_mean(n, emulated_spec(gen)) or "constants: " + ", ".join(emulated_spec(gen)))
            )
    try:
        preset = resolve(gen, workload(base).get("preset"))
    except PresetError as exc:
        raise KnobError(str(exc)) from None
    fixed = [n for n in names if SPEC_FIELDS.get(n) in preset.hardware]
    names = [n for n in names if n not in fixed]
    value = {n: dict(base.spec).get(n, gen.spec[n].value) for n in names}
    points = [base]
    for n in names:
        points += [
            base.with_values(**{n: value[n] * math.exp(-step)}),
            base.with_values(**{n: value[n] * math.exp(step)}),
        ]
    rows = run_points(target, points, jobs=jobs, cache=cache, progress=progress)
    b = rows[0]
    if b.get("error"):
        raise KnobError(f"the operating point does not run: {b['error']}")
    ranked = []
    for i, n in enumerate(names):
        lo, hi = rows[1 + 2 * i], rows[2 + 2 * i]
        el, marg = {}, {}
        for fig in FIGURES:
            d = _log_ratio(hi.get(fig), lo.get(fig))
            el[fig] = None if d is None else d / (2 * step)
            marg[fig] = None if el[fig] is None or b.get(fig) is None else el[fig] * b[fig] / value[n]
        ranked.append(
            {
                "constant": n,
                "value": value[n],
                "unit": gen.spec[n].unit_text,
                "elasticity": el,
                "marginal": marg,
                "bottleneck_down": lo.get("bottleneck"),
                "bottleneck_up": hi.get("bottleneck"),
                "error": lo.get("error") or hi.get("error"),
            }
        )
    ranked.sort(key=lambda r: -(r["elasticity"][RANK_BY] or 0.0))
    return Sensitivity(b, step, ranked, fixed)


__all__ = ["FIGURES", "RANK_BY", "Sensitivity", "sensitivity"]
