"""Packing counter needs into passes: the combinatorial core of ``metrics.plan_groups`` (issue 29).

A *need* is what one metric reads through programmable counter slots: ``{block: frozenset(full
signal names)}``. A *pass* is a need too: the counters read at once, one group per block. A need fits
a pass when, in every block, the union holds at most the block's programmable slots and no two
counters of one ``apart`` set. Counters of different blocks count at the same time (each block has its
own monitoring unit), so a metric whose counters all sit in one pass is measured consistently.

The rule (stated, and tested against brute force on small inputs):

0. (``plan_groups``) the metrics that share a declared ``parent`` (a top-down node's children) are also
   given as one need when they fit one pass, and kept so when that costs no pass over packing without
   them: siblings read together add up to their parent in every window;
1. needs contained in another need are dropped (the larger need's pass reads them);
2. **greedy with affinity**: the remaining needs in decreasing size (ties by name) each go to the pass
   where they fit adding the fewest new counters (sharing the most with what is already there: a
   ratio's numerator and denominator, or two ratios over one denominator, stay together), the earliest
   such pass on ties; a new pass when none fits;
3. the greedy pass count is compared with a lower bound (per block, ⌈counters / slots⌉, and the size
   of the largest set of needed counters that must be pairwise apart); when it is above it and there
   are at most ``EXACT_LIMIT`` needs, an exhaustive search (branch and bound over the assignments of
   needs to passes) gives the fewest passes. The plan says whether its count is proven optimal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Need = dict[str, frozenset[str]]
EXACT_LIMIT = 10  # needs up to which the exhaustive search runs (Bell(10) = 115,975 partitions at worst)


@dataclass(frozen=True)
class Rules:
    """What a pass may hold: ``slots`` programmable slots per block, and per block the sets of counters no
    two of which may share a group (``apart``)."""

    slots: dict[str, int]
    apart: dict[str, tuple[frozenset[str], ...]] = field(default_factory=dict)

    def fits(self, need: Need) -> bool:
        """Whether ``need`` can be read in one pass."""
        for b, cs in need.items():
            if len(cs) > self.slots.get(b, 0):
                return False
            if any(len(cs & a) > 1 for a in self.apart.get(b, ())):
                return False
        return True


def size(need: Need) -> int:
    """Programmable counters a need reads, over all its blocks."""
    return sum(len(cs) for cs in need.values())


def union(a: Need, b: Need) -> Need:
    """The counters of both needs, per block."""
    out = dict(a)
    for blk, cs in b.items():
        out[blk] = out.get(blk, frozenset()) | cs
    return out


def covers(big: Need, small: Need) -> bool:
    """Whether every counter of ``small`` is in ``big`` (in the same block)."""
    return all(cs <= big.get(b, frozenset()) for b, cs in small.items())


def _key(need: Need) -> tuple:
    return (-size(need), sorted((b, sorted(cs)) for b, cs in need.items()))


def undominated(needs: list[Need]) -> list[Need]:
    """The non-empty needs not contained in another (duplicates once), largest first (rule 1)."""
    out: list[Need] = []
    for n in sorted((n for n in needs if size(n)), key=_key):
        if not any(covers(o, n) for o in out):
            out.append(n)
    return out


def lower_bound(needs: list[Need], rules: Rules) -> int:
    """No plan has fewer passes: per block ⌈distinct counters / slots⌉, and the most needed counters of one
    ``apart`` set (each needs a pass of its own); 0 when nothing needs a slot."""
    total: Need = {}
    for n in needs:
        total = union(total, n)
    lb = 1 if size(total) else 0
    for b, cs in total.items():
        if cs:
            lb = max(lb, math.ceil(len(cs) / max(1, rules.slots.get(b, 0))))
        for a in rules.apart.get(b, ()):
            lb = max(lb, len(cs & a))
    return lb


def greedy(needs: list[Need], rules: Rules) -> list[Need]:
    """Rule 2: each need, largest first, into the pass it shares most with (fewest new counters)."""
    passes: list[Need] = []
    for n in needs:
        best, best_new = -1, None
        for i, p in enumerate(passes):
            u = union(p, n)
            if rules.fits(u):
                new = size(u) - size(p)
                if best_new is None or new < best_new:
                    best, best_new = i, new
        if best < 0:
            passes.append(dict(n))
        else:
            passes[best] = union(passes[best], n)
    return passes


def exact(needs: list[Need], rules: Rules, bound: int) -> list[Need] | None:
    """The fewest passes below ``bound`` (an assignment of every need to a pass), by depth-first search
    with pruning at the best count so far; None when none is below ``bound``."""
    best: list[list[Need] | None] = [None]
    limit = [bound]
    lb = lower_bound(needs, rules)

    def go(i: int, passes: list[Need]) -> None:
        if limit[0] <= lb:
            return
        if i == len(needs):
            if len(passes) < limit[0]:
                best[0], limit[0] = [dict(p) for p in passes], len(passes)
            return
        n = needs[i]
        for j, p in enumerate(passes):
            u = union(p, n)
            if rules.fits(u):
                passes[j] = u
                go(i + 1, passes)
                passes[j] = p
        if len(passes) + 1 < limit[0]:
            passes.append(dict(n))
            go(i + 1, passes)
            passes.pop()

    go(0, [])
    return best[0]


def pack(needs: list[Need], rules: Rules) -> tuple[list[Need], bool]:
    """The passes that read every need (each need within one pass), and whether their number is proven
    the fewest (module docstring, rules 1–3). Every need must fit a pass on its own (``rules.fits``)."""
    units = undominated(needs)
    passes = greedy(units, rules)
    lb = lower_bound(units, rules)
    if len(passes) <= lb:
        return passes, True
    if len(units) <= EXACT_LIMIT:
        better = exact(units, rules, len(passes))
        return (better if better is not None else passes), True
    return passes, False


def split(need: Need, atoms: dict[str, frozenset[str]], rules: Rules) -> list[Need]:
    """A need too large for one pass cut into pieces that each fit: per block, its counters (whole
    ``together`` atoms, from ``atoms``: counter → its atom) first-fit into chunks; piece i holds chunk i
    of every block."""
    chunks: dict[str, list[frozenset[str]]] = {}
    for b, cs in sorted(need.items()):
        seen: set[str] = set()
        parts: list[frozenset[str]] = []
        for c in sorted(cs):
            if c in seen:
                continue
            atom = atoms.get(c, frozenset({c})) & cs
            seen |= atom
            for k, part in enumerate(parts):
                if rules.fits({b: part | atom}):
                    parts[k] = part | atom
                    break
            else:
                parts.append(atom)
        chunks[b] = parts
    n = max((len(v) for v in chunks.values()), default=0)
    return [{b: v[i] for b, v in chunks.items() if i < len(v)} for i in range(n)]


__all__ = ["EXACT_LIMIT", "Need", "Rules", "covers", "exact", "greedy", "lower_bound", "pack", "split", "union"]
