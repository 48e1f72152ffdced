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
    are printed to stderr, and under ``--json`` a JSON document describing the failure goes to stdout.

    A catalog folder of several generations given without ``--generation`` (the loader's ``unchosen``
    error among ``diagnostics``) is a usage error whose message asks for ``--generation``, whatever the
    command wrote: each command's own wording named the default, `sohu`, which the user never gave."""

    def __init__(self, message: str, code: int = 1, diagnostics=()):
        diagnostics = list(diagnostics)
        which = _unchosen(diagnostics)
        if which is not None:
            message = f"{which.span.file} holds several generations (listed above): pick one with --generation NAME"
            code = 2
        super().__init__(message)
        self.message, self.code, self.diagnostics = message, code, diagnostics


def _unchosen(diagnostics: list):
    """The loader's error for a folder of several generations and none named, among ``diagnostics``."""
    if not any(getattr(d, "code", None) == "unknown-generation" for d in diagnostics):
        return None  # the loader is not imported for every error
    from perfonto.ontology.loader import unchosen

    return unchosen(diagnostics)


def folder_choice(catalog: str | None) -> str | None:
    """The generation of the catalog folder ``catalog`` when none is named: the one its other YAML files do
    not extend (``ontology.loader.folder_generations``); None without a folder, or when it declares none.

    Raises:
        CommandError: the folder holds several such generations (a usage error naming them and
            ``--generation``).
    """
    from perfonto.ontology.files import is_dir
    from perfonto.ontology.loader import folder_generations, folder_yamls, load_generation_files

    if catalog is None or not is_dir(catalog):
        return None
    yamls = folder_yamls(catalog)
    leaves = folder_generations(yamls)
    if len(leaves) > 1:
        raise CommandError("", 2, load_generation_files(yamls, None)[1])
    return leaves[0][0] if leaves else None


GENERATION_HELP = "hardware generation (default: sohu, or the --catalog folder's)"
CATALOG_HELP = "catalog folder of ontology *.yaml and metric *.metrics files (default: the shipped catalog)"


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
    options = [
        ("--generation", {"help": generation, "type": _generation_name}),
        ("--catalog", {"metavar": metavar, "help": catalog}),
    ]
    for name, kw in options[::-1] if catalog_first else options:
        p.add_argument(name, default=None, **kw)
    if library:
        p.add_argument(
            "--no-library", action="store_true", help="with --catalog: compile only the folder's metric files"
        )


def _generation_name(text: str) -> str:
    """``--generation``'s value: a name, not empty or blank (an empty one was looked up as a generation
    named '' and then reported as `sohu`, the default, in a second contradicting error)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; name a generation, e.g. sohu (perfonto check lists a folder's)")
    return text


OUT_HELP = "output folder, written atomically"
JSON_HELP = "print one JSON object on stdout, messages on stderr"


FORCE_HELP = "replace --out even if perfonto did not write it"
#: --out of a command whose outputs accumulate in one folder (codegen, import: ``output_folder(accumulate=True)``)
SHARED_OUT_HELP = (
    "{what}, written atomically; several {runs} may share one (each replaces only its own files); a file perfonto "
    "did not write is never replaced"
)
SHARED_FORCE_HELP = "write into a non-empty folder perfonto did not write"


def output_options(
    p, out_help: str = OUT_HELP, default: str | None = None, json_help: str = JSON_HELP, force_help: str = FORCE_HELP
) -> None:
    """A command's ``--out`` (required unless ``default`` is given), ``--force`` (by default: replace a
    folder perfonto did not write) and ``--json``, with the help texts given."""
    p.add_argument("--out", required=default is None, default=default, help=out_help, type=out_path)
    p.add_argument("--force", action="store_true", help=force_help)
    json_option(p, json_help)


def jobs_option(p) -> None:
    """A command's ``--jobs``: worker processes, an integer ≥ 1 (``args.jobs``; None: the cores)."""
    p.add_argument("--jobs", type=positive_int, default=None, help="worker processes (default: the cores)")


def json_option(p, help: str = JSON_HELP) -> None:
    """A command's ``--json`` flag (``args.json``), with the help given."""
    p.add_argument("--json", action="store_true", help=help)


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
            f"no generation named `{gen}`"
            + (f" in {args.catalog}" if getattr(args, "catalog", None) else "")
            + shipped_folder_hint(gen),
            2,
            exc.diagnostics,
        )
    check = "perfonto check" + (f" --catalog {args.catalog}" if getattr(args, "catalog", None) else "")
    return CommandError(f"the catalog does not compile; run `{check}` for the full list", 1, exc.diagnostics)


def shipped_folder_hint(name) -> str:
    """For a name that is one of the catalogs shipped as folders (``perfonto/catalogs``: linux, dcgm,
    node, ncu, rocprof), how to select it: they are catalog folders, not generations of the chip family."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "catalogs" / str(name)
    if not str(name).isidentifier() or not folder.is_dir():
        return ""
    return f"; `{name}` is a catalog shipped as a folder: select it with --catalog {folder}"


def uncompiled(cat, args, usage: bool) -> CommandError:
    """The ``CommandError`` for a ``load_catalog`` result without a graph or with errors: ``usage``
    (exit 2), no generation named ``--generation``; else a failure (1) that points at ``perfonto check``."""
    return CommandError(
        f"no generation named `{args.generation}`{shipped_folder_hint(args.generation)}"
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


def load_generation_arg(name: str, catalog: str | None = None):
    """Load ``--generation``/a positional generation: a YAML path as it is; a name from the ``catalog``
    folder (``--catalog DIR``) when the folder declares it, else the shipped one of that name. An unknown
    name is a usage error (2), a file that does not load is a failure (1)."""
    in_folder: list = []
    if catalog is not None and not names_a_file(name):
        gen, in_folder = catalog_generation(name, catalog)
        if gen is not None:
            return gen, []
    return shipped_generation(name, catalog, in_folder)


def shipped_generation(name: str, catalog: str | None = None, in_folder: list = ()):
    """The shipped generation ``name`` (or the YAML file it names) and the loader's diagnostics; an unknown
    name is a usage error (2) that shows ``in_folder`` (``catalog``'s own unknown-generation diagnostic) too,
    a file that does not load a failure (1)."""
    from perfonto.ontology.loader import load_generation

    in_folder = list(in_folder)
    gen, diags = load_generation(name)
    if gen is None:
        usage = any(d.code == "unknown-generation" for d in diags)
        where = f" (neither {catalog} nor the shipped generations declare it)" if in_folder and usage else ""
        raise CommandError(
            f"cannot load generation `{name}`{where}{shipped_folder_hint(name) if usage else ''}",
            2 if usage else 1,
            in_folder + diags,
        )
    return gen, diags


def names_a_file(name: str) -> bool:
    """Whether a generation argument names a file (a ``.yaml``/``.yml`` path, or anything that exists) rather
    than a generation (``ontology.loader.load_generation``'s rule)."""
    from pathlib import Path

    return Path(name).suffix in (".yaml", ".yml") or Path(name).exists()


def catalog_generation(name: str, catalog: str):
    """Generation ``name`` of the catalog folder ``catalog``, found as every command's ``--catalog`` finds
    it (``metrics.catalog.load_catalog``), and ``[]``; or None and the folder's unknown-generation
    diagnostic (its generations, a did-you-mean) when no file of the folder declares ``name``: the caller
    looks among the shipped ones.

    Raises:
        CommandError: the folder is not a catalog folder, or its generation ``name`` does not load (1).
    """
    from dataclasses import replace
    from pathlib import Path

    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(catalog, name)
    if cat.generation is not None:
        return cat.generation, []
    errors = cat.errors
    if errors and all(d.code == "unknown-generation" for d in errors):  # the name is an argument here, not --generation
        return None, [replace(d, hint=d.hint.replace("; pick one with --generation NAME", "")) for d in errors]
    if not Path(catalog).is_dir() or any(d.code == "empty-catalog" for d in errors):
        what = "give a folder of ontology *.yaml files"
        raise CommandError(f"--catalog {catalog}: not a catalog folder; {what}", 1, errors)
    raise CommandError(
        f"cannot load generation `{name}` from --catalog {catalog}; fix the errors above "
        f"(`perfonto check --catalog {catalog} --generation {name}` lists them)",
        1,
        errors,
    )


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


def out_path(text: str) -> str:
    """``--out``: a path that is not empty (an empty one was taken as the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: give the folder or file to write")
    return text


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

    import os

    console = Console(highlight=False)
    if not console.is_terminal:  # files and pipes: wide enough for the tables, wider where COLUMNS says so
        cols = os.environ.get("COLUMNS", "")
        width = min(max(120, int(cols) if cols.isdigit() else 0), 1000)
        console = Console(highlight=False, width=width)
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


def file_force_option(p) -> None:
    """``--force`` for a command that writes single files (``outputs.check_file_target``): replace a file
    of that name that perfonto did not write."""
    p.add_argument(
        "--force", action="store_true", help="replace an output file that perfonto did not write (refused otherwise)"
    )


def split_refused(exc: Exception, instead: str) -> CommandError | None:
    """A usage error for a chip count the model's heads do not split over, in a command without ``--tp``
    (``run``, ``emulate``): the emulator's hint names ``--tp with --dp or --pp``, which those commands do not
    take, so it is replaced by ``instead`` (a breaker followed it into "unrecognized arguments"). None for
    any other error."""
    from perfonto.emulator.parallel import MappingError

    text = str(exc)
    if not (isinstance(exc, MappingError) and "possible tp:" in text):
        return None
    return CommandError(text.split(" (the other chips as")[0] + f"; {instead}", 2)
