"""Lint rules for a resolved generation: things that load but that a reviewer would flag.

Errors the loader already enforces (snake_case names, a unit and a description on every signal,
units that parse, provenance on every spec constant, no duplicate keys) are not repeated here.
"""

from __future__ import annotations

from .diagnostics import Diagnostic
from .generation import Generation
from . import kinds
from .units import is_rate


def misspelt_overrides(gen: Generation) -> list[tuple[str, str]]:
    """(new constant, inherited constant) pairs of a generation that extends another: a spec constant its
    own file declares that no parent does, close to one it inherits unchanged (``hbm.peak_bandwith`` beside
    the inherited ``hbm.peak_bandwidth``) — a misspelt override, which leaves the parent's value in force
    (a new user's HBM what-if projected sohu's own figure, rc 0). Names that differ only in digits
    (``mxu.peak_flops_fp4`` beside ``fp8``) are variants, not typos."""
    import difflib
    import re

    if len(gen.lineage) < 2:
        return []
    own = {n for n, c in gen.spec.items() if c.span.file and _same(c.span.file, gen.source_file)}
    inherited = [n for n in gen.spec if n not in own]
    out = []
    for name in sorted(own):
        close = difflib.get_close_matches(name, inherited, n=1, cutoff=0.85)
        if close and re.sub(r"\d", "", close[0]) != re.sub(r"\d", "", name):
            out.append((name, close[0]))
    return out


def _same(a: str, b) -> bool:
    from pathlib import Path

    try:
        return Path(a).resolve() == Path(str(b)).resolve()
    except OSError:
        return str(a) == str(b)


def lint_generation(gen: Generation) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    reg = gen.registry
    for new, old in misspelt_overrides(gen):
        out.append(
            Diagnostic(
                "warning",
                "lint-spec-near-miss",
                f"spec constant `{new}` is new in `{gen.name}` and close to `{old}`, which it inherits unchanged "
                f"({gen.spec[old].value} {gen.spec[old].unit_text}): a misspelt override leaves the parent's value",
                gen.spec[new].span,
                hint=f"did you mean `{old.removeprefix('spec.')}`?",
            )
        )
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
