"""Checks over every window, added up piece by piece: bound violations and the top-down tree's sums
(``analysis.bottleneck.analyse`` and ``check_tree`` make the same checks over all windows at once of a
whole catalog; the results are the same: counts add up, the first violations are taken in window-then-chip
order, the worst top-down error is kept with its window and chip).

A level of the top-down tree is summed only where all of it is evaluated (``summed_levels``): with
``--metrics`` naming a child without its parent, or one node of a level without its siblings, or a capture
that cannot feed a sibling, the sum cannot be checked and that level is left out (it is not a violation); so
is a level 1 the catalog marks partial (group ``topdown_partial``); the report's notes say so
(``level1_not_summed``)."""

from __future__ import annotations

import numpy as np

from perfonto.metrics.graph import MetricGraph

from .bottleneck import BoundViolation, _as_fraction, tree_children


_SHARE = ("percent", "%", "ratio", "1")


def summed_levels(graph: MetricGraph) -> dict[str | None, list[str]]:
    """The levels of the top-down tree (``tree_children``) whose sum can be checked over ``graph``'s metrics:
    the parent is evaluated (level 1 has none) and so is every top-down share the catalog declares under
    that parent and can compute (``graph`` may be the part of the catalog ``--metrics`` selected:
    ``metrics.catalog.select_metrics`` keeps every declaration)."""
    declared: dict[str | None, set[str]] = {}
    for n, d in graph.declarations.items():
        if "topdown" in d.groups and d.unit in _SHARE and n not in graph.unavailable:
            declared.setdefault(d.parent, set()).add(n)
    return {
        parent: names
        for parent, names in tree_children(graph).items()
        if (parent is None or parent in graph.metrics)
        and declared.get(parent, set()) <= set(names)
        and not (parent is None and any("topdown_partial" in graph.metrics[n].groups for n in names))
    }


def level1_not_summed(graph: MetricGraph) -> str | None:
    """Why the level-1 top-down shares are not checked to add up to 100 % (None where they are): the catalog
    gives only part of level 1 (group ``topdown_partial``, which the importers write: ``interop.perf_topdown``),
    or only part of it is evaluated (``--metrics``, ``summed_levels``)."""
    level1 = tree_children(graph).get(None, [])
    if not level1 or None in summed_levels(graph):
        return None
    if any("topdown_partial" in graph.metrics[n].groups for n in level1):
        why = "the catalog gives only part of level 1 (group topdown_partial)"
    else:
        why = "only part of level 1 is evaluated"
    return f"top-down level 1 ({', '.join(level1)}) not checked to add up to 100 %: {why}"


def _first_true(bad: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(window, chip) indices of the first ``k`` True cells of ``bad`` (W, C), in window-then-chip order:
    ``np.nonzero(bad)`` cut to ``k``, scanning a growing prefix so that a piece where most windows are
    out of bounds is not indexed whole."""
    flat = bad.reshape(-1)
    n = max(64, 8 * k)
    while True:
        idx = np.flatnonzero(flat[:n])
        if len(idx) >= k or n >= flat.size:
            return np.divmod(idx[:k], bad.shape[1])
        n *= 16


class WindowChecks:
    """Bound violations and top-down sums of a dump read in pieces."""

    def __init__(self, graph: MetricGraph, max_listed: int = 20, tol: float = 1e-6):
        self.graph = graph
        self.max_listed = max_listed
        self.tol = tol
        self.counts: dict[str, int] = {}
        self.first: dict[str, list[tuple[int, int, BoundViolation]]] = {}  # metric -> its first violations
        self.tree: dict[str | None, list] = {}  # parent -> [bad windows, worst error, window, chip number]

    def add(
        self, values: dict[str, np.ndarray], first: int, chips: np.ndarray, col0: int, hosts: np.ndarray | None = None
    ) -> None:
        """One piece: ``values`` (W, C, …) of windows ``first`` …, chip columns ``col0`` … of the whole dump
        (``hosts``: each column's host, when the dump names hosts)."""
        for name, m in self.graph.metrics.items():
            if not m.bounds:
                continue
            v = values[name]
            lo, hi = m.bounds
            tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
            with np.errstate(invalid="ignore"):
                bad = (v < lo - tol) | (v > hi + tol)
            if bad.ndim > 2:
                bad = bad.reshape(bad.shape[0], bad.shape[1], -1).any(axis=2)
            count = int(np.count_nonzero(bad))
            if not count:
                continue
            self.counts[name] = self.counts.get(name, 0) + count
            wis, cis = _first_true(bad, self.max_listed)  # window-then-chip order; only the first few are listed
            listed = self.first.setdefault(name, [])
            for wi, ci in zip(wis.tolist(), cis.tolist()):
                val = v[wi, ci]
                listed.append(
                    (
                        first + int(wi),
                        col0 + int(ci),
                        BoundViolation(
                            name,
                            int(chips[ci]),
                            first + int(wi),
                            float(np.nanmax(val) if np.ndim(val) else val),
                            m.bounds,
                            None if hosts is None else str(hosts[ci]),
                        ),
                    )
                )
            if len(listed) > 2 * self.max_listed:  # only the first max_listed (window, then chip) can be shown
                listed.sort(key=lambda r: (r[0], r[1]))
                del listed[self.max_listed :]
        for parent, names in summed_levels(self.graph).items():
            total = sum(_as_fraction(self.graph, n, values[n]) for n in names)
            want = 1.0 if parent is None else _as_fraction(self.graph, parent, values[parent])
            err = np.nan_to_num(np.abs(total - want), nan=0.0)
            bad = err > self.tol
            if not bad.any():
                continue
            w, c = np.unravel_index(np.argmax(err), err.shape)
            rec = self.tree.setdefault(parent, [0, -1.0, 0, 0, 0])
            rec[0] += int(bad.sum())
            key = (float(err[w, c]), -(first + int(w)), -(col0 + int(c)))
            if key > (rec[1], -rec[2], -rec[4]):
                label = f"{hosts[c]}/{int(chips[c])}" if hosts is not None and str(hosts[c]) else str(int(chips[c]))
                rec[1:] = [float(err[w, c]), first + int(w), label, col0 + int(c)]

    def violations(self) -> list[BoundViolation]:
        """The first ``max_listed`` violations, in metric order, then window, then chip."""
        order = {n: i for i, n in enumerate(self.graph.metrics)}
        rows = sorted((r for rs in self.first.values() for r in rs), key=lambda r: (order[r[2].metric], r[0], r[1]))
        return [r[2] for r in rows[: self.max_listed]]

    def tree_messages(self) -> list[str]:
        """``check_tree``'s messages."""
        kids = tree_children(self.graph)
        msgs = []
        for parent, names in kids.items():
            if parent not in self.tree:
                continue
            n, err, w, chip, _ = self.tree[parent]
            what = "level-1 top-down shares" if parent is None else f"children of {parent}"
            msgs.append(
                f"{what} ({', '.join(names)}) do not add up in {n} window(s); "
                f"worst: window {w}, chip {chip}, off by {err:.3g}"
            )
        return msgs
