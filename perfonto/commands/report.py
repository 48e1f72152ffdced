"""``perfonto report RUN --html FILE [--plots DIR]``: the report of a run folder (written by ``perfonto
run`` or ``perfonto analyze``) as one self-contained offline HTML page (``analysis.html_report``:
pictures inlined, no network at view time) and, with ``--plots``, the pictures as PNG and SVG
(``analysis.plots``). Beside the page it writes the run's Perfetto timeline (``FILE`` stem +
``.pftrace``, protobuf) when the run has a trace and sync reads, and links to it. Exit 0 when the
outputs were written, 1 when the run folder lacks its report or a file cannot be written, 2 for
usage errors."""

from __future__ import annotations

import json
from pathlib import Path

from . import HELP
from .common import CommandError, file_force_option, stderr, why


def register(sub) -> None:
    p = sub.add_parser("report", help=HELP["report"])
    p.add_argument(
        "run", metavar="RUN", help="output folder of `perfonto run` or `perfonto analyze` (holds report.json)"
    )
    p.add_argument("--html", default=None, metavar="FILE", help="the HTML page to write (one file, viewable offline)")
    p.add_argument(
        "--plots", default=None, metavar="DIR", help="also write every picture as DIR/NAME.png and DIR/NAME.svg"
    )
    p.add_argument(
        "--no-timeline",
        action="store_true",
        help="do not write the Perfetto timeline beside the page (it takes a few seconds on long runs)",
    )
    p.add_argument("--json", action="store_true", help="print what was written as one JSON object on stdout")
    file_force_option(p)
    p.set_defaults(func=cmd_report)


def load_run_report(run: Path) -> dict:
    """``RUN/report.json`` as a dict; ``CommandError`` (exit 1) when it is missing or not a report."""
    path = run / "report.json"
    if not run.is_dir():
        raise CommandError(f"{run}: not a folder; give the output folder of `perfonto run` or `perfonto analyze`", 1)
    if not path.is_file():
        raise CommandError(
            f"{run}: no report.json; `perfonto run --out {run}` or `perfonto analyze … --out {run}` writes it", 1
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandError(f"{path}: cannot read the report ({why(exc)})", 1) from None
    if not isinstance(doc, dict) or "metrics" not in doc or "generation" not in doc:
        raise CommandError(f"{path}: not a perfonto report (no `generation` or `metrics`)", 1)
    return doc


def cmd_report(args) -> int:
    from perfonto.analysis import plots

    if args.html is None and args.plots is None:
        raise CommandError("nothing to write: give --html FILE and/or --plots DIR", 2)
    err = stderr()
    run = Path(args.run)
    doc = load_run_report(run)
    table = _metrics_table(run, err)
    pics = plots.pictures(doc, table)
    out: dict = {"pictures": [p.name for p in pics]}
    if args.plots is not None:
        from ..outputs import OutputError, check_file_target, record_outputs, refuse_run_file, remember_output

        try:
            names = frozenset(f"{p.name}{ext}" for p in pics for ext in (".png", ".svg"))
            # never one of the run's files; its own pictures of before are replaced
            refuse_run_file([Path(args.plots) / n for n in sorted(names)], run, "--plots", ours=names)
            for n in sorted(names):  # nor a file of the user's that has a picture's name
                check_file_target(Path(args.plots) / n, "--plots", args.force)
            out["plots"] = plots.write_pictures(pics, args.plots)
            for files in out["plots"].values():
                for f in files:
                    remember_output(f)
        except OutputError as exc:
            raise CommandError(str(exc), 1) from None
        except OSError as exc:
            raise CommandError(f"{args.plots}: cannot write the pictures ({why(exc)})", 1) from None
        if Path(args.plots).resolve() == run.resolve():  # into the run folder: listed as the run's, replaced with it
            record_outputs(run, [Path(f).name for fs in out["plots"].values() for f in fs])
    if args.html is not None:
        out |= _write_page(args, run, doc, pics, err)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def _metrics_table(run: Path, err):
    """RUN's ``metrics.parquet`` (for the top-down picture); None, with a note when it cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = None
    if (run / "metrics.parquet").is_file():
        try:
            table = pq.read_table(run / "metrics.parquet")
        except (OSError, pa.ArrowInvalid) as exc:
            err.print(
                f"note: {run / 'metrics.parquet'} cannot be read ({exc}); the top-down picture is left out",
                markup=False,
            )
    return table


def _write_page(args, run: Path, doc: dict, pics: list, err) -> dict:
    """Write the HTML page (and, unless ``--no-timeline``, the timeline beside it); returns what the
    JSON summary says of them."""
    from perfonto.analysis import html_report

    from ..outputs import OutputError, write_file

    from ..outputs import refuse_run_file

    from ..outputs import check_file_target

    html_path = Path(args.html)
    try:
        check_file_target(args.html, "--html", args.force)  # a device, a folder, a file of the user's: refused
        refuse_run_file(html_path, run, "--html")
        if not args.no_timeline:
            refuse_run_file(html_path.with_name(html_path.stem + ".pftrace"), run, "--html's timeline")
            check_file_target(html_path.with_name(html_path.stem + ".pftrace"), "--html's timeline", args.force)
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    timeline = None if args.no_timeline else _timeline(run, html_path, err)
    try:
        page = html_report.render(doc, pics, timeline=timeline.name if timeline is not None else None)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a report.json edited by hand
        where = getattr(exc, "section", None)
        raise CommandError(
            f"{run / 'report.json'}: {'its `' + where + '` section' if where else 'a section'} is not as perfonto "
            f"writes it ({type(exc).__name__}: {why(exc)}); write it again with `perfonto analyze` or `perfonto run`",
            1,
        ) from None
    try:
        write_file(html_path, page)
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    err.print(
        f"wrote {html_path} ({len(page.encode('utf-8')) / 1e6:.1f} MB, {len(pics)} pictures"
        + (f"; timeline {timeline}" if timeline is not None else "")
        + ")",
        markup=False,
    )
    return {
        "html": str(html_path),
        "timeline": str(timeline) if timeline is not None else None,
        "bytes": len(page.encode("utf-8")),
    }


def _timeline(run: Path, html_path: Path, err) -> Path | None:
    """Write RUN's Perfetto timeline beside the page; None (with a note) when the run has no trace
    or sync reads."""
    from perfonto.analysis.run_files import RunError
    from perfonto.analysis.timeline import TimelineError, write

    import os
    import uuid

    from ..outputs import remember_output

    target = html_path.with_name(html_path.stem + ".pftrace")
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write(run, tmp, "proto")
        os.replace(tmp, target)
        remember_output(target)
    except (RunError, TimelineError) as exc:
        err.print(f"note: no timeline beside the page: {exc}", markup=False)
        return None
    except (OSError, ValueError) as exc:
        raise CommandError(f"{target}: cannot write the timeline ({why(exc)})", 1) from None
    finally:
        tmp.unlink(missing_ok=True)
    return target
