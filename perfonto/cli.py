"""``perfonto`` command line.

Exit codes: 2 for usage errors everywhere; commands that judge (``check``, ``test``, ``validate``,
``diff``) exit 1 when what they judge fails; commands that produce (``run``, ``codegen``, ``docs``,
``import``, ``export``, …) exit 0 when they produced their output and 1 when they could not. Under
``--json`` stdout holds one JSON document and nothing else; messages go to stderr.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfonto", description="Counter ontology and metric derivation for Sohu and its successors.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = name.replace("-", "_")
        if module in ("import",):  # Python keywords: the module is named with a trailing underscore
            module += "_"
        importlib.import_module(f"perfonto.commands.{module}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["run"]  # `perfonto` alone runs the main job on its defaults
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
