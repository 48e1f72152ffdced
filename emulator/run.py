"""Run the emulator: schedule steps, time them, sample the counters, write dump and ground truth."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ontology import Generation, load_generation

from .assumptions import Assumptions
from .counters import write_counters
from .groundtruth import ground_truth
from .hardware import Hardware, hardware_from_generation
from .models import get_model
from .ops import build_ops, chip_shape
from .scheduler import ContinuousBatcher, StepBatch
from .signals import plan_columns
from .thermal import Thermal
from .timeline import Timeline, concat_tables, step_lengths, take_steps


@dataclass
class EmulationResult:
    """Outputs of ``run``.

    counters_path: ``out_dir/counters.parquet``; ground_truth_path: ``out_dir/ground_truth.json``;
    ground_truth: its contents; timeline: the simulated steps (for inspection and tests).
    """

    counters_path: Path
    ground_truth_path: Path
    ground_truth: dict
    timeline: Timeline | None = field(default=None, repr=False)
    hardware: Hardware | None = field(default=None, repr=False)


def sample_grid(duration_s: float, period_s: float, core_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Sample times 0, P, 2P, … and exactly ``duration`` last: (ns int64, core cycles int64).

    Raises:
        ValueError: non-positive duration or period.
    """
    if not duration_s > 0 or not period_s > 0:
        raise ValueError(f"duration_s and sample_period_s must be > 0 (got {duration_s}, {period_s})")
    d_ns, p_ns = int(round(duration_s * 1e9)), int(round(period_s * 1e9))
    if p_ns < 1:
        raise ValueError("sample_period_s must be at least 1 ns")
    t = np.arange(0, d_ns, p_ns, dtype=np.int64)
    t = np.append(t, np.int64(d_ns))
    return t, np.rint(t * (core_hz / 1e9)).astype(np.int64)


def _simulate(sched: ContinuousBatcher, build, layers: int, end_cycle: int) -> Timeline:
    """Steps until the one in progress at ``end_cycle`` (cut there later); idle once work runs out."""
    parts, t, blk = [], 0, 16
    while True:
        b = sched.run(blk)
        if len(b) == 0:
            zero = StepBatch(*([np.zeros(1, np.int64)] * 11))
            parts.append(build(zero, np.array([max(end_cycle - t + 1, 1)])))
            break
        table = build(b, None)
        ends = t + np.cumsum(step_lengths(table, layers))
        k = int(np.searchsorted(ends, end_cycle, side="right"))
        if k < len(b):
            parts.append(take_steps(table, k + 1))
            break
        parts.append(table)
        t = int(ends[-1])
        blk = min(2 * blk, 1024)
    return Timeline.build(concat_tables(parts), layers)


def run(gen: Generation | str, *, model: str = "llama3-70b", chips: int = 8, duration_s: float = 1.0,
        sample_period_s: float = 1e-3, isl: int = 2048, osl: int = 128, seed: int = 0, out_dir: str | Path,
        token_budget: int = 8192, max_batch: int = 1024, num_requests: int | None = None, warmup_steps: int = 0,
        assumptions: Assumptions | None = None) -> EmulationResult:
    """Emulate ``chips`` chips serving ``model`` with TP = ``chips`` for ``duration_s`` seconds.

    Offline scenario: requests of ``isl`` prompt and ``osl`` output tokens queued at t = 0
    (``num_requests``; None = unbounded), served by continuous batching with chunked prefill
    (``token_budget`` tokens per step, at most ``max_batch`` requests running). ``warmup_steps``
    steps are scheduled before t = 0 and not measured (the server starts warm, its batch and KV cache
    already filled); with 0 the server starts empty at t = 0.

    Writes ``out_dir/counters.parquet`` (raw registers of every signal of ``gen`` at t = 0, P, 2P, …,
    duration; see ``emulator.counters``) and ``out_dir/ground_truth.json`` (see
    ``emulator.groundtruth``). Deterministic for a given ``seed``.

    Raises:
        ValueError: bad parameters; ``HardwareSpecError`` / ``SchedulerError`` (both ValueError)
            when the generation lacks a constant or the model does not fit.
    """
    if isinstance(gen, str):
        loaded, diags = load_generation(gen)
        if loaded is None:
            raise ValueError("; ".join(str(d.message) for d in diags))
        gen = loaded
    if int(chips) < 1:
        raise ValueError(f"chips must be ≥ 1 (got {chips})")
    a = assumptions or Assumptions()
    hw = hardware_from_generation(gen)
    shape = get_model(model)
    cs = chip_shape(shape, chips)
    t_ns, s_cyc = sample_grid(duration_s, sample_period_s, hw.core_hz)
    end = int(s_cyc[-1])
    kv_tokens = int((hw.hbm_capacity * a.kv_memory_fraction - cs.weight_bytes) // cs.kv_bytes_per_token)
    sched = ContinuousBatcher(isl=isl, osl=osl, token_budget=token_budget, max_batch=max_batch,
                              kv_capacity_tokens=kv_tokens, num_requests=num_requests, page_tokens=a.kv_page_tokens)
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be ≥ 0 (got {warmup_steps})")
    sched.run(warmup_steps)
    tl = _simulate(sched, lambda b, idle: build_ops(b, shape, hw, a, chips, idle), shape.layers, end)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_columns(gen, hw, a, chips, seed, end)
    meta = {"generation": gen.name, "content_hash": gen.content_hash, "model": model, "chips": int(chips),
            "sample_period_ns": int(round(sample_period_s * 1e9)), "seed": int(seed), "isl": int(isl), "osl": int(osl)}
    counters_path = out / "counters.parquet"
    write_counters(counters_path, gen, tl, plan, t_ns, s_cyc, chips,
                   Thermal(hw.idle_power, a.ambient_c, a.r_th_c_per_w, a.tau_th_s),
                   {**meta, "duration_ns": int(t_ns[-1]), "unmodelled_signals": plan.unmodelled})
    extra = {"generation": gen.name, "content_hash": gen.content_hash, "model": model, "seed": int(seed),
             "isl": int(isl), "osl": int(osl), "sample_period_s": float(sample_period_s),
             "token_budget": int(token_budget), "max_batch": int(max_batch), "num_requests": num_requests,
             "warmup_steps": int(warmup_steps),
             "kv_capacity_tokens": kv_tokens, "weight_bytes_per_chip": cs.weight_bytes,
             "peak_flops_per_chip": hw.peak_fp8, "assumptions": dataclasses.asdict(a)}
    gt = ground_truth(tl, plan, hw, chips, float(t_ns[-1]) * 1e-9, end, a.ring_links or hw.links, extra)
    gt_path = out / "ground_truth.json"
    gt_path.write_text(json.dumps(gt, indent=1, sort_keys=False))
    return EmulationResult(counters_path, gt_path, gt, tl, hw)
