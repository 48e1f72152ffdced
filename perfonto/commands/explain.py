"""``perfonto explain METRIC`` and ``perfonto graph METRIC``."""

from __future__ import annotations

from . import HELP
from .common import catalog_options, CommandError, shipped_folder_hint


def register(sub) -> None:
    for name in ("explain", "graph"):
        p = sub.add_parser(name, help=HELP[name])
        p.add_argument("metric", help="metric name, e.g. mfu")
        catalog_options(p, library=True)
        p.add_argument("--json", action="store_true", help="print one JSON object ({name, text}) on stdout")
        if name == "graph":
            p.add_argument(
                "--format", choices=("mermaid", "dot"), default="mermaid", help="output format (default: mermaid)"
            )
        p.set_defaults(func=cmd_explain if name == "explain" else cmd_graph)


def _graph(args):
    from perfonto.ontology.diagnostics import did_you_mean

    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation, library=not args.no_library)
    if cat.graph is None:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        name = args.generation or "sohu"
        hint = shipped_folder_hint(name) if usage else ""
        raise CommandError(f"cannot load generation `{name}`{hint}", 2 if usage else 1, cat.errors)
    if args.metric not in cat.graph.all_metrics:
        if getattr(args, "func", None) is cmd_explain:
            from perfonto.metrics.explain import explain_input

            text = explain_input(cat.generation, args.metric)
            if text is not None:
                return text, 0
        if args.metric in cat.graph.unavailable:
            raise CommandError(
                f"`{args.metric}` is unavailable on {cat.generation.name}: {cat.graph.unavailable[args.metric]}", 1
            )
        hint = did_you_mean(args.metric, cat.graph.all_metrics)
        raise CommandError(f"no metric named `{args.metric}`" + (f"; {hint}" if hint else ""), 2)
    return cat.graph, 0


def _emit(args, text: str) -> None:
    import json

    if args.json:
        print(json.dumps({"ok": True, "name": args.metric, "text": text}, indent=2))
    else:
        from perfonto.ontology.diagnostics import escaped

        # the catalog's text (descriptions, sources) may hold control characters: shown escaped, never sent
        shown = "\n".join(escaped(line) for line in text.split("\n"))
        print(shown, end="" if shown.endswith("\n") else "\n")


def _cached(args, what: tuple, make) -> tuple[str, int]:
    """``make()`` through the text cache (``metrics.catalog_cache.cached_text``): keyed by the catalog's
    inputs, this command's options ``what`` and this file's source, so that a warm ``explain`` does not
    load the catalog (nor import pint, networkx and numpy)."""
    from pathlib import Path

    from perfonto.metrics.catalog_cache import cached_text

    here = Path(__file__).read_bytes().decode("utf-8", "replace")
    lib = not args.no_library
    return cached_text(args.catalog, args.generation, lib, [repr(what), repr(args.catalog), here], make)


def cmd_explain(args) -> int:
    def make():
        from perfonto.metrics.explain import explain

        graph, rc = _graph(args)
        return (graph if isinstance(graph, str) else explain(graph, args.metric, args.catalog)), rc

    text, rc = _cached(args, ("explain", args.metric), make)
    _emit(args, text)
    return rc


def cmd_graph(args) -> int:
    def make():
        from perfonto.metrics.explain import graph_text

        graph, rc = _graph(args)
        return graph_text(graph, args.metric, args.format), rc

    text, rc = _cached(args, ("graph", args.metric, args.format), make)
    _emit(args, text)
    return rc
