"""``perfonto export perf-json [--generation G] --out FILE``: write generation G's compiled metric
catalog (default: the shipped Sohu catalog) as Linux perf pmu-events metrics JSON.

Exit 0 when the file was written, 1 when the catalog does not compile or the file cannot be written.
Metrics perf cannot express are listed on stderr with the reason (or in the JSON under ``--json``)."""
from __future__ import annotations

import json

from .common import CommandError, stderr


def register(sub) -> None:
    p = sub.add_parser("export", help="export the metric catalog in another tool's format (perf pmu-events JSON)")
    p.add_argument("target", choices=["perf-json"], help="output format")
    p.add_argument("--generation", default="sohu", help="generation whose catalog to export (default: sohu)")
    p.add_argument("--catalog", default=None, help="folder of ontology *.yaml and metric *.metrics files (default: the shipped catalog)")
    p.add_argument("--out", required=True, help="output file")
    p.add_argument("--json", action="store_true", help="print a summary as one JSON document on stdout")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from pathlib import Path

    from perfonto.interop.perf_export import export

    from perfonto.metrics.catalog import load_catalog

    err = stderr()
    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None or cat.errors:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        raise CommandError(f"no generation named `{args.generation}`" if usage else
                           "the catalog does not compile; run `perfonto check` for the full list", 2 if usage else 1, cat.errors)
    result = export(cat.graph)
    try:
        Path(args.out).write_text(result.to_json(), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {args.out}: {exc.strerror}", 1) from None
    n_const = sum(1 for e in result.entries if e.get("MetricName", "").startswith("spec."))
    n_events = len(result.events)
    summary = {"ok": True, "generation": args.generation, "out": args.out, "metrics": len(result.entries) - n_const - n_events,
               "constants": n_const, "events": n_events, "skipped": result.skipped, "lost": result.lost}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        err.print(f"wrote {args.out}: {summary['metrics']} metrics, {n_const} constant metrics and {n_events} event definitions "
                  f"of `{args.generation}` as perf pmu-events JSON (re-import with `perfonto import perf {args.out}`)", markup=False)
        if result.skipped:
            err.print(f"not expressible in perf ({len(result.skipped)}):", markup=False)
            for name, why in result.skipped.items():
                err.print(f"  - {name}: {why}", markup=False)
    return 0
