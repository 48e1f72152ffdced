"""Top-down (TMA) level 1 of an imported tree, marked in the imported metric file itself.

TMA's level 1 splits the issue slots into four categories (Yasin, ISPASS 2014): frontend bound, bad
speculation, backend bound — the stalls — and retiring, the slots that did useful work. Two marks, written
as groups of the level-1 metrics so that they are visible in the ``.metrics`` file rather than a special
case of the analysis:

- ``useful`` on the retiring node: useful work, not a stall. ``perfonto analyze`` chooses the dominant
  bottleneck among the stall categories, not the group-``useful`` ones (a run retiring 60 % of its slots
  is bound by its largest stall, not by retiring).
- ``topdown_partial`` on every level-1 node when the source gives only some of the four categories (an
  arch that defines two, or a category whose formula was rejected): the level-1 shares cannot add up to
  100 %, so their sum is not checked; the import report names the missing categories.

A category is recognised by its name, as perf and Intel spell it (``tma_retiring``, ``retiring``,
``Retiring``); a level-1 node of another name is left as it is, and a source with no recognised category
gets no mark.
"""

from __future__ import annotations

import re

from .catalog import Finding, SourceCatalog, SourceMetric

CATEGORIES = ("frontend_bound", "bad_speculation", "retiring", "backend_bound")  # TMA level 1, in TMA's order
USEFUL = "useful"  # group of a level-1 node that is useful work (TMA's Retiring), not a stall
PARTIAL = "topdown_partial"  # group of the level-1 nodes of a source that gives only part of level 1
_SHARE = ("%", "percent")


def category(name: str) -> str | None:
    """The TMA level-1 category a metric's name spells (``tma_Retiring`` → ``retiring``), or None."""
    low = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    low = low[4:] if low.startswith("tma_") else low
    return low if low in CATEGORIES else None


def _level1(cat: SourceCatalog) -> list[SourceMetric]:
    """The metrics the analysis reads as top-down level 1: group ``topdown``, a share, no parent."""
    return [m for m in cat.metrics.values() if "topdown" in m.groups and m.parent is None and m.unit_text in _SHARE]


def mark_level1(cat: SourceCatalog) -> None:
    """Add the ``useful`` and ``topdown_partial`` groups to ``cat``'s top-down level 1 (module docstring),
    with an import-report finding naming the categories a partial level 1 lacks."""
    level1 = _level1(cat)
    present = {category(m.key): m for m in level1 if m.expr is not None and category(m.key)}
    if not present:
        return
    for cat_name, m in present.items():
        if cat_name == "retiring" and USEFUL not in m.groups:
            m.groups.append(USEFUL)
    missing = [c for c in CATEGORIES if c not in present]
    if not missing:
        return
    kept = [m for m in level1 if m.expr is not None]
    for m in kept:
        if PARTIAL not in m.groups:
            m.groups.append(PARTIAL)
    rejected = {category(m.key): m.key for m in level1 if m.expr is None and category(m.key)}
    why = ", ".join(f"{c} (`{rejected[c]}` not imported)" if c in rejected else c for c in missing)
    cat.findings.append(
        Finding(
            "topdown-partial",
            "",
            f"top-down level 1 is partial: {', '.join(f'`{m.key}`' for m in kept)} without {why}; they get group "
            f"`{PARTIAL}`, and `perfonto analyze` does not check that level 1 adds up to 100 %",
            "info",
        )
    )
