"""``perfonto test [PATH] [--catalog DIR]``: run catalog test vectors (PATH's, else the ``--catalog``
folder's, else the shipped library's; exit 1 on any failure, or when none is found)."""

from __future__ import annotations

import json
from pathlib import Path

from . import HELP
from .common import catalog_options, CommandError, stderr


def register(sub) -> None:
    t = sub.add_parser("test", help=HELP["test"])
    t.add_argument(
        "path",
        nargs="?",
        default=None,
        help="a vectors file or a folder of them (default: the --catalog folder's, else the shipped library's)",
    )
    catalog_options(
        t,
        generation="only vectors of this generation (default: every generation the files name)",
        catalog="catalog folder to compile (default: the shipped catalog)",
    )
    t.add_argument("--json", action="store_true", help="print the outcomes as one JSON object")
    t.set_defaults(func=cmd_test)


def cmd_test(args) -> int:
    err = stderr()
    files = _vector_files(args.path, args.catalog)
    outcomes, diags = _run_vectors(args, files, _generations(files, args.generation))
    failed = [o for o in outcomes if not o.ok]
    if args.json:
        _print_json(outcomes, failed, diags)
    else:
        _print_text(outcomes, failed, diags, files)
    if not outcomes:
        err.print("no vector matched a compiled generation", markup=False)
        return 1
    return 1 if failed or diags else 0


def _vector_files(arg: str | None, catalog: str | None = None) -> list:
    """The vectors files at ``arg`` (a file or a folder), else in the ``catalog`` folder (``--catalog``),
    else in the shipped library; at least one."""
    from perfonto.metrics.compiler import library_files
    from perfonto.metrics.vectors import vector_files
    from perfonto.ontology.files import FileReadError, check_path, exists

    path = Path(arg or catalog or library_files()[0].parent)
    try:
        check_path(path, "vectors path" if arg or not catalog else "--catalog folder")
    except FileReadError as exc:
        raise CommandError(str(exc), 1) from None
    files = vector_files(path) if exists(path) else []
    if files:
        return files
    if arg or not catalog:
        raise CommandError(f"no test vectors (*.vectors.yaml) found at {path}", 1)
    raise CommandError(
        f"no test vectors (*.vectors.yaml) in the --catalog folder {path}"
        + ("" if exists(path) else " (it does not exist)")
        + "; add a <name>.vectors.yaml there, or give the vectors' PATH",
        1,
    )


def _generations(files: list, wanted: str | None) -> set[str]:
    """The generations the files name (only ``wanted`` when given); a file that does not read names none."""
    from perfonto.ontology.yaml_source import read_yaml

    gens = set()
    for f in files:
        try:
            src = read_yaml(f)  # guarded against alias bombs and bad bytes
            g = src.data.get("generation") if not src.diagnostics and isinstance(src.data, dict) else None
        except Exception:
            g = None
        if g and (wanted is None or g == wanted):
            gens.add(g)
    return gens


def _run_vectors(args, files: list, gens: set[str]) -> tuple[list, list]:
    """Compile each generation's catalog (``--generation`` or sohu when the files name none) and run
    every file's vectors on it; returns the outcomes and the diagnostics."""
    from perfonto.codegen.python_evaluator import generate, load
    from perfonto.metrics.catalog import load_catalog
    from perfonto.metrics.vectors import run_vectors

    outcomes, diags = [], []
    for g in sorted(gens) or [args.generation or "sohu"]:
        cat = load_catalog(args.catalog, g)
        if cat.graph is None:
            diags += cat.errors
            continue
        evaluator = load(generate(cat.graph))
        for f in files:
            o, d = run_vectors(cat.graph, f, evaluator)
            outcomes += o
            diags += d
    return outcomes, diags


def _print_json(outcomes: list, failed: list, diags: list) -> None:
    """The outcomes as one JSON object: counts, the failures and the diagnostics."""
    print(
        json.dumps(
            {
                "passed": len(outcomes) - len(failed),
                "failed": len(failed),
                "failures": [vars(o) | {"span": str(o.span)} for o in failed],
                "diagnostics": [d.to_json() for d in diags],
            },
            indent=2,
        )
    )


def _print_text(outcomes: list, failed: list, diags: list, files: list) -> None:
    """The diagnostics, each failure, then one summary line."""
    for d in diags:
        print(d.render())
    for o in failed:
        print(f"{o.span}: FAIL {o.vector!r}: {o.metric}: {o.message}")
    metrics = {o.metric for o in outcomes}
    print(
        f"{len(outcomes) - len(failed)} passed, {len(failed)} failed ({len(metrics)} metrics checked, "
        f"{len(files)} file(s))"
    )
