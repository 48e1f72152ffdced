"""``perfonto docs [--generation G] --out DIR``: write the docs site (Markdown pages per generation and
per metric group, and an index; see ``codegen.docs_site``).

Every shipped generation is compiled (for availability); ``--generation`` picks the one whose
compiled catalog gives the metric details (default: sohu). Output is deterministic. Exit 0 when the
site was written, 1 when a catalog could not be compiled, 2 for usage errors."""
from __future__ import annotations

from pathlib import Path

from .common import stderr


def register(sub) -> None:
    c = sub.add_parser("docs", help="write the Markdown docs site of the catalog (pages per generation and per metric group)")
    c.add_argument("--generation", default="sohu", help="generation whose catalog gives the metric details (default: sohu)")
    c.add_argument("--catalog", default=None, help="catalog folder of *.yaml and *.metrics files (default: the shipped catalog)")
    c.add_argument("--out", required=True, help="output folder")
    c.set_defaults(func=cmd_docs)


def cmd_docs(args) -> int:
    from perfonto.codegen.docs_site import generate_site, write_site
    from perfonto.ontology.loader import shipped_generations

    from perfonto.metrics.catalog import load_catalog

    err = stderr()
    names = shipped_generations()
    if args.generation not in names:
        names.append(args.generation)
    graphs = {}
    for name in names:
        cat = load_catalog(args.catalog, name)
        if cat.graph is None:
            if name != args.generation and args.catalog is not None:
                continue  # a user's catalog folder need not hold every shipped generation
            for d in cat.diagnostics:
                err.print(d.render(), markup=False)
            err.print(f"generation `{name}` does not load; nothing written", markup=False)
            return 1
        graphs[name] = cat.graph
    out = Path(args.out)
    written = write_site(generate_site(graphs, args.generation), out)
    written.append(_emulator_page(graphs[args.generation].generation, out))
    err.print(f"wrote {len(written)} pages under {out} (index: {out / 'index.md'})", markup=False)
    return 0


def _emulator_page(gen, out: Path) -> Path:
    """``emulator-quantities.md``: the quantities a signal's emulator binding may name (``perfonto emulator-quantities``)."""
    from perfonto.emulator.quantities import registry

    from .emulator_quantities import bound_by, markdown

    path = out / "emulator-quantities.md"
    path.write_text(markdown(registry(), bound_by(gen), gen.name), encoding="utf-8")
    return path
