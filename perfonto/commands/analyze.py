"""``perfonto analyze COUNTERS``: the report of ``perfonto run`` for a capture the user already has —
a counter dump in the collector format (any subset of the signals; wide or long layout; Parquet,
Arrow IPC or CSV; a file, a folder or a glob), with request records, a trace and sync reads where
the collector wrote them. Writes the same ``report.json`` and ``metrics.parquet`` into ``--out``
(atomically) and prints the same report. Exit 0 when the report was produced, 1 when the capture or
catalog could not be read, 2 for usage errors."""

from __future__ import annotations

import json
from pathlib import Path

from . import HELP
from .steady_option import add_steady_state
from .common import (
    BY_HELP,
    CommandError,
    catalog_failure,
    catalog_options,
    duration,
    groupings,
    job_arguments,
    output_options,
    positive_int,
    stderr,
    stdout,
    transient_bar,
)


def register(sub) -> None:
    a = sub.add_parser("analyze", help=HELP["analyze"])
    a.add_argument(
        "counters",
        metavar="COUNTERS",
        help="counter dump: a file, a folder or a glob (see the collector-format guide), or a run folder "
        "(its requests, trace, sync reads and ground truth are used unless given), or the folder "
        "`perfonto emulate --fleet` writes (its counters/ and, unless --topology is given, its topology.csv)",
    )
    catalog_options(
        a,
        generation="generation of the dump (default: sohu, or the --catalog folder's)",
        metavar="DIR",
        library=True,
        catalog_first=True,
    )
    a.add_argument(
        "--requests", default=None, metavar="R", help="request records (latency metrics: ttft, tpot, itl, e2e)"
    )
    a.add_argument(
        "--trace", default=None, metavar="T", help="device/host trace (time split; collective waits with --sync)"
    )
    a.add_argument("--sync", default=None, metavar="S", help="driver host/device clock reads (the multi-chip section)")
    a.add_argument(
        "--snapshots",
        default=None,
        metavar="S",
        help="counter snapshots taken at op boundaries (trigger-on-marker): exact per-op attribution",
    )
    a.add_argument("--by", type=groupings, default=(), metavar="op|layer|phase", help=BY_HELP)
    a.add_argument("--metrics", default=None, metavar="a,b,…", help="evaluate only these metrics and what they need")
    a.add_argument(
        "--format",
        default="auto",
        choices=("auto", "collector", "perf-stat", "openmetrics", "dcgm", "ncu", "rocprof"),
        help="what COUNTERS is: collector (perfonto's collector format); perf-stat (`perf stat -x,` CSV, with or "
        "without -I, -A, or perf stat's report; read against the shipped `linux` catalog unless --catalog); "
        "openmetrics (Prometheus/OpenMetrics text: a file of time-stamped samples or a folder of scrapes named "
        "by their time; the shipped `node` catalog unless --catalog); dcgm (`dcgmi dmon` text; give its -d as "
        "--sample-period; the shipped `dcgm` catalog); ncu (`ncu --csv --page raw`; the shipped `ncu` catalog); "
        "rocprof (rocprofv3's counter_collection.csv; the shipped `rocprof` catalog); auto (default): recognised "
        "from the file",
    )
    a.add_argument(
        "--timestamp-unit",
        default=None,
        choices=["ns", "us", "ms", "s"],
        help="unit of a bare `timestamp` column (columns named timestamp_ns/_us/_ms/_s say it themselves)",
    )
    a.add_argument(
        "--sample-period",
        type=duration,
        default=None,
        help="the collector's sampling period, e.g. 1ms (aligns chips and finds dropped samples; "
        "default: the dump's metadata)",
    )
    a.add_argument(
        "--topology",
        default=None,
        metavar="FILE",
        help="fleet topology: (host, chip) → rack, pod, as CSV, YAML or Parquet (rollups per rack and pod)",
    )
    a.add_argument(
        "--engine",
        default="auto",
        choices=("auto", "memory", "embedded", "spark"),
        help="one engine, two outputs — auto (default): memory for a dump of up to 131,072 rows without a "
        "topology, else embedded; memory: window values kept (metrics.parquet, cross-chip and per-op analyses); "
        "embedded: written in pieces, bounded memory (metrics/host=…/part-*.parquet, fleet rollups); "
        "spark: the same kernel on Spark, one task per host (--spark-master; "
        "the generated SQL: `codegen --target sql --dialect spark`)",
    )
    a.add_argument(
        "--multiplexed",
        default="null",
        choices=("null", "flag"),
        help="a metric whose inputs ran in different multiplex groups (never counted together): null, reason "
        "`mismeasured` (default), or flag: the value kept and marked",
    )
    a.add_argument(
        "--spark-master", default=None, metavar="URL", help="with --engine spark: the master (default: local[2])"
    )
    a.add_argument(
        "--chunk-rows",
        type=positive_int,
        default=None,
        metavar="N",
        help="embedded engine: sample rows per piece (default: 32768; memory grows with it)",
    )
    output_options(a)
    add_steady_state(a)
    a.set_defaults(func=cmd_analyze)


def cmd_analyze(args) -> int:
    """Read the capture (``capture_of``), pick the tool's format and catalog, run the analysis into
    ``--out`` and print the report (JSON with ``--json``)."""
    from perfonto.analysis.capture import capture_of

    metrics = _metrics_option(args)
    period = None if args.sample_period is None else int(round(args.sample_period * 1e9))
    capture = capture_of(
        args.counters,
        args.requests,
        args.trace,
        args.sync,
        timestamp_unit=args.timestamp_unit,
        sample_period_ns=period,
        snapshots=args.snapshots,
    )
    from perfonto.analysis.capture import fleet_folder
    from perfonto.capture.formats import detect

    fleet = fleet_folder(args.counters)
    if fleet is not None and args.topology is None:  # `perfonto emulate --fleet`'s folder: its topology too
        args.topology = str(fleet / "topology.csv")
        stderr().print(f"note: the fleet's topology {args.topology} is used (--topology replaces it)", markup=False)
    fmt = detect(capture.counters if fleet is not None else args.counters) if args.format == "auto" else args.format
    capture.format = fmt
    if fmt != "collector" and args.timestamp_unit is not None:  # it was ignored in silence
        raise CommandError(
            f"--timestamp-unit is for a collector-format dump's bare `timestamp` column; a {fmt} capture states "
            "its own times: drop the option",
            2,
        )
    capture.steady_state = args.steady_state
    capture.multiplexed = args.multiplexed
    if fmt != "collector" and args.catalog is None:  # the tool's shipped catalog (perf: linux, dcgm: dcgm, …)
        _tool_catalog(args, fmt)
    report = _analyze(args, capture, metrics)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        from ..report import render

        render(report, stdout())  # the fleet section too, when there is one, before the outputs line
    return 0


def _metrics_option(args) -> list[str] | None:
    """``--metrics`` as a list of names (None when not given); an empty list is a usage error."""
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    if args.metrics is not None and not metrics:
        raise CommandError("--metrics is empty; name at least one metric, e.g. --metrics mfu,hbm.bandwidth", 2)
    return metrics


def _tool_catalog(args, fmt: str) -> None:
    """A tool's capture without ``--catalog``: the format's shipped catalog (``--no-library``) and, where
    the capture does not say which GPU it is, the generation to use and a note saying so."""
    from perfonto.capture.formats import default_catalog

    args.catalog = default_catalog(fmt, args.counters)
    args.no_library = True
    if fmt == "openmetrics" and Path(args.catalog).name == "dcgm" and args.generation is None:
        from perfonto.capture.gpu_models import shown
        from perfonto.capture.openmetrics import generation_of

        args.generation, model = generation_of(args.counters)
        if args.generation is None:
            stderr().print(
                f"note: the scrapes name GPU model {shown(model) if model else '(none)'}, which has no shipped DCGM "
                "generation (dcgm_h100: H100 SXM5, dcgm_h200: H200 SXM); "
                "the peaks of dcgm_h200 are used: give --generation dcgm_h100 or dcgm_h200, or a catalog of "
                "your GPU's datasheet figures",
                markup=False,
            )
    elif fmt == "ncu" and args.generation is None:
        from perfonto.capture.gpu_models import shown
        from perfonto.capture.ncu import DEVICE_NAME, generation_of

        named = generation_of(args.counters)
        args.generation = named.generation or "ncu_h100"
        if named.generation is None and named.launches:  # an unreadable file: the reader says why, no note first
            names = "; ".join(shown(n) for n in named.names[:4]) + (" …" if len(named.names) > 4 else "")
            said = (
                f"ran on more than one GPU model ({names}), and one generation's peaks apply to every launch"
                if len(named.names) > 1
                else f"names GPU {names}, which no shipped ncu generation describes (ncu_h100: H100 SXM5 "
                "`NVIDIA H100 80GB HBM3`; ncu_h200: H200 SXM `NVIDIA H200`)"
                if named.names
                else f"names no GPU ({DEVICE_NAME})"
            )
            stderr().print(
                f"note: the capture {said}; the H100 SXM5 datasheet peaks of ncu_h100 are used: give --generation "
                "ncu_h100 or ncu_h200, or a catalog of your GPU's datasheet figures",
                markup=False,
            )
    elif fmt == "ncu":  # --generation given: honoured, and said when the capture names another part
        from perfonto.capture.gpu_models import shown
        from perfonto.capture.ncu import generation_of

        named = generation_of(args.counters)
        if named.generation is not None and named.generation != args.generation:
            stderr().print(
                f"note: the capture names GPU {shown(named.names[0])} ({named.generation}); --generation "
                f"{shown(args.generation)}'s peaks are used, as asked",
                markup=False,
            )
    elif fmt == "dcgm" and args.generation is None:
        stderr().print(
            "note: dcgmi dmon does not name the GPU model; the peaks of the dcgm catalog's default generation "
            "(dcgm_h200) are used: give --generation dcgm_h100 or dcgm_h200",
            markup=False,
        )


def _spark_master(args) -> str:
    """``--spark-master``, which only ``--engine spark`` reads (default ``local[2]``); given with another
    engine it would be ignored in silence — the job run here, not on the cluster — so it is refused.

    Raises:
        CommandError: ``--spark-master`` without ``--engine spark`` (a usage error).
    """
    if args.spark_master is not None and args.engine != "spark":
        raise CommandError(
            f"--spark-master {args.spark_master} applies to --engine spark only (this analysis would run here, "
            f"with --engine {args.engine}): add --engine spark",
            2,
        )
    return args.spark_master or "local[2]"


def _analyze(args, capture, metrics: list[str] | None):
    """The analysis job (``job.analyze_job``) over ``capture`` into ``--out``, with a progress bar on
    stderr; its failures as command errors (2: an unknown metric; 1: a capture, catalog or output that
    cannot be used)."""
    from perfonto.analysis.run_files import RunError
    from perfonto.analysis.spans import AttributionError
    from perfonto.metrics.catalog import UnknownMetric
    from perfonto.metrics.windows import DumpError
    from perfonto.ontology.diagnostics import CatalogError
    from perfonto.ontology.kinds import UnsupportedKind

    from ..job import analyze_job
    from ..outputs import OutputError

    err = stderr()
    try:
        topology = None
        if args.topology is not None:
            from perfonto.capture.topology import read_topology

            topology = read_topology(args.topology)
        with progress_bar(err) as bar:
            return analyze_job(
                capture,
                **job_arguments(args, err),
                metrics=metrics,
                topology=topology,
                engine=args.engine,
                spark_master=_spark_master(args),
                chunk_rows=args.chunk_rows,
                progress=bar,
                by=args.by,
            )
    except CatalogError as exc:
        raise catalog_failure(exc, args) from None
    except UnknownMetric as exc:  # a --metrics name: a usage error (any other KeyError is a bug, not this)
        raise CommandError(str(exc), 2) from None
    except (DumpError, RunError, OutputError, AttributionError, UnsupportedKind) as exc:
        raise CommandError(str(exc), 1) from None
    except OSError as exc:
        raise CommandError(f"{exc.filename or args.counters}: {exc.strerror or exc}", 1) from None


class progress_bar:
    """A rich progress bar on stderr for the engine's ``progress(phase, done, total)`` (rows); none when
    stderr is not a terminal (a transient bar shows nothing there: neither rich's progress module nor
    its refresh thread is started)."""

    def __init__(self, console):
        self.console = console
        self.bar = None
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        if not self.console.is_terminal:
            return self
        from rich.progress import MofNCompleteColumn, TextColumn, TimeRemainingColumn

        self.bar = transient_bar(self.console, MofNCompleteColumn(), TextColumn("rows"), TimeRemainingColumn())
        self.bar.__enter__()
        return self

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(self.tasks[phase], completed=done)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False
