"""The main job: compile the catalog, emulate a workload, generate the evaluator, evaluate, analyse.

``run_job`` writes into ``out``: ``counters.parquet``, ``requests.parquet``, ``sync.parquet``,
``trace.parquet`` and ``ground_truth.json`` (emulator), ``evaluator.py`` (generated),
``docs/<generation>.md`` (generated), ``metrics.parquet`` (per window and chip) and ``report.json``
(the run-level result, with the multi-chip analysis of ``perfonto.crosschip`` under ``multichip``).
Progress messages go to ``log`` (stderr in the CLI).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from perfonto import emulator
from perfonto.emulator.claim import run_context
from perfonto.analysis import crosschip
from perfonto.analysis.bottleneck import Analysis, analyse
from perfonto.analysis.headline import headline
from perfonto.analysis.evaluate import Evaluation, evaluate_dump, load_evaluator, write_metrics_parquet
from perfonto.analysis.records import record_metrics, trace_time_split
from perfonto.codegen.docs import generate_markdown
from perfonto.codegen.python_evaluator import generate
from perfonto.metrics.catalog import Catalog, load_catalog
from perfonto.ontology.diagnostics import CatalogError


@dataclass
class JobResult:
    catalog: Catalog
    evaluation: Evaluation
    analysis: Analysis
    ground_truth: dict
    outputs: dict[str, str]
    model: str
    chips: int
    timings: dict[str, float]
    multichip: dict | None = None
    records: dict | None = None  # record metric -> value (scalars) or per-record array
    time_split: dict | None = None
    headline: dict | None = None  # analysis.headline: the finding to read first
    context: dict | None = None  # emulator.claim.run_context: modelling assumptions, the public claim

    def to_json(self) -> dict:
        graph = self.catalog.graph
        metrics = {}
        for name, m in graph.metrics.items():
            v = self.evaluation.server[name]
            if np.ndim(v) == 0:
                metrics[name] = {"value": _num(v), "unit": m.unit_text}
            else:
                metrics[name] = {"value": [_num(x) for x in np.ravel(v)], "unit": m.unit_text,
                                 "axes": [list(a) for a in m.axes]}
        for name, m in graph.record_metrics.items():
            v = (self.records or {}).get(name)
            if v is None:
                continue
            if np.ndim(v) == 0:
                metrics[name] = {"value": _num(v), "unit": m.unit_text, "population": "run (over records)"}
            else:
                arr = np.asarray(v, dtype=np.float64)
                metrics[name] = {"value": None, "unit": m.unit_text, "population": m.population,
                                 "count": int(np.isfinite(arr).sum()), "nulls": int(np.isnan(arr).sum())}
        decls = graph.declarations
        for name, why in graph.unavailable.items():
            metrics[name] = {"value": None, "unit": decls[name].unit if name in decls else "", "unavailable": why}
        per_chip = []
        for ci, chip in enumerate(self.evaluation.chips):
            per_chip.append({"chip": int(chip), "metrics": {
                n: _num(self.evaluation.per_chip[n][ci]) for n, m in graph.metrics.items() if not m.axes}})
        a = self.analysis
        return {
            "generation": graph.generation.name,
            "model": self.model,
            "chips": self.chips,
            "metrics": metrics,
            "headline": self.headline,
            "bottleneck": a.bottleneck,
            "bottleneck_label": a.bottleneck_label,
            "topdown": {k: _num(v) for k, v in a.topdown.items()},
            "drilldown": [{"metric": n, "share_of_time": _num(v)} for n, v in a.drilldown],
            "topdown_tree_violations": a.tree_violations,
            "thresholds_crossed": [{"metric": n, "value": _num(v), "message": msg} for n, v, msg in a.thresholds],
            "bounds_violations": {"counts": a.violation_counts,
                                  "first": [vars(v) | {"bounds": list(v.bounds)} for v in a.violations]},
            "null_windows": a.null_windows,
            "coverage": {k: round(v, 6) for k, v in self.evaluation.coverage.items() if v < 0.999999},
            "unavailable": graph.unavailable,
            "per_chip": per_chip,
            "outputs": self.outputs,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "multichip": multichip_json(self.multichip),
            "time_split": self.time_split,
            "assumptions": (self.context or {}).get("assumptions"),
            "claim": (self.context or {}).get("claim"),
        }


def multichip_json(mc: dict | None) -> dict | None:
    """The multi-chip section of the JSON report: ``straggler`` (or None), ``collective_wait_s`` per
    chip, ``waits_for``, ``skew`` (per-step arrival skew, forward-pass start skew), ``imbalance``
    (across chips and within chips, 1 − mean/max), ``saturation`` (PCIe and link windows at or above
    the threshold), ``slow_links``, and ``alignment`` (clock-fit error against the ground truth)."""
    if mc is None:
        return None
    coll = mc.get("collective", {})
    return {"straggler": coll.get("straggler"), "collective_wait_s": coll.get("wait_s"), "waits_for": coll.get("waits_for"),
            "collective_wait_share": coll.get("wait_share_of_time"), "skew": coll.get("skew"),
            "imbalance": mc.get("imbalance"), "saturation": mc.get("saturation"), "slow_links": mc.get("slow_links"),
            "alignment": {k: v for k, v in mc.get("alignment", {}).items() if k in ("error_ns", "samples")}}


def _num(v) -> float | None:
    f = float(v)
    return f if np.isfinite(f) else None


def run_job(*, model: str = "llama3-70b", chips: int = 8, duration_s: float = 1.0, sample_period_s: float = 1e-3,
            isl: int = 2048, osl: int = 128, seed: int = 0, warmup_steps: int = 400, generation: str = "sohu", out: str | Path = "perfonto-out",
            log: Callable[[str], None] = lambda s: None, progress=None, slow_chip: tuple[int, float] | None = None,
            throttled_link: tuple[int, int, float] | None = None, router_skew: float = 0.0,
            serving: dict | None = None) -> JobResult:
    """Run the main job end to end. Raises ``CatalogError`` when the catalog does not compile.

    ``progress(phase, done, total)`` is passed to ``emulator.run``; ``slow_chip``, ``throttled_link``
    and ``router_skew`` are its knobs (``emulator.knobs``); ``serving``: more of its keyword
    arguments (``preset``, ``num_requests``, ``rate``, ``concurrency``, ``draft_tokens``, ``acceptance``)."""
    timings: dict[str, float] = {}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cat = load_catalog(None, generation)
    if cat.errors or cat.graph is None:
        raise CatalogError(cat.diagnostics)
    graph = cat.graph
    timings["compile"] = time.perf_counter() - t0
    log(f"compiled catalog: generation {graph.generation.name}, {len(graph.generation.signals)} signals, "
        f"{len(graph.metrics)} metrics, catalog hash {graph.content_hash} ({timings['compile']:.2f} s)")

    t0 = time.perf_counter()
    log(f"emulating {model} on {chips} x {graph.generation.name}, {duration_s:g} s simulated, "
        f"sample period {sample_period_s * 1e3:g} ms, {isl}/{osl} tokens, {warmup_steps} warm-up steps, seed {seed}")
    emu = emulator.run(graph.generation, model=model, chips=chips, duration_s=duration_s, sample_period_s=sample_period_s,
                       isl=isl, osl=osl, seed=seed, warmup_steps=warmup_steps, out_dir=out, progress=progress,
                       slow_chip=slow_chip, throttled_link=throttled_link, router_skew=router_skew, **(serving or {}))
    timings["emulate"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    evaluator_path = out / "evaluator.py"
    evaluator_path.write_text(generate(graph), encoding="utf-8")
    docs_path = out / "docs" / f"{graph.generation.name}.md"
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    docs_path.write_text(generate_markdown(graph), encoding="utf-8")
    timings["codegen"] = time.perf_counter() - t0
    log(f"generated evaluator {evaluator_path} and docs {docs_path}")

    t0 = time.perf_counter()
    evaluator = load_evaluator(evaluator_path)
    ev = evaluate_dump(graph, evaluator, emu.counters_path)
    metrics_path = out / "metrics.parquet"
    write_metrics_parquet(ev, graph, metrics_path)
    timings["evaluate"] = time.perf_counter() - t0
    W, C = ev.windows.interval.shape
    log(f"evaluated {len(graph.metrics)} metrics over {W} windows x {C} chips with the generated evaluator")

    analysis = analyse(graph, ev)
    records = record_metrics(graph, emu.requests_path)
    split = trace_time_split(emu.trace_path, ev.windows)
    t0 = time.perf_counter()
    multichip = crosschip.analyse(out, gen=graph.generation)
    timings["crosschip"] = time.perf_counter() - t0
    outputs = {"counters": str(emu.counters_path), "ground_truth": str(emu.ground_truth_path), "metrics": str(metrics_path),
               "evaluator": str(evaluator_path), "docs": str(docs_path), "requests": str(emu.requests_path),
               "sync": str(emu.sync_path), "trace": str(emu.trace_path)}
    result = JobResult(cat, ev, analysis, emu.ground_truth, outputs, model, chips, timings, multichip, records, split,
                       headline(graph, ev, analysis, multichip), run_context(graph.generation, emu.ground_truth))
    outputs["report"] = str(out / "report.json")
    (out / "report.json").write_text(json.dumps(result.to_json(), indent=2), encoding="utf-8")
    return result
