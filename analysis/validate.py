"""Metrics against ground truth: for each metric with a ground-truth counterpart, the value computed
from the ground truth alone (``truth_table``), and the checks of an evaluated run against it
(``check_run``). The emulated workloads themselves are run by ``perfonto.validation``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from .evaluate import Evaluation

if TYPE_CHECKING:
    from perfonto.metrics.graph import MetricGraph


def _peak(gen, name: str, unit: str) -> float:
    c = gen.spec[name]
    return float(gen.registry.Quantity(c.value, c.unit).to(unit).magnitude)


LEVEL2 = {
    "topdown.compute.matrix": "compute_matrix",
    "topdown.compute.vector": "compute_vector",
    "topdown.memory.weights": "memory_weights",
    "topdown.memory.kv_cache": "memory_kv",
    "topdown.memory.activations": "memory_activations",
    "topdown.interconnect.link_transfer": "collective_transfer",
    "topdown.interconnect.peer_wait": "collective_wait",
    "topdown.host.pcie": "host_pcie",
    "topdown.host.launch": "host_launch",
}


def dominant_peak(gen, gt: dict) -> str:
    """The spec constant of ``mxu.peak_flops_dominant`` (``metrics/library/compute.metrics``) from the
    ground truth's FLOPs by precision: FP4 where the generation has FP4 math and FP4 leads, else BF16
    where BF16 leads FP8, else FP8."""
    fp4, fp8, bf16 = (gt.get(f"flops_{p}", 0.0) for p in ("fp4", "fp8", "bf16"))
    if fp4 > max(fp8, bf16):
        return "spec.mxu.peak_flops_fp4" if "spec.mxu.peak_flops_fp4" in gen.spec else "spec.mxu.peak_flops_fp8"
    return "spec.mxu.peak_flops_bf16" if bf16 > fp8 else "spec.mxu.peak_flops_fp8"


def truth_table(gen, gt: dict) -> dict[str, Callable[[], float]]:
    """Metric → its value computed from ground truth alone (server level, in the metric's unit)."""
    d, n = gt["duration_s"], gt["chips"]
    td = gt["topdown_s"]
    cyc = sum(td.values())
    busy = gt.get("busy_s", {})
    hbm_bw = _peak(gen, "spec.hbm.peak_bandwidth", "B/s")
    peak8 = _peak(gen, "spec.mxu.peak_flops_fp8", "FLOP/s")
    peak = _peak(gen, dominant_peak(gen, gt), "FLOP/s")
    # the chip-seconds the executed FLOPs take at each precision's own dense peak (compute.metrics' hfu)
    at_peak = sum(
        gt[f"flops_{p}"] / _peak(gen, f"spec.mxu.peak_flops_{p}", "FLOP/s")
        for p in ("fp8", "bf16", "fp4")
        if gt.get(f"flops_{p}")
    )
    t = {
        "mfu": lambda: 100 * gt["model_flops"] / gt["flops"] * at_peak / (n * d),
        "model_flops_rate": lambda: gt["model_flops"] / d / 1e12,
        "hfu": lambda: 100 * at_peak / (n * d),
        "mxu.peak_flops_dominant": lambda: n * peak / 1e12,
        "mxu.achieved_flops": lambda: gt["flops"] / d / 1e12,
        "mxu.flops": lambda: gt["flops"] / 1e12,
        "mxu.flops.per_second": lambda: gt["flops"] / d / 1e12,
        "mxu.flops.pct_of_peak": lambda: 100 * gt["flops"] / (n * peak8 * d),
        "vpu.achieved_flops": lambda: gt["vector_flops"] / d / 1e12,
        "hbm.read_bandwidth": lambda: gt["hbm_read_bytes"] / d / 1e9,
        "hbm.write_bandwidth": lambda: gt["hbm_write_bytes"] / d / 1e9,
        "hbm.bandwidth": lambda: (gt["hbm_read_bytes"] + gt["hbm_write_bytes"]) / d / 1e9,
        "hbm.bytes": lambda: (gt["hbm_read_bytes"] + gt["hbm_write_bytes"]) / 1e9,
        "hbm.bandwidth_utilization": lambda: 100 * (gt["hbm_read_bytes"] + gt["hbm_write_bytes"]) / (n * hbm_bw * d),
        "c2c.tx_bandwidth": lambda: gt["c2c_tx_bytes"] / d / 1e9,
        "c2c.bytes_sent": lambda: gt["c2c_tx_bytes"] / 1e9,
        "pcie.rx_bandwidth": lambda: gt["pcie_rx_bytes"] / d / 1e9,
        "pcie.tx_bandwidth": lambda: gt["pcie_tx_bytes"] / d / 1e9,
        "tokens_per_second": lambda: gt["tokens"] / d,
        "input_tokens_per_second": lambda: gt["input_tokens"] / d,
        "output_tokens_per_second": lambda: gt["output_tokens"] / d,
        "power.average": lambda: gt["energy_j"] / d,
        "energy_per_token": lambda: gt["job_energy_j"] / gt["tokens"],
        "energy_per_output_token": lambda: gt["job_energy_j"] / gt["output_tokens"],
        "server_energy_per_token": lambda: gt["energy_j"] / gt["tokens"],
        "ttft_p50": lambda: 1e3 * gt["ttft_p50_s"],
        "ttft_p99": lambda: 1e3 * gt["ttft_p99_s"],
        "tpot_p50": lambda: 1e3 * gt["tpot_p50_s"],
        "tpot_p99": lambda: 1e3 * gt["tpot_p99_s"],
        "itl_p50": lambda: 1e3 * gt["itl_p50_s"],
        "itl_p99": lambda: 1e3 * gt["itl_p99_s"],
        "topdown.compute_bound": lambda: 100 * td["compute"] / cyc,
        "topdown.memory_bound": lambda: 100 * td["memory"] / cyc,
        "topdown.interconnect_bound": lambda: 100 * td["collective"] / cyc,
        "topdown.host_bound": lambda: 100 * td["host_wait"] / cyc,
        "topdown.idle": lambda: 100 * td["idle"] / cyc,
    }
    for metric, key in LEVEL2.items():  # top-down level 2 (emulator.subclasses), when the truth has it
        if key in gt.get("topdown2_s", {}):
            t[metric] = (lambda k: lambda: 100 * gt["topdown2_s"][k] / cyc)(key)
    tags = gt.get("hbm_bytes_by_tag") or {}
    if {"weights", "kv_read", "kv_write"} <= set(tags):  # the model's bytes: memory.metrics' mbu
        t["mbu"] = lambda: 100 * (tags["weights"] + tags["kv_read"] + tags["kv_write"]) / (n * hbm_bw * d)
    if "c2c_rx_bytes" in gt:
        t["c2c.rx_bandwidth"] = lambda: gt["c2c_rx_bytes"] / d / 1e9
    if "mxu" in busy:
        t["mxu.utilization"] = lambda: 100 * busy["mxu"] / (n * d)
    if "vpu" in busy:
        t["vpu.utilization"] = lambda: 100 * busy["vpu"] / (n * d)
    return t


def emulated_part(graph: MetricGraph) -> tuple[MetricGraph, dict[str, str]]:
    """``(part, unavailable)``: the metrics of ``graph`` an emulated dump can feed, and every other
    metric with its reason. A signal without an ``emulator:`` binding has no column in an emulated dump
    (``emulator.signals``): a metric reading it, directly, through a packed field or through other
    metrics, is left out ("reads `kvc.block_sizes`, which the emulator does not produce (no `emulator:`
    binding)"), as ``perfonto run`` leaves it out; ``default(x, d)`` over such an x reads d and stays.
    The metrics the generation cannot provide (``graph.unavailable``) are listed too."""
    import networkx as nx

    from perfonto.metrics.catalog import select_metrics
    from perfonto.metrics.optional import fill_defaults

    gen, given = graph.generation, dict(graph.unavailable)
    unbound = {n for n, s in gen.signals.items() if s.emulator is None}
    register = {n: n for n in unbound} | {f: fd.register for f, fd in gen.fields.items() if fd.register in unbound}
    graph = fill_defaults(graph, set(register))
    gone = {}
    for name in graph.all_metrics:
        lacking = sorted({register[n] for n in nx.ancestors(graph.graph, name) if n in register})
        if lacking:
            names = ", ".join(f"`{n}`" for n in lacking[:6]) + (" …" if len(lacking) > 6 else "")
            gone[name] = f"reads {names}, which the emulator does not produce (no `emulator:` binding)"
    if gone:
        graph = select_metrics(graph, [n for n in graph.all_metrics if n not in gone])
    return graph, given | gone


@dataclass
class Check:
    workload: str
    metric: str
    measured: float
    truth: float

    @property
    def error(self) -> float:
        if self.truth == 0:
            return 0.0 if self.measured == 0 else float("inf")
        return abs(self.measured / self.truth - 1.0)


def check_run(graph, ev: Evaluation, records: dict, gt: dict, label: str) -> list[Check]:
    """One ``Check`` per metric of ``truth_table`` that the run evaluated (server level, or a scalar
    record metric) and whose truth is finite; ``label`` names the workload."""
    measured = {**dict(ev.server), **{k: v for k, v in records.items() if np.ndim(v) == 0}}
    checks: list[Check] = []
    for metric, fn in truth_table(graph.generation, gt).items():
        if metric not in measured:
            continue
        try:
            truth = float(fn())
        except (ZeroDivisionError, KeyError, TypeError):
            continue
        if not np.isfinite(truth):
            continue
        checks.append(Check(label, metric, float(measured[metric]), truth))
    return checks
