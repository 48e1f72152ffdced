"""``perfonto explain METRIC`` and ``perfonto graph METRIC``."""
from __future__ import annotations

from .common import CommandError, stderr


def register(sub) -> None:
    for name, help_ in (("explain", "formula, unit derivation, dependency tree, availability and source of a metric"),
                        ("graph", "dependency graph of a metric as Mermaid or DOT")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("metric", help="metric name, e.g. mfu")
        p.add_argument("--generation", default="sohu", help="generation (default: sohu)")
        p.add_argument("--catalog", default=None, help="catalog folder (default: the shipped catalog)")
        if name == "graph":
            p.add_argument("--format", choices=("mermaid", "dot"), default="mermaid", help="output format (default: mermaid)")
        p.set_defaults(func=cmd_explain if name == "explain" else cmd_graph)


def _graph(args):
    from perfonto.ontology.diagnostics import did_you_mean

    from perfonto.metrics.catalog import load_catalog

    err = stderr()
    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        raise CommandError(f"cannot load generation `{args.generation}`", 2 if usage else 1, cat.errors)
    if args.metric not in cat.graph.all_metrics:
        if getattr(args, "func", None) is cmd_explain:
            from perfonto.metrics.explain import explain_input

            text = explain_input(cat.generation, args.metric)
            if text is not None:
                print(text)
                return None, 0
        if args.metric in cat.graph.unavailable:
            err.print(f"`{args.metric}` is unavailable on {args.generation}: {cat.graph.unavailable[args.metric]}", markup=False)
            return None, 1
        hint = did_you_mean(args.metric, cat.graph.all_metrics)
        err.print(f"no metric named `{args.metric}`" + (f"; {hint}" if hint else ""), markup=False)
        return None, 2
    return cat.graph, 0


def cmd_explain(args) -> int:
    from perfonto.metrics.explain import explain

    graph, rc = _graph(args)
    if graph is None:
        return rc
    print(explain(graph, args.metric, args.catalog))
    return 0


def cmd_graph(args) -> int:
    from perfonto.metrics.explain import graph_text

    graph, rc = _graph(args)
    if graph is None:
        return rc
    print(graph_text(graph, args.metric, args.format), end="")
    return 0
