"""``perfonto codegen --target T [--generation G] --out DIR``: write generated artefacts.

Targets: ``python`` (standalone NumPy evaluator), ``sql`` (the metrics query, DuckDB dialect by
default, ``--dialect spark`` for Spark SQL), ``c-header``, ``docs`` (one Markdown page; ``perfonto docs``
writes the whole site), ``schemas``."""
from __future__ import annotations

from pathlib import Path

from .common import CommandError, duration, stderr

TARGETS = ("python", "sql", "c-header", "docs", "schemas")


def register(sub) -> None:
    c = sub.add_parser("codegen", help="generate an evaluator, the SQL query, a C header, docs or the JSON Schemas")
    c.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    c.add_argument("--generation", default="sohu", help="generation (default: sohu)")
    c.add_argument("--catalog", default=None, help="catalog folder (default: the shipped catalog)")
    c.add_argument("--out", required=True, help="output folder")
    c.add_argument("--dialect", default="duckdb", choices=("duckdb", "spark"), help="sql: SQL dialect (default: duckdb)")
    c.add_argument("--counters", default=None,
                   help="sql: the counter table — a Parquet path read with read_parquet (duckdb; default counters.parquet) "
                        "or a table name (spark; default counters)")
    c.add_argument("--sample-period", type=duration, default=None,
                   help="sql: sampling period (e.g. 1ms); samples are placed on that grid and gaps give null windows, "
                        "as `perfonto run` does with the dump's sample_period_ns (default: consecutive samples form windows)")
    c.set_defaults(func=cmd_codegen)


def cmd_codegen(args) -> int:
    try:
        return _codegen(args)
    except ValueError as exc:  # a catalog the target cannot express (e.g. C identifiers that collide)
        raise CommandError(str(exc), 1) from None


def _codegen(args) -> int:
    err = stderr()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} is a file; give a folder", 2)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create {out}: {exc.strerror}", 1) from None
    if args.target == "schemas":
        from perfonto.codegen.schemas import schemas

        for name, text in schemas().items():
            (out / name).write_text(text, encoding="utf-8")
            err.print(f"wrote {out / name}", markup=False)
        return 0
    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation)
    if cat.generation is None or (args.target != "c-header" and cat.errors):
        for d in cat.diagnostics:
            err.print(d.render(), markup=False)
        err.print("the catalog does not compile; nothing written", markup=False)
        return 1
    gen = cat.generation
    if args.target == "c-header":
        from perfonto.codegen.c_header import generate_header

        path = out / f"{gen.name}.h"
        path.write_text(generate_header(gen), encoding="utf-8")
    elif args.target == "sql":
        from perfonto.codegen.sql import generate_sql, parquet_source

        if args.dialect == "duckdb":
            source = parquet_source(args.counters or "counters.parquet")
        else:
            source = args.counters or "counters"
        period = None if args.sample_period is None else int(round(args.sample_period * 1e9))
        path = out / (f"{gen.name}.sql" if args.dialect == "duckdb" else f"{gen.name}.{args.dialect}.sql")
        path.write_text(generate_sql(cat.graph, source, sample_period_ns=period, dialect=args.dialect), encoding="utf-8")
    elif args.target == "python":
        from perfonto.codegen.python_evaluator import generate

        path = out / f"{gen.name}_evaluator.py"
        path.write_text(generate(cat.graph), encoding="utf-8")
    else:
        from perfonto.codegen.docs import generate_markdown

        path = out / f"{gen.name}.md"
        path.write_text(generate_markdown(cat.graph), encoding="utf-8")
    err.print(f"wrote {path}", markup=False)
    return 0
