"""``perfonto diff OLD NEW``: signal changes (``ontology.diff``) plus what they do to the metrics."""

from __future__ import annotations

import networkx as nx

from perfonto.metrics.compiler import compile_files
from perfonto.ontology.diff import SERVER_LEVEL, diff_signals
from perfonto.ontology.resolved import Generation


def diff_generations(old: Generation, new: Generation, graphs: tuple = (None, None)) -> dict:
    """The diff document: ``{"signals": {...}, "metrics": {"added", "removed", "became_unavailable", "changed"},
    "errors"}``. ``graphs``: the compiled metrics of ``old`` and ``new`` where a catalog folder gives them (its
    own metric files with the library, ``metrics.catalog.load_catalog``); None: the shipped library compiled
    against the generation."""
    sd = diff_signals(old, new)
    from perfonto.metrics.catalog import shipped_others

    go = graphs[0] or compile_files(old, others=shipped_others(old) + (new,))
    gn = graphs[1] or compile_files(new, others=shipped_others(new) + (old,))
    became = []
    for name in sorted(gn.unavailable):
        if name in go.metrics:
            became.append({"metric": name, "reason": gn.unavailable[name]})
    changed = []
    for name in sorted(set(go.metrics) & set(gn.metrics)):
        mo, mn = go.metrics[name], gn.metrics[name]
        why = []
        if mo.unit_text != mn.unit_text:
            why.append(f"unit {mo.unit_text} -> {mn.unit_text}")
        if mo.axes != mn.axes:
            why.append(f"axes {mo.axes} -> {mn.axes}")
        deps_old = set(mo.signal_deps)
        deps_new = set(mn.signal_deps)
        reads = nx.ancestors(gn.graph, name)  # through other metrics too; a `rollup max` is its chips' extreme
        for r in sd.renamed:
            if r["from"] in deps_old and r["to"] in deps_new:
                why.append(f"reads `{r['to']}` (renamed from `{r['from']}`)")
        for c in sd.changed:  # a wider register or more instances behind a rollup keep the meaning
            if c["signal"] in deps_new and c["field"] in ("unit", "kind"):
                why.append(f"`{c['signal']}` {c['field']} {c['old']} -> {c['new']}")
            elif c["field"] in SERVER_LEVEL and mn.rollup not in ("max", "min") and c["signal"] in reads:
                how = "reads" if c["signal"] in deps_new else "reads, through other metrics,"
                change = f"{c['field']} {c['old']} -> {c['new']}"
                why.append(f"{how} `{c['signal']}`, {change}: its server-level value changes")
        if why:
            changed.append({"metric": name, "why": why})
    return {
        "old": old.name,
        "new": new.name,
        "signals": {"added": sd.added, "removed": sd.removed, "renamed": sd.renamed, "changed": sd.changed},
        "spec": sd.spec,
        "metrics": {
            "added": sorted(set(gn.metrics) - set(go.metrics) - set(go.unavailable)),
            "removed": sorted(set(go.metrics) - set(gn.metrics) - set(gn.unavailable)),
            "became_unavailable": became,
            "changed": changed,
        },
        "errors": sd.errors,
        "compatible": not sd.errors,
    }
