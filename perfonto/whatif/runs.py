"""Emulated runs of coverage scenarios and the diagnosis of each.

``run_one`` emulates a scenario (``scenarios.run_kwargs``; its ``spec`` as a derived generation)
into a folder, analyses the capture with the catalog compiled against that generation
(``analysis.capture.analyse_capture``, the code path of ``perfonto run``) and keeps what the
judgement needs: the server-level value of every scalar metric (window and run-level record
metrics), the per-chip values of the peer-wait share (the headline names the chip waited on), the
headline and the thresholds crossed.

``diagnose(graph, values, per_chip, chips)`` makes the report's judgement again from those values
with any compiled catalog — a catalog recompiled without a signal lacks the metrics that read it,
and every other metric has the value it had (a metric's value depends only on what it reads): the
headline by ``analysis.headline`` (waiting for a slower chip, else the deepest top-down node above
its threshold, else the level-1 bottleneck) and the set of metrics whose threshold is crossed.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .points import Target
from .pool import fill, workers
from .scenarios import Scenario, _quantity, run_kwargs


def spec_of(sc: Scenario | None) -> dict:
    """A scenario's spec overrides as full name → (value, unit)."""
    return {k: _quantity(v) for k, v in (sc.spec if sc else {}).items()}


def diagnose(graph, values: dict, per_chip: dict | None = None, chips=()) -> dict:
    """``{"headline", "message", "chip", "findings"}`` of a run from its metric values (module docstring).

    ``values``: metric → server-level value (NaN or missing: null); only the metrics ``graph``
    compiles are read. ``findings``: sorted names of the metrics whose threshold is crossed.
    """
    from perfonto.analysis.bottleneck import (
        bottleneck_label,
        drill_down,
        stall_shares,
        thresholds_crossed,
        topdown_level1,
    )
    from perfonto.analysis.headline import headline

    server = {n: float(values.get(n, math.nan)) if values.get(n) is not None else math.nan for n in graph.metrics}
    level1 = {n: server[n] for n in topdown_level1(graph) if math.isfinite(server[n])}
    stalls = stall_shares(graph, level1)  # useful work (group `useful`) is no bottleneck
    bottleneck = max(stalls, key=stalls.get) if stalls else None
    analysis = SimpleNamespace(
        topdown=level1,
        bottleneck=bottleneck,
        bottleneck_label=bottleneck_label(graph, bottleneck, server) if bottleneck else "",
        drilldown=drill_down(graph, server),
    )
    pc = {n: np.asarray(v, np.float64) for n, v in (per_chip or {}).items() if n in graph.metrics}
    ev = SimpleNamespace(server=server, per_chip=pc, chips=np.asarray(chips, np.int64))
    h = headline(graph, ev, analysis, None)
    findings = sorted(n for n, _, _ in thresholds_crossed(graph, server))  # as analyze: the parent chain's too
    return {
        "headline": h["metric"] if h else None,
        "message": h["message"] if h else None,
        "chip": h["chip"] if h else None,
        "findings": findings,
    }


def _scalar(v) -> float | None:
    a = np.asarray(v, np.float64)
    if a.ndim:
        a = a[np.isfinite(a)]
        return float(a.mean()) if a.size else None  # a per-instance metric: its mean over instances
    return float(a) if np.isfinite(a) else None


def run_one(target: Target, nominal: dict, sc: Scenario | None, seed: int, folder: str) -> dict:
    """Emulate and analyse one scenario (None: the nominal run) at ``seed`` into ``folder``.

    Returns ``{"scenario", "seed", "values", "per_chip", "chips", "headline", "message", "chip",
    "findings", "report" (the report's own headline and findings), "folder", "error"}``; a run the emulator refuses has
    ``error`` set and no values.
    """
    from perfonto import emulator
    from perfonto.analysis.capture import Capture, analyse_capture
    from perfonto.analysis.headline import PEER_WAIT
    from perfonto.ontology.derive import with_spec

    from .catalogs import compiled, evaluator, parts, _key

    name = sc.name if sc else "nominal"
    spec = spec_of(sc)
    base = parts(target)[0].generation
    gen = with_spec(base, spec, why=f"coverage scenario {name}")
    graph = compiled(target, spec)
    out = {"scenario": name, "seed": int(seed), "folder": str(folder), "error": None}
    Path(folder).mkdir(parents=True, exist_ok=True)
    try:
        res = emulator.run(gen, **run_kwargs(nominal, sc, gen, seed, folder))
    except (ValueError, KeyError) as exc:
        return out | {
            "error": str(exc.args[0]) if exc.args else type(exc).__name__,
            "values": {},
            "findings": [],
            "headline": None,
            "message": None,
            "chip": None,
            "per_chip": {},
            "chips": [],
        }
    cap = Capture(res.counters_path, res.requests_path, None, res.sync_path, res.ground_truth)
    rep = analyse_capture(graph, cap, evaluator=evaluator(target, _key(spec)))
    ev = rep.evaluation
    values = {n: _scalar(ev.server[n]) for n in rep.evaluated.metrics}
    for n, v in (rep.records or {}).items():
        if np.ndim(v) == 0:
            values[n] = _scalar(v)
    per_chip = {PEER_WAIT: np.asarray(ev.per_chip[PEER_WAIT], np.float64).tolist()} if PEER_WAIT in ev.per_chip else {}
    h = rep.headline or {}
    findings = sorted(t[0] for t in rep.analysis.thresholds)
    return out | {
        "values": values,
        "per_chip": per_chip,
        "chips": [int(c) for c in ev.chips],
        "headline": h.get("metric"),
        "message": h.get("message"),
        "chip": h.get("chip"),
        "findings": findings,
        "report": {"headline": h.get("metric"), "findings": findings},
    }


def run_all(
    target: Target,
    nominal: dict,
    scenarios: list[Scenario],
    seeds: list[int],
    workdir,
    *,
    jobs: int | None = None,
    progress=None,
) -> list[dict]:
    """``run_one`` for the nominal run and every scenario at every seed, over ``jobs`` processes."""
    tasks = [(sc, s) for sc in [None, *scenarios] for s in seeds]
    folders = [str(Path(workdir) / (sc.name if sc else "nominal") / f"seed{s}") for sc, s in tasks]
    out: list[dict | None] = [None] * len(tasks)
    return fill(
        out,
        range(len(tasks)),
        lambda i: run_one(target, nominal, *tasks[i], folders[i]),
        lambda i: (run_one, target, nominal, *tasks[i], folders[i]),
        jobs=workers(jobs, len(tasks)),
        total=len(tasks),
        progress=progress,
    )


__all__ = ["diagnose", "run_all", "run_one", "spec_of"]
