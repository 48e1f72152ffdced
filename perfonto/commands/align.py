"""``perfonto align RUN``: fit each chip's clock from the sync reads, map every counter sample and
trace event to the host timeline, report the error against the ground truth, and the cross-chip
analysis on that timeline (straggler, collective waits, skew, imbalance, saturation; see
``perfonto.crosschip``).

Each chip's clock is fitted piecewise, one epoch per detected clock reset (``analysis.clock_fit``),
and every mapped time carries an error bound (``analysis.clock_run``). Writes ``RUN/alignment.json``
(the fits with their epochs and resets, the bounds, the unmappable stamps, the device spans outside
their submit bracket, the errors against a ground truth and the analysis),
``RUN/aligned_counters.parquet`` (``chip``, ``timestamp_ns``, ``host_ns``, ``host_err_ns``,
``unmappable``) and ``RUN/aligned_trace.parquet`` (the trace with ``host_start_ns``, ``host_end_ns``,
their ``…_err_ns`` bounds, ``unmappable`` and ``outside_submit``). A chip without rows (a dead chip, or
its capture lost: chips 0, 1, 3 of four) is named in ``notes``; the chips present are aligned, and the
cross-chip analysis, which indexes the chips 0 … N − 1, is skipped where their numbers have a gap
(``skipped``), as ``perfonto analyze`` skips it. Exit 0 when it produced them, 1 when the run folder lacks
what it needs."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, catalog_options, json_option, stdout, why


def register(sub) -> None:
    p = sub.add_parser("align", help=HELP["align"])
    p.add_argument("run", metavar="RUN", help="output folder of `perfonto run` (or emulator.run)")
    p.add_argument(
        "--saturation",
        type=float,
        default=0.9,
        help="utilisation from which a PCIe or link window counts as saturated (default: 0.9)",
    )
    catalog_options(
        p,
        generation="generation of the counters (default: the run's metadata, or the --catalog folder's)",
        catalog="catalog folder whose generation the run's counters are (default: shipped)",
        metavar="DIR",
        catalog_first=True,
    )
    p.add_argument(
        "--device-processing-ns",
        type=float,
        default=0.0,
        metavar="NS",
        help="device time between a sync request's arrival and its device stamp, when sync.parquet has one "
        "device stamp per read (removes the offset's bias of half of it; default: 0)",
    )
    json_option(p)
    p.set_defaults(func=cmd_align)


def cmd_align(args) -> int:
    import math

    import pyarrow.parquet as pq

    from pathlib import Path

    from perfonto.analysis.clock_run import alignment_summary, map_counters, map_trace
    from perfonto.analysis.crosschip import fit_clocks
    from perfonto.analysis.run_files import Run, RunError
    from perfonto.outputs import atomic_path, record_outputs, write_file
    from ..report_multichip import render_multichip

    if not 0 < args.saturation <= 1:
        raise CommandError(f"--saturation must be in (0, 1] (got {args.saturation})", 2)
    if not (math.isfinite(args.device_processing_ns) and args.device_processing_ns >= 0):
        raise CommandError(f"--device-processing-ns must be a finite number ≥ 0 (got {args.device_processing_ns})", 2)
    try:
        run = Run.open(args.run)
        fits = fit_clocks(run, args.device_processing_ns)
        _check_chips(run, fits)
        doc = _cross_chip(run, fits, args)
        counters = map_counters(run, fits)
        trace = map_trace(run, fits) if run.file("trace.parquet").exists() else None
        doc["alignment"] = alignment_summary(run, fits, counters, trace)
        with atomic_path(run.file("aligned_counters.parquet")) as tmp:  # each output beside it, then renamed
            pq.write_table(counters, str(tmp))
        outputs = {
            "alignment": str(run.file("alignment.json")),
            "aligned_counters": str(run.file("aligned_counters.parquet")),
        }
        if trace is not None:
            with atomic_path(run.file("aligned_trace.parquet")) as tmp:
                pq.write_table(trace, str(tmp))
            outputs["aligned_trace"] = str(run.file("aligned_trace.parquet"))
        doc["outputs"] = outputs
        clean = _finite(doc)  # a value over unmappable stamps is NaN: null in JSON
        write_file(run.file("alignment.json"), json.dumps(clean, indent=2, allow_nan=False))
        record_outputs(run.path, [Path(p).name for p in outputs.values()])
    except (RunError, ValueError, OSError) as exc:
        raise CommandError(why(exc), 1) from None
    if args.json:
        print(json.dumps(clean, indent=2, allow_nan=False))
        return 0
    out = stdout()
    _render_alignment(doc["alignment"], out)
    for note in doc.get("notes", []):
        out.print(f"note: {note}", style="yellow", markup=False, highlight=False)
    if "skipped" not in doc:
        render_multichip(doc, out)
    out.print("[dim]outputs: " + ", ".join(f"{k}={v}" for k, v in doc["outputs"].items()) + "[/dim]")
    return 0


def _finite(o):
    """``o`` with every non-finite float (NaN, ±inf) as None, in nested dicts and lists."""
    import math

    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def _cross_chip(run, fits, args) -> dict:
    """The cross-chip analysis (``perfonto.analysis.crosschip.analyse``) of the run's chips, and ``notes``
    naming the chips without rows. Each chip's clock fit stands alone, so the chips present are aligned
    whatever is missing; the analysis, which indexes the chips 0 … N − 1, is skipped (``skipped``: why)
    when their numbers have a gap (a dead chip, or its capture lost), as ``perfonto analyze`` skips it."""
    from perfonto.analysis.crosschip import analyse
    from perfonto.analysis.run_files import ChipsMissing

    gen = _generation(args, run)  # a --catalog that does not load is refused whatever the chips
    chips = sorted(fits)
    counted = run.meta.get("chips")
    notes = []
    if isinstance(counted, int) and not isinstance(counted, bool) and counted > chips[-1] + 1:
        after = ", ".join(map(str, range(chips[-1] + 1, counted)))
        notes.append(
            f"{run.file('counters.parquet')}: the run's metadata counts {counted} chips, and chip(s) {after} have no "
            "sync reads, counter rows or device events (a dead chip, or its capture lost?): the chips present are "
            "aligned"
        )
    if chips != list(range(len(chips))):  # _check_chips: a chip without sync reads has no other rows either
        skipped = ChipsMissing(run.file("sync.parquet"), chips, True).skipped
        return {"chips": len(chips), "skipped": skipped, "notes": [skipped, *notes]}
    doc = analyse(run.path, gen=gen, threshold=args.saturation, with_alignment=False)
    return doc | ({"notes": notes} if notes else {})


def _check_chips(run, fits) -> None:
    """Every chip of the counters and of the trace's device events has sync reads (RunError otherwise)."""
    import numpy as np

    from perfonto.analysis.crosschip import text
    from perfonto.analysis.run_files import RunError, read_parquet

    def read(name: str, columns: list[str]):
        path = run.file(name)
        have = read_parquet(path, schema_only=True).names
        for c in columns:
            if c not in have:
                raise RunError(f"{path}: no column {c}; the run's {name} needs {', '.join(columns)}")
        return read_parquet(path, columns=columns)

    chips = set(read("counters.parquet", ["chip"]).column("chip").to_pylist())
    if run.file("trace.parquet").exists():
        t = read("trace.parquet", ["chip", "clock"])
        chips |= set(np.asarray(t.column("chip").to_pylist(), dtype=object)[text(t, "clock") == "device"])
    missing = sorted(int(c) for c in chips - set(fits) if c is not None)
    if missing:
        raise RunError(
            f"{run.file('sync.parquet')}: no sync reads for chip(s) {', '.join(map(str, missing))} of the counters "
            "or the trace; the driver's host/device clock reads are needed for every chip"
        )


def _generation(args, run):
    """The generation the counters are read as: the catalog's, the named one, or the run's own."""
    if args.catalog is None and args.generation is None:
        return None  # the run's metadata names a shipped generation
    from perfonto.metrics.catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation or run.meta.get("generation"), library=False)
    if cat.generation is None:
        usage = any(d.code == "unknown-generation" for d in cat.diagnostics)
        raise CommandError("the generation does not load", 2 if usage else 1, cat.diagnostics)
    return cat.generation


def _render_alignment(al: dict, out) -> None:
    from rich.table import Table

    t = Table(
        title="Clock alignment (device = offset + (1 + drift) × host, per clock epoch)",
        title_justify="left",
        caption="reads kept: the sync reads of shortest round trip the fit uses (the fastest half, at least 5); "
        "bound: the error a mapped time is stated to be within (round trips, 3 standard errors of the fit, a "
        "drift not fitted); err: its actual error against the run's ground truth, which the bound must cover",
        caption_justify="left",
    )
    for col in ("chip", "epochs", "offset ns", "true offset ns", "drift ppm", "true drift ppm", "reads kept",
                "bound p99 ns", "median err ns", "p99 err ns"):  # fmt: skip
        t.add_column(col, justify="right")
    for r in al["chips"]:
        e, b = r.get("error_ns", {}), r.get("bound_ns", {})
        fitted = r["segments"][0]["drift_fitted"]
        t.add_row(
            str(r["chip"]),
            str(len(r["segments"])),
            f"{r['offset_ns']:,.0f}",  # as the true offset: the bound is thousands of ns
            f"{r['true_offset_ns']:,.0f}" if "true_offset_ns" in r else "—",
            f"{r['drift_ppm']:.4f}" if fitted else "not fitted",
            f"{r['true_drift_ppm']:.4f}" if "true_drift_ppm" in r else "—",
            f"{r['reads_kept']}/{r['reads']}",
            f"{b['p99']:.1f}" if b else "—",
            f"{e['median']:.1f}" if e else "—",
            f"{e['p99']:.1f}" if e else "—",
        )
    out.print(t)
    _render_findings(al, out)
    if "error_ns" in al:
        e = al["error_ns"]
        out.print(
            f"alignment error over {al['samples']:,} counter samples and device events: median {e['median']:.1f} ns, "
            f"p99 {e['p99']:.1f} ns, max {e['max']:.1f} ns; within the stated bound: {al['within_bound']:.1%}"
        )
    else:
        out.print("no ground truth with clocks in the run folder: the error against the truth is not reported")


def _render_findings(al: dict, out) -> None:
    """Resets, unmappable stamps and spans outside their submit bracket, one line each."""
    for r in al["chips"]:
        for z in r["resets"]:
            out.print(
                f"[yellow]chip {r['chip']}: device clock reset ({z['kind']}) between host "
                f"{z['after_host_ns'] / 1e9:.6f} s and {z['before_host_ns'] / 1e9:.6f} s[/yellow]"
            )
        for reason, n in r["unmappable"].items():
            out.print(f"[yellow]chip {r['chip']}: {n:,} stamp(s) unmappable ({reason}): no host time[/yellow]")
    o = al.get("outside_submit")
    if o and o["count"]:
        first = o["spans"][0]
        out.print(
            f"[red]{o['count']:,} device span(s) outside their submit bracket[/red] (first: chip {first['chip']}, "
            f"step {first['step']}, {first['name']}, trace row {first['row']}); see alignment.json"
        )
