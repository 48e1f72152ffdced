"""Thresholds of perf (``MetricThreshold``) and Intel (``Threshold.Formula``) as perfonto can hold them.

perfonto's ``threshold OP bound`` compares the metric itself with one number. Both sources write a
node's threshold as a conjunction: the node's own comparison, and the conditions of its ancestors
(Intel's README: "'P' requires that the node's parent needs to pass the threshold"; perf's TMA
metrics repeat the parents' conditions). ``split`` finds the own comparison and the conjuncts that
repeat an ancestor's own threshold — those are carried by the ``parent`` clause and the threshold is
written ``when parent`` (crossed only where the parent chain's are); anything else
(a disjunction, a condition on another metric) cannot be expressed and is reported.
"""

from __future__ import annotations

from collections.abc import Callable

from .catalog import Finding, SourceCatalog, SourceMetric, Threshold
from .exprparse import ParseError, SBin, SId, SNeg, SNum, parse, perf_symbol

FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}


def fold(t) -> float | None:
    """Value of a literal-only side (``4 * 1.5``), else None."""
    if isinstance(t, SNum):
        return t.value
    if isinstance(t, SNeg):
        v = fold(t.operand)
        return None if v is None else -v
    if isinstance(t, SBin) and t.op in ("+", "-", "*", "/"):
        a, b = fold(t.left), fold(t.right)
        if a is None or b is None or (t.op == "/" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[t.op]
    return None


def comparison(t, resolve: Callable[[str], str | None]) -> tuple[str, str, float] | None:
    """``metric OP number`` (either order) → (metric key, op with the metric on the left, number)."""
    if not (isinstance(t, SBin) and t.op in FLIP):
        return None
    if isinstance(t.left, SId) and resolve(t.left.name) and fold(t.right) is not None:
        return resolve(t.left.name), t.op, fold(t.right)
    if isinstance(t.right, SId) and resolve(t.right.name) and fold(t.left) is not None:
        return resolve(t.right.name), FLIP[t.op], fold(t.left)
    return None


def ancestors(metrics: dict[str, SourceMetric], key: str) -> list[str]:
    out, seen = [], set()
    p = metrics[key].parent
    while p is not None and p not in seen and p in metrics:
        out.append(p)
        seen.add(p)
        p = metrics[p].parent
    return out


def split(tree, key: str, metrics: dict[str, SourceMetric], resolve) -> tuple[tuple | None, list[str], list]:
    """(own comparison or None, ancestors whose threshold a conjunct repeats, conjuncts left over).
    Ancestors' thresholds must be split first (callers go by depth)."""
    conj: list = []
    _conjuncts(tree, conj)
    above = ancestors(metrics, key)
    own, implied, other = None, [], []
    for c in conj:
        cmp = comparison(c, resolve)
        if cmp and cmp[0] == key and own is None:
            own = cmp
        elif cmp and cmp[0] in above and _repeats(metrics[cmp[0]], cmp):
            implied.append(cmp[0])
        else:
            other.append(c)
    return own, implied, other


def _conjuncts(t, out: list) -> None:
    if isinstance(t, SBin) and t.op in ("&", "and"):
        _conjuncts(t.left, out)
        _conjuncts(t.right, out)
    else:
        out.append(t)


def _repeats(m: SourceMetric, cmp: tuple) -> bool:
    return m.threshold is not None and m.threshold.op == cmp[1] and m.threshold.value == cmp[2]


def perf_thresholds(cat: SourceCatalog, entries: dict[str, dict], lower: dict[str, str]) -> None:
    """Each perf metric's ``MetricThreshold`` (``entries``: metric key → its entry; ``lower``: lower-case
    name → key) as its ``threshold``, or its ``threshold_problem`` and a finding when it cannot be held."""

    def resolve(name: str) -> str | None:
        return lower.get(perf_symbol(name).lower())

    metrics = cat.metrics
    for key in sorted(entries, key=lambda k: len(ancestors(metrics, k))):  # ancestors first
        m = metrics[key]
        text = str(entries[key].get("MetricThreshold", "") or "").strip()
        if not text or m.expr is None:
            continue
        try:
            tree = parse(text, "perf")
        except ParseError as exc:
            m.threshold_problem = f"MetricThreshold syntax: {exc}"
            continue
        own, implied, other = split(tree, key, metrics, resolve)
        if own is None or other:
            m.threshold_problem = (
                f"MetricThreshold `{text}` is not `<metric> <op> <number>` (and ancestors'): "
                f"perfonto's threshold clause compares the metric itself with one bound"
            )
            cat.findings.append(Finding("threshold-not-translated", key, m.threshold_problem, "warning"))
            continue
        m.threshold = Threshold(own[1], own[2], f"perf MetricThreshold: {text}", implied)
