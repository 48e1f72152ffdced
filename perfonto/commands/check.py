"""``perfonto check``: compile a catalog and print every diagnostic (exit 1 on errors)."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, catalog_options, stderr


def register(sub) -> None:
    c = sub.add_parser("check", help=HELP["check"])
    catalog_options(
        c,
        generation="generation to compile against (default: sohu, or the --catalog folder's)",
        library=True,
        catalog_first=True,
    )
    c.add_argument("--json", action="store_true", help="print diagnostics as one JSON object")
    c.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation, library=not args.no_library)
    none_named = args.catalog is None or args.generation is None  # a folder of several generations: name one
    if cat.generation is None and none_named and any(d.code == "unknown-generation" for d in cat.diagnostics):
        raise CommandError(f"no generation named `{args.generation}`", 2, cat.diagnostics)
    name = cat.generation.name if cat.generation is not None else (args.generation or "sohu")
    if cat.generation is not None:  # what the emulator counts for each signal: names and units it knows
        from perfonto.emulator.quantities import check_bindings

        cat.diagnostics.extend(check_bindings(cat.generation))
    err = stderr()
    for n in cat.notes:
        err.print(f"note: {n}", markup=False)
    errors = cat.errors
    if args.json:
        doc = {
            "ok": not errors,
            "generation": name,
            "metrics": len(cat.graph.metrics) if cat.graph else 0,
            "signals": len(cat.generation.signals) if cat.generation else 0,
            "diagnostics": [d.to_json() for d in cat.diagnostics],
        }
        print(json.dumps(doc, indent=2))
    else:
        for d in cat.diagnostics:
            print(d.render())
            print()
        if cat.graph is not None:
            print(
                f"{name}: {len(cat.generation.signals)} signals, {len(cat.graph.metrics)} metrics compiled, "
                f"{len(errors)} error(s), {len(cat.diagnostics) - len(errors)} warning(s)"
            )
        else:
            print(f"{len(errors)} error(s)")
    return 1 if errors else 0
