"""``perfonto import perf|intel|arm|rocprof FILE --out DIR``: read a metric catalog of another tool,
write a generation YAML and a ``.metrics`` file that mean the same, compile them, and report.

Exit 0 when the file was read and at least 95 % of its metrics compile, 1 otherwise. The report goes
to stderr, or to stdout as one JSON document under ``--json``."""

from __future__ import annotations

import argparse
import json

from . import HELP
from .common import out_path, stderr


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
    p.add_argument(
        "--out", required=True, help="folder for the generated YAML, .metrics file and report", type=out_path
    )
    p.add_argument("--name", default=None, help="generation name (default: from the file name)")
    p.add_argument(
        "--generation",
        default=None,
        help="perf only: resolve event names against this generation (e.g. sohu, for perfonto's own export)",
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
    p.add_argument("--json", action="store_true", help="print the report as one JSON document on stdout")
    p.set_defaults(func=cmd_import)


def cmd_import(args) -> int:
    from pathlib import Path

    from perfonto.interop import import_file

    err = stderr()
    if args.generation and args.format != "perf":
        err.print("error: --generation applies to perf files only", markup=False)
        return 2
    report = import_file(
        args.format,
        args.file,
        args.out,
        args.name,
        extends=args.generation,
        constants=dict(args.constant),
        archs=args.arch or None,
        arch_std=args.arch_std or None,
    )
    doc = report.to_json()
    if not report.error:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "import-report.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        err.print(report.render(), markup=False)
    return 0 if report.ok else 1
