"""Emulator bindings as resolved: what the reference emulator counts for a signal, checked as far as
the ontology can check it.

A binding (``model.EmulatorBinding``, ``emulator:`` under a signal) names quantities of the
emulator. The ontology checks its shape — exactly one kind, a kind that fits the signal's kind, a
split that fits the block's instances, finite coefficients; the emulator checks the quantity names
and units it knows (``perfonto.emulator.quantities.check_bindings``), so the ontology never
depends on the emulator. Both report located diagnostics.

Kinds: ``linear`` (Σ coefficient × cumulative amount, counters), ``impulse`` (a step-end count,
counters), ``gauge`` (a level, gauges), ``events`` (Poisson events at ``rate`` per instance per
second, counters), ``constant`` (a raw register value, any kind).
"""

from __future__ import annotations

import math

from .diagnostics import Diagnostic, Span
from . import kinds
from .model import EmulatorBinding
from .resolved import ResolvedBinding
from .yaml_source import YamlSource

KINDS = ("linear", "impulse", "gauge", "event_rate", "constant")
_KIND_NAME = {
    "linear": "linear",
    "impulse": "impulse",
    "gauge": "gauge",
    "event_rate": "events",
    "constant": "constant",
}
_FOR: dict[str, tuple[str, ...] | None] = {
    "linear": ("increase",),
    "impulse": ("increase",),
    "gauge": ("mean",),
    "event_rate": ("increase",),
    "constant": None,
}  # binding -> the window rules (ontology/kinds.py) of the signals it can feed; None: any


def _fits(binding: str, kind: str) -> bool:
    rules = _FOR[binding]
    return rules is None or kinds.of(kind).window in rules


_SPLIT = ("linear", "gauge", "event_rate")


def resolve_binding(
    full: str, kind: str, b: EmulatorBinding, axes: tuple, width, sloc: tuple, src: YamlSource, diags: list[Diagnostic]
) -> ResolvedBinding | None:
    """Resolve the binding ``b`` of signal ``full`` (of ``kind``, register ``width`` bits, on a block
    with instance ``axes``), written at ``sloc + ("emulator",)``; every problem becomes a located
    diagnostic in ``diags`` (then None)."""
    loc = sloc + ("emulator",)
    err = _reporter(full, loc, src, diags)
    given = [k for k in KINDS if getattr(b, k) is not None]
    if len(given) != 1:
        err(
            f"give exactly one of {', '.join(KINDS)} (got {', '.join(given) or 'none'})",
            None,
            "e.g. `emulator: {linear: {hbm_read: 1}, split: jitter}`; `perfonto emulator-quantities` lists the "
            "quantities",
        )
        return None
    k = given[0]
    ok = _check_fits(k, kind, err)
    split, split_ok = _split(k, b.split.value if b.split is not None else None, axes, err)
    ok = split_ok and ok
    if b.leader_only and k not in ("linear", "impulse"):
        err(f"`leader_only` does not apply to `{k}`", "leader_only", "leader_only is for linear and impulse bindings")
        ok = False
    terms: list[tuple[str, float]] = []
    spans: list[Span] = []
    if k == "linear":
        ok = _linear_terms(b, loc, src, err, terms, spans) and ok
    if k == "constant" and isinstance(width, int) and b.constant is not None and b.constant >= (1 << width):
        err(f"constant {b.constant} does not fit in the {width}-bit register", "constant")
        ok = False
    if not ok:
        return None
    name = b.impulse if k == "impulse" else b.gauge if k == "gauge" else ""
    return ResolvedBinding(
        _KIND_NAME[k],
        src.span(loc),
        tuple(terms),
        tuple(spans),
        name or "",
        src.span(loc + (k,)) if name else None,
        split or "one",
        bool(b.leader_only),
        float(b.event_rate or 0.0),
        int(b.constant or 0),
    )


def _reporter(full: str, loc: tuple, src: YamlSource, diags: list[Diagnostic]):
    """A function err(message, key, hint) that appends one error about the binding, located at a key under it."""

    def err(msg, key=None, hint=""):
        diags.append(
            Diagnostic(
                "error",
                "emulator-binding",
                f"signal `{full}`: emulator binding: {msg}",
                src.span(loc + ((key,) if key else ())),
                hint=hint,
            )
        )

    return err


def _check_fits(k: str, kind: str, err) -> bool:
    """The binding's kind can feed a signal of this kind (False after reporting it cannot)."""
    if _fits(k, kind):
        return True
    rules = _FOR[k]
    assert rules is not None, "a binding for any window (constant) fits every kind"
    want = " or ".join(n for n, row in kinds.KINDS.items() if row.window in rules)
    fits = [x for x in KINDS if _fits(x, kind)]
    err(f"`{k}` is for a {want}, but the signal is a {kind}", k, f"a {kind} takes {', '.join(fits)}")
    return False


def _split(k: str, split: str | None, axes: tuple, err) -> tuple[str | None, bool]:
    """The instance split as resolved (``one`` when a splitting binding gives none) and whether it fits
    the binding and the block's instance axes (each misfit reported)."""
    if k not in _SPLIT:
        if split is not None:
            err(f"`split` does not apply to `{k}`", "split", "remove `split`")
            return split, False
        return split, True
    n_axes = len(axes)
    if split is None:
        if n_axes:
            err(
                f"block instances {', '.join(f'{a}: {n}' for a, n in axes)} need a `split`",
                None,
                "add `split: each` (every instance sees it all), `even`, `jitter`, `links` or `links_each`",
            )
            return "one", False
        return "one", True
    if split == "one" and n_axes:
        err(
            "`split: one` is for blocks without instances",
            "split",
            "use `each` for every instance seeing the whole amount",
        )
    elif split != "one" and not n_axes:
        err(
            f"`split: {split}` needs a block with instances; this one has none",
            "split",
            "remove `split` (or write `one`)",
        )
    elif split in ("links", "links_each") and n_axes != 1:
        err(f"`split: {split}` needs one instance axis (the links)", "split")
    elif k == "event_rate" and split not in ("one", "each", "links_each"):
        err(
            f"random events happen at `event_rate` on every instance; `split: {split}` does not apply",
            "split",
            "use `each` (every instance) or `links_each` (the links the collectives use)",
        )
    else:
        return split, True
    return split, False


def _linear_terms(b: EmulatorBinding, loc: tuple, src: YamlSource, err, terms: list, spans: list) -> bool:
    """A linear binding's (quantity, coefficient) terms and where each is written, appended to `terms`
    and `spans`; False when there are none or a coefficient is not finite and non-zero (reported)."""
    ok = True
    if not b.linear:
        err("`linear` needs at least one quantity", "linear", "e.g. `linear: {mxu_busy: 1}`")
        ok = False
    for q, c in (b.linear or {}).items():
        if not math.isfinite(c) or c == 0:
            err(f"coefficient of `{q}` must be a finite non-zero number (got {c})", "linear")
            ok = False
        terms.append((q, float(c)))
        spans.append(src.span(loc + ("linear", q, "<key>")))
    return ok


__all__ = ["ResolvedBinding", "resolve_binding"]
