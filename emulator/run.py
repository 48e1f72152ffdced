"""Run the emulator: schedule steps, time them, sample the counters, write dump, records, trace and
ground truth.

Outputs of ``run`` in ``out_dir``:

- ``counters.parquet``: raw registers of every signal, one row per chip per sample, timestamps on
  each chip's device clock (``emulator.counters``, ``emulator.clocks``);
- ``requests.parquet``: one row per request, with the time of every output token (``emulator.records``);
- ``sync.parquet``: the driver's clock-synchronisation reads (``emulator.clocks.sync_reads``);
- ``trace.parquet``: host-side events (API calls, submissions, PCIe transfers, step markers) and the
  chips' execution spans (``emulator.trace``);
- ``ground_truth.json``: ``emulator.groundtruth``;
- with ``op_snapshots``, ``snapshots.parquet``: the counters read at every op boundary too
  (``emulator.opsnapshots``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from perfonto.ontology import Generation

from .assumptions import Assumptions
from .clocks import DeviceClock, draw_clocks
from .counters import write_counters
from .groundtruth import ground_truth
from .hardware import Hardware, hardware_from_generation
from .knobs import Knobs, WorkloadError
from .lockstep import lockstep_seconds
from .models import get_model
from .opsnapshots import write_snapshots
from .ops import EmuConfig
from .parallel import Mapping, MappingError, Precision
from .presets import generation, resolve
from .records import latency_truth
from .engine_profiles import profile
from .footprint import check_run_fits
from .serving import Engine, engine_for, make_batchers, rank_kv_capacity, serve
from .signals import plan_columns
from .thermal import Thermal
from .timeline import Timeline
from .run_stages import device_grid, speculative_truth, timelines, whole_step_duration, write_side_outputs
from .trace import collective_waits


#: ``progress(phase, done, total)``: ``phase`` is ``"schedule"`` (simulated s) or ``"counters"`` (samples).
Progress = Callable[[str, float, float], None]

#: Most chips one emulation takes (the per-chip trace, clocks and counter columns grow with them).
MAX_CHIPS = 1024
#: Requests one emulation serves, and requests in flight in a closed loop: at most these (a million
#: requests took 34 s and 7.4 GB to project, a hundred million were killed for memory; the public
#: benchmarks this models send up to 30,000, at a concurrency of a few hundred; an 8-chip Sohu at its
#: claimed rate, ~3,900 requests/s, for 30 s of Poisson arrivals asks for 175,000).
MAX_REQUESTS = 1_000_000
MAX_CONCURRENCY = 10_000
#: Shortest sampling period (a driver cannot read thousands of registers faster).
MIN_SAMPLE_PERIOD_S = 1e-6


@dataclass
class EmulationResult:
    """Outputs of ``run``.

    counters_path: ``out_dir/counters.parquet``; ground_truth_path: ``out_dir/ground_truth.json``;
    ground_truth: its contents; timeline: the simulated steps of chip 0's profile (for inspection
    and tests); timelines: one per chip profile, ``profile_of`` (chips,) its index per chip;
    requests_path, sync_path, trace_path: the other outputs; clocks: each chip's device clock.
    """

    counters_path: Path
    ground_truth_path: Path
    ground_truth: dict
    timeline: Timeline | None = field(default=None, repr=False)
    hardware: Hardware | None = field(default=None, repr=False)
    config: EmuConfig | None = field(default=None, repr=False)
    requests_path: Path | None = None
    sync_path: Path | None = None
    trace_path: Path | None = None
    timelines: list[Timeline] = field(default_factory=list, repr=False)
    profile_of: np.ndarray | None = field(default=None, repr=False)
    clocks: list[DeviceClock] = field(default_factory=list, repr=False)
    snapshots_path: Path | None = None


def sample_grid(duration_s: float, period_s: float, core_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Sample times 0, P, 2P, … up to ``duration``, plus a final sample at ``duration`` when it is at
    least half a period after the last grid point (so that every sample lands on its own point of the
    grid a reader rebuilds from the period, ``metrics.windows``): (ns int64, core cycles int64). The
    run's duration is the last sample's time.

    Raises:
        WorkloadError (a ValueError): a duration or period that is not finite and positive, or a period under 1 ns.
    """
    if not (math.isfinite(duration_s) and duration_s > 0) or not (math.isfinite(period_s) and period_s > 0):
        raise WorkloadError(f"duration_s and sample_period_s must be finite and > 0 (got {duration_s}, {period_s})")
    d_ns, p_ns = int(round(duration_s * 1e9)), int(round(period_s * 1e9))
    if p_ns < 1:
        raise WorkloadError("sample_period_s must be at least 1 ns")
    if p_ns > d_ns:
        raise WorkloadError(
            f"the sample period ({period_s:g} s) is longer than the duration ({duration_s:g} s): no window would fit"
        )
    t = np.arange(0, d_ns, p_ns, dtype=np.int64)
    if d_ns - t[-1] >= p_ns / 2:
        t = np.append(t, np.int64(d_ns))
    return t, np.rint(t * (core_hz / 1e9)).astype(np.int64)


def leader_mask(mp: Mapping) -> np.ndarray:
    """(chips,) bool: the chip that counts a rank's tokens — the first chip of the first stage of each
    replica, or every chip of the first stage with data-parallel attention. Chips are numbered
    ``(replica · pp + stage) · tp + position``."""
    c = np.arange(mp.chips)
    first_stage = (c // mp.tp) % mp.pp == 0
    return first_stage & ((c % mp.tp == 0) | mp.attn_dp)


def setup(
    gen: Generation | str,
    *,
    model: str,
    chips: int,
    dtype: str = "fp8",
    kv_dtype: str | None = None,
    mapping: Mapping | None = None,
    preset: str | None = None,
    assumptions: Assumptions | None = None,
    hardware: dict | None = None,
) -> tuple[Generation, EmuConfig, object]:
    """Generation, ``EmuConfig`` and preset of a scenario (``assumptions`` replaces the preset's;
    ``hardware``: ``Hardware`` fields to override after the preset's, SI units).

    Raises:
        ValueError: unknown generation, model, dtype or preset, or a mapping that does not fit.
    """
    if isinstance(gen, str):
        gen = generation(gen)
    _whole("chips", chips, 1, MAX_CHIPS)
    try:
        shape = get_model(model)
    except KeyError as exc:
        raise WorkloadError(exc.args[0]) from None
    p = resolve(gen, preset)
    hw = p.apply(hardware_from_generation(gen))
    if hardware:
        hw = dataclasses.replace(hw, **{k: float(v) for k, v in hardware.items()})
    a = assumptions if assumptions is not None else p.assumptions
    mp = mapping or p.mapping_for(shape, int(chips))
    if mp.chips != int(chips):
        raise MappingError(f"mapping {mp.describe()} uses {mp.chips} chips, not {chips}")
    cfg = EmuConfig(shape, hw, a, mp, Precision.of(dtype, kv_dtype, a.head_dtype))
    cfg.cs  # checks the mapping
    return gen, cfg, p


#: the most warm-up steps (each one scheduled: 100,000 take ~30 s here; 10^8 ran for hours with nothing printed)
MAX_WARMUP_STEPS = 100_000


def _whole(name: str, v, lo: int, hi: int | None = None) -> None:
    """Refuse ``v`` unless it is a whole number (an int, or a float with no fraction; not a bool) in
    ``lo`` … ``hi``: ``chips=1.5`` ran a 1-chip emulation, ``isl=nan`` failed deep in the scheduler."""
    import numbers

    whole = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and float(v).is_integer()
    if not whole or v < lo or (hi is not None and v > hi):
        span = f"between {lo} and {hi}" if hi is not None else f"≥ {lo}"
        raise WorkloadError(f"{name} must be a whole number {span} (got {v!r})")


def check_load(num_requests, concurrency) -> None:
    """Refuse a request count above ``MAX_REQUESTS`` or a concurrency above ``MAX_CONCURRENCY`` (each a
    whole number ≥ 1 when given; None: the default).

    Raises:
        WorkloadError: naming the value and the limit."""
    if num_requests is not None:
        _whole("num_requests", num_requests, 1, MAX_REQUESTS)
    if concurrency is not None:
        _whole("concurrency", concurrency, 1, MAX_CONCURRENCY)


def _rate_requests(rate: float, duration_s: float) -> int:
    """Requests an online run at ``rate`` (requests/s) needs over ``duration_s``: 1.5 × rate × duration +
    16 (Poisson arrivals past the end are never reached).

    Raises:
        WorkloadError: more than ``MAX_REQUESTS``, capped as a given count is."""
    n = int(np.ceil(rate * duration_s * 1.5)) + 16
    if n > MAX_REQUESTS:
        raise WorkloadError(
            f"a rate of {rate:g} requests/s over {duration_s:g} s needs {n:,} requests (1.5 × rate × duration), "
            f"more than {MAX_REQUESTS:,}: give a lower rate or a shorter duration"
        )
    return n


def _check_periods(duration_s: float, sample_period_s: float) -> None:
    """Refuse a duration or sampling period that is not a finite positive number of seconds, and a
    period under ``MIN_SAMPLE_PERIOD_S``."""
    for name, v in (("duration_s", duration_s), ("sample_period_s", sample_period_s)):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise WorkloadError(f"{name} must be a finite number of seconds > 0 (got {v})")
    if sample_period_s < MIN_SAMPLE_PERIOD_S:
        raise WorkloadError(
            f"sample_period_s must be at least {MIN_SAMPLE_PERIOD_S * 1e6:g} µs (got {sample_period_s:g} s)"
        )


def _knobs(slow_chip, throttled_link, router_skew) -> Knobs:
    """The knobs that make chips differ, as ``run`` takes them (tuples, or None).

    Raises:
        WorkloadError: a knob that is not a tuple of numbers of its length, or a skew that is not a number.
    """

    def numbers(name, v, form):
        if v is None:
            return None
        try:
            t = tuple(v)
            ok = len(t) == len(form.split(",")) and all(float(x) == float(x) for x in t)
            ok = ok and all(float(x) == int(float(x)) for x in t[:-1])  # chip and link numbers are whole
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise WorkloadError(f"{name} must be ({form}), numbers with whole chip and link numbers (got {v!r})")
        return t

    try:
        skew = float(router_skew)
    except (TypeError, ValueError):
        raise WorkloadError(f"router_skew must be a number ≥ 0 (got {router_skew!r})") from None
    return Knobs(
        slow_chip=numbers("slow_chip", slow_chip, "chip, factor"),
        throttled_link=numbers("throttled_link", throttled_link, "chip, link, factor"),
        router_skew=skew,
    )


def _refuse_long_step(measured_s: float, duration_s: float, hw) -> None:
    """Refuse a run whose step in progress at ``duration_s`` ends past 10 × it (and a minute): the run
    ends with that step and would sample all of it (a breaker's HBM of 1e-4 TB/s sampled 1.9M windows of a
    10 ms run before it was killed).

    Raises:
        WorkloadError: with the step's end and the hardware's bandwidth and peak."""
    if measured_s > max(10 * duration_s, duration_s + 60.0):
        raise WorkloadError(
            f"the engine step in progress at --duration {duration_s:g} s ends at {measured_s:,.1f} s on this "
            f"hardware ({hw.hbm_bw / 1e9:,.3g} GB/s HBM, {hw.peak_fp8 / 1e12:,.3g} TFLOP/s FP8): the run, "
            "which ends with that step, would sample all of it; check the generation's spec constants, or "
            "give a --duration of several steps"
        )


def run(
    gen: Generation | str,
    *,
    model: str = "llama3-70b",
    chips: int = 8,
    duration_s: float = 1.0,
    sample_period_s: float = 1e-3,
    isl: int = 2048,
    osl: int = 128,
    seed: int = 0,
    out_dir: str | Path,
    token_budget: int | None = None,
    max_batch: int | None = None,
    num_requests: int | None = None,
    warmup_steps: int = 0,
    assumptions: Assumptions | None = None,
    dtype: str = "fp8",
    kv_dtype: str | None = None,
    mapping: Mapping | None = None,
    preset: str | None = None,
    chunked_prefill: bool | None = None,
    rate: float | None = None,
    engine: Engine | None = None,
    progress: Progress | None = None,
    slow_chip: tuple[int, float] | None = None,
    throttled_link: tuple[int, int, float] | None = None,
    router_skew: float = 0.0,
    clock_offset_max_s: float = 10e-3,
    clock_drift_max_ppm: float = 100.0,
    trace_detail: str = "auto",
    concurrency: int | None = None,
    draft_tokens: int = 0,
    acceptance: float = 0.0,
    op_snapshots: bool = False,
    whole_steps: bool = False,
    engine_profile: str | None = None,
) -> EmulationResult:
    """Emulate ``chips`` chips serving ``model`` for ``duration_s`` seconds and write the counter dump.

    Scenario: offline by default — requests of ``isl`` prompt and ``osl`` output tokens queued at t = 0
    (``num_requests``; None = unbounded); online with ``rate`` (requests/s, Poisson arrivals,
    ``num_requests`` of them, default enough for the duration); closed loop with ``concurrency``
    requests in flight (a client sends its next request when its last one completes; ``num_requests``
    in all, None = without end). Speculative decoding: ``draft_tokens`` drafts verified per decoding
    request and step, each accepted with probability ``acceptance`` (``scheduler``; the draft
    network's cost in ``work``). Continuous batching sized as the
    preset prescribes (``serving.engine_for``, the same sizing as ``project``): ``token_budget``
    tokens per step, at most ``max_batch`` requests running per scheduler rank, prompts chunked or
    whole (``chunked_prefill``); each given one replaces the preset's, ``engine`` replaces all three.
    ``warmup_steps`` steps are scheduled before t = 0 and not measured (the server starts warm); with
    0 it starts empty at t = 0.
    ``whole_steps``: the run ends at the end of the engine step in progress at ``duration_s`` instead
    (``run_stages.whole_step_duration``; ground truth ``duration_s`` is the measured duration,
    ``requested_duration_s`` the one asked for), so that its tokens and its work cover the same steps.

    Model and hardware: ``dtype`` of the weights (``fp8``, ``fp4``, ``bf16``), ``kv_dtype`` of the KV
    cache (default FP8, BF16 for BF16 weights); ``mapping`` (default: the preset's — tensor parallel
    over the chips for dense models, attention-DP + EP for MoE, see ``emulator.parallel``);
    ``preset`` (``emulator/data/presets.yaml``; default: the generation family's) gives the
    assumptions unless ``assumptions`` is given.

    Chips that differ (``emulator.knobs``): ``slow_chip=(chip, factor)`` (its ops take factor × as
    long), ``throttled_link=(chip, link, factor)`` (the link carries 1/factor of its rate),
    ``router_skew`` (Zipf exponent of the routed-expert load over the chips). Clocks
    (``emulator.clocks``): each chip's device clock has an offset uniform in ±``clock_offset_max_s``
    and a drift uniform in ±``clock_drift_max_ppm``, drawn from the seed (0 and 0: ideal clocks).
    ``trace_detail``: ``auto``, ``op`` or ``step`` (``emulator.trace``). ``op_snapshots``: also read
    the counters at every op boundary (trigger-on-marker) into ``snapshots.parquet``
    (``emulator.opsnapshots``).

    Writes into ``out_dir`` (see the module docstring): ``counters.parquet`` (raw registers of every
    signal of ``gen``, each chip sampled on its own clock at 0, P, 2P, … and a final sample, see
    ``sample_grid``), ``requests.parquet``, ``sync.parquet``, ``trace.parquet`` and
    ``ground_truth.json`` (``emulator.groundtruth``). Deterministic for a given ``seed``.
    ``progress(phase, done, total)`` is called while scheduling (simulated s) and while writing
    counters (samples).

    Raises:
        WorkloadError (a ValueError): bad parameters (a duration or period that is not finite and
            positive, a period under 1 µs or over the duration, more than ``MAX_CHIPS`` chips, more samples than the
            machine's memory holds (``emulator.footprint``), a knob
            that does not apply); ``HardwareSpecError`` / ``SchedulerError`` / ``MappingError`` (all ValueError)
            when the generation lacks a constant, has one that is not a finite positive number, or
            the model does not fit.
    """
    _check_periods(duration_s, sample_period_s)
    gen, cfg, p = setup(
        gen,
        model=model,
        chips=chips,
        dtype=dtype,
        kv_dtype=kv_dtype,
        mapping=mapping,
        preset=preset,
        assumptions=assumptions,
    )
    if engine_profile is not None:  # its kernel constants and scheduler (emulator/data/engine_profiles.yaml)
        ep = profile(engine_profile)
        cfg = dataclasses.replace(cfg, a=ep.assumptions(cfg.a))
        given = {"max_batch": max_batch, "token_budget": token_budget, "chunked_prefill": chunked_prefill}
        engine = engine or dataclasses.replace(
            ep.engine(cfg, isl, osl, draft_tokens=draft_tokens, acceptance=acceptance),
            **{k: v for k, v in given.items() if v is not None},
        )
    a, hw, mp = cfg.a, cfg.hw, cfg.mapping
    chips = int(chips)
    check_run_fits(gen, chips, duration_s, sample_period_s)
    for name, v in (("isl", isl), ("osl", osl)):
        _whole(name, v, 1)
    check_load(num_requests, concurrency)
    _whole("warmup_steps", warmup_steps, 0, MAX_WARMUP_STEPS)
    knobs = _knobs(slow_chip, throttled_link, router_skew)
    knobs.check(chips, mp, cfg.model, hw.links, a.ring_links)
    profiles, prof_of = knobs.profiles(chips, mp)
    counts = np.bincount(prof_of, minlength=len(profiles))
    clocks = draw_clocks(chips, seed, clock_offset_max_s * 1e9, clock_drift_max_ppm)
    eng = engine or engine_for(
        cfg,
        p,
        isl,
        osl,
        max_batch=max_batch,
        token_budget=token_budget,
        chunked_prefill=chunked_prefill,
        draft_tokens=draft_tokens,
        acceptance=acceptance,
    )
    f = hw.core_hz
    t_grid, _ = sample_grid(duration_s, sample_period_s, f)
    d_ns, s_cyc, t_dev, end, end_host = device_grid(t_grid, clocks, f)
    until_s = max(end, end_host) / f
    if rate is not None and num_requests is None:
        num_requests = _rate_requests(rate, duration_s)
    batchers = make_batchers(
        cfg, eng, isl, osl, num_requests=num_requests, rate=rate, concurrency=concurrency, seed=seed
    )
    tick = (lambda now: progress("schedule", min(now, until_s), until_s)) if progress else None
    seconds_fn = (lambda batch: lockstep_seconds(batch, cfg, profiles)) if len(profiles) > 1 else None
    sv = serve(cfg, batchers, until_s=until_s, warmup_steps=warmup_steps, progress=tick, seconds_fn=seconds_fn)

    b, idle = sv.batch, np.rint(sv.idle_s * f).astype(np.int64)
    horizon = max(end, end_host)
    b_all = b
    b, tls = timelines(b_all, idle, cfg, profiles, counts, horizon)
    if whole_steps:  # stop at the end of the step in progress, so the run counts that step's tokens too
        drift_max = max((abs(c.drift) for c in clocks), default=0.0)
        measured_s = whole_step_duration(tls[0].ends, duration_s, sample_period_s, f, drift_max)
        _refuse_long_step(measured_s, duration_s, hw)
        if measured_s > duration_s:
            t_grid, _ = sample_grid(measured_s, sample_period_s, f)
            d_ns, s_cyc, t_dev, end, end_host = device_grid(t_grid, clocks, f)
            horizon = max(end, end_host)
            b, tls = timelines(b_all, idle, cfg, profiles, counts, horizon)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    leaders = leader_mask(mp)
    slow_link = (int(knobs.throttled_link[0]), int(knobs.throttled_link[1])) if knobs.throttled_link else None
    plan = plan_columns(gen, hw, a, chips, seed, end, leaders, slow_link=slow_link)
    meta = {
        "generation": gen.name,
        "content_hash": gen.content_hash,
        "model": model,
        "chips": chips,
        "sample_period_ns": int(round(sample_period_s * 1e9)),
        "seed": int(seed),
        "isl": int(isl),
        "osl": int(osl),
    }
    counters_path = out / "counters.parquet"
    cb = (lambda i, n: progress("counters", i, n)) if progress else None
    write_counters(
        counters_path,
        gen,
        tls,
        plan,
        t_dev,
        s_cyc,
        chips,
        Thermal(hw.idle_power, a.ambient_c, a.r_th_c_per_w, a.tau_th_s),
        {
            **meta,
            "duration_ns": d_ns,
            "unbound_signals": plan.unbound,
            "clock": "device: each chip's timestamps are on its own clock; align with sync.parquet",
        },
        progress=cb,
        profile_of=prof_of,
    )

    # request records and the latencies they give (host time)
    trace_args = (prof_of, clocks, leaders, end_host, seed, d_ns, trace_detail)
    records, requests_path, sync_path, trace_path, trace_info, ends_s = write_side_outputs(
        out, sv, b, tls, cfg, isl, osl, trace_args
    )
    snapshots_path = None
    if op_snapshots:
        snapshots_path = out / "snapshots.parquet"
        trace_info["snapshots"] = write_snapshots(
            snapshots_path,
            gen,
            tls,
            prof_of,
            plan,
            clocks,
            f,
            s_cyc,
            t_dev,
            Thermal(hw.idle_power, a.ambient_c, a.r_th_c_per_w, a.tau_th_s),
            {**meta, "duration_ns": d_ns, "clock": "device: each chip's timestamps are on its own clock"},
        )

    waits = collective_waits(tls, prof_of, end_host)
    extra = {
        "generation": gen.name,
        "content_hash": gen.content_hash,
        "model": model,
        "seed": int(seed),
        "isl": int(isl),
        "osl": int(osl),
        "sample_period_s": float(sample_period_s),
        "requested_duration_s": float(duration_s),
        "whole_steps": bool(whole_steps),
        # offline with a timed warm-up: the requests' queueing time before t = 0 (emulator.records)
        "offline_queued_s": (
            float(sv.warmup_seconds[0].sum())
            if rate is None and concurrency is None and len(sv.batchers) == 1 and sv.warmup and sv.warmup[0]
            else None
        ),
        "token_budget": int(eng.token_budget),
        "max_batch": int(eng.max_batch),
        "chunked_prefill": bool(eng.chunked_prefill),
        "num_requests": num_requests,
        "rate": rate,
        "concurrency": concurrency,
        "speculative": speculative_truth(b, eng, mp.ranks),
        "warmup_steps": int(warmup_steps),
        "dtype": cfg.prec.weights,
        "kv_dtype": cfg.prec.kv,
        "mapping": dataclasses.asdict(mp),
        "preset": p.name if assumptions is None else "custom",
        "engine_profile": engine_profile,
        "hardware_overrides": p.hardware if assumptions is None else {},
        "kv_capacity_tokens": rank_kv_capacity(cfg, eng),
        "weight_bytes_per_chip": cfg.cs.weight_bytes,
        "peak_flops_per_chip": hw.peak_fp8,
        # the latency truth is the records' (requests.parquet, warm-up requests included), as perfonto
        # measures it: a second view from t = 0 (arrivals clipped to the run's start) read TTFT p50 0.84 s
        # beside the records' 111 s and was never used (a hand audit)
        **latency_truth(records),
        "knobs": knobs.to_json(),
        "trace": trace_info,
        "assumptions": dataclasses.asdict(a),
    }
    gt = ground_truth(
        tls,
        prof_of,
        plan,
        hw,
        cfg,
        chips,
        d_ns * 1e-9,
        s_cyc[-1],
        a.ring_links or hw.links,
        extra,
        clocks=clocks,
        waits=waits,
        knobs=knobs,
    )
    gt_path = out / "ground_truth.json"
    gt_path.write_text(json.dumps(gt, indent=1, sort_keys=False))
    return EmulationResult(
        counters_path,
        gt_path,
        gt,
        tls[0],
        hw,
        cfg,
        requests_path,
        sync_path,
        trace_path,
        tls,
        prof_of,
        clocks,
        snapshots_path,
    )
