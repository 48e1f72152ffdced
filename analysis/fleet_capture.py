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

import numpy as np

from perfonto.metrics.graph import MetricGraph
from perfonto.capture.dump_plan import DumpPlan
from perfonto.capture.dump_scan import CHUNK_ROWS
from perfonto.capture.topology import Topology, TopologyError

from .bottleneck import analyse
from .checks import level1_not_summed
from .evaluate import leader_note
from .capture import Capture, Report, evaluable, fleet_steps_note, plan_capture
from .engine import evaluate_capture
from .fleet import rollups
from .findings import findings
from .headline import headline
from .records import record_metrics
from .report_json import format_value


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
                _place(topology, plan, host, int(c))
    held = plan.rows_present
    log(
        f"{held:,} sample rows: {sum(plan.chips.values())} chips on {len(plan.groups)} host(s), "
        + (
            f"{plan.n_grid} samples each"
            if held == plan.rows
            else f"on a grid of {plan.n_grid} samples ({plan.rows - held:,} of its {plan.rows:,} chip slots "
            "without a row)"
        )
        + f"; engine {engine}"
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
    notes = server_cut(graph, ev, res.sums, fleet) + list(plan.notes) + fleet.notes
    notes += fleet_steps_note(capture.ground_truth)
    notes += [why for why in [level1_not_summed(evaluated)] if why]  # a partial level 1: its sum not checked
    notes += leader_note(ev)
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


SERVER_COVERAGE = 0.9  # a server level over less of the run than this (and less than some chip's own) is noted


def server_cut(graph: MetricGraph, ev, sums, fleet) -> list[str]:
    """A note when the server level (the windows valid on every chip) covers under ``SERVER_COVERAGE`` of the
    run for some metric while some chips' own valid windows cover more: it names the chips (hosts) that cut
    it, and points at the fleet table, whose rows read each chip over its own windows (a fleet trial's
    headline read 410,847 tok/s over half the run where the fleet row read 455,910)."""
    from .engine_levels import chip_values

    cov = {m: c for m, c in ev.coverage.items() if np.ndim(ev.server[m]) == 0 and np.isfinite(ev.server[m])}
    if not cov or not sums or min(cov.values()) >= SERVER_COVERAGE:
        return []
    low = sorted((m for m, c in cov.items() if c < SERVER_COVERAGE), key=lambda m: (cov[m], m))
    worst = low[0]
    dirty = frozenset().union(*[s.dirty for s in sums])
    _, dt = chip_values(sums, frozenset(sums[0].deps[worst] & dirty))
    cut = np.flatnonzero(dt < 0.99 * dt.max())
    if not len(cut):
        return []  # every chip's own windows are as short: the server level is what the chips hold
    labels = fleet.nodes["chip"]
    hosts = [p[0] for p in fleet.place]
    named: list[str] = []
    for i in cut:  # a host all of whose chips cut it is named once
        mine = [j for j in range(len(hosts)) if hosts[j] == hosts[i]]
        whole = bool(hosts[i]) and all(j in cut for j in mine)
        share = (max(dt[j] for j in mine) if whole else dt[i]) / dt.max() * 100
        name = f"{hosts[i]} (all its chips, {share:.1f} %)" if whole else f"{labels[i]} ({share:.1f} %)"
        if name not in named:
            named.append(name)
    shown = "tokens_per_second" if "tokens_per_second" in low else worst
    unit = graph.metrics[shown].unit_text
    return [
        f"the server level (the first table, the headline and the findings) reads the windows valid on every one "
        f"of the {len(dt)} chips: {cov[worst] * 100:.1f} % of the run for {worst}"
        + (f" and {len(low) - 1} more metric(s)" if len(low) > 1 else "")
        + f", because {', '.join(named[:8])}{' …' if len(named) > 8 else ''} "
        f"ha{'s' if len(named) == 1 else 've'} fewer valid windows (in brackets: as a share of the longest chip's); "
        "the host, rack, pod and fleet tables read each chip over its own valid windows — for the fleet's figures "
        f"read its fleet row ({shown}: {format_value(fleet.values['fleet'][shown][0], unit)} there, "
        f"{format_value(ev.server[shown], unit)} at the server level)"
    ]


def _place(topology: Topology, plan: DumpPlan, host: str | None, chip: int) -> None:
    """Check that ``topology`` places chip ``chip`` of ``host``; a dump that names no host is placed by rows
    with an empty host, which an error for it says (it showed a host named ``).

    Raises:
        TopologyError: the topology does not place the chip."""
    if host is None and ("", chip) not in topology.place and ("", None) not in topology.place:
        raise TopologyError(
            f"{topology.path}: the dump {plan.label} names no host (no `host` column, no host=… folder in its "
            f"path), so its chips are placed by rows with an empty host, and none places chip {chip}: add a row "
            "with an empty host (and an empty chip for every chip), or give the dump its host (a `host` column, "
            "or its host=… folder)"
        )
    topology.of(host, chip)


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
