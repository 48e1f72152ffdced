"""Lint rules for a resolved generation: things that load but that a reviewer would flag.

Errors the loader already enforces (snake_case names, a unit and a description on every signal,
units that parse, provenance on every spec constant, no duplicate keys) are not repeated here.
"""

from __future__ import annotations

import math

from .diagnostics import Diagnostic
from .generation import Generation
from . import kinds
from .rates import max_rate, peak_rate
from .units import is_rate


def misspelt_overrides(gen: Generation) -> list[tuple[str, str]]:
    """(new constant, inherited constant) pairs of a generation that extends another: a spec constant its
    own file declares that no parent does, close to one it inherits unchanged (``hbm.peak_bandwith`` beside
    the inherited ``hbm.peak_bandwidth``) — a misspelt override, which leaves the parent's value in force
    (a new user's HBM what-if projected sohu's own figure, rc 0). An override of a constant a parent
    declares is not new; names that differ only in digits (``mxu.peak_flops_fp4`` beside ``fp8``,
    ``hbm2.peak_bandwidth`` beside ``hbm``) are variants, and a constant named after a block of the
    generation (``uec.peak_bandwidth`` for a new ``uec`` block, ``vpu.peak_flops_bf16`` beside ``mxu``'s)
    is that block's own, not a typo."""
    import re

    if len(gen.lineage) < 2:
        return []
    own = {n for n, c in gen.spec.items() if c.span.file and _same(c.span.file, gen.source_file)}
    inherited = sorted(n for n in gen.spec if n not in own)
    out = []
    for name in sorted(own - gen.inherited_spec):
        near = [(_edits(name, old), old) for old in inherited]
        near = [(d, old) for d, old in near if d <= 2 and re.sub(r"\d", "", old) != re.sub(r"\d", "", name)]
        if not near:
            continue
        close = min(near)[1]
        seg, other = name.split(".")[1], close.split(".")[1]
        if name.count(".") >= 2 and seg != other and seg in gen.blocks:
            continue  # named after a block of its own (a new `uec`, or `vpu` beside `mxu`): that block's constant
        out.append((name, close))
    return out


#: The window a wrap check assumes: ``perfonto run``'s default sample period, and about the fastest a
#: host samples counters in software.
SAMPLE_PERIOD_S = 1e-3


def _short_wrap(gen: Generation, s) -> Diagnostic | None:
    """A counter that can rise past its whole register in one 1 ms window at its maximum rate (declared,
    or a cycle counter's clock + 1 %: ``rates.max_rate``): window rule 4b then calls every such window
    ambiguous (``max_rate × interval / scale + 1 ≥`` the register's range) and nulls it — an architect's
    16-bit byte counter at 100 GB/s passed check and gave no value in a run."""
    if s.scale_field is not None or not s.scale > 0 or not kinds.of(s).counts:
        return None
    rate, peak = max_rate(gen, s), None
    if rate is None and (found := peak_rate(gen, s)) is not None:
        rate, peak = found
    if rate is None or rate <= 0:
        return None
    rng = s.modulus or (2**s.wrap_width if s.wrap_width else None)
    if rng is None:
        return None
    per_window = rate * SAMPLE_PERIOD_S / s.scale  # raw counts a 1 ms window can add
    if per_window + 1 < rng:
        return None
    bits = math.ceil(math.log2(per_window + 2))
    at = f"max rate ({rate:g} {s.unit_text}/s)" if peak is None else f"block's peak `{peak}` ({rate:g} {s.unit_text}/s)"
    wraps = f"{_seconds((rng - 1) / (rate / s.scale))}"
    then = (
        f"every window of {SAMPLE_PERIOD_S * 1e3:g} ms or longer is null "
        "(`window longer than the counter's wrap period`)"
        if peak is None
        else "with no `max_rate`, a window in which it wraps more than once reads a wrong, smaller increase"
    )
    return Diagnostic(
        "warning",
        "lint-wrap-period",
        f"counter `{s.name}` can rise by {per_window:.4g} raw counts in a {SAMPLE_PERIOD_S * 1e3:g} ms window at its "
        f"{at}, past its register's {rng:g} values (it wraps every {wraps}): {then}",
        s.span,
        hint=f"give it at least {bits} bits (or a larger `scale`), or "
        + ("correct `max_rate`" if peak is None else "declare its `max_rate` (window rule 4b then nulls such windows)"),
    )


def summed_temperature(gen: Generation, s) -> Diagnostic | None:
    """A gauge in a unit of temperature that declares ``across_chips: sum``: a temperature is intensive,
    so the sum over chips is no temperature at all (two chips at 70 and 80 degC read 150 degC at server
    level); the hottest chip (``max``) or the mean (``avg``) is what a server-level temperature means."""
    if s.kind != "gauge" or s.across_chips != "sum" or not s.unit_text:
        return None
    try:
        dims = dict(gen.registry.Quantity(1, s.unit).dimensionality)
    except Exception:  # a unit pint cannot make a quantity of: nothing to say
        return None
    if dims != {"[temperature]": 1}:
        return None
    return Diagnostic(
        "warning",
        "lint-summed-temperature",
        f"gauge `{s.name}` is a temperature ({s.unit_text}) summed across chips (`across_chips: sum`): "
        "its server-level value is no temperature (two chips at 70 and 80 read 150)",
        s.span,
        hint="write `across_chips: max` (the hottest chip) or `across_chips: avg`",
    )


def c_name(name: str) -> str:
    """A catalog name as the generated C header spells it (``codegen.c_header``): upper case, each dot a
    double underscore (``hbm.read_bytes`` → ``HBM__READ_BYTES``)."""
    return name.replace(".", "__").upper()


def _c_name_clashes(gen: Generation) -> list[Diagnostic]:
    """Signals (and packed fields) whose C header identifiers are the same (``kvc.a__b`` and ``kvc__a.b`` are
    both ``KVC__A__B``): the header cannot be generated. Reported at the later one (a parent's names first,
    then this file's in line order), naming the earlier."""
    out: list[Diagnostic] = []
    for what, table in (("signal", gen.signals), ("packed field", gen.fields)):
        order = {n: i for i, n in enumerate(table)}

        def place(n: str, table=table, order=order) -> tuple[int, int, int]:
            sp = table[n].span
            own = bool(sp.file) and _same(sp.file, gen.source_file)
            return (1, sp.line, sp.col) if own else (0, order[n], 0)

        seen: dict[str, str] = {}
        for name in sorted(table, key=place):
            first = seen.setdefault(c_name(name), name)
            if first != name:
                out.append(
                    Diagnostic(
                        "error",
                        "c-identifier",
                        f"{what} `{name}` and `{first}` ({table[first].span}) map to the same C header identifier "
                        f"`{c_name(name)}` (a dot is written `__`): `perfonto codegen --target c-header` cannot "
                        "tell them apart",
                        table[name].span,
                        hint="rename one of them (avoid `__` in block, signal and field names)",
                    )
                )
    return out


def _seconds(x: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if x >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.3g} s"


def _edits(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from ``a`` to ``b``: a typo is one or two."""
    if abs(len(a) - len(b)) > 2:
        return 3
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def _same(a: str, b) -> bool:
    from pathlib import Path

    try:
        return Path(a).resolve() == Path(str(b)).resolve()
    except OSError:
        return str(a) == str(b)


def lint_generation(gen: Generation) -> list[Diagnostic]:
    """The lint diagnostics of a resolved generation (module docstring), and names that meet in the C header."""
    out: list[Diagnostic] = _c_name_clashes(gen)
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
    out += [d for s in gen.signals.values() if (d := _short_wrap(gen, s)) is not None]
    out += [d for s in gen.signals.values() if (d := summed_temperature(gen, s)) is not None]
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
