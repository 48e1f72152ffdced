"""Why a metric is unavailable on a generation (not an error), for ``metrics.passes.resolve_names``.

A metric that reads a signal this generation cannot provide — one removed along its ``extends`` chain
(also under the old name of a signal renamed and later removed), one listed but broken here, one that
only other generations have — is left out with the reason. The shipped library's metrics are
written for every generation, so that is silent there; a metric of the user's own files (the catalog
folder's) reading a removed signal gets a ``removed-signal`` warning at the name, since it was
written for this generation.
"""

from __future__ import annotations

import functools
import os

from perfonto.ontology.diagnostics import Diagnostic, Span
from perfonto.ontology.generation import Generation


@functools.lru_cache(maxsize=1)
def _library_dir() -> str:
    from importlib import resources

    return os.path.realpath(str(resources.files("perfonto.metrics").joinpath("library")))


def shipped_library(file: str) -> bool:
    """Whether ``file`` is a metric file of the shipped library (``metrics/library``): its metrics read a
    deprecated signal knowingly (``hbm.refresh_overhead`` is a sohu metric; caelius removes the signal and
    the metric is unavailable there), so only a user's metric reading one is warned of."""
    return bool(file) and os.path.dirname(os.path.realpath(file)) == _library_dir()


def unavailable_reason(gen: Generation, name: str, elsewhere: dict[str, list[str]]) -> str | None:
    """Why a signal name that this generation cannot provide makes a metric unavailable (not an error):
    removed in this generation's lineage, listed but broken here, or defined only on other generations.
    An old name whose signal was renamed and then removed gives the removal, under the current name."""
    if name in gen.removed:
        return f"signal `{name}` was removed in generation `{gen.removed[name]}`"
    new = gen.aliases.get(name)
    if new is not None and new in gen.removed:
        return f"signal `{new}` (`{name}` before a rename) was removed in generation `{gen.removed[new]}`"
    sig = gen.signals.get(name)
    if sig is not None and sig.broken:
        return f"signal `{name}` is listed on `{gen.name}` but known not to count (broken_on)"
    if sig is None and name not in gen.fields and name in elsewhere:
        return f"signal `{name}` does not exist on `{gen.name}` (it exists on: {', '.join(elsewhere[name])})"
    return None


def removed_read(gen: Generation, name: str, metric: str, span: Span) -> Diagnostic | None:
    """The ``removed-signal`` warning for metric ``metric`` of a user's file reading ``name`` (at ``span``),
    a signal that a generation of ``gen``'s chain removed; None for any other name (and for signals
    left out by a coverage study, ``ontology.derive.without_signals``, which no generation removed)."""
    gone = gen.aliases.get(name, name) if name not in gen.removed else name
    by = gen.removed.get(gone)
    if by is None or by not in gen.lineage:
        return None
    which = f"`{gen.name}` removes" if by == gen.name else f"`{by}` removed (`{gen.name}` extends it)"
    old = f" (by its old name `{name}`)" if gone != name else ""
    return Diagnostic(
        "warning",
        "removed-signal",
        f"metric `{metric}` reads `{gone}`{old}, which {which}: the metric is unavailable on `{gen.name}`",
        span,
        hint=f"read a signal `{gen.name}` has, drop the metric, or write `default({name}, …)` for the value to "
        "use where the signal is absent",
    )


def names_in(others, gen: Generation) -> dict[str, list[str]]:
    """Signal and field names of the generations ``others`` other than ``gen`` (name -> generations)."""
    out: dict[str, list[str]] = {}
    for other in others:
        if other.name == gen.name:
            continue
        for n in list(other.signals) + list(other.fields):
            out.setdefault(n, []).append(other.name)
    return out
