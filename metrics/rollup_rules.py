"""Two checks of a division (``metrics.infer``) for figures that compile in the right units and are still
off: a mean over a block's instances against a chip-wide total over them, and a level over the window's
duration.

- **Roll-ups** (``roll_warning``, a warning): ``a / b`` where one side is a mean over an instance axis
  (``avg``, ``min``, ``max``) and the other a chip-wide total over it (``sum``, or a chip-scope constant of
  that block), one of them a spec constant and the other a measurement, reads off by the number of
  instances when a fraction is meant: an architect's ``avg(noc.tx_bytes) / (sum(spec.noc.link_peak) *
  interval)`` read 3.05 % for 16 links busy 48.8 %. A warning, not an error: "how many cores' worth"
  (``sum(mxu.flops) / (avg(spec.mxu.peak) * interval)``) is meant as it is written. A division of like
  roll-ups on both sides (``max(x) / avg(spec…)``) is a ratio over that axis: it carries the axis no
  further, so the hot link over the chip's mean compiles without a word.
- **Levels** (``level_rate_error``, an error): a gauge (its window value is the mean over the window) or a
  packed field (its value at the window's end) — read directly or through metrics that read only levels
  — divided by the window's duration itself (``interval``, times a constant), or multiplied by
  ``1 / interval``, is no rate: ``sum(noc.link_status.retries) / interval`` read 80,000 event/s in every
  window and 210.5 event/s over the run. A level times ``interval`` (energy from power) and a level over a
  rate (``queue_depth / (requests / interval)``, Little's law) are right and compile.
"""

from __future__ import annotations

from perfonto.ontology import kinds
from perfonto.ontology.diagnostics import Diagnostic, Span

from . import ir

#: the way out of a roll-up mismatch, in the roll-up warning and the per-instance-constant scope error
ROLL_HINT = (
    "roll both sides up alike: `sum(x) / sum(spec.…)` for the chip, `avg(x) / avg(spec.…)` for the mean "
    "instance; if the constant is one instance's own figure rather than the chip's total, declare its scope: "
    "`instance` for an amount that adds up across chips (a link's bandwidth), `system` for one that does not "
    "(a clock, a per-core limit)"
)


def roll_set(rolls: frozenset, total: frozenset, gen) -> set:
    """A typed value's roll-ups, ``(axis, instances, "sum" | "mean", from a spec constant?)``, with each
    chip-scope constant's total (``total``: its block's axes) counted as a sum over its axes."""
    sizes = {ax: size for ax, size, _, _ in rolls}
    return set(rolls) | {(ax, sizes.get(ax, axis_size(gen, ax)), "sum", True) for ax in total}


def axis_size(gen, axis: str) -> int:
    """Instances along ``axis`` (``block.axis``) of ``gen``; 0 when the block or axis is unknown."""
    block, _, name = axis.partition(".")
    return dict(gen.blocks.get(block, {}).get("axes", ())).get(name, 0)


def roll_warning(left: set, right: set, span: Span) -> Diagnostic | None:
    """The warning for ``a / b`` whose roll-up sets (``roll_set``) hold a mean over an axis on one side and a
    chip-wide total over it on the other, one from a spec constant and one from a measurement; else None."""
    for ax, size, kind, const in left:
        other = "sum" if kind == "mean" else "mean"
        if (ax, size, other, not const) in right:
            mean_const = const if kind == "mean" else not const
            return Diagnostic(
                "warning",
                "scope-rollup",
                f"a {'spec constant' if mean_const else 'measurement'}'s mean over {ax} meets "
                f"{'a measurement' if mean_const else 'a spec constant'}'s chip-wide total over it: as a "
                f"fraction, the ratio is off by the number of instances ({size}) (meant as written where it counts "
                "instances' worth, or the constant was divided by the count)",
                span,
                hint=ROLL_HINT,
            )
    return None


def after_division(a_rolls: frozenset, a_total: frozenset, b_rolls: frozenset, b_total: frozenset):
    """(roll-ups, chip-wide totals) ``a / b`` carries on: those of both sides, less the axes rolled up alike on
    both (a chip-scope constant's total counting as a sum): the quotient is a ratio over them, and meets a
    total over them as a ratio, not as a mean (``sum(x) / sum(spec…)`` over ``avg(y) / avg(spec…)``)."""

    def kinds_of(rolls, total):
        return {(ax, kind) for ax, _, kind, _ in rolls} | {(ax, "sum") for ax in total}

    axes = {ax for ax, _ in kinds_of(a_rolls, a_total) & kinds_of(b_rolls, b_total)}
    rolls = frozenset(r for r in a_rolls | b_rolls if r[0] not in axes)
    return rolls, frozenset(ax for ax in a_total | b_total if ax not in axes)


def level_rate_error(op: str, a: ir.Node, b: ir.Node, gen, compiled: dict, span: Span) -> Diagnostic | None:
    """The error for ``a / b`` (``op`` "/") with ``b`` the window's duration (``interval``, or it times a
    constant) or ``a * b`` (``op`` "*") with one side ``1 / interval``, where the other side reads only
    levels and holds no ``interval`` (module docstring); else None."""
    if op == "/":
        level, duration = a, b
    elif _inverse_duration(b):
        level, duration = a, b
    elif _inverse_duration(a):
        level, duration = b, a
    else:
        return None
    if op == "/" and not _duration(duration):
        return None
    levels = level_inputs(level, gen, compiled)
    if not levels or holds_interval(level, compiled):
        return None
    name = levels[0]
    what = (
        "packed register's field: its value at the window's end"
        if name in gen.fields
        else "gauge: its mean over the window"
    )
    return Diagnostic(
        "error",
        "level-rate",
        f"`{name}` is a level (a {what}), not an amount accrued in the window: divided by the window's duration "
        "it is no rate, and a window and the run would read it differently",
        span,
        hint="count the events with a counter (kind: counter) to get their rate, or report the level itself",
    )


def level_inputs(node: ir.Node, gen, compiled: dict) -> list[str]:
    """The gauges and packed fields ``node`` reads, directly or through the metrics it names, when it reads
    nothing else (no counter, no signal of another kind), else []."""
    found: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.MetricRef) and n.metric in compiled:
            stack.append(compiled[n.metric].ir)
            continue
        if isinstance(n, ir.Input) and (n.signal in gen.signals or n.signal in gen.fields):
            if n.signal in gen.signals and kinds.of(gen.signals[n.signal]).name != "gauge":
                return []  # a count (or a kind whose window value this rule does not know): not only levels
            found.append(n.signal)
        stack.extend(ir.children(n))
    return found


def holds_interval(node: ir.Node, compiled: dict) -> bool:
    """Whether ``node`` reads ``interval`` anywhere, the metrics it names included."""
    if isinstance(node, ir.Interval):
        return True
    if isinstance(node, ir.MetricRef):
        m = compiled.get(node.metric)
        return m is not None and holds_interval(m.ir, compiled)
    return any(holds_interval(c, compiled) for c in ir.children(node))


def _duration(node: ir.Node) -> bool:
    """``interval``, or ``interval`` times a constant (either order)."""
    if isinstance(node, ir.Interval):
        return True
    if isinstance(node, ir.Op) and node.op == "mul":
        x, y = ir.children(node)
        return (isinstance(x, ir.Interval) and isinstance(y, ir.Const)) or (
            isinstance(y, ir.Interval) and isinstance(x, ir.Const)
        )
    return False


def _inverse_duration(node: ir.Node) -> bool:
    """``c / interval`` (or ``c / (interval * k)``) for a constant ``c``."""
    if isinstance(node, ir.Op) and node.op == "div":
        x, y = ir.children(node)
        return isinstance(x, ir.Const) and _duration(y)
    return False


__all__ = [
    "ROLL_HINT",
    "after_division",
    "axis_size",
    "holds_interval",
    "level_inputs",
    "level_rate_error",
    "roll_set",
    "roll_warning",
]
