"""``perfonto codegen --target T [--generation G] --out DIR``: write generated artefacts.

Targets: ``python`` (standalone NumPy evaluator), ``sql`` (the metrics query, DuckDB dialect by
default, ``--dialect spark`` for Spark SQL), ``c-header``, ``docs`` (one Markdown page; ``perfonto docs``
writes the whole site), ``schemas``, ``collector`` (the generation's wide-layout dump schema, JSON).
The targets, their emitters, output files and options are the table of ``perfonto.targets``."""

from __future__ import annotations

from pathlib import Path

from ..targets import offered_by
from . import HELP
from .common import SHARED_FORCE_HELP, SHARED_OUT_HELP, CommandError, catalog_options, duration, output_options, stderr

TARGETS = offered_by("codegen")


def register(sub) -> None:
    c = sub.add_parser("codegen", help=HELP["codegen"])
    c.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    catalog_options(c, library=True)
    output_options(
        c,
        out_help=SHARED_OUT_HELP.format(what="output folder", runs="targets"),
        force_help=SHARED_FORCE_HELP,
        json_help="print one JSON object (the files written) on stdout",
    )
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
        help="sql --rollup: a table with host, chip, rack, pod; an empty chip places every chip of its host "
        "(default: no rack or pod level)",
    )
    c.set_defaults(func=cmd_codegen)


def cmd_codegen(args) -> int:
    import json

    from ..outputs import OutputError

    try:
        written = _codegen(args)
    except (ValueError, OutputError) as exc:  # a catalog the target cannot express (e.g. C identifiers that
        raise CommandError(str(exc), 1) from None  # collide), or an output folder that cannot be written
    for path in written:
        stderr().print(f"wrote {path}", markup=False)
    if args.json:
        print(json.dumps({"ok": True, "target": args.target, "written": [str(p) for p in written]}, indent=2))
    return 0


def _codegen(args) -> list[Path]:
    from perfonto.ontology.files import check_path, exists, is_dir

    from .. import targets
    from ..outputs import write_file

    out = Path(args.out)
    check_path(out, "--out folder")
    if exists(out) and not is_dir(out):
        raise CommandError(f"--out {out} is a file; give a folder", 2)
    target = targets.target(args.target)
    cat = None
    if target.needs != "nothing":
        from perfonto.metrics.catalog import load_catalog

        cat = load_catalog(args.catalog, args.generation, library=not args.no_library)
        if cat.generation is None or (target.needs != "generation" and cat.errors):
            usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
            raise CommandError(
                "the catalog does not compile; nothing written"
                if not usage
                else f"no generation named `{args.generation}`",
                2 if usage else 1,
                cat.diagnostics,
            )
    if cat is not None and target.needs == "generation" and cat.errors:  # the C header: the signals alone
        stderr().print(
            f"note: the catalog's metrics do not compile ({len(cat.errors)} error(s); `perfonto check"
            + (f" --catalog {args.catalog}" if args.catalog else "")
            + "` lists them); the header describes the generation's signals, which do not depend on them",
            markup=False,
        )
    _refuse_unsized(cat, args.target)
    files = target.emit(cat, target.options_from(args)).files
    if args.target == "sql":  # the header's regenerate line: the emitter gives the query's options, these the rest
        from perfonto.codegen.sql_header import with_command_options

        files = {name: with_command_options(text, command_options(args)) for name, text in files.items()}
    from ..outputs import output_folder

    inputs = {"catalog": str(args.catalog)} if getattr(args, "catalog", None) else None
    command = getattr(args, "argv", None)
    with output_folder(out, command=command, force=args.force, inputs=inputs, accumulate=True) as tmp:
        for name, text in files.items():
            write_file(tmp / name, text)
    return [out / name for name in files]


def command_options(args) -> str:
    """The options of a ``codegen`` command line that say where its output goes and which catalog it is of —
    ``--out``, ``--catalog``, ``--generation``, ``--no-library`` — as the user gave them (paths as given),
    shell-quoted, for a generated file's "regenerate with" line; the target's own options (``--dialect``,
    ``--counters``, …) are the emitter's to give. A value that starts with ``-`` is written ``--out=-x``,
    which argparse reads as the value. ``--force``, ``--json`` and ``--no-cache`` change no output: left out."""
    import shlex

    given = [("--out", args.out), ("--catalog", args.catalog), ("--generation", args.generation)]
    words = [f"{flag}{'=' if v.startswith('-') else ' '}{shlex.quote(v)}" for flag, v in given if v is not None]
    if getattr(args, "no_library", False):
        words.append("--no-library")
    return "".join(f" {w}" for w in words)


SIZED_TARGETS = ("python", "sql", "c-header", "collector")  # what fixes every instance axis' size in its output


def _refuse_unsized(cat, target: str) -> None:
    """A target that writes a fixed instance count (an evaluator's array shapes, SQL's per-instance columns,
    a register header, a collector schema's list sizes) is refused for a catalog whose instance axes are
    sized by the data (``from_data``): their size is known only from a capture. ``docs`` and ``schemas``
    are written (the docs with the placeholder size 1 and a note)."""
    from perfonto.ontology.derive import from_data_axes

    if cat is None or cat.generation is None or target not in SIZED_TARGETS:
        return
    todo = from_data_axes(cat.generation)
    if todo:
        axes = ", ".join(f"`{b}.{a}`" for b, v in todo.items() for a in v)
        raise CommandError(
            f"--target {target} writes a fixed number of instances, but the instance axes {axes} of "
            f"`{cat.generation.name}` are sized by the data (`from_data`); `perfonto analyze` generates the "
            "evaluator for each capture's instances (evaluator.py in its output folder), or give the axis a size "
            "in a catalog of your own",
            1,
        )
