"""The main job and the analysis job: ``run_job`` emulates a workload and analyses the capture it
wrote; ``analyze_job`` analyses a capture the user already has. Both go through
``analysis.capture.analyse_capture``, so ``perfonto run`` and ``perfonto analyze`` cannot drift.

Each writes one output folder atomically (``perfonto.outputs``): ``evaluator.py`` (the generated
evaluator of the catalog), ``docs/<generation>.md``, ``metrics.parquet`` (per window and chip),
``report.json`` (the run-level result, with the multi-chip analysis under ``multichip``) and the
manifest; ``run_job`` also the emulator's ``counters.parquet``, ``requests.parquet``,
``sync.parquet``, ``trace.parquet`` and ``ground_truth.json``. Progress messages go to ``log``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from perfonto.analysis.capture import Capture, Report, analyse_capture
from perfonto.analysis.evaluate import write_metrics_parquet
from perfonto.metrics.catalog import Catalog, load_catalog
from perfonto.ontology.diagnostics import CatalogError

from .outputs import output_folder, relocate

JobResult = Report  # what ``run_job`` returns (the name the main job had before it shared the analysis)


def compile_catalog(
    catalog_dir=None, generation: str = "sohu", library: bool = True, log=lambda s: None, instances=None
) -> tuple[Catalog, float]:
    """Load and compile the catalog (with ``instances``: its ``from_data`` axes sized by a capture, see
    ``metrics.catalog.load_catalog``); raises ``CatalogError`` when it does not compile."""
    t0 = time.perf_counter()
    cat = load_catalog(catalog_dir, generation, library=library, instances=instances)
    if cat.errors or cat.graph is None:
        raise CatalogError(cat.diagnostics)
    graph = cat.graph
    dt = time.perf_counter() - t0
    for note in cat.notes:
        log(note)
    how = " (read from the cache)" if cat.from_cache else ""  # a new user read "compiled … (0.02 s)" on a hit
    log(
        f"compiled catalog{how}: generation {graph.generation.name}, {len(graph.generation.signals)} signals, "
        f"{len(graph.metrics)} window and {len(graph.record_metrics)} request-level metrics, catalog hash "
        f"{graph.content_hash} ({dt:.2f} s)"
    )
    return cat, dt


def evaluator_for(graph, log=None):
    """The generated evaluator of ``graph`` and its source, from perfonto's cache
    (``codegen.evaluator_cache``); says so on ``log`` when its kernel has to be compiled first."""
    from perfonto.codegen.evaluator_cache import evaluator

    return evaluator(graph, log=log)


def _write_products(
    graph,
    report: Report,
    tmp: Path,
    final: Path,
    evaluator_src: str,
    outputs: dict,
    timings: dict,
    metrics_file: bool = True,
) -> None:
    from perfonto.analysis.groups import write_group_parquet
    from perfonto.codegen.docs import generate_markdown

    t0 = time.perf_counter()
    docs_path = tmp / "docs" / f"{graph.generation.name}.md"
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(generate_markdown(graph), encoding="utf-8")
    if metrics_file:  # else the engine wrote metrics/host=…/part-*.parquet
        write_metrics_parquet(report.evaluation, report.evaluated, tmp / "metrics.parquet")
    for by, gm in report.groups.items():  # --by: every metric per layer / op / phase
        write_group_parquet(gm, report.evaluated, tmp / f"metrics_by_{by}.parquet")
        outputs[f"metrics_by_{by}"] = str(tmp / f"metrics_by_{by}.parquet")
    if metrics_file:
        outputs["metrics"] = str(tmp / "metrics.parquet")
    timings["codegen"] = timings.get("codegen", 0.0) + time.perf_counter() - t0
    outputs |= {"evaluator": str(tmp / "evaluator.py"), "docs": str(docs_path)}
    outputs["report"] = str(tmp / "report.json")
    report.outputs = relocate(outputs, tmp, final)
    report.notes = [n.replace(str(tmp), str(final)) for n in report.notes]  # name the folder the user will find
    report.timings = timings
    (tmp / "report.json").write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")


def run_job(
    *,
    warmup_steps: int = 400,
    generation: str = "sohu",
    out: str | Path = "perfonto-out",
    catalog=None,
    library: bool = True,
    force: bool = False,
    command: list[str] | None = None,
    log: Callable[[str], None] = lambda s: None,
    serving: dict | None = None,
    by: tuple[str, ...] = (),
    steady_state: float | None = 0.9,
    **emulation,
) -> Report:
    """Run the main job end to end: compile, emulate into the output folder, analyse.

    ``emulation``: ``emulator.run``'s keyword arguments, with its defaults (``model``, ``chips``,
    ``duration_s``, ``sample_period_s``, ``isl``, ``osl``, ``seed``; ``progress(phase, done, total)``;
    the knobs ``slow_chip``, ``throttled_link`` and ``router_skew`` of ``emulator.knobs``;
    ``op_snapshots``: the emulator also reads the counters at every op boundary
    (``snapshots.parquet``), which makes the attribution exact); ``serving``: more of them
    (``preset``, ``num_requests``, ``rate``, ``concurrency``, ``draft_tokens``, ``acceptance``);
    ``warmup_steps`` is 400 here. ``catalog``: a catalog folder (default: the shipped one). The report
    gets the run's modelling assumptions and, for a generation with a public claim, the comparison
    (``emulator.claim``). ``by``: groupings for every metric per layer / op / phase
    (``metrics_by_<by>.parquet``, ``analysis.groups``). ``steady_state``: the fraction of the peak
    concurrency for the steady-state window (``analysis.steady_state``; None: off).

    Raises:
        TypeError: an argument ``emulator.run`` does not take.
        CatalogError: the catalog does not compile.
        perfonto.outputs.OutputError: ``out`` cannot be written (not perfonto's, being written).
    """
    from perfonto import emulator
    from perfonto.emulator.claim import run_context

    emulation.setdefault("whole_steps", True)  # the main job measures whole engine steps (issue 30)
    emu_args = _emulation_args(emulator.run, warmup_steps=warmup_steps, **emulation, **(serving or {}))
    model, chips = emu_args["model"], emu_args["chips"]
    cat, t_compile = compile_catalog(catalog, generation, library, log)
    graph = cat.graph
    timings = {"compile": t_compile}
    final = Path(out)
    expected = run_outputs(graph.generation.name, by, bool(emu_args.get("op_snapshots")))
    with output_folder(final, command=command, force=force, expected=expected) as tmp:
        t0 = time.perf_counter()
        log(
            f"emulating {model} on {chips} x {graph.generation.name}, {emu_args['duration_s']:g} s simulated, "
            f"sample period {emu_args['sample_period_s'] * 1e3:g} ms, {emu_args['isl']}/{emu_args['osl']} tokens, "
            + (
                # the arrivals start with the run: a warm-up before t = 0 has no request to serve
                "online: the server starts empty at t = 0 (no warm-up; a run long enough reaches steady state)"
                if emu_args.get("rate") is not None
                else f"{warmup_steps} warm-up steps"
            )
            + f", seed {emu_args['seed']}"
        )
        emu = emulator.run(**(emu_args | {"gen": graph.generation, "out_dir": tmp}))
        measured = emu.ground_truth["duration_s"]
        if measured > emu_args["duration_s"] * (1 + 1e-9):
            log(
                f"measured {measured:g} s: the run ends at the end of the engine step in progress at "
                f"{emu_args['duration_s']:g} s, so its tokens and its work cover the same whole steps"
            )
        timings["emulate"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        mod, src = evaluator_for(graph, log)
        (tmp / "evaluator.py").write_text(src, encoding="utf-8")
        timings["codegen"] = time.perf_counter() - t0
        log(f"generated evaluator {final / 'evaluator.py'} and docs {final / 'docs' / (graph.generation.name + '.md')}")
        capture = Capture(
            emu.counters_path,
            emu.requests_path,
            emu.trace_path,
            emu.sync_path,
            emu.ground_truth,
            snapshots=emu.snapshots_path,
            steady_state=steady_state,
        )
        report = analyse_capture(graph, capture, evaluator=mod, model=model, log=log, by=by)
        report.chips = chips
        report.context = run_context(graph.generation, emu.ground_truth)
        timings |= report.timings
        outputs = {
            "counters": str(emu.counters_path),
            "ground_truth": str(emu.ground_truth_path),
            "requests": str(emu.requests_path),
            "sync": str(emu.sync_path),
            "trace": str(emu.trace_path),
        }
        if emu.snapshots_path is not None:
            outputs["snapshots"] = str(emu.snapshots_path)
        _write_products(graph, report, tmp, final, src, outputs, _ordered(timings))
    return report


#: the files ``emulator.run`` writes into its folder, whatever the run (``snapshots.parquet`` too with ``op_snapshots``)
EMULATOR_OUTPUTS = ("counters.parquet", "requests.parquet", "sync.parquet", "trace.parquet", "ground_truth.json")


def run_outputs(generation: str, by: tuple[str, ...] = (), op_snapshots: bool = False) -> list[str]:
    """The files ``run_job`` surely writes (relative to its folder): the emulator's (``snapshots.parquet``
    with ``op_snapshots``), the evaluator, the docs of ``generation``, the metrics (per ``by`` grouping too)
    and the report; checked against a user's files before the run (``outputs.check_expected``)."""
    return [
        *EMULATOR_OUTPUTS,
        *(["snapshots.parquet"] if op_snapshots else []),
        "evaluator.py",
        f"docs/{generation}.md",
        "metrics.parquet",
        *(f"metrics_by_{b}.parquet" for b in by),
        "report.json",
    ]


def _emulation_args(run: Callable, **kwargs) -> dict:
    """``run``'s keyword arguments (``emulator.run``'s), its defaults filled in where not given; its
    generation and output folder are set later.

    Raises:
        TypeError: an argument it does not take, or one given twice.
    """
    import inspect

    bound = inspect.signature(run).bind(None, out_dir=None, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _replaced_engine(engine: str, topology, rows: int) -> list[str]:
    """The note for ``--engine memory`` on a capture the embedded engine takes instead (said, not
    silently replaced): one with a topology, or too large to hold."""
    if engine != "memory":
        return []
    what = "the topology's fleet rollups are" if topology is not None else f"a dump of {rows:,} sample rows is"
    return [f"--engine memory: {what} evaluated by the embedded engine (in pieces; window values under metrics/)"]


def _multiplexed_in_memory(engine: str, topology) -> list[str]:
    """The note for a multiplexed capture asked of an engine it does not go to (it is read whole, so
    that which counters ran together is checked), or with a topology whose rollups it does not get."""
    if engine not in ("embedded", "spark") and topology is None:
        return []
    return [
        "a multiplexed capture is analysed by the in-memory engine, which checks which counters ran together "
        f"(not --engine {engine}{', nor the topology rollups' if topology is not None else ''})"
    ]


def _warm_the_kernel_that_runs(graph, mod, plan, metrics, log) -> None:
    """Start loading (or compiling) the kernel that will run while the capture's keys are read: the whole
    catalog's (``mod``), or with ``metrics`` or a dump that lacks a signal the cut catalog's, which
    ``analysis.capture.evaluable`` builds (the same cache entry the analysis takes) and announces."""
    from perfonto.analysis.capture import evaluable
    from perfonto.codegen.evaluator_cache import warm_kernel

    if plan is not None:
        run = evaluable(graph, set(plan.absent), metrics, mod, log)[1]
    else:
        run = None if metrics else mod
    if run is mod:
        evaluator_for(graph, log)  # says so when the whole catalog's kernel must be compiled first
    if run is not None:
        warm_kernel(run)


def analyze_job(
    capture: Capture,
    *,
    out: str | Path,
    catalog=None,
    generation: str = "sohu",
    library: bool = True,
    metrics: list[str] | None = None,
    force: bool = False,
    command: list[str] | None = None,
    log: Callable[[str], None] = lambda s: None,
    by: tuple[str, ...] = (),
    topology=None,
    engine: str = "auto",
    spark_master: str = "local[2]",
    chunk_rows: int | None = None,
    progress=None,
) -> Report:
    """Analyse a capture the user has (``perfonto analyze``) into ``out``; ``by`` as for ``run_job``.

    ``engine``: ``auto`` (the whole dump in memory when it is small, else the embedded engine),
    ``memory``, ``embedded`` (in pieces, bounded memory: ``analysis.engine``) or ``spark``
    (``analysis.spark_engine``, on ``spark_master``). The embedded and Spark engines write the window
    values as ``metrics/host=…/part-*.parquet`` and add the fleet rollups (per host, and per rack and
    pod with a ``topology``: ``capture.topology.Topology``) to the report; ``progress(phase, done, total)``.

    Raises:
        CatalogError: the catalog does not compile.
        perfonto.metrics.catalog.UnknownMetric: a name in ``metrics`` that is not a metric of the catalog (a
            ``KeyError`` too).
        DumpError: a part of the capture cannot be read (TopologyError: the topology does not place a chip); a
            side file that is missing (requests, trace, sync reads, snapshots) or not Parquet (the first three)
            fails before anything is compiled or written (``analysis.side_files``).
        perfonto.outputs.OutputError: ``out`` cannot be written.
    """
    from perfonto.analysis.capture import plan_capture
    from perfonto.analysis.fleet_capture import analyse_fleet
    from perfonto.analysis.side_files import check_side_files
    from perfonto.metrics.catalog import select_metrics
    from perfonto.capture.dump_scan import CHUNK_ROWS

    check_side_files(capture)  # a wrong side file fails now, not after the evaluation
    spark = None
    if engine == "spark":  # the JVM and the executors start while the catalog compiles and the dump is planned
        from perfonto.analysis.spark_engine import SessionStart

        spark = SessionStart(spark_master)
    try:
        graph, t_compile = _compile_for(capture, catalog, generation, library, log)
        if metrics:
            select_metrics(graph, metrics)  # unknown names fail before anything is written
        chunk_rows = chunk_rows or CHUNK_ROWS
        plan = plan_capture(graph, capture) if isinstance(capture.counters, (str, Path)) else None
        t0 = time.perf_counter()
        mod, src = evaluator_for(graph)  # the whole catalog's: its source is the run's evaluator.py
        _warm_the_kernel_that_runs(graph, mod, plan, metrics, log)
        t_codegen = time.perf_counter() - t0
        multiplexed = plan is not None and plan.multiplex is not None  # read whole: its groups are checked in memory
        at_scale = not multiplexed and (
            engine in ("embedded", "spark")
            or (not by and (topology is not None or (plan is not None and plan.rows > 4 * chunk_rows)))
        )
        timings = {"compile": t_compile}
        inputs = _inputs(capture)
        final = Path(out)
        with output_folder(final, command=command, force=force, inputs={k: v for k, v in inputs.items() if v}) as tmp:
            t0 = time.perf_counter()
            (tmp / "evaluator.py").write_text(src, encoding="utf-8")
            timings["codegen"] = t_codegen + time.perf_counter() - t0
            outputs = {k.removesuffix(".parquet").removesuffix(".json"): v for k, v in inputs.items() if v}
            if at_scale and plan is not None:
                report = analyse_fleet(
                    graph,
                    capture,
                    tmp / "metrics",
                    plan=plan,
                    topology=topology,
                    metrics=metrics,
                    evaluator=mod,
                    engine="spark" if engine == "spark" else "embedded",
                    spark_master=spark_master,
                    spark=spark,
                    chunk_rows=chunk_rows,
                    progress=progress,
                    log=log,
                )
                report.notes += _in_memory_only(capture, by) + _replaced_engine(engine, topology, plan.rows)
                _record_populations(capture, report)
                _emulated_context(graph, capture, inputs, report)
                timings |= report.timings
                outputs["metrics"] = str(tmp / "metrics")
                _write_products(graph, report, tmp, final, src, outputs, _ordered(timings), metrics_file=False)
                return report
            report = analyse_capture(
                graph,
                capture,
                metrics=metrics,
                evaluator=mod,
                log=log,
                by=by,
                plan=plan,
                chunk_rows=chunk_rows,
                progress=progress,
            )
            if multiplexed:
                report.notes += _multiplexed_in_memory(engine, topology)
            _emulated_context(graph, capture, inputs, report)
            timings |= report.timings
            _write_products(graph, report, tmp, final, src, outputs, _ordered(timings))
        return report
    finally:
        if spark is not None:  # a capture left to the in-memory engine, or an error: the session is not left running
            spark.stop()


def _compile_for(capture: Capture, catalog, generation: str, library: bool, log) -> tuple:
    """(graph, compile seconds): the catalog compiled for ``capture`` — for the instances it holds where the
    catalog sizes an axis from the data (what the first compile says is then not logged: the second's is)."""
    from perfonto.analysis.capture import capture_instances
    from perfonto.ontology.derive import from_data_axes

    said: list[str] = []  # what compiling says, held back until it is known whether the capture sizes the catalog
    cat, t_compile = compile_catalog(catalog, generation, library, said.append)
    if not from_data_axes(cat.graph.generation):
        for line in said:
            log(line)
        return cat.graph, t_compile
    sized = capture_instances(cat.graph.generation, capture)  # the capture's instances fix the axes' sizes
    cat, t_more = compile_catalog(catalog, generation, library, log, instances=sized)
    return cat.graph, t_compile + t_more


def _inputs(capture: Capture) -> dict[str, str | None]:
    """The capture's files by their run-folder names (the output manifest's ``inputs``)."""
    inputs = {
        "counters.parquet": _where(capture.counters),
        "requests.parquet": _where(capture.requests),
        "trace.parquet": _where(capture.trace),
        "sync.parquet": _where(capture.sync),
        "snapshots.parquet": _where(capture.snapshots),
    }
    if getattr(capture, "folder", None):  # the run or fleet folder given: an --out inside it is refused too
        from .outputs import CAPTURE_FOLDER

        inputs[CAPTURE_FOLDER] = str(Path(capture.folder).resolve())
    if isinstance(capture.counters, (str, Path)) and capture.ground_truth is not None:
        inputs["ground_truth.json"] = str((Path(capture.counters).parent / "ground_truth.json").resolve())
    return inputs


def _emulated_context(graph, capture: Capture, inputs: dict, report: Report) -> None:
    """An emulated run's context in ``report`` — its preset, assumptions, the public claim it is compared
    with, the offline queue — whatever engine evaluated it (the embedded and Spark engines left it out with
    no note); a ground truth naming a model perfonto does not know gives a note, not a claim."""
    if capture.ground_truth is None or "preset" not in capture.ground_truth:
        return
    from perfonto.emulator.claim import run_context

    gt_file = inputs.get("ground_truth.json") or "ground_truth.json"
    report.context = run_context(graph.generation, capture.ground_truth, gt_file)
    report.notes += report.context.pop("notes", [])


def _record_populations(capture: Capture, report: Report) -> None:
    """The request-level metrics' record counts and "capped by the run length" warnings of a report the
    embedded engine made (the in-memory engine makes them as it evaluates), from the request records."""
    if capture.requests is None or not report.records or report.populations is not None:
        return
    from perfonto.analysis.records import record_populations
    from perfonto.metrics.population import read_records

    rec = read_records(capture.requests, report.evaluated.generation)
    report.populations = record_populations(report.evaluated, rec, report.records)


def _in_memory_only(capture: Capture, by: tuple[str, ...]) -> list[str]:
    """Notes on what the embedded and Spark engines leave to the in-memory engine."""
    notes = []
    if by:
        notes.append(f"--by {','.join(by)} is evaluated by the in-memory engine only (--engine memory)")
    if capture.trace is not None:
        split = "the trace's time split (compute, communication, overlap, idle)"
        if "op" in by:  # the per-op attribution is said by the --by note
            notes.append(f"{split} is made by the in-memory engine only (--engine memory)")
        else:
            notes.append(
                f"the per-op attribution (the counters to the trace's op spans) and {split} are made by the "
                "in-memory engine only (--engine memory)"
            )
    if capture.requests is not None and capture.steady_state is not None:
        notes.append(
            "the steady-state window (--steady-state) and the energy-sensor checks are evaluated by the "
            "in-memory engine only (--engine memory)"
        )
    return notes


def _where(source) -> str | None:
    if source is None or not isinstance(source, (str, Path)):
        return None
    return str(Path(source).resolve()) if Path(source).exists() else str(source)


def _ordered(t: dict) -> dict:
    order = ["compile", "emulate", "codegen", "evaluate", "crosschip"]
    return {k: t[k] for k in order if k in t} | {k: v for k, v in t.items() if k not in order}


__all__ = ["JobResult", "analyze_job", "compile_catalog", "run_job", "run_outputs"]
