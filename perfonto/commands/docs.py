"""``perfonto docs [--generation G] --out DIR``: write the docs site (Markdown pages per generation and
per metric group, and an index; see ``codegen.docs_site``).

Every shipped generation is compiled (for availability); ``--generation`` picks the one whose
compiled catalog gives the metric details (default: sohu). Output is deterministic. Exit 0 when the
site was written, 1 when a catalog could not be compiled, 2 for usage errors. The pages are those of the
``docs-site`` target of ``perfonto.targets``."""

from __future__ import annotations

from pathlib import Path

from . import HELP
from .common import catalog_options, CommandError, folder_choice, output_options, stderr


def register(sub) -> None:
    c = sub.add_parser("docs", help=HELP["docs"])
    catalog_options(
        c,
        generation="generation whose catalog gives the metric details (default: sohu, or the --catalog folder's)",
        library=True,
    )
    output_options(c, json_help="print one JSON object (the pages written) on stdout")
    c.set_defaults(func=cmd_docs)


def cmd_docs(args) -> int:
    import json

    from perfonto.metrics.catalog import load_catalog
    from perfonto.ontology.loader import shipped_generations

    from ..outputs import OutputError, output_folder, relocate
    from ..targets import target, write_files

    err = stderr()
    chosen = args.generation
    if chosen is None:
        chosen = folder_choice(args.catalog)  # a usage error when the folder holds several generations
    chosen = chosen or "sohu"
    names = shipped_generations()
    if chosen not in names:
        names.append(chosen)
    graphs, cats = {}, {}
    for name in names:
        cat = load_catalog(args.catalog, name, library=not args.no_library)
        if cat.graph is None:
            if name != chosen and args.catalog is not None:
                continue  # a user's catalog folder need not hold every shipped generation
            usage = any(d.code == "unknown-generation" for d in cat.diagnostics) and args.catalog is None
            raise CommandError(
                f"generation `{name}` does not load; nothing written", 2 if usage else 1, cat.diagnostics
            )
        graphs[name], cats[name] = cat.graph, cat
    out = Path(args.out)
    try:
        with output_folder(out, command=args.argv, force=args.force) as tmp:
            pages = target("docs-site").emit(cats[chosen], {"graphs": graphs, "primary": chosen}).files
            written = [str(p) for p in write_files(pages, tmp)]
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    except OSError as exc:
        raise CommandError(f"{out}: cannot write the site ({exc.strerror or exc}); choose another --out", 1) from None
    written = relocate(written, tmp, out)
    err.print(f"wrote {len(written)} pages under {out} (index: {out / 'index.md'})", markup=False)
    if args.json:
        print(json.dumps({"ok": True, "out": str(out), "pages": written}, indent=2))
    return 0
