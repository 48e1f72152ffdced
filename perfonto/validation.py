"""``perfonto validate``: emulate several workloads and check every metric that has a ground-truth
counterpart against the emulator's ground truth. The counters pass through the whole pipeline (raw
registers, windows, the generated evaluator, run and server levels); the comparison itself is
``perfonto.analysis.validate``."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from perfonto import emulator
from perfonto.analysis.evaluate import evaluate_dump
from perfonto.analysis.records import record_metrics
from perfonto.analysis.validate import Check, check_run, emulated_part
from perfonto.codegen.python_evaluator import generate, load
from perfonto.metrics.catalog import load_catalog
from perfonto.ontology.diagnostics import CatalogError

WORKLOADS = [
    {"model": "llama3-70b", "chips": 8, "isl": 2048, "osl": 128, "duration_s": 1.0},
    {"model": "llama3-70b", "chips": 4, "isl": 1000, "osl": 1000, "duration_s": 1.0},
    {"model": "llama3-8b", "chips": 1, "isl": 128, "osl": 128, "duration_s": 1.0},
]


def validate(
    generation: str | None = "sohu", workloads=None, log=lambda s: None, catalog=None
) -> tuple[list[Check], float, dict[str, str]]:
    """Emulate every workload (``WORKLOADS`` by default) on the catalog's generation and check the metrics
    an emulated dump can feed; returns the checks, the elapsed seconds and the other metrics with their
    reasons (``analysis.validate.emulated_part``: a signal without an emulator binding).

    Raises:
        CatalogError: the catalog does not compile (or names an unknown generation).
    """
    t0 = time.perf_counter()
    cat = load_catalog(catalog, generation)
    if cat.errors or cat.graph is None:
        raise CatalogError(cat.diagnostics)
    graph, unavailable = emulated_part(cat.graph)
    ev_mod = load(generate(graph))
    checks: list[Check] = []
    for wl in workloads or WORKLOADS:
        label = f"{wl['model']} x{wl['chips']} {wl['isl']}/{wl['osl']}"
        with tempfile.TemporaryDirectory() as tmp:
            res = emulator.run(
                graph.generation,
                model=wl["model"],
                chips=wl["chips"],
                duration_s=wl["duration_s"],
                sample_period_s=1e-3,
                isl=wl["isl"],
                osl=wl["osl"],
                seed=wl.get("seed", 0),
                warmup_steps=wl.get("warmup_steps", 400),
                out_dir=Path(tmp),
            )
            ev = evaluate_dump(graph, ev_mod, res.counters_path)
            rec = record_metrics(graph, res.requests_path)
        mine = check_run(graph, ev, rec, res.ground_truth, label)
        checks += mine
        worst = max(mine, key=lambda c: c.error, default=None)
        log(
            f"{label}: {len(mine)} metrics checked, worst {worst.metric if worst else '-'} "
            f"{(worst.error if worst else 0) * 100:.4f} %"
        )
    return checks, time.perf_counter() - t0, unavailable
