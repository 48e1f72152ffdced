"""Lint rules for a resolved generation: things that load but that a reviewer would flag.

Errors the loader already enforces (snake_case names, a unit and a description on every signal,
units that parse, provenance on every spec constant, no duplicate keys) are not repeated here.
"""

from __future__ import annotations

from .diagnostics import Diagnostic
from .generation import Generation
from . import kinds
from .units import is_rate


def lint_generation(gen: Generation) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    reg = gen.registry
    for name, c in gen.spec.items():
        if c.provenance in ("measured", "claimed", "estimated") and not c.source.strip():
            out.append(
                Diagnostic(
                    "warning",
                    "lint-source",
                    f"spec constant `{name}` is {c.provenance} but gives no source",
                    c.span,
                    hint="cite the datasheet, paper or measurement (`source:`)",
                )
            )
        if c.provenance == "assumed" and not c.source.strip():
            out.append(
                Diagnostic(
                    "warning",
                    "lint-source",
                    f"spec constant `{name}` is assumed but does not say on what basis",
                    c.span,
                    hint="say why the figure was chosen (`source:`)",
                )
            )
    for name, s in gen.signals.items():
        if kinds.of(s).counts and s.unit_text:
            if is_rate(reg, s.unit):
                out.append(
                    Diagnostic(
                        "warning",
                        "lint-counter-rate",
                        f"counter `{name}` has unit {s.unit_text}, a rate",
                        s.span,
                        hint="counters accumulate amounts (B, FLOP, cycles); a rate is a gauge",
                    )
                )
        if len(s.description.strip()) < 8:
            out.append(
                Diagnostic(
                    "warning",
                    "lint-description",
                    f"signal `{name}` has a very short description",
                    s.span,
                    hint="say what is counted, when it increments, and in which unit",
                )
            )
    return out
