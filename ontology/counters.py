"""Resolution of the counter semantics a generation may declare beyond widths (issue 15): instance
slots of a SKU (``Block.slots``), ranges that are not powers of two (``Signal.wrap_range``), unit fields
(``Signal.scale_field``) and the kinds of reset indicators (``Signal.reset_indicator_kind``). Each
helper checks what the written model cannot check alone and reports a located diagnostic with a hint;
``ontology.generation.resolve`` calls them and stores the results on the resolved signals.
"""

from __future__ import annotations

from fractions import Fraction

from .diagnostics import Diagnostic, did_you_mean
from . import kinds
from .model import GenerationFile, ResetIndicatorKind
from .units import UnitError, parse_quantity_exact
from .yaml_source import YamlSource


def _slots(bname: str, block, bloc: tuple, src: YamlSource, diags: list[Diagnostic]):
    """The block's resolved axes (sizes = present slots) and its present slots per axis (None: all)."""
    if not block.slots:
        return tuple(block.instances.items()), None
    present = []
    ok = True
    for axis, idx in block.slots.items():
        if axis not in block.instances:
            diags.append(
                Diagnostic(
                    "error",
                    "slots",
                    f"block `{bname}`: `slots` names axis `{axis}`, which is not an instance axis",
                    src.span(bloc + ("slots", axis)),
                    hint=did_you_mean(axis, block.instances)
                    or f"the axes are {', '.join(block.instances) or 'none'}; declare it under `instances`",
                )
            )
            ok = False
            continue
        size = block.instances[axis]
        bad = [i for i in idx if i < 0 or i >= size]
        if bad or not idx or len(set(idx)) != len(idx):
            what = (
                f"slot {bad[0]} is outside axis `{axis}` (0 … {size - 1})"
                if bad
                else "an empty slot list"
                if not idx
                else "a slot listed twice"
            )
            diags.append(
                Diagnostic(
                    "error",
                    "slots",
                    f"block `{bname}`: {what}",
                    src.span(bloc + ("slots", axis)),
                    hint=f"list the populated slots of `{axis}` once each, ascending, within 0 … {size - 1}",
                )
            )
            ok = False
    if not ok:
        return tuple(block.instances.items()), None
    for axis, size in block.instances.items():
        present.append(tuple(sorted(block.slots.get(axis, range(size)))))
    axes = tuple((a, len(p)) for a, p in zip(block.instances, present))
    if all(len(p) == size for p, size in zip(present, block.instances.values())):
        return axes, None
    return axes, tuple(present)


def _flat_slots(full: tuple, present, buckets: int) -> tuple[tuple[int, ...] | None, int]:
    """Row-major flat indices (over the full axes, then the histogram's buckets) of the present
    instances, and the full instance count; (None, 0) when every slot is present."""
    if present is None:
        return None, 0
    import itertools

    sizes = [n for _, n in full] + [buckets]
    out = []
    for combo in itertools.product(*present, range(buckets)):
        flat = 0
        for i, n in zip(combo, sizes):
            flat = flat * n + i
        out.append(flat)
    total = 1
    for n in sizes:
        total *= n
    return tuple(out), total


def _modulus(sig, u, reg, sloc: tuple, src: YamlSource, diags: list[Diagnostic]) -> int | None:
    """The raw modulus of ``wrap_range`` (range / scale, an integer > 1 within the register width)."""
    if sig.wrap_range is None or u is None:
        return None
    loc = sloc + ("wrap_range",)

    def err(msg, hint):
        diags.append(Diagnostic("error", "wrap-range", f"{msg}", src.span(loc), hint=hint))

    if "wrap_range" not in kinds.of(sig.kind).options:
        err("`wrap_range` is for counters", "remove it, or make the signal a counter")
        return None
    if not isinstance(sig.width, int):
        err("`wrap_range` needs a known register `width`", "give the stored width in bits (e.g. width: 64)")
        return None
    if sig.effective_width is not None:
        err("`wrap_range` and `effective_width` both say where the counter wraps", "keep one")
        return None
    try:
        q = parse_quantity_exact(reg, sig.wrap_range, u)  # exact: a range past 2^53 keeps its last digits
    except UnitError as exc:
        err(
            f"wrap_range `{sig.wrap_range}` is not a quantity in {sig.unit} ({exc})",
            f"write e.g. `wrap_range: 262143.328850 {sig.unit}`",
        )
        return None
    raw = q / Fraction(repr(float(sig.scale)))  # the scale as the decimal it is written as
    m = round(raw) if abs(raw) < 2**70 else None
    if m is None or abs(raw - m) > Fraction(1, 10**12) * abs(raw) + Fraction(1, 10**9):
        err(
            f"wrap_range `{sig.wrap_range}` is {float(raw)!r} raw units (range / scale {sig.scale:g}), not a whole "
            "number",
            "the range is a whole number of raw counts: give it exactly, or check `scale`",
        )
        return None
    if m <= 1:
        err(
            f"wrap_range `{sig.wrap_range}` is {m} raw unit(s); a counter's range is at least 2 raw counts",
            "give the range at which the register wraps back to 0 (powercap: max_energy_range_uj)",
        )
        return None
    if m > (1 << sig.width):
        err(
            f"wrap_range `{sig.wrap_range}` is {m} raw counts, more than a {sig.width}-bit register holds "
            f"(2^{sig.width})",
            "the range cannot exceed the register; check `width`, `scale` and the range",
        )
        return None
    return int(m)


def _check_scale_field(full: str, s_, fields: dict, loc: tuple, src: YamlSource, diags: list[Diagnostic]) -> None:
    fname, base = s_.scale_field
    span = src.span(loc)
    if "scale_field" not in kinds.of(s_.kind).options:
        diags.append(
            Diagnostic(
                "error", "scale-field", f"signal `{full}`: `scale_field` is for counters", span, hint="remove it"
            )
        )
        return
    f = fields.get(fname)
    if f is None:
        diags.append(
            Diagnostic(
                "error",
                "scale-field",
                f"signal `{full}`: scale field `{fname}` is not a field of a packed register",
                span,
                hint=did_you_mean(fname, fields) or "name `<block>.<packed register>.<field>`",
            )
        )
        return
    if not f.unit.dimensionless:
        diags.append(
            Diagnostic(
                "error",
                "scale-field",
                f"signal `{full}`: scale field `{fname}` has unit {f.unit_text}; an exponent is a plain number",
                span,
                hint="declare the field with `unit: '1'`",
            )
        )
    if f.axes and f.axes != tuple(a for a in s_.axes if a[0] != "bucket"):
        diags.append(
            Diagnostic(
                "error",
                "scale-field",
                f"signal `{full}`: scale field `{fname}` has instance axes "
                f"{dict(f.axes)}, the counter {dict(s_.axes) or 'none'}",
                span,
                hint="use a field of a register with no instances (one unit per chip) or with the counter's axes",
            )
        )
    if base == 1.0:
        diags.append(
            Diagnostic(
                "error",
                "scale-field",
                f"signal `{full}`: scale field base 1 makes the field meaningless",
                span,
                hint="RAPL energy units are 2^-field: `base: 0.5`",
            )
        )


def _check_indicator_kinds(gf: GenerationFile, signals: dict, src: YamlSource, diags: list[Diagnostic]) -> None:
    """``reset_indicator_kind`` needs a ``reset_indicator``, and one indicator has one kind."""
    seen: dict[str, tuple[str, str]] = {}
    for bname, block in gf.blocks.items():
        for sname, sig in block.signals.items():
            loc = ("blocks", bname, "signals", sname, "reset_indicator_kind")
            if sig.reset_indicator_kind is not None and sig.reset_indicator is None:
                diags.append(
                    Diagnostic(
                        "error",
                        "reset-indicator",
                        f"signal `{bname}.{sname}`: `reset_indicator_kind` without a `reset_indicator`",
                        src.span(loc),
                        hint="name the indicator signal with `reset_indicator: <block>.<signal>`",
                    )
                )
                continue
            if sig.reset_indicator is None:
                continue
            kind = (sig.reset_indicator_kind or ResetIndicatorKind.boot_counter).value
            rule = "decrease" if kind == "uptime" else "change"
            prev = seen.setdefault(sig.reset_indicator, (rule, f"{bname}.{sname}"))
            if prev[0] != rule:
                diags.append(
                    Diagnostic(
                        "error",
                        "reset-indicator",
                        f"signal `{bname}.{sname}` reads `{sig.reset_indicator}` as a {kind}, "
                        f"`{prev[1]}` reads it the other way",
                        src.span(loc),
                        hint="an indicator is one thing: give every counter that names it the same "
                        "`reset_indicator_kind`",
                    )
                )
