"""Projection: the offline (or online) serving figures of a model on a generation, without counters.

``project`` runs a whole benchmark the way ``trtllm-bench throughput`` does: ``num_requests``
requests (by default the count the TensorRT-LLM performance page uses for these lengths, enough to
reach steady state: ``default_requests``) are queued at t = 0 and served to the last token;
throughput is tokens over the makespan, TTFT and TPOT come from every request. The schedule is
bounded (``max_steps``) so that a projection takes seconds.

``claim_requirements`` says what a throughput claim needs from the hardware (sustained matrix
FLOP/s per chip, KV cache, memory) for a request shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from perfonto.ontology import Generation
from perfonto.ontology.records import attributes

from .engine_profiles import profile
from .ops import EmuConfig
from .parallel import Mapping
from .run import check_load, setup
from .serving import Engine, Served, Throughput, engine_for, make_batchers, rank_kv_capacity, serve, throughput

DATA = Path(__file__).parent / "data"
#: Steps a projection serves at most (a projection takes seconds): a run that needs more is cut there, with
#: fewer requests completed than asked (``Projection.step_cap`` says so).
MAX_STEPS = 400_000


def requests_table(table, where: str) -> dict[tuple[int, int], int]:
    """A calibration file's ``num_requests`` table (``{"isl/osl": requests}``) as ``{(isl, osl): n}``.

    Raises:
        ValueError: ``where`` (the file) and the entry: not a mapping, a key that is not ``isl/osl`` in
        whole numbers ≥ 1, a count that is not a whole number between 1 and ``run.MAX_REQUESTS``."""
    from .run import MAX_REQUESTS

    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f'{where}: `num_requests` maps "isl/osl" to a request count (got {table!r})')
    out = {}
    for k, v in table.items():
        parts = str(k).split("/")
        if len(parts) != 2 or not all(x.isdigit() and int(x) >= 1 for x in parts):
            raise ValueError(f"{where}: `num_requests` key {k!r} is not isl/osl in whole numbers, e.g. 128/2048")
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_REQUESTS:
            raise ValueError(
                f"{where}: `num_requests` {k}: a whole number between 1 and {MAX_REQUESTS:,} requests (got {v!r})"
            )
        out[(int(parts[0]), int(parts[1]))] = v
    return out


@lru_cache(maxsize=None)
def _requests_table() -> dict[tuple[int, int], int]:
    p = DATA / "calibration.yaml"
    return requests_table(yaml.safe_load(p.read_text(encoding="utf-8")).get("num_requests"), str(p))


def default_requests(isl: int, osl: int) -> int:
    """Requests of a benchmark run: TensorRT-LLM's count for these lengths, else by sequence length
    as that table goes (30,000 up to 256 tokens, 3,000 up to 2,500, 1,500 up to 6,000, then 1,000)."""
    t = _requests_table()
    if (isl, osl) in t:
        return t[(isl, osl)]
    seq = isl + osl
    return 30000 if seq <= 256 else 3000 if seq <= 2500 else 1500 if seq <= 6000 else 1000


@dataclass
class Projection:
    """Figures of one projection and what produced them."""

    generation: str
    model: str
    chips: int
    isl: int
    osl: int
    dtype: str
    kv_dtype: str
    preset: str
    mapping: Mapping
    engine: Engine
    kv_capacity_tokens: int
    figures: Throughput
    named: tuple[str, ...]
    config: EmuConfig = field(repr=False)
    served: Served | None = field(default=None, repr=False)
    engine_profile: str | None = None
    #: None, or, when the run was cut at ``max_steps`` before its last request completed: ``{"max_steps",
    #: "requests_completed", "requests_requested"}`` (server totals); its figures are those of the part served.
    step_cap: dict | None = None

    def to_json(self) -> dict:
        return {
            **attributes(self, "generation", "model", "chips", "isl", "osl", "dtype", "kv_dtype", "preset"),
            "mapping": self.mapping.describe(),
            "engine": self.engine.describe(),
            "engine_profile": self.engine_profile,
            "kv_capacity_tokens_per_rank": self.kv_capacity_tokens,
            **self.figures.to_json(),
            "step_cap": self.step_cap,
            "steady_share": steady_share(self),
            "assumptions": list(self.named),
        }


def step_cap(batchers, ranks: int, steps: int, max_steps: int, completed: int) -> dict | None:
    """``Projection.step_cap``: None when every batcher finished (or the run had fewer than ``max_steps``
    steps); else the cap, and the requests completed of those requested (server totals: ``ranks`` ranks)."""
    if steps < max_steps or all(bt.finished for bt in batchers):
        return None
    requested = sum(bt.total or 0 for bt in batchers) * ranks
    return {"max_steps": int(max_steps), "requests_completed": int(completed), "requests_requested": int(requested)}


def step_cap_note(cap: dict, isl: int, osl: int) -> str:
    """What a projection cut at the step cap means and what to change (the words ``project`` and ``sweep``
    print)."""
    return (
        f"the run was cut at the emulator's cap of {cap['max_steps']:,} steps (emulator.project.MAX_STEPS) with "
        f"{cap['requests_completed']:,} of the {cap['requests_requested']:,} requests asked for completed "
        f"({isl}/{osl} tokens: up to {osl:,} decode steps per request): its figures are that part's; give fewer "
        "--requests, a shorter --osl, or more in flight (--concurrency)"
    )


def steady_share(pr: "Projection") -> float | None:
    """The share of the run's time (makespan) in its steady window (``serving.steady_window``: the steps at
    full load); None without a served schedule. A small share (a window of a run of one or two waves of the
    batch) is where the window falls in the waves, not a steady state."""
    from .serving import steady_window

    sv = pr.served
    if sv is None or sv.seconds is None or not len(sv.seconds):
        return None
    dt = sv.seconds + sv.idle_s
    span = float(dt.sum())
    w = steady_window(np.cumsum(dt), sv.batch.batch, sv.batch.prefill_tokens, sv.idle_s)
    return float(dt[w].sum()) / span if span > 0 else None


def concurrency_requests(concurrency: int) -> int:
    """Requests of a closed-loop benchmark at ``concurrency`` in flight: ten rounds of the clients, at
    least 100 (enough requests for p99 latencies over the steady part of the run)."""
    return max(10 * int(concurrency), 100)


def project(
    gen: Generation | str,
    *,
    isl: int,
    osl: int,
    engine: Engine | None = None,
    num_requests: int | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    draft_tokens: int = 0,
    acceptance: float = 0.0,
    seed: int = 0,
    max_steps: int | None = None,
    progress=None,
    engine_profile: str | None = None,
    overrides: dict | None = None,
    check_only: bool = False,
    **scenario,
) -> Projection | None:
    """Serve ``num_requests`` requests and measure the server.

    ``scenario``: ``setup``'s keyword arguments, the model and the hardware: ``model`` and ``chips``
    (required), ``dtype``, ``kv_dtype``, ``preset``, ``mapping``, ``assumptions``, ``hardware``
    (overrides of ``Hardware`` fields, SI units, after the preset's).

    Offline unless ``rate`` (requests/s, Poisson arrivals) or ``concurrency`` (closed loop: that many
    requests in flight, a new one when one completes, as vLLM bench ``--max-concurrency`` and
    GenAI-Perf ``--concurrency``). Requests: ``default_requests`` (offline, online) or
    ``concurrency_requests`` (closed loop) unless given. Engine: the preset's (``serving.engine_for``,
    the sizing ``run`` uses too) unless ``engine``; speculative decoding with ``draft_tokens`` drafts
    per step at ``acceptance``. ``progress(done, total)`` is called with the requests completed so far
    (of one rank) as the schedule advances. ``max_steps``: the steps served at most (default ``MAX_STEPS``); a
    run cut there says so in ``Projection.step_cap``. ``engine_profile`` (``emulator/data/engine_profiles.yaml``):
    its kernel constants on top of the preset's assumptions and its scheduler (unless ``engine``).
    ``overrides``: ``Assumptions`` fields set last, on top of the preset's and the profile's (what the
    calibration's refits vary). ``check_only``: set up the model, mapping, engine and requests and
    return None without serving: the errors a projection would raise, in milliseconds (the calibration
    files' rows are checked so before any replay).

    Raises:
        ValueError: unknown names (an unknown engine profile too), a mapping or a request that does not
            fit, a rate with a concurrency.
        TypeError: no ``model`` or ``chips``, or an argument ``setup`` does not take.
    """
    check_load(num_requests, concurrency)
    max_steps = MAX_STEPS if max_steps is None else max_steps  # read here: the cap as the module has it now
    g, cfg, p = setup(gen, **scenario)
    custom = scenario.get("assumptions") is not None
    if engine_profile is not None:
        prof = profile(engine_profile)
        cfg = dataclasses.replace(cfg, a=prof.assumptions(cfg.a))
        engine = engine or prof.engine(cfg, isl, osl, draft_tokens=draft_tokens, acceptance=acceptance)
    if overrides:
        cfg = dataclasses.replace(cfg, a=cfg.a.replace(**overrides))
    eng = engine or engine_for(cfg, p, isl, osl, draft_tokens=draft_tokens, acceptance=acceptance)
    n = num_requests or (concurrency_requests(concurrency) if concurrency else default_requests(isl, osl))
    batchers = make_batchers(cfg, eng, isl, osl, num_requests=n, rate=rate, concurrency=concurrency, seed=seed)
    if check_only:
        return None
    total = sum(bt.total or 0 for bt in batchers)
    tick = (lambda now: progress(sum(bt.completed for bt in batchers), total)) if progress else None
    sv = serve(cfg, batchers, max_steps=max_steps, progress=tick)
    fig = throughput(cfg, sv, osl)
    return Projection(
        g.name,
        scenario["model"],
        int(scenario["chips"]),
        int(isl),
        int(osl),
        cfg.prec.weights,
        cfg.prec.kv,
        "custom" if custom else p.name,
        cfg.mapping,
        eng,
        rank_kv_capacity(cfg, eng),
        fig,
        (() if custom else p.stated(prof if engine_profile is not None else None, cfg.mapping))
        + (prof.foreign_note(p.family) if engine_profile is not None else ())
        + _math_note(cfg),
        cfg,
        sv,
        engine_profile,
        step_cap(batchers, cfg.mapping.ranks, len(sv.batch), max_steps, fig.requests),
    )


def _math_note(cfg: EmuConfig) -> tuple[str, ...]:
    """What the projection assumes about a weight dtype other than FP8: the peak its matrix math runs at
    (the presets' statements give the FP8 peak), or, for a dtype the chip has no matrix math for (FP4
    weights on a generation without ``spec.mxu.peak_flops_fp4``), that they run FP8 math
    (``Hardware.math_dtype``); nothing for FP8."""
    w = cfg.prec.weights
    math = cfg.hw.math_dtype(w)
    if math == w == "fp8":
        return ()
    if math == w:  # the assumptions state the FP8 peak; this projection's GEMMs run at another one
        return (
            f"{w.upper()} weights run {math.upper()} matrix math: peak {math.upper()} "
            f"{cfg.hw.peak(math) / 1e15:g} PFLOP/s (spec.mxu.peak_flops_{math}), not the FP8 peak",
        )
    return (
        f"{w.upper()} weights run {math.upper()} matrix math: {cfg.hw.generation} has no {w.upper()} matrix math "
        "(spec.mxu.peak_flops_fp4), so the weights are dequantised on load; only their bytes are FP4's",
    )


def request_flops(cfg: EmuConfig, isl: int, osl: int) -> float:
    """Matrix FLOP of one request (whole model): ``2 × active params × (isl + osl − 1)`` forward
    tokens + the LM head on ``osl`` sampled tokens + attention over its causal pairs."""
    m = cfg.model
    fwd = isl + osl - 1
    pairs = isl * (isl + 1) / 2
    decode = sum(isl + g for g in range(1, osl))
    return 2.0 * m.active_matmul_params * fwd + 2.0 * m.lm_head_params * osl + m.attention_flops(pairs, decode)


def hbm_bytes_per_token(pr: Projection) -> float:
    """HBM bytes (weights, KV reads and writes, activations when they go through HBM) per token
    processed, over the steady window of a projection, per chip."""
    from .ops import stack_work
    from .serving import steady_window

    sv, cfg = pr.served, pr.config
    w = steady_window(np.cumsum(sv.seconds + sv.idle_s), sv.batch.batch, sv.batch.prefill_tokens, sv.idle_s)
    b = sv.batch.select(np.flatnonzero(w))
    if len(b) == 0:
        return 0.0
    W = stack_work(b, cfg)
    act = (W["act_r"] + W["act_w"]) if cfg.a.activations_in_hbm else 0.0
    per_step = (W["w"] + W["kv_r"] + W["kv_w"] + act) @ cfg.plan.slot_reps.astype(float)
    return float(per_step.sum() / max(b.tokens.sum(), 1))


def claim_requirements(
    cfg: EmuConfig,
    *,
    tokens_per_second: float,
    chips: int,
    isl: int,
    osl: int,
    hbm_bytes_per_token: float | None = None,
) -> dict:
    """What serving ``tokens_per_second`` (input + output) on ``chips`` chips needs for requests of
    ``isl``/``osl`` tokens: sustained matrix FLOP/s per chip (and as a share of the peak), the HBM
    bandwidth per chip (given the HBM bytes per token of a schedule), and whether one chip holds the
    whole model (data parallelism)."""
    per_req = request_flops(cfg, isl, osl)
    req_s = tokens_per_second / (isl + osl)
    flops_chip = per_req * req_s / chips
    peak = cfg.hw.peak(cfg.hw.math_dtype(cfg.prec.weights))
    from .parallel import Precision, chip_shape

    whole = chip_shape(cfg.model, Mapping(tp=1), Precision.of(cfg.prec.weights, cfg.prec.kv, cfg.prec.head))
    return {
        "tokens_per_second": tokens_per_second,
        "requests_per_second": req_s,
        "flops_per_token": per_req / (isl + osl),
        "sustained_flops_per_chip": flops_chip,
        "share_of_catalog_peak": flops_chip / peak,
        "catalog_peak_flops": peak,
        "peak_needed_at_90pct": flops_chip / 0.9,
        "model_bytes_one_chip": whole.weight_bytes,
        "hbm_capacity": cfg.hw.hbm_capacity,
        "hbm_bytes_per_token": hbm_bytes_per_token,
        "hbm_bandwidth_needed": None
        if hbm_bytes_per_token is None
        else hbm_bytes_per_token * tokens_per_second / chips,
        "hbm_peak_bandwidth": cfg.hw.hbm_bw,
        "fits_one_chip": bool(whole.weight_bytes < cfg.hw.hbm_capacity),
    }


def geomean_error(predicted: np.ndarray, measured: np.ndarray) -> float:
    """``exp(mean |ln(predicted / measured)|) − 1`` (a fraction)."""
    r = np.abs(np.log(np.asarray(predicted, float) / np.asarray(measured, float)))
    return float(np.exp(r.mean()) - 1.0) if len(r) else 0.0
