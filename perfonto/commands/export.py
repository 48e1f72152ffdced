"""``perfonto export perf-json [--generation G] --out FILE``: write generation G's compiled metric
catalog (default: the shipped Sohu catalog) as Linux perf pmu-events metrics JSON.
``perfonto export semconv [--generation G] --out DIR``: write it as an OpenTelemetry
semantic-conventions registry (Weaver's definition/2 YAML, ``interop.semconv``).

Exit 0 when the file was written, 1 when the catalog does not compile or the file cannot be written.
Metrics perf cannot express are listed on stderr with the reason (or in the JSON under ``--json``).
The formats are the targets ``perfonto.targets`` lists for ``export``."""

from __future__ import annotations


from ..targets import offered_by
from . import HELP
from .common import catalog_options, CommandError, output_options, stderr, summary, uncompiled


def register(sub) -> None:
    p = sub.add_parser("export", help=HELP["export"])
    p.add_argument("target", choices=offered_by("export"), help="output format")
    catalog_options(p, generation="generation whose catalog to export (default: sohu, or the --catalog folder's)")
    output_options(
        p,
        "output file (perf-json) or folder (semconv)",
        # unlike a command that replaces its --out folder, semconv writes into the folder and keeps its files
        force_help="semconv: write into a non-empty folder perfonto did not write "
        "(its files are kept; one with the name of an output is refused)",
    )
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from pathlib import Path

    from perfonto.metrics.catalog import load_catalog

    from ..targets import target

    err = stderr()
    from perfonto.outputs import OutputError, check_file_target, write_file

    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None or cat.errors:
        raise uncompiled(cat, args, any(d.code == "unknown-generation" for d in cat.diagnostics))
    args.generation = cat.graph.generation.name
    if args.target == "semconv":
        return _semconv(args, cat, err)
    emitted = target(args.target).emit(cat, {})
    result = emitted.detail
    try:
        (text,) = emitted.files.values()  # one file, written where --out says
        check_file_target(args.out, "--out", args.force)
        write_file(Path(args.out), text)  # beside it, then renamed: a full disk leaves the old file whole
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    n_const = sum(1 for e in result.entries if e.get("MetricName", "").startswith("spec."))
    n_events = len(result.events)
    doc = {
        "ok": True,
        "generation": args.generation,
        "out": args.out,
        "metrics": len(result.entries) - n_const - n_events,
        "constants": n_const,
        "events": n_events,
        "skipped": result.skipped,
        "lost": result.lost,
    }
    summary(
        args,
        doc,
        f"wrote {args.out}: {doc['metrics']} metrics, {n_const} constant metrics and {n_events} event "
        f"definitions of `{args.generation}` as perf pmu-events JSON (re-import with `perfonto import perf "
        f"{args.out}`)",
        *([f"not expressible in perf ({len(result.skipped)}):"] if result.skipped else []),
        *(f"  - {name}: {why}" for name, why in result.skipped.items()),
        err=err,
    )
    return 0


def _semconv(args, cat, err) -> int:
    from perfonto.interop.semconv import lint

    from pathlib import Path

    from perfonto.outputs import OutputError, output_folder, relocate

    from ..targets import target, write_files

    try:
        emitted = target("semconv").emit(cat, {})
        reg = emitted.detail
        with output_folder(
            args.out, command=getattr(args, "argv", None), force=args.force
        ) as tmp:  # complete or absent
            paths = [Path(relocate(str(p), tmp, Path(args.out))) for p in write_files(emitted.files, tmp)]
    except (ValueError, OutputError) as exc:
        raise CommandError(str(exc), 1) from None
    except OSError as exc:
        raise CommandError(f"cannot write {args.out}: {exc.strerror or exc}", 1) from None
    problems = lint(reg.files)
    doc = {
        "ok": not problems,
        "generation": args.generation,
        "out": args.out,
        "files": [str(p) for p in paths],
        **reg.counts,
        "skipped": reg.skipped,
        "problems": problems,
    }
    summary(
        args,
        doc,
        f"wrote {args.out}: an OpenTelemetry semantic-conventions registry of `{args.generation}` "
        f"({reg.counts['metrics']} metrics, {reg.counts['records']} record histograms, {reg.counts['signals']} "
        f"signals, {reg.counts['attributes']} attributes); check it with `weaver registry check -r {args.out}`",
        *(f"  skipped {name}: {why}" for name, why in reg.skipped.items()),
        *(f"  problem: {p}" for p in problems),
        err=err,
    )
    return 1 if problems else 0
