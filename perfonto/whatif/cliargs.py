"""Command-line pieces shared by ``sweep``, ``sensitivity`` and ``compare``: the workload options,
``--vary``, the cache and the job count, and the base point they make."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from .knobs import KnobError, Point, parse_mapping
from .points import DEFAULTS, Cache, Target, default_cache_dir


def add_workload_args(p, *, generation: bool = True) -> None:
    """The base workload (defaults: ``points.DEFAULTS``, the preset's engine), the generation, the
    cache and ``--jobs``."""
    from perfonto.commands.common import catalog_options, jobs_option, json_option
    from perfonto.commands.workload_args import workload_options

    if generation:
        catalog_options(p, catalog="a catalog folder whose generation is the base", metavar="DIR")
    notes = {k: {"note": f"{v}, or the mapping's" if k == "chips" else v} for k, v in DEFAULTS.items()}
    workload_options(
        p,
        *WORKLOAD,
        fill_later=True,
        **{**notes, "model": {**notes["model"], "choices": None}},  # an unknown model: KnobError, JSON under --json
    )
    for opt in PROJECT_ONLY:  # project's options: refused with the equivalent --mapping (given_workload)
        flag = opt == "--attention-dp"
        kw: dict = dict(action=argparse.BooleanOptionalAction) if flag else {}
        p.add_argument(opt, default=None, help=argparse.SUPPRESS, dest=_dest(opt), **kw)
    jobs_option(p)  # the points' cache: perfonto's (``--no-cache``, PERFONTO_CACHE_DIR), added by the CLI
    p.add_argument("--cache", default=None, metavar="DIR", help=argparse.SUPPRESS)  # gone: says what replaced it
    json_option(p)


#: The workload options of the what-if commands (``perfonto.commands.workload_args.workload_options``), in order.
WORKLOAD = (
    "model",
    "chips",
    "isl",
    "osl",
    "dtype",
    "kv_dtype",
    "mapping",
    "preset",
    "engine_profile",
    "batch",
    "concurrency",
    "rate",
    "requests",
)


#: ``perfonto project``'s mapping options, which the what-if commands take as one ``--mapping``.
PROJECT_ONLY = ("--tp", "--pp", "--dp", "--ep", "--attention-dp")


def _dest(opt: str) -> str:
    return "project_" + opt.removeprefix("--").replace("-", "_")


def _project_options(args) -> None:
    """Refuse ``project``'s --tp/--pp/--dp/--ep/--attention-dp, naming the ``--mapping`` that says the same.

    Raises:
        KnobError: one of them given.
    """
    given = {o: getattr(args, _dest(o), None) for o in PROJECT_ONLY}
    given = {o: v for o, v in given.items() if v is not None}
    if not given:
        return
    adp = given.pop("--attention-dp", None)
    parts = [f"{o.removeprefix('--')}{v}" for o, v in given.items()] + (["adp"] if adp else [])
    typed = " ".join(
        [f"{o} {v}" for o, v in given.items()] + [f"--{'' if adp else 'no-'}attention-dp"] * (adp is not None)
    )
    command = getattr(args, "command", None) or "this command"
    raise KnobError(
        f"{command} takes the mapping as one option: --mapping {'-'.join(parts) or 'tp8'} for {typed} "
        "(tp<N>, pp<N>, dp<N>, ep<N>, adp joined by -; the chips are their product unless --chips)"
    )


def given_workload(args) -> dict:
    """The workload options given on the command line (None left out).

    Raises:
        KnobError: ``project``'s mapping options (``PROJECT_ONLY``), a bad mapping, an unknown model.
    """
    _project_options(args)
    out = {}
    for k in WORKLOAD:
        v = getattr(args, k, None)
        if v is not None:
            out[k] = v
    if "mapping" in out:
        parse_mapping(out["mapping"])
    if "model" in out:
        from perfonto.emulator.models import get_model

        try:
            get_model(out["model"])
        except KeyError as exc:
            raise KnobError(exc.args[0]) from None
    return out


def base_point(args) -> Point:
    """The base point: the given workload options over nothing (``points.workload`` fills defaults)."""
    return Point(workload=tuple(sorted(given_workload(args).items())))


def target_of(generation: str | None, catalog: str | None) -> Target:
    """A ``Target`` from a generation name (or YAML path, or catalog folder) and ``--catalog``."""
    if catalog is None and generation is not None and Path(generation).is_dir():
        return Target(None, generation)
    return Target(generation if generation or catalog else "sohu", catalog)


def cache_of(args) -> Cache:
    """The points' cache: ``points.default_cache_dir``, or none under ``--no-cache`` or
    ``PERFONTO_NO_CACHE=1`` (the switches of every perfonto cache, ``ontology.cache``)."""
    import os

    from perfonto.commands.common import CommandError, stderr
    from perfonto.ontology.cache import CACHE_ENV, enabled

    if getattr(args, "cache", None):
        raise CommandError(
            f"--cache is gone: the what-if points live in perfonto's cache folder; set {CACHE_ENV}={args.cache} "
            "(or --no-cache to run every point again)",
            2,
        )
    if os.environ.get("PERFONTO_CACHE") and not os.environ.get(CACHE_ENV):
        stderr().print(
            f"note: PERFONTO_CACHE is no longer read; the what-if points are cached in {default_cache_dir()} "
            f"(set {CACHE_ENV} to move perfonto's cache)",
            markup=False,
        )
    return Cache(default_cache_dir() if enabled() and not getattr(args, "no_cache", False) else None)


def add_output_args(p, table: str) -> None:
    """``--out`` (``table`` as .csv, .parquet or .json) and ``--plot`` (the figure as .png or .svg)."""
    from perfonto.commands.common import out_path

    p.add_argument("--out", default=None, metavar="FILE", help=f"{table} as .csv, .parquet or .json", type=out_path)
    p.add_argument("--plot", default=None, metavar="FILE", help="the figure as .png or .svg", type=out_path)


def check_outputs(args) -> None:
    """Refuse an ``--out`` or ``--plot`` file of a kind it cannot be written as, before any work.

    Raises:
        KnobError: naming the file and the extensions it may have; OutputError: a device, a folder, or a
            file perfonto did not write without ``--force`` (``outputs.check_file_target``).
    """
    from perfonto.outputs import check_file_target

    for path, exts in ((args.out, (".csv", ".parquet", ".json")), (args.plot, (".png", ".svg"))):
        if path and not str(path).lower().endswith(exts):
            raise KnobError(f"{path}: write {' or '.join(exts)}")
    for opt, path in (("--out", args.out), ("--plot", args.plot)):
        if path is not None:  # a device, a folder or a file of the user's is refused before any work
            check_file_target(path, opt, getattr(args, "force", False))


def write_outputs(
    args,
    rows: Callable[[], list[dict]],
    figure: Callable[[Any], Any],
    units: dict[str, str] | None = None,
    headed: set[str] | None = None,
) -> dict[str, str]:
    """Write the ``--out`` table (``sweep.write_table`` of ``rows()``, with ``units`` and the columns
    ``headed`` with theirs) and the ``--plot`` figure (``figure(path)``), each when given; returns
    ``{"table": path, "plot": path}`` of those written.

    Raises:
        CommandError: a file cannot be written (exit 1, the file and what the system said).
    """
    from perfonto.commands.common import CommandError, why

    outputs = {}
    what = None
    try:
        if args.out:
            from .sweep import write_table

            what = ("--out", args.out)
            write_table(rows(), args.out, units, headed)
            outputs["table"] = str(args.out)
        if args.plot:
            what = ("--plot", args.plot)
            from perfonto.outputs import atomic_path

            with atomic_path(args.plot) as tmp:  # beside it, then renamed: a link is replaced, never written through
                figure(tmp)
            outputs["plot"] = str(args.plot)
    except OSError as exc:
        opt, path = what or ("--out", args.out)
        raise CommandError(f"{opt} {path}: cannot be written ({why(exc)}); choose another {opt}", 1) from None
    return outputs


__all__ = [
    "add_output_args",
    "add_workload_args",
    "base_point",
    "cache_of",
    "check_outputs",
    "given_workload",
    "target_of",
    "write_outputs",
]
