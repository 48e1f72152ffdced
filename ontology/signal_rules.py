"""The rules a signal must follow because of its kind (``ontology/kinds.py``): which of width,
effective width, sentinels, max rate, packed fields and histogram buckets it may or must carry.

``ontology.generation.resolve`` runs ``check_signal`` on every signal; each broken rule is one located
error, reported in the order the checks below run.
"""

from __future__ import annotations

from typing import Callable

from . import kinds
from .diagnostics import Diagnostic
from .yaml_source import YamlSource

# err(code, message, key under the signal or None, hint)
_Err = Callable[..., None]


def check_signal(full: str, sig, sloc: tuple, src: YamlSource, diags: list[Diagnostic]) -> None:
    """Rules that depend on the kind of signal (each a located error)."""
    err = _reporter(full, sloc, src, diags)
    k = kinds.of(sig.kind)  # what the kind allows: ontology/kinds.py
    _check_width(err, sig, k)
    _check_chip_options(err, sig, k)
    _check_effective_width(err, sig, k)
    _check_sentinels(err, sig)
    if sig.max_rate is not None and "max_rate" not in k.options:
        err("max-rate", "`max_rate` is for counters", "max_rate")
    _check_fields(err, sig, k)
    _check_buckets(err, sig, k)
    # deprecated without a replacement is allowed; metrics using it get a warning
    if sig.renamed_to and sig.stability.value != "deprecated":
        err("stability", "`renamed_to` is only for deprecated signals", "renamed_to", "set `stability: deprecated`")


def _reporter(full: str, sloc: tuple, src: YamlSource, diags: list[Diagnostic]) -> _Err:
    """A function that appends one error about signal `full`, located at a key under the signal."""

    def err(code, msg, key, hint=""):
        diags.append(
            Diagnostic(
                "error",
                code,
                f"signal `{full}`: {msg}",
                src.span(sloc + (key if isinstance(key, tuple) else (key,) if key else ())),
                hint=hint,
            )
        )

    return err


def _check_width(err: _Err, sig, k) -> None:
    """`width` is present when the kind needs one, absent when it forbids one; `unknown` for counters only."""
    if sig.width == "unknown" and "width_unknown" not in k.options:
        err("counter-width", "`width: unknown` is only for counters", "width")
    if k.width == "required" and sig.width is None:
        err(
            "counter-width",
            f"a {k.name} needs a `width`",
            None,
            "give the register width in bits (e.g. width: 32); it decides where the value wraps",
        )
    if k.width == "forbidden" and sig.width is not None:
        err(
            "gauge-width",
            f"a {k.name} has no `width`: it is a level and never wraps",
            "width",
            "remove `width`, or make the signal a counter",
        )


def _check_chip_options(err: _Err, sig, k) -> None:
    """`counted_by: leader` only on counting kinds; `across_chips` only where the kind lets it be declared."""
    if sig.counted_by == "leader" and not k.counts:
        err("counted-by", f"`counted_by: leader` is for counters; a {k.name} is read on every chip", "counted_by")
    if "across_chips" not in k.options and sig.across_chips is not None:
        err(
            "counter-across-chips",
            "`across_chips` is for gauges; counters always sum across chips",
            "across_chips",
            "remove `across_chips`",
        )


def _check_effective_width(err: _Err, sig, k) -> None:
    """`effective_width` only on counters, no wider than the register, and only with a known width."""
    if sig.effective_width is not None:
        if "effective_width" not in k.options:
            err("effective-width", "`effective_width` is for counters", "effective_width")
        elif isinstance(sig.width, int) and sig.effective_width > sig.width:
            err(
                "effective-width",
                f"effective_width {sig.effective_width} exceeds the register width {sig.width}",
                "effective_width",
                "the wrap width cannot exceed the stored width",
            )
    if sig.effective_width is not None and sig.width == "unknown":
        err("effective-width", "`effective_width` needs a known `width`", "effective_width")


def _check_sentinels(err: _Err, sig) -> None:
    """Every sentinel value fits in the stored width (64 bits when the width is not a number)."""
    stored = sig.width if isinstance(sig.width, int) else 64
    for v in sig.sentinel:
        if v < 0 or v >= (1 << stored):
            err("sentinel", f"sentinel {v} does not fit in {stored} bits", "sentinel")


def _check_fields(err: _Err, sig, k) -> None:
    """A packed register has fields whose bit ranges fit and do not overlap; other kinds have none."""
    if "fields" not in k.options:
        if sig.fields:
            err("packed-fields", "`fields` are for packed registers", "fields")
        return
    if not sig.fields:
        err(
            "packed-fields",
            "a packed register needs `fields`",
            None,
            "give each bit range: fields: {state: {bits: [0, 3], description: ...}}",
        )
    used: list[tuple[int, int, str]] = []
    for fname, f in sig.fields.items():
        lo, hi = f.bits
        at = ("fields", fname, "bits")  # the field's own line, not the first field's
        if lo > hi:
            err(
                "packed-fields",
                f"field `{fname}` bits [{lo}, {hi}]: the first bit is above the last",
                at,
                f"write [{hi}, {lo}]",
            )
            continue  # no bit range to compare with the others
        if lo < 0 or (isinstance(sig.width, int) and hi >= sig.width):
            err("packed-fields", f"field `{fname}` bits [{lo}, {hi}] do not fit in {sig.width} bits", at)
        for a, b, other in used:
            if lo <= b and a <= hi:
                both = f"{max(lo, a)}..{min(hi, b)}" if max(lo, a) != min(hi, b) else f"{max(lo, a)}"
                err(
                    "packed-fields",
                    f"fields `{other}` [{a}, {b}] and `{fname}` [{lo}, {hi}] overlap in bit(s) {both}",
                    at,
                )
        used.append((lo, hi, fname))


def _check_buckets(err: _Err, sig, k) -> None:
    """A histogram has ascending buckets; other kinds have none."""
    if "buckets" in k.options:
        if not sig.buckets or any(b >= c for b, c in zip(sig.buckets, sig.buckets[1:])):
            err(
                "histogram-buckets",
                "a histogram needs ascending `buckets`",
                "buckets",
                "e.g. buckets: [64, 256, 1024, 4096]",
            )
    elif sig.buckets:
        err("histogram-buckets", "`buckets` are for histograms", "buckets")
