"""``perfonto codegen --target T [--generation G] --out DIR``: write generated artefacts."""
from __future__ import annotations

from pathlib import Path

from .common import stderr

TARGETS = ("python", "c-header", "docs", "schemas")


def register(sub) -> None:
    c = sub.add_parser("codegen", help="generate an evaluator, a C header, docs or the JSON Schemas")
    c.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    c.add_argument("--generation", default="sohu", help="generation (default: sohu)")
    c.add_argument("--catalog", default=None, help="catalog folder (default: the shipped catalog)")
    c.add_argument("--out", required=True, help="output folder")
    c.set_defaults(func=cmd_codegen)


def cmd_codegen(args) -> int:
    err = stderr()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.target == "schemas":
        from codegen.schemas import schemas

        for name, text in schemas().items():
            (out / name).write_text(text, encoding="utf-8")
            err.print(f"wrote {out / name}", markup=False)
        return 0
    from ..catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation)
    if cat.generation is None or (args.target != "c-header" and cat.errors):
        for d in cat.diagnostics:
            err.print(d.render(), markup=False)
        err.print("the catalog does not compile; nothing written", markup=False)
        return 1
    gen = cat.generation
    if args.target == "c-header":
        from codegen.c_header import generate_header

        path = out / f"{gen.name}.h"
        path.write_text(generate_header(gen), encoding="utf-8")
    elif args.target == "python":
        from codegen.python_evaluator import generate

        path = out / f"{gen.name}_evaluator.py"
        path.write_text(generate(cat.graph), encoding="utf-8")
    else:
        from codegen.docs import generate_markdown

        path = out / f"{gen.name}.md"
        path.write_text(generate_markdown(cat.graph), encoding="utf-8")
    err.print(f"wrote {path}", markup=False)
    return 0
