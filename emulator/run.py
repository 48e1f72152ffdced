"""Run the emulator: schedule steps, time them, sample the counters, write dump and ground truth."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from ontology import Generation

from .assumptions import Assumptions
from .counters import write_counters
from .groundtruth import ground_truth
from .hardware import Hardware, hardware_from_generation
from .models import get_model
from .ops import EmuConfig, build_ops
from .parallel import Mapping, MappingError, Precision
from .presets import generation, resolve
from .scheduler import StepBatch, latency
from .serving import Engine, make_batchers, rank_kv_capacity, request_times, serve, trtllm_bench_engine
from .signals import plan_columns
from .thermal import Thermal
from .timeline import Timeline, concat_tables, step_lengths, take_steps

#: ``progress(phase, done, total)``: ``phase`` is ``"schedule"`` (simulated s) or ``"counters"`` (samples).
Progress = Callable[[str, float, float], None]


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
    config: EmuConfig | None = field(default=None, repr=False)


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


def leader_mask(mp: Mapping) -> np.ndarray:
    """(chips,) bool: the chip that counts a rank's tokens — the first chip of the first stage of each
    replica, or every chip of the first stage with data-parallel attention. Chips are numbered
    ``(replica · pp + stage) · tp + position``."""
    c = np.arange(mp.chips)
    first_stage = (c // mp.tp) % mp.pp == 0
    return first_stage & ((c % mp.tp == 0) | mp.attn_dp)


def setup(gen: Generation | str, *, model: str, chips: int, dtype: str = "fp8", kv_dtype: str | None = None,
          mapping: Mapping | None = None, preset: str | None = None, assumptions: Assumptions | None = None
          ) -> tuple[Generation, EmuConfig, object]:
    """Generation, ``EmuConfig`` and preset of a scenario (``assumptions`` replaces the preset's).

    Raises:
        ValueError: unknown generation, model, dtype or preset, or a mapping that does not fit.
    """
    if isinstance(gen, str):
        gen = generation(gen)
    if int(chips) < 1:
        raise ValueError(f"chips must be ≥ 1 (got {chips})")
    try:
        shape = get_model(model)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    p = resolve(gen, preset)
    hw = p.apply(hardware_from_generation(gen))
    a = assumptions if assumptions is not None else p.assumptions
    mp = mapping or p.mapping_for(shape, int(chips))
    if mp.chips != int(chips):
        raise MappingError(f"mapping {mp.describe()} uses {mp.chips} chips, not {chips}")
    cfg = EmuConfig(shape, hw, a, mp, Precision.of(dtype, kv_dtype, a.head_dtype))
    cfg.cs  # checks the mapping
    return gen, cfg, p


def engine_for(cfg: EmuConfig, preset, isl: int, osl: int) -> Engine:
    """The engine a preset prescribes (``trtllm``: trtllm-bench's sizing; or explicit settings)."""
    if preset.engine == "trtllm":
        return trtllm_bench_engine(cfg, isl, osl)
    e = dict(preset.engine)
    return Engine(max_batch=int(e.get("max_batch", 1024)), token_budget=int(e.get("token_budget", 8192)),
                  chunked_prefill=bool(e.get("chunked_prefill", True)))


def run(gen: Generation | str, *, model: str = "llama3-70b", chips: int = 8, duration_s: float = 1.0,
        sample_period_s: float = 1e-3, isl: int = 2048, osl: int = 128, seed: int = 0, out_dir: str | Path,
        token_budget: int = 8192, max_batch: int = 1024, num_requests: int | None = None, warmup_steps: int = 0,
        assumptions: Assumptions | None = None, dtype: str = "fp8", kv_dtype: str | None = None,
        mapping: Mapping | None = None, preset: str | None = None, chunked_prefill: bool = True,
        rate: float | None = None, engine: Engine | None = None, progress: Progress | None = None) -> EmulationResult:
    """Emulate ``chips`` chips serving ``model`` for ``duration_s`` seconds and write the counter dump.

    Scenario: offline by default — requests of ``isl`` prompt and ``osl`` output tokens queued at t = 0
    (``num_requests``; None = unbounded); online with ``rate`` (requests/s, Poisson arrivals,
    ``num_requests`` of them, default enough for the duration). Continuous batching with chunked
    prefill (``token_budget`` tokens per step, at most ``max_batch`` requests running per scheduler
    rank; ``engine`` replaces the three). ``warmup_steps`` steps are scheduled before t = 0 and not
    measured (the server starts warm); with 0 it starts empty at t = 0.

    Model and hardware: ``dtype`` of the weights (``fp8``, ``fp4``, ``bf16``), ``kv_dtype`` of the KV
    cache (default FP8, BF16 for BF16 weights); ``mapping`` (default: the preset's — tensor parallel
    over the chips for dense models, attention-DP + EP for MoE, see ``emulator.parallel``);
    ``preset`` (``emulator/data/presets.yaml``; default: the generation family's) gives the
    assumptions unless ``assumptions`` is given.

    Writes ``out_dir/counters.parquet`` (raw registers of every signal of ``gen`` at t = 0, P, 2P, …,
    duration; see ``emulator.counters``) and ``out_dir/ground_truth.json`` (see
    ``emulator.groundtruth``; plus ``latency``: TTFT and TPOT p50/p99 of the requests whose first
    token falls in the run). Deterministic for a given ``seed``. ``progress(phase, done, total)`` is
    called while scheduling (simulated s) and while writing counters (samples).

    Raises:
        ValueError: bad parameters; ``HardwareSpecError`` / ``SchedulerError`` / ``MappingError``
            (all ValueError) when the generation lacks a constant or the model does not fit.
    """
    gen, cfg, p = setup(gen, model=model, chips=chips, dtype=dtype, kv_dtype=kv_dtype, mapping=mapping, preset=preset,
                        assumptions=assumptions)
    a, hw, mp = cfg.a, cfg.hw, cfg.mapping
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be ≥ 0 (got {warmup_steps})")
    eng = engine or Engine(max_batch=max_batch, token_budget=token_budget, chunked_prefill=chunked_prefill)
    t_ns, s_cyc = sample_grid(duration_s, sample_period_s, hw.core_hz)
    end = int(s_cyc[-1])
    if rate is not None and num_requests is None:
        num_requests = int(np.ceil(rate * duration_s * 1.5)) + 16
    batchers = make_batchers(cfg, eng, isl, osl, num_requests=num_requests, rate=rate, seed=seed)
    tick = (lambda now: progress("schedule", min(now, duration_s), duration_s)) if progress else None
    sv = serve(cfg, batchers, until_s=duration_s, warmup_steps=warmup_steps, progress=tick)

    f = hw.core_hz
    b, idle = sv.batch, np.rint(sv.idle_s * f).astype(np.int64)
    table = build_ops(b, cfg, idle) if len(b) else None
    if table is not None:  # keep the steps up to the one in progress at the end
        ends = np.cumsum(step_lengths(table, cfg.plan))
        k = int(np.searchsorted(ends, end, side="right"))
        if k < len(b):
            table, b = take_steps(table, k + 1), b.take(k + 1)
    tl = Timeline.build(table, cfg.plan) if table is not None else None
    if tl is None or tl.ends[-1] <= end:  # drained (or nothing to do) before the end: idle to the end
        tail = end - (int(tl.ends[-1]) if tl is not None else 0) + 1
        extra = build_ops(StepBatch.empty(1), cfg, np.array([tail]))
        table = extra if table is None else concat_tables([table, extra])
        tl = Timeline.build(table, cfg.plan)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    leaders = leader_mask(mp)
    plan = plan_columns(gen, hw, a, chips, seed, end, leaders)
    meta = {"generation": gen.name, "content_hash": gen.content_hash, "model": model, "chips": int(chips),
            "sample_period_ns": int(round(sample_period_s * 1e9)), "seed": int(seed), "isl": int(isl), "osl": int(osl)}
    counters_path = out / "counters.parquet"
    cb = (lambda i, n: progress("counters", i, n)) if progress else None
    write_counters(counters_path, gen, tl, plan, t_ns, s_cyc, chips,
                   Thermal(hw.idle_power, a.ambient_c, a.r_th_c_per_w, a.tau_th_s),
                   {**meta, "duration_ns": int(t_ns[-1]), "unmodelled_signals": plan.unmodelled}, progress=cb)
    ends_s = tl.ends[:min(len(b), len(tl))] / f
    rt = request_times(sv, ends_s)
    lat = latency(rt["arrival_s"], rt["first_s"], rt["last_s"], osl, t0=0.0)
    extra = {"generation": gen.name, "content_hash": gen.content_hash, "model": model, "seed": int(seed),
             "isl": int(isl), "osl": int(osl), "sample_period_s": float(sample_period_s),
             "token_budget": int(eng.token_budget), "max_batch": int(eng.max_batch),
             "chunked_prefill": bool(eng.chunked_prefill), "num_requests": num_requests, "rate": rate,
             "warmup_steps": int(warmup_steps), "dtype": cfg.prec.weights, "kv_dtype": cfg.prec.kv,
             "mapping": dataclasses.asdict(mp), "preset": p.name if assumptions is None else "custom",
             "hardware_overrides": p.hardware if assumptions is None else {},
             "kv_capacity_tokens": rank_kv_capacity(cfg, eng), "weight_bytes_per_chip": cfg.cs.weight_bytes,
             "peak_flops_per_chip": hw.peak_fp8, "latency": lat, "assumptions": dataclasses.asdict(a)}
    gt = ground_truth(tl, plan, hw, chips, float(t_ns[-1]) * 1e-9, end, a.ring_links or hw.links, extra)
    gt_path = out / "ground_truth.json"
    gt_path.write_text(json.dumps(gt, indent=1, sort_keys=False))
    return EmulationResult(counters_path, gt_path, gt, tl, hw, cfg)
