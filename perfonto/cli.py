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


class UsageError(Exception):
    """A command line argparse refused; ``message`` is argparse's, ``usage`` the command's usage line."""

    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.message, self.usage = message, usage


class _Parser(argparse.ArgumentParser):
    """argparse without abbreviations (``--chip`` is not ``--chips``) and whose errors are raised,
    so that ``main`` can keep ``--json``'s promise of one JSON document on stdout."""

    def __init__(self, *a, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)

    def error(self, message: str):
        raise UsageError(message, self.format_usage())


def build_parser() -> argparse.ArgumentParser:
    from perfonto import __version__

    p = _Parser(prog="perfonto", description="Counter ontology and metric derivation for Sohu and its successors.",
                epilog="`perfonto` with no arguments runs the whole main job (`perfonto run` on its defaults: emulate, "
                       "analyze, report). `perfonto COMMAND --help` describes each command.")
    p.add_argument("--version", action="version", version=f"perfonto {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        import json

        sys.stderr.write(exc.usage)
        sys.stderr.write(f"perfonto: error: {exc.message}\n")
        if "--json" in argv:
            print(json.dumps({"ok": False, "error": exc.message, "exit_code": 2, "diagnostics": []}, indent=2))
        return 2
    args.argv = ["perfonto", *argv]  # what the output manifests record
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    from .commands.common import CommandError

    try:
        return args.func(args)
    except CommandError as exc:
        return _fail(args, exc.message, exc.code, exc.diagnostics)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a path the system refused (too long, a device, no permission): name it and the reason
        from perfonto.ontology.files import describe_os_error

        return _fail(args, describe_os_error(exc), 1, [])
    except Exception as exc:  # an internal error: say so plainly, keep --json's promise
        import os

        if os.environ.get("PERFONTO_DEBUG"):
            raise
        return _fail(args, f"internal error: {type(exc).__name__}: {exc} (set PERFONTO_DEBUG=1 for the traceback, "
                           "and please report it)", 1, [])


def _fail(args, message: str, code: int, diagnostics) -> int:
    import json

    from .commands.common import stderr

    err = stderr()
    for d in diagnostics:
        err.print(d.render(), markup=False)
    err.print(f"error: {message}", markup=False)
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "error": message, "exit_code": code,
                          "diagnostics": [d.to_json() for d in diagnostics]}, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
