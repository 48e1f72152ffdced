"""Shared pieces of the command modules: stderr console, argument types."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING
from perfonto.ontology.errors import PerfontoError

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


class CommandError(PerfontoError):
    """A command could not do its job. ``code`` is the exit code (2 usage, 1 failure); ``diagnostics``
    are printed to stderr, and under ``--json`` a JSON document describing the failure goes to stdout."""

    def __init__(self, message: str, code: int = 1, diagnostics=()):
        super().__init__(message)
        self.message, self.code, self.diagnostics = message, code, list(diagnostics)


GENERATION_HELP = "generation (default: sohu, or the --catalog folder's)"
CATALOG_HELP = "catalog folder (default: the shipped catalog)"


def catalog_options(
    p,
    generation: str = GENERATION_HELP,
    catalog: str = CATALOG_HELP,
    metavar: str | None = None,
    library: bool = False,
    catalog_first: bool = False,
) -> None:
    """A command's ``--generation`` and ``--catalog`` (the catalog it compiles; help texts as given, in
    that order or, with ``catalog_first``, the other way round) and, with ``library``, ``--no-library``."""
    options = [("--generation", {"help": generation}), ("--catalog", {"metavar": metavar, "help": catalog})]
    for name, kw in options[::-1] if catalog_first else options:
        p.add_argument(name, default=None, **kw)
    if library:
        p.add_argument(
            "--no-library", action="store_true", help="with --catalog: compile only the folder's metric files"
        )


OUT_HELP = "output folder, written atomically"
JSON_HELP = "print one JSON object on stdout, messages on stderr"


def output_options(p, out_help: str = OUT_HELP, default: str | None = None, json_help: str = JSON_HELP) -> None:
    """A command's ``--out`` folder (required unless ``default`` is given), ``--force`` (replace a folder
    perfonto did not write) and ``--json``, with the help texts given."""
    p.add_argument("--out", required=default is None, default=default, help=out_help)
    p.add_argument("--force", action="store_true", help="replace --out even if perfonto did not write it")
    p.add_argument("--json", action="store_true", help=json_help)


def job_arguments(args, err) -> dict:
    """The keyword arguments a job (``job.run_job``, ``job.analyze_job``) takes from its command's options
    as they are: the catalog (``--catalog``, ``--generation``, ``--no-library``), the output folder
    (``--out``, ``--force``), the command line it records there, and its log as plain text on ``err``."""
    return dict(
        catalog=args.catalog,
        generation=args.generation,
        library=not args.no_library,
        out=args.out,
        force=args.force,
        command=args.argv,
        log=lambda s: err.print(s, markup=False),
    )


def summary(args, doc: dict, *lines: str, err: Console | None = None) -> None:
    """What a command that wrote its output says: under ``--json`` ``doc`` as one JSON object on stdout,
    else ``lines`` as plain text (no markup) on stderr (``err``, or a new console)."""
    if args.json:
        print(json.dumps(doc, indent=2))
        return
    err = err or stderr()
    for line in lines:
        err.print(line, markup=False)


def catalog_failure(exc, args) -> CommandError:
    """The ``CommandError`` for a ``CatalogError``: an unknown generation is a usage error (2), a
    catalog that does not compile a failure (1)."""
    usage = any(d.code == "unknown-generation" for d in exc.diagnostics)
    gen = getattr(args, "generation", None) or "sohu"
    if usage:
        return CommandError(
            f"no generation named `{gen}`" + (f" in {args.catalog}" if getattr(args, "catalog", None) else ""),
            2,
            exc.diagnostics,
        )
    check = "perfonto check" + (f" --catalog {args.catalog}" if getattr(args, "catalog", None) else "")
    return CommandError(f"the catalog does not compile; run `{check}` for the full list", 1, exc.diagnostics)


def uncompiled(cat, args, usage: bool) -> CommandError:
    """The ``CommandError`` for a ``load_catalog`` result without a graph or with errors: ``usage``
    (exit 2), no generation named ``--generation``; else a failure (1) that points at ``perfonto check``."""
    return CommandError(
        f"no generation named `{args.generation}`"
        if usage
        else "the catalog does not compile; run `perfonto check` for the full list",
        2 if usage else 1,
        cat.errors,
    )


def why(exc: BaseException) -> str:
    """A readable message for an exception from a lower layer: an OSError names its file and what
    the system said (never a bare errno), others give their message."""
    if isinstance(exc, OSError):
        from perfonto.ontology.files import describe_os_error

        return describe_os_error(exc)
    return str(exc.args[0]) if exc.args else type(exc).__name__


def load_generation_arg(name: str):
    """Load ``--generation``/a positional generation: an unknown name is a usage error (2), a file that
    does not load is a failure (1)."""
    from perfonto.ontology.loader import load_generation

    gen, diags = load_generation(name)
    if gen is None:
        usage = any(d.code == "unknown-generation" for d in diags)
        raise CommandError(f"cannot load generation `{name}`", 2 if usage else 1, diags)
    return gen, diags


def _int_at_least(minimum: int):
    """An argparse type: an integer ≥ ``minimum``, else a usage error (exit 2) naming the text."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text!r}")
        return v

    return parse


non_negative_int = _int_at_least(0)
positive_int = _int_at_least(1)


def request_rate(text: str) -> float:
    """``--rate``: Poisson arrivals in requests/s, a finite number above 0 (an argparse type applying
    ``perfonto.values.rate``, the rule the API and ``--vary rate=`` use; anything else is a usage error)."""
    from perfonto.values import ValueRuleError, rate

    try:
        return rate(text, "rate")
    except ValueRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("rate: ")) from None


def groupings(text: str) -> tuple[str, ...]:
    """``--by``: a comma-separated list of ``op``, ``layer``, ``phase`` (an argparse type; anything else
    is a usage error naming the choices)."""
    from perfonto.analysis.spans import BY

    parts = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in parts if p not in BY]
    if not parts or bad:
        raise argparse.ArgumentTypeError(
            f"unknown grouping {', '.join(map(repr, bad)) or repr(text)}; "
            f"use {', '.join(BY)} (comma-separated for several, e.g. --by op,layer)"
        )
    return parts


BY_HELP = (
    "every metric per group: op (op class), layer, phase (prefill/decode/mixed), comma-separated; "
    "writes metrics_by_<group>.parquet and a `by` section in report.json (needs the device trace)"
)


def stderr() -> Console:
    from rich.console import Console  # rich loads when a command prints (0.08 s of a start-up)

    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # files and pipes: wide enough for the tables, no wrapping
        console = Console(highlight=False, width=120)
    return console


def transient_bar(console: Console, *columns):
    """A rich progress bar on ``console`` that leaves nothing behind when it stops: each task's
    description, the bar, then ``columns`` (rich progress columns)."""
    from rich.progress import BarColumn, Progress, TextColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), *columns, console=console, transient=True)


def duration(text: str) -> float:
    """Parse ``1s``, ``500ms``, ``2.5 s``, ``1min`` into seconds (``perfonto.values.duration_s``: the
    rule the API and the sweep use too)."""
    from perfonto.values import ValueRuleError, duration_s

    try:
        return duration_s(text, "duration")
    except ValueRuleError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("duration: ")) from None
