"""Analyse a capture — any counter dump in the collector format, with request records, a trace and
sync reads where the collector gives them — with any compiled catalog: the one code path behind
``perfonto analyze`` and ``perfonto run`` (which emulates, then calls this).

Steps: read the dump (``capture.dump``); keep the metrics the dump can feed and the user asked for
(the others are unavailable with the reason, e.g. "not in the dump: hbm.read_bytes"); evaluate
them with the generated evaluator at window, chip and server level (``analysis.evaluate``); the
top-down split, bottleneck, thresholds and bounds (``analysis.bottleneck``); record metrics over the
request records; the time split from the trace; and, with sync reads, the multi-chip analysis on
the host timeline (``analysis.crosschip``). The result is a ``Report``; ``Report.to_json`` is the
JSON document both commands print and write as ``report.json``.
"""

from __future__ import annotations

import os

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


from perfonto.capture.dump_io import DumpError
from perfonto.capture.dump_plan import DumpPlan
from perfonto.capture.dump_scan import CHUNK_ROWS, plan_dump
from perfonto.codegen.evaluator_cache import evaluator as cached_evaluator
from perfonto.metrics.catalog import select_metrics
from perfonto.metrics.graph import MetricGraph

from .bottleneck import Analysis, analyse
from .checks import level1_not_summed
from .evaluate import leader_note
from .engine import evaluate_capture
from .evaluate import Evaluation
from .findings import findings, name_slow_links
from .headline import headline


@dataclass
class Capture:
    """Where a capture's parts are. ``counters``: a path, folder, glob or ``pa.Table`` in the
    collector format; ``requests``, ``trace``, ``sync``: paths or None; ``ground_truth``: the
    emulator's, when the capture came from it (used for the alignment error only)."""

    counters: object
    requests: object | None = None
    trace: str | Path | None = None
    sync: str | Path | None = None
    ground_truth: dict | None = None
    timestamp_unit: str | None = None
    sample_period_ns: int | None = None
    snapshots: object | None = None  # op-boundary counter snapshots (analysis.snapshots), when the collector took them
    format: str = (
        "collector"  # or a capture.formats.FORMATS name: another tool's output, read into the collector format
    )
    multiplexed: str = "null"  # inputs that ran in different multiplex groups: null or flag (analysis.multiplexed)
    steady_state: float | None = 0.9  # fraction of the peak concurrency for the steady-state window (None: off)
    folder: str | None = None  # the run or fleet folder the user gave as COUNTERS (an input an --out may not lie in)


@dataclass
class Report:
    """What a capture says. ``graph``: the catalog as compiled; ``evaluated``: the part of it that
    was evaluated; ``unavailable``: metric → why it has no value on this capture (the catalog's
    reasons and the dump's); ``notes``: what the readers ignored or could not do."""

    graph: MetricGraph
    evaluated: MetricGraph
    evaluation: Evaluation
    analysis: Analysis
    unavailable: dict[str, str]
    model: str | None = None
    chips: int = 0
    records: dict | None = None
    time_split: dict | None = None
    multichip: dict | None = None
    ground_truth: dict | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    populations: dict | None = None  # record metric -> what it covers (analysis.records.record_populations)
    headline: dict | None = None  # analysis.headline: the finding to read first
    findings: list | None = None  # analysis.findings: guided findings with estimated gains
    context: dict | None = None  # a run's modelling assumptions and the public claim (emulator.claim), when emulated
    attribution: object | None = None  # analysis.attribution.Attribution: counters per span group
    groups: dict = field(default_factory=dict)  # by -> analysis.groups.GroupMetrics (the groupings asked for)
    ops: list | None = None  # analysis.roofline.op_rows: per op class, by time
    links: dict | None = None  # analysis.links.link_utilization: chip x link busy share
    fleet: object | None = None  # analysis.fleet.Fleet: rollups per host, rack, pod and fleet (fleet-scale path)
    engine: str = "memory"  # memory (whole dump in memory), embedded (in pieces) or spark
    energy: dict | None = None  # analysis.serving_checks: sensor averaging marks and energy cross-checks
    steady_state: dict | None = None  # analysis.steady_state: the steady-state window and its serving figures

    def to_json(self) -> dict:
        """The report as one JSON document (``analysis.report_json``)."""
        from .report_json import report_json

        return report_json(self)


def fleet_folder(path) -> Path | None:
    """``path`` as the folder ``perfonto emulate --fleet`` writes — ``counters/`` (Hive partitions
    ``host=…``) beside ``topology.csv`` — or None when it is not one (a run folder holds
    ``counters.parquet``; a dump folder holds its parts). A folder with ``topology.csv`` and ``counters``
    (in any form: a broken topology is the topology reader's to refuse) is one.

    Raises:
        DumpError: a folder that is both a run's and a fleet's (``counters.parquet`` beside
            ``counters/``), or a fleet folder whose ``counters`` is not a folder."""
    from perfonto.ontology.files import is_dir

    if not isinstance(path, (str, Path)) or not is_dir(path):
        return None
    p = Path(path)

    def there(name: str) -> bool:
        return os.path.lexists(p / name)

    if not there("topology.csv") or not there("counters"):
        return None
    if there("counters.parquet"):
        if not there("counters"):
            return None  # a run folder with a topology beside it
        raise DumpError(
            f"{p}: holds both a run's counters.parquet and a fleet's counters/; point at one of them "
            f"({p / 'counters.parquet'} or {p / 'counters'} with --topology {p / 'topology.csv'})"
        )
    if not is_dir(p / "counters"):
        what = "a link that leads to no folder" if (p / "counters").is_symlink() else "not a folder"
        raise DumpError(
            f"{p / 'counters'}: is {what}; a fleet folder holds its dump as counters/host=…/part-*.parquet "
            "beside topology.csv (perfonto emulate --fleet writes it so): point at the dump with --topology"
        )
    return p


def _regular_input(path, option: str) -> None:
    """Refuse a path given for a run part that is not a regular file: reading a FIFO waits for ever (a
    breaker's `--sync fifo` hung analyze), a device never ends; a table or frame passes as it is.

    Raises:
        DumpError: naming the path and the option."""
    import os
    import stat

    if not isinstance(path, (str, Path)):
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a missing file is the reader's to name
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise DumpError(f"{path}: not a regular file (a device or a pipe?); give {option} a file")


def capture_of(
    counters,
    requests=None,
    trace=None,
    sync=None,
    *,
    timestamp_unit: str | None = None,
    sample_period_ns: int | None = None,
    snapshots=None,
) -> Capture:
    """A ``Capture`` from what a user points at. ``counters`` may be a run folder (it holds
    ``counters.parquet``, as ``perfonto run`` and ``emulator.run`` write it): its request records,
    trace, sync reads, op-boundary snapshots (``snapshots.parquet``) and ``ground_truth.json`` are
    used unless given. A fleet folder (``fleet_folder``) gives its ``counters/``; its topology is the
    caller's to read (``perfonto analyze`` takes it unless ``--topology`` is given). Otherwise
    ``counters`` is the dump itself (a file, a folder of dump files, a glob or a table)."""

    truth = None
    from perfonto.ontology.files import is_dir, is_file

    for option, given in (("--requests", requests), ("--trace", trace), ("--sync", sync)):
        _regular_input(given, option)
    given = counters if isinstance(counters, (str, Path)) and is_dir(counters) else None
    fleet = fleet_folder(counters)
    if fleet is not None:  # the fleet's own ground truth (hosts' profiles) is not a run's: only its step counts
        counters = fleet / "counters"
        if (fleet / "ground_truth.json").is_file():
            try:
                truth = fleet_steps(_run_truth(fleet / "ground_truth.json", counters))
            except DumpError:  # read for a note only: a damaged one does not stop the analysis
                truth = None
    elif isinstance(counters, (str, Path)) and is_dir(counters) and is_file(Path(counters) / "counters.parquet"):
        run = Path(counters)
        counters = run / "counters.parquet"

        def pick(given, name):
            if given is not None:
                return given
            part = run / name
            if part.exists() and not part.is_file():  # a folder in a run part's place: never silently left out
                raise DumpError(
                    f"{part}: not a file, so the run's {name.split('.')[0]} cannot be read; move it aside, or "
                    f"analyse {counters} alone"
                )
            return part if part.is_file() else None

        requests, trace, sync = (
            pick(requests, "requests.parquet"),
            pick(trace, "trace.parquet"),
            pick(sync, "sync.parquet"),
        )
        snapshots = pick(snapshots, "snapshots.parquet")
        gt = pick(None, "ground_truth.json")
        if gt is not None:
            truth = _run_truth(gt, counters)
    cap = Capture(counters, requests, trace, sync, truth, timestamp_unit, sample_period_ns, snapshots)
    cap.folder = str(given) if given is not None else None
    return cap


def fleet_steps(gt: dict) -> dict | None:
    """``{"fleet_steps": {host: forward passes finished}}`` from an emulated fleet's ground truth (each
    host's run's ``steps``), or None: what the report needs to say its token figures are step-quantised."""
    hosts = gt.get("hosts") if isinstance(gt.get("hosts"), dict) else {}
    steps = {}
    for h, v in hosts.items():
        n = (v.get("truth") or {}).get("steps") if isinstance(v, dict) and isinstance(v.get("truth"), dict) else None
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0:
            steps[str(h)] = int(n)
    return {"fleet_steps": steps} if steps else None


def fleet_steps_note(gt: dict | None) -> list[str]:
    """The note for an emulated fleet whose hosts finished few forward passes (``fleet_steps``): token
    counters advance when a step ends, so a host's token rates and per-token figures move by a whole step's
    tokens (a data engineer read one host's 1 step against another's 2 as −50 % tokens/s while its MFU was
    −37 %); none otherwise."""
    steps = (gt or {}).get("fleet_steps")
    if not isinstance(steps, dict) or not steps or min(steps.values()) >= 20:
        return []
    few = sorted(set(steps.values()))
    counts = ", ".join(f"{n} on {sum(1 for v in steps.values() if v == n)} host(s)" for n in few)
    worst = f"about {100 / few[0]:.0f} %" if few[0] > 0 else "entirely"
    return [
        f"the hosts finished few forward passes ({counts}); token counters advance when a step ends, so a "
        f"host's token rates and per-token figures (energy, FLOPs per token) are uncertain by up to {worst}, and "
        "host or rack differences in them below that are a step's tokens, not a fault — emulate longer "
        "(--duration) for steadier serving figures"
    ]


def _run_truth(gt: Path, counters: Path) -> dict:
    """A run folder's ``ground_truth.json`` (the emulator's), read whole.

    Raises:
        DumpError: not UTF-8 JSON (``file:line:col``) or not a JSON object: a damaged ground truth would
        otherwise drop the report's modelling assumptions and the clock alignment without a word."""
    import json

    instead = f"repair it, or analyse {counters} alone (no ground truth)"
    try:
        truth = json.loads(gt.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DumpError(f"{gt}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg}); {instead}") from None
    except UnicodeDecodeError:
        raise DumpError(f"{gt}: not UTF-8 text; {instead}") from None
    except OSError as exc:
        raise DumpError(f"{gt}: cannot be read ({exc.strerror or exc}); {instead}") from None
    if not isinstance(truth, dict):
        raise DumpError(f"{gt}: a JSON {type(truth).__name__}, not the object the emulator writes; {instead}")
    return truth


def dump_unavailable(graph: MetricGraph, absent: set[str], wanted: set[str] | None = None) -> dict[str, str]:
    """Metrics of ``graph`` that read (directly or through other metrics) a signal in ``absent``:
    metric → "not in the dump: a, b"."""
    import networkx as nx

    out = {}
    for name in list(graph.metrics) + list(graph.record_metrics):
        if wanted is not None and name not in wanted:
            continue
        missing = sorted(n for n in nx.ancestors(graph.graph, name) if n in absent)
        if missing:
            out[name] = "not in the dump: " + ", ".join(missing[:6]) + (" …" if len(missing) > 6 else "")
    return out


def evaluable(
    graph: MetricGraph,
    absent_signals: set[str],
    metrics: list[str] | None,
    evaluator=None,
    log: Callable[[str], None] | None = None,
):
    """What of ``graph`` a dump lacking ``absent_signals`` can evaluate: ``(evaluated, evaluator, gone,
    unavailable)`` — the catalog cut to the metrics asked for (``metrics``, None: all) whose inputs
    are in the dump, a generated evaluator for it (``evaluator`` when it still fits; else from perfonto's
    cache, ``log`` told when its kernel must be compiled first), the metrics the dump cannot give
    (``dump_unavailable``) and every unavailable metric asked for with its reason."""
    from perfonto.metrics.optional import fill_defaults

    gen = graph.generation
    wanted = None if metrics is None else set(select_metrics(graph, metrics).all_metrics)
    absent = absent_signals | {f for f, fd in gen.fields.items() if fd.register in absent_signals}
    given, graph = graph, fill_defaults(graph, absent)  # `default(x, d)` over an absent x reads d: still available
    gone = dump_unavailable(graph, absent, wanted)
    keep = [n for n in graph.all_metrics if n not in gone and (wanted is None or n in wanted)]
    evaluated = graph if len(keep) == len(graph.all_metrics) else select_metrics(graph, keep)
    if evaluator is None or evaluated is not given:
        evaluator = cached_evaluator(evaluated, log=log)[0]
    unavailable = dict(graph.unavailable) | gone
    if wanted is not None:
        unavailable = {k: v for k, v in unavailable.items() if k in wanted}
    return evaluated, evaluator, gone, unavailable


_INSTANCES = {  # format -> (module, function): the instances a capture holds, for `from_data` axes
    "perf-stat": ("perf_stat", "perf_instances_of"),
    "openmetrics": ("openmetrics", "openmetrics_instances_of"),
}


def capture_instances(gen, capture: Capture) -> dict[str, tuple[str, ...]]:
    """The sizes a capture gives the instance axes of ``gen`` declared ``from_data``: axis → the labels of
    the instances it holds (``{"cpu": ("0", "1")}``), found by the capture's reader (the CPUs of
    ``perf stat -A``, node_exporter's ``cpu`` label, a collector dump's per-instance columns); empty when
    ``gen`` has no such axis. Compile the catalog with them (``load_catalog(..., instances=…)``) before
    ``plan_capture``.

    Raises:
        DumpError: the capture holds no instance of such an axis, or its format's reader cannot size one
            (naming the file).
    """
    from importlib import import_module

    from perfonto.capture.instances import collector_instances
    from perfonto.ontology.derive import from_data_axes

    todo = from_data_axes(gen)
    if not todo:
        return {}
    if capture.format == "collector":
        return collector_instances(capture.counters, gen)
    if capture.format not in _INSTANCES:
        axes = ", ".join(f"{b}.{a}" for b, v in todo.items() for a in v)
        raise DumpError(
            f"{capture.counters}: the {capture.format} reader does not size instance axes from the data, and "
            f"`{gen.name}` declares {axes} `from_data`; give the axis a size in the catalog"
        )
    module, fn = _INSTANCES[capture.format]
    found = getattr(import_module(f"perfonto.capture.{module}"), fn)(capture.counters, gen)
    for a in sorted({a for v in todo.values() for a in v} - set(found)):
        raise DumpError(
            f"{capture.counters}: no instance of the axis `{a}`, whose size comes from the data (`from_data`): "
            f"the {capture.format} capture holds no series or line of its signals"
        )
    return found


def plan_capture(graph: MetricGraph, capture: Capture) -> DumpPlan:
    """The dump plan of a capture's counters (``capture.dump_scan.plan_dump``: the key columns read once);
    another tool's output (``capture.format``) is read into the collector format first. A catalog whose
    instance axes are sized by the data must have been compiled for this capture's instances
    (``capture_instances``); a note names them.

    Raises:
        DumpError: the counters cannot be read; the catalog still has the placeholder size of a ``from_data``
            axis."""
    from perfonto.ontology.derive import describe_instances, from_data_axes, instance_labels

    notes: list[str] = []
    unsized = from_data_axes(graph.generation)
    if unsized:
        axes = ", ".join(f"{b}.{a}" for b, v in unsized.items() for a in v)
        raise DumpError(
            f"{capture.counters}: the catalog's instance axes {axes} are sized by the data (`from_data`) but it was "
            "compiled without a capture's instances; compile it with load_catalog(..., instances="
            "capture_instances(generation, capture)), as `perfonto analyze` does"
        )
    if instance_labels(graph.generation):
        notes.append(describe_instances(instance_labels(graph.generation)))
    counters = capture.counters
    if capture.format != "collector":
        from perfonto.capture.formats import FORMATS

        counters = FORMATS[capture.format].read(
            capture.counters, graph.generation, notes, sample_period_ns=capture.sample_period_ns
        )
    from perfonto.capture.multiplex import split_multiplex

    counters, mux = split_multiplex(counters, graph.generation, notes)  # times enabled and running: scaled
    try:
        plan = plan_dump(
            counters, graph.generation, timestamp_unit=capture.timestamp_unit, sample_period_ns=capture.sample_period_ns
        )
    except DumpError as exc:  # a converted capture is a table: name the file it came from
        if capture.format == "collector":
            raise
        raise DumpError(str(exc).replace("<table>", str(capture.counters))) from None
    if capture.format != "collector":
        plan.label = str(capture.counters)
    plan.notes[:0] = notes
    plan.multiplex = mux
    return plan


def analyse_capture(
    graph: MetricGraph,
    capture: Capture,
    *,
    metrics: list[str] | None = None,
    evaluator=None,
    model: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    by=(),
    plan: DumpPlan | None = None,
    chunk_rows: int = CHUNK_ROWS,
    progress=None,
) -> Report:
    """Analyse ``capture`` with the compiled catalog ``graph``, its window values kept in memory.

    ``metrics``: evaluate only these and what they need (names checked by the caller, see
    ``metrics.catalog.select_metrics``). ``evaluator``: a generated evaluator module for the whole
    ``graph`` (from perfonto's cache when not given, or when only part of the catalog can be evaluated).
    ``model``: the workload's name, else the dump's metadata's. ``by``: groupings (``op``, ``layer``,
    ``phase``) to give every metric for (``analysis.groups``); the per-op table is attributed whenever
    the trace has op spans. ``plan``: the dump's plan, when the caller made it. The evaluation is the
    engine's (``analysis.engine``), one pass over the dump.

    Raises:
        DumpError: the counters, request records, trace or snapshots cannot be read.
        AttributionError: ``by`` is given but the capture has no usable trace.
        run_files.RunError: sync reads that do not cover the dump's chips.
    """
    from . import crosschip, run_files  # the analyses of a kept capture, imported when one is analysed
    from .groups import analyse_groups
    from .links import link_utilization
    from .records import read_and_evaluate, record_populations, records_vs_counters, trace_time_split

    gen = graph.generation
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    plan = plan or plan_capture(graph, capture)
    evaluated, evaluator, gone, unavailable = evaluable(graph, set(plan.absent), metrics, evaluator, log)
    res = evaluate_capture(evaluated, evaluator, plan, None, chunk_rows=chunk_rows, progress=progress, keep=True)
    ev, dump = res.evaluation, res.dump
    w = ev.windows
    notes = list(plan.notes)
    if plan.multiplex is not None:  # inputs never counted together: null or flagged, after the kernel's pass
        from .multiplexed import apply_multiplexed

        res.checks, more = apply_multiplexed(evaluated, ev, plan.multiplex, dump.chips, capture.multiplexed)
        notes += more
    timings["evaluate"] = time.perf_counter() - t0
    W, C = w.interval.shape
    log(f"evaluated {len(evaluated.metrics)} metrics over {W} windows x {C} chips with the generated evaluator")
    if gone:
        import networkx as nx  # only the absent signals the unavailable metrics read (not every absent one)

        read = {a for n in gone if n in graph.graph for a in nx.ancestors(graph.graph, n)} & set(plan.absent)
        log(f"{len(gone)} metric(s) unavailable: the dump lacks {len(read)} signal(s) they read")
    analysis = analyse(evaluated, ev, checks=res.checks)
    notes += [why for why in [level1_not_summed(evaluated)] if why]  # a partial level 1: its sum not checked
    notes += leader_note(ev)
    records = populations = None
    if capture.requests is not None and evaluated.record_metrics:
        rec, records = read_and_evaluate(evaluated, capture.requests)
        populations = record_populations(evaluated, rec, records)
        capped: dict[str, list[str]] = {}
        for name, doc in populations.items():
            if doc.get("warning"):
                capped.setdefault(doc["warning"], []).append(name)
        notes += [f"{', '.join(names)}: {why}" for why, names in capped.items()]
        mismatch = records_vs_counters(gen, rec, w)
        if mismatch:
            notes.append(mismatch)
    elif evaluated.record_metrics:
        notes.append("no request records given: latency metrics (ttft, tpot, itl, e2e) are not evaluated")
    from .serving_checks import serving_checks

    energy, steady, more = serving_checks(evaluated, capture, ev)  # issue 29: sensors and the steady state
    notes += more
    split = trace_time_split(capture.trace, ev.windows) if capture.trace is not None else None
    multichip = None
    if capture.sync is not None:
        if dump.hosts is not None and len(set(dump.hosts)) > 1:
            notes.append(
                "the dump spans several hosts: the multi-chip analysis (one host's chips on its timeline) is skipped"
            )
        else:
            t0 = time.perf_counter()
            run = run_files.Run.of(
                dump.path, capture.sync, capture.trace, capture.ground_truth, meta=dict(dump.metadata)
            )
            try:
                multichip = crosschip.analyse(run, gen=gen, dump=dump, windows=w)
            except run_files.ChipsMissing as exc:  # a chip without rows: the rest of the report stands
                notes.append(exc.skipped)
            timings["crosschip"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from perfonto.capture.kernel_windows import capture_trace  # ncu, rocprof: their kernels are the op spans

    trace = capture_trace(capture.format, capture.counters, capture.trace, gen)
    per = analyse_groups(evaluated, evaluator, dump, w, trace, tuple(by), capture.snapshots)
    notes += per["notes"] + fleet_steps_note(capture.ground_truth)
    if per["attribution"] is not None:
        timings["attribute"] = time.perf_counter() - t0
        log(
            f"attributed the counters to the trace's op spans ({per['attribution'].source})"
            + (f", by {', '.join(by)}" if by else "")
        )
    return Report(
        graph,
        evaluated,
        ev,
        analysis,
        unavailable,
        model or dump.metadata.get("model"),
        len(dump.chips),
        records,
        split,
        multichip,
        capture.ground_truth,
        {},
        timings,
        notes,
        populations=populations,
        headline=(head := headline(evaluated, ev, analysis, multichip)),
        findings=name_slow_links(graph, findings(graph, ev, analysis, head), multichip),  # a slow link: the cause
        attribution=per["attribution"],
        groups=per["groups"],
        ops=per["ops"],
        links=link_utilization(gen, w, dump.chips),
        energy=energy,
        steady_state=steady,
    )


__all__ = [
    "Capture",
    "Report",
    "analyse_capture",
    "capture_instances",
    "capture_of",
    "dump_unavailable",
    "evaluable",
    "fleet_folder",
    "plan_capture",
]
