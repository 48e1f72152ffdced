"""Racks and pods that stand out: a node whose chips, as a group, sit apart from the rest of the fleet's.

The chip rule (``analysis.fleet._spread``) compares each chip with the fleet's median, so it cannot name
a rack that holds half of the fleet's chips: the median then sits between the two halves, and no chip
is far from it (a hot rack of 16 chips out of 32 reads +0 outliers). Here each node of a level (rack,
pod) with two nodes or more is compared with the level's typical node:

    d = m(node) − reference,  m(node) = the median of the node's chip values,
    reference = the median of every node's m (with two nodes: the other node's m)
    σ = pooled MAD / 0.6745,  pooled MAD = the median over all chips of |value − m(its node)|

The node stands out when |d| / σ > ``Z_OUTLIER`` (3.5, the chip rule's cut-off) and |d| is at least
``MIN_RELATIVE`` (1 %) of the reference; where the pooled MAD is 0 (each node's chips agree among
themselves) a difference of 1 % or more decides alone, and where the reference is 0 the score alone.
Medians throughout, so one odd host does not move its rack (nor one odd rack the reference), while a
shift most of a rack's chips share (a warmer aisle, a slower firmware, an older switch) does. σ is the
spread within nodes, not across them: a spread across nodes is what is being looked for. A level of
two nodes gives one finding, the higher node against the lower (each is the other's reference); one
where half of the nodes sit high and half low names both halves. Only nodes of two chips or more
give the spread (a one-chip node's chip is its own median), and a level with none is not judged.
"""

from __future__ import annotations

import numpy as np

from .fleet import MIN_RELATIVE, Z_OUTLIER, Z_SCALE


def nodes_standing_out(idx: np.ndarray, names: list[str], v: np.ndarray) -> list[dict]:
    """The nodes of one level that stand out on one metric (module docstring), farthest first.

    idx: each chip's node, an index into ``names`` (``np.unique(labels, return_inverse=True)``), (chips,);
    names: the nodes' labels; v: each chip's value of the metric, (chips,) float (NaN: not computable on
    that chip, left out). Returns [{node, chips (with a value), median (its chips'), reference (the
    typical node's median, or the other node's), relative ((median − reference) / |reference|, null where
    that is 0), deviation ((median − reference) / σ, signed as the chip outliers' is; null where σ is
    0)}]; empty when fewer than two nodes have values, or no node has two chips with values (the level
    is then the chip level, and the chip rule speaks for it). O(chips log chips)."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.isfinite(v)
    g, x = np.asarray(idx)[ok], v[ok]
    order = np.lexsort((x, g))
    g, x = g[order], x[order]
    present, starts, counts = np.unique(g, return_index=True, return_counts=True)
    if len(present) < 2 or counts.max() < 2:
        return []
    own = np.array([np.median(x[a : a + c]) for a, c in zip(starts, counts)])
    several = np.repeat(counts >= 2, counts)  # a one-chip node's chip is its own median: no spread to tell
    pooled = float(np.median(np.abs(x - np.repeat(own, counts))[several]))
    sigma = pooled / Z_SCALE
    typical = float(np.median(own))
    out = []
    for k, node in enumerate(present):
        ref = float(own[1 - k]) if len(present) == 2 else typical
        d = float(own[k]) - ref
        if d == 0 or (len(present) == 2 and d < 0):  # two nodes: one finding, the higher against the lower
            continue
        rel = d / abs(ref) if ref != 0 else None
        score = d / sigma if sigma > 0 else None
        if (rel is not None and abs(rel) < MIN_RELATIVE) or (score is not None and abs(score) <= Z_OUTLIER):
            continue
        if rel is None and score is None:  # neither a spread nor a reference to measure d against
            continue
        out.append(
            {
                "node": names[node],
                "chips": int(counts[k]),
                "median": float(own[k]),
                "reference": ref,
                "relative": rel,
                "deviation": score,
            }
        )
    return sorted(out, key=lambda o: -abs(o["median"] - o["reference"]))


__all__ = ["nodes_standing_out"]
