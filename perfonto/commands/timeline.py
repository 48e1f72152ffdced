"""``perfonto timeline RUN --out FILE [--format json|proto] [--metrics a,b]``: a correlated timeline
of a run for Perfetto's UI (see ``perfonto.timeline``): one process per chip with a thread per
execution unit, counter tracks for selected metrics, and flows from each step's launch call to its
submission, PCIe transfer and forward pass on every chip; each device slice with the error bound of
its alignment, and the slices that cannot be aligned or lie outside their submit bracket counted.
Exit 0 when the file was written, 1 when the run folder lacks what it needs."""

from __future__ import annotations


from . import HELP
from .common import CommandError, catalog_options, file_force_option, out_path, stderr, summary, why


def register(sub) -> None:
    p = sub.add_parser("timeline", help=HELP["timeline"])
    p.add_argument("run", metavar="RUN", help="output folder of `perfonto run` (or emulator.run)")
    p.add_argument("--out", required=True, help="output file (open it in https://ui.perfetto.dev)", type=out_path)
    p.add_argument(
        "--format",
        default="json",
        choices=["json", "proto"],
        help="json: Chrome trace-event JSON; proto: Perfetto's protobuf format, for long runs (default: json)",
    )
    p.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metrics of RUN/metrics.parquet for counter tracks "
        "(default: mxu.utilization, hbm.bandwidth_utilization, c2c.bandwidth_utilization, power.average)",
    )
    catalog_options(
        p,
        generation="generation whose metrics --metrics names (default: the run's)",
        catalog="catalog folder: --metrics names are checked against it (default: the shipped catalog)",
        metavar="DIR",
        catalog_first=True,
    )
    p.add_argument("--json", action="store_true", help="print a summary as one JSON object on stdout")
    file_force_option(p)
    p.set_defaults(func=cmd_timeline)


def cmd_timeline(args) -> int:
    from perfonto.analysis.run_files import RunError
    from perfonto.analysis.timeline import TimelineError, write

    err = stderr()
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip()) if args.metrics else None
    if metrics and (args.catalog is not None or args.generation is not None):
        _check_names(args, metrics)
    from perfonto.outputs import OutputError, atomic_path, check_file_target, refuse_run_file

    try:
        refuse_run_file(args.out, args.run, "--out")
        check_file_target(args.out, "--out", args.force)
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    try:
        from perfonto.analysis.crosschip import fit_clocks
        from perfonto.analysis.run_files import Run

        from .align import _check_chips

        run = Run.open(args.run)
        _check_chips(run, fit_clocks(run))  # a chip without sync reads: an error, not a timeline missing it
        with atomic_path(args.out) as tmp:  # beside it, then renamed: a failure leaves the old file whole
            info = write(args.run, tmp, args.format, metrics)
    except (RunError, TimelineError, ValueError, OSError) as exc:
        raise CommandError(why(exc), 1) from None
    info = {"out": args.out, "format": args.format, **info}
    summary(
        args,
        info,
        f"wrote {args.out} ({args.format}): {info['slices']:,} slices, {info['flows']:,} flows over "
        f"{info['steps']} steps × {info['chips']} chips, {info['counter_tracks']} counter tracks; "
        f"open it in https://ui.perfetto.dev",
        f"device times mapped within ±{info['bound_ns_max']:,.0f} ns at most (each slice's host_err_ns); "
        f"{info['unmappable']:,} slice(s) left out as unmappable (no host time: after a clock reset, before "
        "the next sync read, or ambiguous between clock epochs); "
        f"{info['outside_submit']:,} device slice(s) outside their submit bracket (args.outside_submit)",
        err=err,
    )
    return 0


def _check_names(args, metrics) -> None:
    """Every name in --metrics is a metric of the catalog (a usage error with a did-you-mean otherwise)."""
    from perfonto.metrics.catalog import load_catalog
    from perfonto.ontology.diagnostics import did_you_mean

    cat = load_catalog(args.catalog, args.generation)
    if cat.graph is None:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        raise CommandError("the catalog does not load", 2 if usage else 1, cat.diagnostics)
    for m in metrics:
        if m not in cat.graph.metrics:
            hint = did_you_mean(m, cat.graph.metrics)
            raise CommandError(f"no window metric `{m}` in the catalog" + (f"; {hint}" if hint else ""), 2)
