"""The fleet-scale analysis of a capture: ``perfonto analyze`` on a dump too large for memory, with a
topology, or with ``--engine spark``.

The dump is planned (``capture.dump_scan``), evaluated in pieces by the embedded engine
(``analysis.engine``: the generated evaluator, bounded memory, window values written as
``metrics/host=…/part-*.parquet``) — or, with ``engine="spark"``, the same engine runs on Spark's
executors host by host (``analysis.spark_kernel``) and the driver merges the hosts' run-level sums —
then rolled up per host, rack, pod and fleet (``analysis.fleet``). The result is
the ``Report`` of ``analysis.capture`` with ``fleet`` set; request records and the trace are used as
there; the multi-chip analysis (one host's chips on its timeline) needs the whole dump in memory and
is left out with a note.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from perfonto.metrics.graph import MetricGraph
from perfonto.capture.dump_scan import CHUNK_ROWS, DumpPlan
from perfonto.capture.topology import Topology

from .bottleneck import analyse
from .capture import Capture, Report, evaluable, fleet_steps_note, plan_capture
from .engine import evaluate_capture
from .fleet import rollups
from .findings import findings
from .headline import headline
from .records import record_metrics


def analyse_fleet(
    graph: MetricGraph,
    capture: Capture,
    out_metrics: str | Path | None,
    *,
    plan: DumpPlan | None = None,
    topology: Topology | None = None,
    metrics: list[str] | None = None,
    evaluator=None,
    engine: str = "embedded",
    spark_master: str = "local[2]",
    spark=None,
    chunk_rows: int = CHUNK_ROWS,
    top: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> Report:
    """Analyse ``capture`` at fleet scale (module docstring); window values go to ``out_metrics``.
    ``spark``: with ``engine="spark"``, the session's start already under way
    (``analysis.spark_engine.SessionStart``), else one is started on ``spark_master`` here; either is
    stopped once the hosts are evaluated.

    Raises:
        DumpError: the counters cannot be read; TopologyError: the topology does not place a chip.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    plan = plan or plan_capture(graph, capture)
    gen = graph.generation
    evaluated, evaluator, _, unavailable = evaluable(graph, set(plan.absent), metrics, evaluator, log)
    if topology is not None:  # every chip placed, before anything is evaluated
        for host, chips in plan.chip_numbers.items():
            for c in chips:
                topology.of(host, int(c))
    log(
        f"{plan.rows:,} sample rows: {sum(plan.chips.values())} chips on {len(plan.groups)} host(s), "
        f"{plan.n_grid} samples each; engine {engine}"
    )
    meta = {"generation": gen.name, "catalog_hash": graph.content_hash}
    if engine == "spark":
        from .spark_engine import SessionStart
        from .spark_kernel import evaluate_on_spark

        t1 = time.perf_counter()
        start = spark or SessionStart(spark_master)
        try:
            res = evaluate_on_spark(
                start.get(),
                evaluated,
                evaluator,
                plan,
                out_metrics,
                chunk_rows=chunk_rows,
                write_meta=meta,
                progress=progress,
            )
        finally:
            start.stop()
        timings["spark"] = time.perf_counter() - t1
    else:
        res = evaluate_capture(
            evaluated, evaluator, plan, out_metrics, chunk_rows=chunk_rows, progress=progress, write_meta=meta
        )
    timings["evaluate"] = time.perf_counter() - t0
    ev = res.evaluation
    analysis = analyse(evaluated, ev, checks=res.checks)
    fleet = rollups(evaluated, evaluator, res, topology, top=top)
    notes = list(plan.notes) + fleet.notes + fleet_steps_note(capture.ground_truth)
    if topology is not None:
        notes += _placed_without_rows(topology, plan) + _racks_in_two_pods(topology)
    records = None
    if capture.requests is not None and evaluated.record_metrics:
        records = record_metrics(evaluated, capture.requests)
    elif evaluated.record_metrics:
        notes.append("no request records given: latency metrics (ttft, tpot, itl, e2e) are not evaluated")
    if capture.sync is not None:
        notes.append(
            "the dump was analysed in pieces: the multi-chip analysis (one host's chips on its timeline, "
            "which needs the whole dump in memory) is skipped"
        )
    report = Report(
        graph,
        evaluated,
        ev,
        analysis,
        unavailable,
        plan.meta.get("model"),
        len(ev.chips),
        records,
        None,
        None,
        capture.ground_truth,
        {},
        timings,
        notes,
        fleet=fleet,
        engine=engine,
    )
    report.headline = headline(evaluated, ev, analysis, None)
    report.findings = findings(graph, ev, analysis, report.headline)
    report.outputs = {"metrics": str(out_metrics)} if out_metrics else {}
    report.rows = res.rows
    return report


def _placed_without_rows(topology: Topology, plan: DumpPlan) -> list[str]:
    """A note on the hosts, and the single chips of hosts with rows, that the topology places but the dump
    has no rows for (a collector down?): their racks' and pods' rollups hold only what has rows."""
    have = {str(h): {int(c) for c in chips} for h, chips in plan.chip_numbers.items()}
    hosts = sorted({h for h, _ in topology.place} - set(have))
    chips = sorted(f"{h}/{c}" for h, c in topology.place if c is not None and h in have and c not in have[h])
    gone = hosts + chips
    if not gone:
        return []
    what = " and ".join(
        x for x in (f"{len(hosts)} host(s)" if hosts else "", f"{len(chips)} chip(s)" if chips else "") if x
    )
    return [
        f"the topology ({topology.path}) places {what} the dump has no rows for: {', '.join(gone[:8])}"
        f"{' …' if len(gone) > 8 else ''}; their racks' and pods' rollups hold only what has rows"
    ]


def _racks_in_two_pods(topology: Topology) -> list[str]:
    """A note on the racks the topology puts in more than one pod (a typo in a pod column?): such a rack's
    rollup holds chips of each of its pods, and the pods' rollups share it."""
    pods: dict[str, set[str]] = {}
    for rack, pod in topology.place.values():
        if pod is not None:
            pods.setdefault(rack, set()).add(pod)
    split = sorted(r for r, ps in pods.items() if len(ps) > 1)
    if not split:
        return []
    said = "; ".join(f"{r} in {', '.join(sorted(pods[r]))}" for r in split[:4]) + (" …" if len(split) > 4 else "")
    return [
        f"the topology ({topology.path}) puts {len(split)} rack(s) in more than one pod: {said}; each such "
        "rack's rollup holds chips of each of its pods"
    ]
