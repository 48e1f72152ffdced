"""``perfonto codegen --target T [--generation G] --out DIR``: write generated artefacts.

Targets: ``python`` (standalone NumPy evaluator), ``sql`` (the metrics query, DuckDB dialect by
default, ``--dialect spark`` for Spark SQL), ``c-header``, ``docs`` (one Markdown page; ``perfonto docs``
writes the whole site), ``schemas``, ``collector`` (the generation's wide-layout dump schema, JSON)."""

from __future__ import annotations

from pathlib import Path

from . import HELP
from .common import CommandError, duration, stderr

TARGETS = ("python", "sql", "c-header", "docs", "schemas", "collector")


def register(sub) -> None:
    c = sub.add_parser("codegen", help=HELP["codegen"])
    c.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    c.add_argument("--generation", default=None, help="generation (default: sohu, or the --catalog folder's)")
    c.add_argument("--catalog", default=None, help="catalog folder (default: the shipped catalog)")
    c.add_argument("--no-library", action="store_true", help="with --catalog: compile only the folder's metric files")
    c.add_argument("--out", required=True, help="output folder (each file is written atomically)")
    c.add_argument("--json", action="store_true", help="print one JSON object (the files written) on stdout")
    c.add_argument(
        "--dialect", default="duckdb", choices=("duckdb", "spark"), help="sql: SQL dialect (default: duckdb)"
    )
    c.add_argument(
        "--counters",
        default=None,
        help="sql: the counter table — a Parquet path read with read_parquet (duckdb; default counters.parquet) "
        "or a table name (spark; default counters)",
    )
    c.add_argument(
        "--sample-period",
        type=duration,
        default=None,
        help="sql: sampling period (e.g. 1ms); samples are placed on that grid and gaps give null windows, "
        "as `perfonto run` does with the dump's sample_period_ns (default: consecutive samples form windows)",
    )
    c.add_argument(
        "--rollup",
        action="store_true",
        help="sql: the fleet rollup query instead (every metric per chip, host, rack, pod and fleet)",
    )
    c.add_argument(
        "--topology-table",
        default=None,
        metavar="NAME",
        help="sql --rollup: a table with host, chip, rack, pod (default: no rack or pod level)",
    )
    c.set_defaults(func=cmd_codegen)


def cmd_codegen(args) -> int:
    import json

    from ..outputs import OutputError

    try:
        written = _codegen(args)
    except ValueError as exc:  # a catalog the target cannot express (e.g. C identifiers that collide)
        raise CommandError(str(exc), 1) from None
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    for path in written:
        stderr().print(f"wrote {path}", markup=False)
    if args.json:
        print(json.dumps({"ok": True, "target": args.target, "written": [str(p) for p in written]}, indent=2))
    return 0


def _codegen(args) -> list[Path]:
    from ..outputs import write_file

    from perfonto.ontology.files import check_path, exists, is_dir

    out = Path(args.out)
    check_path(out, "--out folder")
    if exists(out) and not is_dir(out):
        raise CommandError(f"--out {out} is a file; give a folder", 2)
    if args.target == "schemas":
        from perfonto.codegen.schemas import schemas

        return [write_file(out / name, text) for name, text in schemas().items()]
    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation, library=not args.no_library)
    if cat.generation is None or (args.target != "c-header" and cat.errors):
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        raise CommandError(
            "the catalog does not compile; nothing written"
            if not usage
            else f"no generation named `{args.generation}`",
            2 if usage else 1,
            cat.diagnostics,
        )
    gen = cat.generation
    if args.target == "c-header":
        from perfonto.codegen.c_header import generate_header

        path = write_file(out / f"{gen.name}.h", generate_header(gen))
    elif args.target == "sql":
        from perfonto.codegen.sql import dump_source, generate_sql

        host = True  # the table names each row's host (a chip is (host, chip)), unless the dump given has none
        if args.dialect == "duckdb":
            source, found = dump_source(args.counters or "counters.parquet")
            host = found or args.counters is None
        else:
            source = args.counters or "counters"
        period = None if args.sample_period is None else int(round(args.sample_period * 1e9))
        name = gen.name + (".rollup" if args.rollup else "") + ("" if args.dialect == "duckdb" else f".{args.dialect}")
        if args.rollup:
            from perfonto.codegen.sql_rollup import generate_rollup_sql

            text = generate_rollup_sql(
                cat.graph,
                source,
                sample_period_ns=period,
                dialect=args.dialect,
                host=host,
                topology=args.topology_table,
            )
        else:
            text = generate_sql(cat.graph, source, sample_period_ns=period, dialect=args.dialect, host=host)
        path = write_file(out / f"{name}.sql", text)
    elif args.target == "collector":
        from perfonto.capture.collector import wide_schema_json

        path = write_file(out / f"{gen.name}.collector.json", wide_schema_json(gen))
    elif args.target == "python":
        from perfonto.codegen.python_evaluator import generate

        path = write_file(out / f"{gen.name}_evaluator.py", generate(cat.graph))
    else:
        from perfonto.codegen.docs import generate_markdown

        path = write_file(out / f"{gen.name}.md", generate_markdown(cat.graph))
    return [path]
