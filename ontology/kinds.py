"""Signal kinds as one table: what every layer needs to know of a kind of register, in one row.

A row says how a kind is read and combined; every layer takes it from here instead of branching on
the kind's name:

- ``window``: the window rule (numbered in ``metrics/windows.py``), by id — ``increase`` (a counter:
  the modular increase over the window, its wraps, resets, declared ranges and unit fields),
  ``bucket_increase`` (a histogram: each bucket's increase, a decrease in any bucket a reset),
  ``mean`` (a gauge: the time-weighted mean of the two end samples), ``end`` (a packed register: its
  value at the window's end sample; its fields are read the same way). The reference rules
  (``metrics.windows``) and each backend (the generated NumPy and numba evaluator, the SQL dialects)
  keep one handler per rule id; a backend without a handler for a kind's rule refuses the kind by
  name (``UnsupportedKind``), never evaluates it some other way.
- ``run``: how window values combine over a run — ``sum`` (amounts) or ``time_weighted`` (levels).
- ``across``: how per-chip values combine at server level — ``sum``, ``max``, or ``declared`` (the
  signal's ``across_chips``: a gauge's sum, mean or max; the mean for a kind that cannot declare one).
- ``counts``: the register counts events: it has a bit width that wraps, reset indicators and
  ``counted_by: leader`` apply, it adds up across chips (chip degree 1), and it is exported as a
  counter (``metrics.telemetry``: time degree 1).
- ``options``: the YAML keys that only this kind takes (``effective_width``, ``max_rate``, ``fields``,
  ``buckets``, …), and ``width``: whether a register width is required, forbidden or optional.
- ``meaning``: what the signal's name means inside a metric (``perfonto explain``, the docs).
- ``c_id``: its number in the generated C header.

Adding a kind is adding a row (``register``) and its reference rule (``metrics.windows.RULES``); the
backends that have a handler for its ``window`` rule evaluate it, the others refuse it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from .errors import PerfontoError


@dataclass(frozen=True)
class Kind:
    """One kind of signal (module docstring)."""

    name: str
    window: str
    run: str
    across: str
    counts: bool
    width: str  # "required", "forbidden" or "optional"
    options: frozenset[str]
    meaning: str
    c_id: int
    description: str = ""


class UnsupportedKind(PerfontoError, ValueError):
    """A backend asked to evaluate a kind whose window rule it has no handler for."""

    def __init__(self, backend: str, kind: str, rule: str):
        super().__init__(
            f"{backend} cannot evaluate signals of kind `{kind}` (window rule `{rule}`): it has no handler "
            f"for that rule; evaluate them with a backend that has one, or leave the metrics that read them out"
        )
        self.backend, self.kind, self.rule = backend, kind, rule


_COUNTER_OPTIONS = frozenset({"effective_width", "max_rate", "wrap_range", "scale_field", "width_unknown"})

KINDS: dict[str, Kind] = {
    "counter": Kind(
        "counter",
        "increase",
        "sum",
        "sum",
        True,
        "required",
        _COUNTER_OPTIONS,
        "its increase over the window",
        0,
        "a monotonic register of `width` bits that wraps modulo 2^width (or 2^effective_width); inside a "
        "metric its name means its increase over the window",
    ),
    "gauge": Kind(
        "gauge",
        "mean",
        "time_weighted",
        "declared",
        False,
        "forbidden",
        frozenset({"across_chips"}),
        "its time-weighted mean over the window",
        1,
        "an instantaneous level; inside a metric its name means its time-weighted mean",
    ),
    "packed": Kind(
        "packed",
        "end",
        "time_weighted",
        "declared",
        False,
        "required",
        frozenset({"fields"}),
        "read through its fields",
        2,
        "one register holding several bit ranges (`fields`), each with its own meaning; never differenced. "
        "A field `f` of signal `blk.s` is referenced as `blk.s.f` and means its value at the window's end sample",
    ),
    "histogram": Kind(
        "histogram",
        "bucket_increase",
        "sum",
        "sum",
        True,
        "required",
        frozenset({"buckets"}),
        "each bucket's increase over the window",
        3,
        "a vector of counters, one per bucket (`buckets` gives the upper edges; one more bucket holds the "
        "overflow); each bucket is read like a counter, and a decrease in any bucket marks a reset",
    ),
}

#: A packed register's field, as the layers read it: its bits at the window's end sample, time-weighted
#: over a run, the maximum across chips.
FIELD = Kind(
    "field", "end", "time_weighted", "max", False, "optional", frozenset(), "its value at the window's end sample", -1
)


def of(kind) -> Kind:
    """The row of ``kind`` (a kind's name, or anything with a ``kind`` attribute: a signal).

    Raises:
        KeyError: a kind no row describes.
    """
    name = getattr(kind, "kind", kind)
    name = getattr(name, "value", name)
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"no signal kind `{name}`; the kinds are {', '.join(KINDS)}") from None


def row_of(gen, name: str) -> Kind:
    """The row of a generation's signal or packed field ``name`` (a field's is ``FIELD``)."""
    return FIELD if name in gen.fields else of(gen.signals[name])


def across_rule(gen, name: str) -> str:
    """How ``name``'s per-chip values combine across chips: ``sum``, ``max`` or ``avg`` — its row's rule,
    or the signal's resolved ``across_chips`` where the row defers to it."""
    row = row_of(gen, name)
    return row.across if row.across != "declared" else gen.signals[name].across_chips


def leader_counted(gen, name: str) -> bool:
    """Whether ``name`` is an amount only a group's leader chip counts (``counted_by: leader``: steps,
    tokens, requests) and that adds up over a run (its row's ``run`` is ``sum``: a counter, or a
    histogram's buckets): the rollups read it as its leaders' rates (``analysis.level_sums.combine``, the
    rollup SQL), and the leader chips are those where it advanced (``metrics.levels.leaders``)."""
    sig = gen.signals.get(name)
    return sig is not None and sig.counted_by == "leader" and of(sig).run == "sum"


def chip_degree(signal) -> int:
    """How a signal scales with the number of chips at server level, the compiler's rule for a name
    read in a metric (``metrics.infer``): 1 when its values add up across chips (its ``across_chips``
    is ``sum``: every counting kind, and gauges declared so), else 0."""
    return 1 if signal.across_chips == "sum" else 0


def register(kind: Kind) -> None:
    """Add (or replace) a kind's row; its reference rule goes to ``metrics.windows.RULES``."""
    KINDS[kind.name] = kind


def unregister(name: str) -> None:
    """Remove a kind added with ``register`` (the shipped kinds stay)."""
    if name not in ("counter", "gauge", "packed", "histogram"):
        KINDS.pop(name, None)


__all__ = [
    "FIELD",
    "KINDS",
    "Kind",
    "UnsupportedKind",
    "across_rule",
    "chip_degree",
    "leader_counted",
    "of",
    "register",
    "row_of",
    "unregister",
]
