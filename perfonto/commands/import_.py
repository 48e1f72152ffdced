"""``perfonto import perf|intel|arm|rocprof FILE --out DIR``: read a metric catalog of another tool,
write a generation YAML and a ``.metrics`` file that mean the same, compile them, and report.

Exit 0 when the file was read and at least 95 % of its metrics compile, 1 otherwise. The report goes
to stderr, or to stdout as one JSON document under ``--json``."""

from __future__ import annotations

import argparse
from pathlib import Path
import json

from . import HELP
from .common import SHARED_FORCE_HELP, SHARED_OUT_HELP, output_options, stderr


def _constant(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        if not sep or not name.strip():
            raise ValueError
        return name.strip().lstrip("#").lower(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not NAME=VALUE: {text!r} (e.g. slots=8)") from None


def register(sub) -> None:
    from perfonto.interop import FORMATS

    p = sub.add_parser("import", help=HELP["import"])
    p.add_argument("format", choices=FORMATS, help="source format")
    p.add_argument("file", help="the catalog file")
    output_options(
        p,
        out_help=SHARED_OUT_HELP.format(what="folder for the generated YAML, .metrics file and report", runs="imports")
        + " (but `--catalog DIR` compiles every metrics file of a folder against one generation: import each "
        "generation you will analyse with into a folder of its own)",
        force_help=SHARED_FORCE_HELP,
        json_help="print the report as one JSON document on stdout",
    )
    p.add_argument("--name", default=None, help="generation name (default: from the file name)")
    p.add_argument(
        "--generation",
        default=None,
        help="perf only: resolve event names against this generation (e.g. sohu, for perfonto's own export); a "
        "generation extending a shipped one is used with the shipped metric library, so the file's metrics that the "
        "library defines with the same values are not written again",
    )
    p.add_argument(
        "--constant",
        type=_constant,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of a machine constant (#slots, HYPERTHREADING_ON, simd_count ...); repeatable",
    )
    p.add_argument("--arch", action="append", default=[], help="rocprof only: architecture(s) to import (default: all)")
    p.add_argument(
        "--arch-std", action="append", default=[], help="perf only: an architecture-standard JSON file for ArchStdEvent"
    )
    p.set_defaults(func=cmd_import)


def _report_name(out, doc: dict) -> str:
    """``import-report.json``; beside another generation's import in the same folder (imports accumulate there),
    ``import-report-<generation>.json``, so that neither report replaces the other."""
    mine = sorted(str(g.get("generation")) for g in doc.get("generations") or [])
    try:
        there = json.loads((Path(out) / "import-report.json").read_text(encoding="utf-8"))
        theirs = sorted(str(g.get("generation")) for g in there.get("generations") or [])
    except (OSError, ValueError, AttributeError, TypeError):
        return "import-report.json"
    return "import-report.json" if theirs == mine or not mine else f"import-report-{mine[0]}.json"


def _moved(doc: dict, tmp, out) -> dict:
    """``doc`` with every mention of the temporary folder ``tmp`` (a path, or a path inside a message) as ``out``."""
    a, b = json.dumps(str(tmp))[1:-1], json.dumps(str(out))[1:-1]
    return json.loads(json.dumps(doc).replace(a, b))


def cmd_import(args) -> int:
    from pathlib import Path

    from perfonto.interop import import_file

    err = stderr()
    if args.generation and args.format != "perf":
        err.print("error: --generation applies to perf files only", markup=False)
        return 2
    if Path(args.file).is_dir():  # the real error, before --out's (`import perf . --out b`: "--out lies inside")
        from perfonto.interop import FORMAT_NAMES, ImportReport

        report = ImportReport(args.format, args.file)
        report.error = f"{args.file}: is a folder, not a {FORMAT_NAMES[args.format]} file: give the catalog file"
        return _print(report, report.to_json(), report.render(), args.json, err)
    from perfonto.outputs import output_folder

    class _NotWritten(Exception):
        """The file could not be imported: the output folder is left as it was."""

    out = Path(args.out)
    command = getattr(args, "argv", None)
    try:
        with output_folder(out, command=command, force=args.force, inputs={"file": args.file}, accumulate=True) as tmp:
            report = import_file(
                args.format,
                args.file,
                tmp,
                args.name,
                extends=args.generation,
                constants=dict(args.constant),
                archs=args.arch or None,
                arch_std=args.arch_std or None,
            )
            doc = _moved(report.to_json(), tmp, out)
            if report.error:
                raise _NotWritten
            others = _other_generations(out, doc)
            if others:
                doc["folder_shared_with"] = others
            (tmp / _report_name(out, doc)).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    except _NotWritten:
        pass
    text = report.render().replace(str(tmp), str(out))  # paths where the files are now, never the temporary folder
    if doc.get("folder_shared_with"):
        text += (
            f"\n  note: {out} also holds the import of {', '.join(doc['folder_shared_with'])}: `--catalog {out}` "
            "compiles every metrics file of the folder against one generation, so the folder serves as storage; "
            "import each generation into a folder of its own to analyse with it"
        )
    return _print(report, doc, text, args.json, err)


def _print(report, doc: dict, text: str, as_json: bool, err) -> int:
    """The report on stdout as JSON (``--json``) or as text on stderr; the exit code."""
    if as_json:
        print(json.dumps(doc, indent=2))
    else:
        err.print(text, markup=False)
    return 0 if report.ok else 1


def _other_generations(out, doc: dict) -> list[str]:
    """The generations of the other imports already in folder ``out`` (their import reports)."""
    mine = {str(g.get("generation")) for g in doc.get("generations") or []}
    found: set[str] = set()
    for p in sorted(Path(out).glob("import-report*.json")):
        try:
            found |= {str(g.get("generation")) for g in json.loads(p.read_text(encoding="utf-8"))["generations"]}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return sorted(found - mine)
