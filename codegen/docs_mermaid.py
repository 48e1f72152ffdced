"""The Mermaid graph of a metric's dependencies on the docs site (``codegen.docs_site``): metrics,
signals and spec constants as nodes (labels quoted and entity-escaped), edges from a dependency to its
user, the metric itself drawn bold.
"""

from __future__ import annotations


def _mermaid_label(text: str) -> str:
    out = []
    for ch in str(text):
        if ch.isalnum() or ch in "._-/ ":
            out.append(ch)
        else:
            out.append(f"#{ord(ch)};")
    return '"' + "".join(out) + '"'


def mermaid(name: str, metrics: dict, spec) -> list[str]:
    """``flowchart LR``: every metric, signal and spec constant the metric depends on, transitively;
    edges point from a dependency to its user. ``metrics``: the compiled metrics (name → metric);
    ``spec``: the generation's spec constants (a name in it is drawn as one)."""
    nodes: dict[str, str] = {}
    edges: set[tuple[str, str]] = set()
    todo = [name]
    while todo:
        cur = todo.pop()
        if cur in nodes:
            continue
        nodes[cur] = f"n{len(nodes)}"
        m = metrics.get(cur)
        if m is None:
            continue
        for dep in m.signal_deps + m.spec_deps + m.metric_deps:
            edges.add((dep, cur))
            todo.append(dep)
    ids = {n: f"n{i}" for i, n in enumerate(sorted(nodes))}
    lines = ["flowchart LR"]
    for n in sorted(nodes):
        kind = "metric" if n in metrics else ("spec" if n in spec else "signal")
        shape = {"metric": ("[", "]"), "spec": ("[/", "/]"), "signal": ("([", "])")}[kind]
        lines.append(f"  {ids[n]}{shape[0]}{_mermaid_label(n)}{shape[1]}")
    for a, b in sorted(edges):
        lines.append(f"  {ids[a]} --> {ids[b]}")
    lines.append(f"  style {ids[name]} stroke-width:3px")
    return lines


__all__ = ["mermaid"]
