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
from perfonto.ontology.errors import PerfontoError


class UsageError(PerfontoError):
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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With ``command`` (a name of ``commands.HELP``), only that command's
    module is imported and registered, with all its options; without, every command is listed with
    its one-line help (``perfonto --help``) and no command module is imported. Every command takes
    ``--no-cache`` (compile from the files, as a first run does: ``ontology.cache``; the what-if
    commands also run every point again)."""
    from perfonto import __version__

    from .commands import HELP, module_of

    p = _Parser(
        prog="perfonto",
        description="Counter ontology and metric derivation for Sohu and its successors.",
        epilog="`perfonto` with no arguments runs the whole main job (`perfonto run` on its defaults: emulate, "
        "analyze, report). `perfonto COMMAND --help` describes each command.",
    )
    p.add_argument("--version", action="version", version=f"perfonto {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p.commands = sub.choices  # name → the command's parser (``main`` refuses unknown arguments with its usage)
    if command in HELP:
        importlib.import_module(f"perfonto.commands.{module_of(command)}").register(sub)
        for sp in set(sub.choices.values()):
            sp.add_argument(
                "--no-cache",
                action="store_true",
                help="neither read nor write perfonto's cache: compile the catalog and the evaluator from the files "
                "and run every what-if point again (also PERFONTO_NO_CACHE=1; the cache folder: PERFONTO_CACHE_DIR)",
            )
        known = set(sub.choices)
        for name, text in HELP.items():  # the other commands: listed, not loaded
            if name not in known:
                sub.add_parser(name, help=text)
    else:
        for name, text in HELP.items():
            sub.add_parser(name, help=text)
    return p


def _given_twice(command, argv: list[str]) -> str | None:
    """The first option of ``command`` that takes one value and appears twice in ``argv``:
    argparse keeps the last in silence (a breaker's `--slow-chip 3:1.2 --slow-chip 4:1.3` lost chip 3's
    fault). Options that collect their values (``--vary``, ``--constant``) may repeat."""
    import argparse

    seen: set[str] = set()
    for tok in argv:
        if tok == "--":
            break
        if not tok.startswith("-"):
            continue
        flag = tok.split("=", 1)[0]
        action = getattr(command, "_option_string_actions", {}).get(flag)
        collects = (
            argparse._AppendAction,
            argparse._CountAction,
            argparse._HelpAction,
            argparse._StoreConstAction,
            argparse.BooleanOptionalAction,
        )
        if action is None or isinstance(action, collects):  # a repeated switch (--json --json) is harmless
            continue
        key = action.dest
        if key in seen:
            return flag
        seen.add(key)
    return None


def _option_hint(command, extra: list[str]) -> str:
    """``; did you mean `--chips`?`` for the first unknown option of ``extra`` close to one of ``command``'s
    (``--chip 8`` was refused with no word of ``--chips``: abbreviations are refused on purpose); "" else."""
    from perfonto.ontology.diagnostics import did_you_mean

    known = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    for tok in extra:
        if tok.startswith("--"):
            hint = did_you_mean(tok.split("=", 1)[0], known)
            if hint:
                return f"; {hint}"
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["run"]  # `perfonto` alone runs the main job on its defaults
    parser = build_parser(argv[0] if not argv[0].startswith("-") else None)
    try:
        args, extra = parser.parse_known_args(argv)
        command = parser.commands.get(getattr(args, "command", None) or "", parser)
        if extra:  # refused by the command's own parser, so that the usage shown is the command's
            command.error(f"unrecognized arguments: {' '.join(extra)}{_option_hint(command, extra)}")
        twice = _given_twice(command, argv[1:])
        if twice:
            command.error(f"{twice} is given twice; give it once (only one value is used)")
    except UsageError as exc:
        import json

        sys.stderr.write(exc.usage)
        sys.stderr.write(f"perfonto: error: {exc.message}\n")
        if "--json" in argv:
            print(json.dumps({"ok": False, "error": exc.message, "exit_code": 2, "diagnostics": []}, indent=2))
        return 2
    args.argv = ["perfonto", *argv]  # what the output manifests record
    if args.command is None or not hasattr(args, "func"):
        parser.print_help(sys.stderr)
        return 2
    if getattr(args, "no_cache", False):
        import os

        from perfonto.ontology.cache import NO_CACHE_ENV

        before = os.environ.get(NO_CACHE_ENV)
        os.environ[NO_CACHE_ENV] = "1"  # for this command only: ``main`` called in-process leaves it as it was
        try:
            return _dispatch(args)
        finally:
            if before is None:
                os.environ.pop(NO_CACHE_ENV, None)
            else:
                os.environ[NO_CACHE_ENV] = before
    return _dispatch(args)


#: Arguments that name a file or folder: an empty one is refused (a breaker's `analyze ''` read the current
#: folder, `--plots ''` wrote pictures there, `--requests ''` and `--topology ''` read it).
PATH_ARGS = {
    "counters": "COUNTERS",
    "run": "RUN",
    "runs": "RUN",
    "file": "FILE",
    "requests": "--requests",
    "trace": "--trace",
    "sync": "--sync",
    "snapshots": "--snapshots",
    "topology": "--topology",
    "catalog": "--catalog",
    "plots": "--plots",
    "html": "--html",
    "out": "--out",
    "plot": "--plot",
    "follow": "--follow",
    "collector_config": "--collector-config",
    "rows": "--rows",
    "sources": "--sources",
}


def _empty_path(args) -> str | None:
    """The option of the first empty path among the parsed arguments, or None."""
    for dest, flag in PATH_ARGS.items():
        value = getattr(args, dest, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and v == "" for v in values):
            return "--counters" if dest == "counters" and getattr(args, "command", "") == "codegen" else flag
    return None


def _dispatch(args) -> int:
    """Run the parsed command; its errors become ``_fail``'s message and exit status."""
    from .commands.common import CommandError
    from .outputs import OutputError

    _arrow_pool(args.command)
    empty = _empty_path(args)
    if empty is not None:
        return _fail(args, f"{empty}: an empty path; give a file or folder", 2, [])

    try:
        return args.func(args)
    except CommandError as exc:
        return _fail(args, exc.message, exc.code, exc.diagnostics)
    except OutputError as exc:  # an output that cannot be written where asked (the message names it and what to do)
        return _fail(args, str(exc), 1, [])
    except KeyboardInterrupt:
        return 130
    except (
        PerfontoError
    ) as exc:  # bad input a command did not turn into its own message: still a clean error, not an internal one
        return _fail(args, str(exc), 1, list(getattr(exc, "diagnostics", []) or []))
    except OSError as exc:  # a path the system refused (too long, a device, no permission): name it and the reason
        from perfonto.ontology.files import describe_os_error

        return _fail(args, describe_os_error(exc), 1, [])
    except Exception as exc:  # an internal error: say so plainly, keep --json's promise
        import os

        if os.environ.get("PERFONTO_DEBUG"):
            raise
        return _fail(
            args,
            f"internal error: {type(exc).__name__}: {exc} (set PERFONTO_DEBUG=1 for the traceback, "
            "and please report it)",
            1,
            [],
        )


def entry() -> int:
    """The ``perfonto`` program (console script and ``python -m perfonto``): ``main`` in a process of its
    own. pyarrow imports pandas, when it is installed, the first time it builds an array, only to ask
    whether what it was given is a pandas object (1.0 s of a 5.7 s analyze here); the command line
    never hands it one, so in this process an import finder says pandas is not installed
    (``capture.no_pandas``). ``PERFONTO_PANDAS=1`` lets it load; ``main`` called in-process (tests, a
    user's script) changes nothing. A command that decodes a dump allocates Arrow's buffers from
    jemalloc (``_arrow_pool``)."""
    from perfonto.capture.no_pandas import block_pandas

    global _OWN_PROCESS

    block_pandas()
    _OWN_PROCESS = True
    try:
        return main()
    except KeyboardInterrupt:  # Ctrl-C while the command starts (imports, parsing): no traceback, the shell's code
        print("interrupted", file=sys.stderr)
        return 130


_OWN_PROCESS = False  # set by ``entry``: this process is the ``perfonto`` program, not a caller of ``main``
_DUMP_READERS = ("analyze", "run")  # the commands that decode dumps (and import pyarrow anyway)


def _arrow_pool(command: str | None) -> None:
    """In the ``perfonto`` process, for the commands that decode a dump (``analyze``, ``run``), Arrow
    allocates from jemalloc rather than its default, mimalloc, where this pyarrow carries jemalloc and
    ``ARROW_DEFAULT_MEMORY_POOL`` names no pool. Decoding a dump's Parquet pages allocates and frees a
    piece's buffers over and over; mimalloc hands freed pages back to the system and faults them in
    again. On this 2-core VM, ``perfonto analyze`` of a 2M-row dump took 10.9 s against 11.6–11.9 s at
    the same peak memory (1.36–1.43 GB); a pass over a 241k-row dump's row groups 0.38 s against 0.76 s.
    Chosen in this process only (``pa.set_memory_pool``): child processes (Spark's workers, a sweep's
    pool) keep their own default, and a pyarrow built without jemalloc keeps mimalloc, silently."""
    import os

    if not _OWN_PROCESS or command not in _DUMP_READERS or os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # built without jemalloc
        pass


def _fail(args, message: str, code: int, diagnostics) -> int:
    import json

    from .commands.common import stderr

    err = stderr()
    for d in diagnostics:
        err.print(d.render(), markup=False)
    err.print(f"error: {message}", markup=False)
    if getattr(args, "json", False):
        print(
            json.dumps(
                {"ok": False, "error": message, "exit_code": code, "diagnostics": [d.to_json() for d in diagnostics]},
                indent=2,
            )
        )
    return code


if __name__ == "__main__":
    sys.exit(entry())
