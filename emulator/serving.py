"""Serving scenarios: engine settings, the schedulers of a mapping, and the step loop with timing.

Engine settings (``Engine``): the scheduler's ``max_batch`` (TensorRT-LLM ``max_batch_size``),
``token_budget`` (``max_num_tokens``), whether prompts are chunked, and the KV cache admission
(``kv_capacity_tokens`` per scheduler rank, from ``parallel.kv_capacity_tokens``).
``trtllm_bench_engine`` reproduces how ``trtllm-bench throughput`` sizes them when the user gives
neither (its heuristic in ``tensorrt_llm/bench/build/tuning.py``, described here in our words):

- requests that fit in the KV cache: ``fraction × (HBM of the group − weights) / (KV bytes per
  token × (isl + osl))``, at most 4096, divided by ``pp``;
- ``max_batch``: that count rounded up — to a multiple of 32 (at least 64) below 256, of 128 below
  1024, of 256 above;
- ``token_budget``: ``max_batch × (1 + isl/osl)``, at most 32768, rounded up — to a multiple of 256
  (at least 2048) below 4096, of 512 below 8192, of 1024 above; without chunked prefill (the
  default) at least ``isl + max_batch`` so a whole prompt fits a step.

Schedulers: one ``ContinuousBatcher`` per scheduler rank and pipeline micro-batch. All ranks of a
mapping are symmetric (identical requests, identical load), so one rank's ``pp`` micro-batches are
simulated and the others are copies; the ``pp`` micro-batches of a rank take turns (step ``k`` runs
micro-batch ``k mod pp`` on every stage), each with ``max_batch/pp`` requests and ``1/pp`` of the KV
cache. A micro-batch's tokens come out ``pp − 1`` steps after its step on the first stage.

``serve`` runs the step loop: offline and closed-loop it schedules blocks of steps ahead (the
schedule does not depend on time: a closed-loop request arrives at the end of the step that
completes the one it replaces) and times them afterwards; online it times every step before
scheduling the next (admission depends on the clock) and idles until the next arrival when nothing
is queued. ``engine_for`` sizes the engine for both ``run`` and ``project``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .ops import EmuConfig, stack_work, step_seconds
from .parallel import dtype_bytes, kv_capacity_tokens
from .latency import latency, load_figures, token_gaps
from .scheduler import ContinuousBatcher, SchedulerError, poisson_arrivals
from .step_loop import IDLE, STOP, StepLoop
from .steps import ROW, StepBatch, token_steps


@dataclass(frozen=True)
class Engine:
    """Scheduler settings of one serving engine (per scheduler rank)."""

    max_batch: int = 1024
    token_budget: int = 8192
    chunked_prefill: bool = True
    kv_capacity_tokens: int | None = None  # None: from HBM, weights and Assumptions
    draft_tokens: int = 0  # speculative decoding / MTP: drafts verified per request and step
    acceptance: float = 0.0  # probability each draft token is accepted

    def describe(self) -> str:
        spec = (
            f"; {self.draft_tokens} draft tokens per step at {self.acceptance:.0%} acceptance"
            if self.draft_tokens
            else ""
        )
        return (
            f"max batch {self.max_batch}, {self.token_budget} tokens per step, "
            f"{'chunked' if self.chunked_prefill else 'whole'} prompts{spec}"
        )


def _round_up(x: float, m: int) -> int:
    return int(m * math.ceil(x / m))


def trtllm_bench_engine(cfg: EmuConfig, isl: int, osl: int, *, chunked_prefill: bool = False) -> Engine:
    """The engine settings ``trtllm-bench throughput`` picks for this model, mapping and lengths
    (see the module docstring), with the KV fraction of ``cfg.a.kv_memory_fraction``."""
    m, mp, cs = cfg.model, cfg.mapping, cfg.cs
    group = mp.tp * mp.pp
    weights = m.total_params * dtype_bytes(cfg.prec.weights)
    kv_token = cs.kv_bytes_per_token * group / (mp.tp if mp.attn_dp else 1)
    avail = cfg.hw.hbm_capacity * group - weights
    req = max(cfg.a.kv_memory_fraction * avail / (kv_token * (isl + osl)), 1.0)
    bs = min(req, 4096.0) / mp.pp
    if bs < 256:
        max_bs = max(64, _round_up(bs, 32))
    elif bs < 1024:
        max_bs = _round_up(bs, 128)
    else:
        max_bs = _round_up(bs, 256)
    tok = min(bs * (1 + isl / osl), 32768.0)
    if tok < 4096:
        max_tok = max(2048, _round_up(tok, 256))
    elif tok < 8192:
        max_tok = _round_up(tok, 512)
    else:
        max_tok = _round_up(tok, 1024)
    if not chunked_prefill:
        max_tok = max(max_tok, isl + max_bs)
    return Engine(max_batch=max_bs, token_budget=max_tok, chunked_prefill=chunked_prefill)


def engine_for(
    cfg: EmuConfig,
    preset,
    isl: int,
    osl: int,
    *,
    max_batch: int | None = None,
    token_budget: int | None = None,
    chunked_prefill: bool | None = None,
    draft_tokens: int = 0,
    acceptance: float = 0.0,
) -> Engine:
    """The engine a preset prescribes — ``trtllm``: trtllm-bench's sizing (``trtllm_bench_engine``), or
    the preset's explicit ``{max_batch, token_budget, chunked_prefill}`` — with each setting given here
    replacing the preset's. ``run`` and ``project`` both size their engine here, so that the same
    preset and workload schedule the same steps."""
    if preset.engine == "trtllm":
        base = trtllm_bench_engine(cfg, isl, osl, chunked_prefill=bool(chunked_prefill))
    else:
        e = dict(preset.engine)
        base = Engine(
            max_batch=int(e.get("max_batch", 1024)),
            token_budget=int(e.get("token_budget", 8192)),
            chunked_prefill=bool(e.get("chunked_prefill", True)),
        )
    return Engine(
        max_batch=int(max_batch) if max_batch is not None else base.max_batch,
        token_budget=int(token_budget) if token_budget is not None else base.token_budget,
        chunked_prefill=bool(chunked_prefill) if chunked_prefill is not None else base.chunked_prefill,
        draft_tokens=int(draft_tokens),
        acceptance=float(acceptance),
    )


def rank_kv_capacity(cfg: EmuConfig, engine: Engine) -> int:
    """KV tokens one scheduler rank can hold (``engine.kv_capacity_tokens`` or from the HBM left)."""
    if engine.kv_capacity_tokens is not None:
        return int(engine.kv_capacity_tokens)
    return kv_capacity_tokens(cfg.hw.hbm_capacity, cfg.cs, cfg.a.kv_memory_fraction, cfg.a.runtime_reserve_bytes)


def make_batchers(
    cfg: EmuConfig,
    engine: Engine,
    isl: int,
    osl: int,
    *,
    num_requests: int | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    seed: int = 0,
) -> list[ContinuousBatcher]:
    """The ``pp`` micro-batch schedulers of one rank. ``num_requests``, ``rate`` and ``concurrency``
    (closed loop: requests in flight) are server totals, split evenly over the ``Mapping.ranks`` ranks
    (and the micro-batches).

    Raises:
        SchedulerError: a request does not fit, bad parameters, or a concurrency and a rate together.
    """
    mp = cfg.mapping
    pp, ranks = mp.pp, mp.ranks
    cap = rank_kv_capacity(cfg, engine) // pp
    if concurrency is not None:
        if rate is not None:
            raise SchedulerError("a closed loop (concurrency) and Poisson arrivals (rate) exclude each other")
        if int(concurrency) < ranks * pp:
            raise SchedulerError(
                f"concurrency {concurrency} is below the {ranks * pp} scheduler ranks × micro-batches "
                f"of {mp.describe()}: some would never get a request"
            )
    out = []
    for i in range(pp):
        conc = None if concurrency is None else -(-int(concurrency) // (ranks * pp))
        if rate is not None:
            if num_requests is None:
                raise SchedulerError("an online scenario needs a number of requests")
            n = -(-int(num_requests) // (ranks * pp))
            arrivals = poisson_arrivals(rate / (ranks * pp), n, seed * 1000 + i)
            nreq = None
        else:
            arrivals = None
            nreq = None if num_requests is None else -(-int(num_requests) // (ranks * pp))
        out.append(
            ContinuousBatcher(
                isl=isl,
                osl=osl,
                token_budget=engine.token_budget,
                max_batch=max(engine.max_batch // pp, 1),
                kv_capacity_tokens=cap,
                num_requests=nreq,
                page_tokens=cfg.a.kv_page_tokens,
                chunked_prefill=engine.chunked_prefill,
                arrivals=arrivals,
                concurrency=conc,
                draft_tokens=engine.draft_tokens,
                acceptance=engine.acceptance,
                seed=seed * 1000 + i,
            )
        )
    return out


@dataclass
class Served:
    """The steps of one rank's schedule: ``batch`` (all steps, interleaved micro-batches), ``idle_s``
    (s of idle before each step, online), ``seconds`` (duration of each step, s; None until timed),
    ``owner`` (micro-batch of each step), and the batchers with their request logs."""

    batch: StepBatch
    idle_s: np.ndarray
    owner: np.ndarray
    batchers: list[ContinuousBatcher]
    seconds: np.ndarray | None = None
    local_index: list[np.ndarray] = field(default_factory=list)  # per batcher: global index of each local step
    warmup: list[int] = field(default_factory=list)
    warmup_seconds: list[np.ndarray] = field(default_factory=list)  # per batcher: each warm-up step's duration (s)


def serve(
    cfg: EmuConfig,
    batchers: list[ContinuousBatcher],
    *,
    until_s: float | None = None,
    max_steps: int | None = None,
    warmup_steps: int = 0,
    progress=None,
    seconds_fn=None,
) -> Served:
    """Run the step loop until every request is done, or past ``until_s`` simulated seconds, or
    ``max_steps`` steps; times every step (``Served.seconds``). ``progress(done_s)`` is called as
    simulated time advances. ``seconds_fn(StepBatch) -> (steps,) s`` times the steps (default: the
    nominal chip, ``step_seconds``; ``lockstep.lockstep_seconds`` when the chips differ)."""
    if seconds_fn is None:

        def seconds_fn(batch):
            return step_seconds(stack_work(batch, cfg), cfg)

    warm, warm_s = [], []
    for bt in batchers:
        w0 = bt.steps
        wb = bt.run(warmup_steps)
        warm.append(bt.steps - w0)
        warm_s.append(np.asarray(seconds_fn(wb), np.float64) if len(wb) else np.zeros(0))
    online = any(bt.arrivals is not None for bt in batchers)
    loop = StepLoop(batchers, seconds_fn)
    limit = max_steps if max_steps is not None else 1 << 62
    while len(loop.rows) < limit and not loop.done_all() and (until_s is None or loop.now <= until_s):
        did = loop.online_turn(until_s) if online else loop.offline_turn()
        if did == STOP:
            break
        if did == IDLE:
            continue
        if progress is not None:
            progress(loop.now)
    real = [r if r is not None else (0,) * ROW for r in loop.rows]
    return Served(
        StepBatch.from_rows(real),
        np.array(loop.idle),
        np.array(loop.owner, np.int64),
        batchers,
        np.array(loop.secs),
        [np.array(x, np.int64) for x in loop.local],
        warm,
        warm_s,
    )


def request_times(
    sv: Served, step_end_s: np.ndarray, *, tokens: bool = False, step_start_s: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per request of every batcher: ``arrival_s``, ``first_s``, ``last_s`` (NaN when not in the timed
    range); with ``tokens``, also ``itl_s``: every gap between consecutive emissions of a request;
    with ``step_start_s`` (start time of every global step), ``admit_s``: the start of the step that
    admitted the request (NaN when not in the timed range).

    A micro-batch's tokens leave the pipeline ``pp − 1`` steps after its step (``step_end_s`` is the
    end time of every global step); a closed-loop request arrives when the request it replaces has
    left (warm-up arrivals: at 0)."""
    pp = len(sv.batchers)
    out = {"arrival_s": [], "first_s": [], "last_s": [], "itl_s": [], "admit_s": []}
    n = len(step_end_s)
    for bt, idx, w in zip(sv.batchers, sv.local_index, sv.warmup):
        log = bt.request_log()

        def when(local_step, at=step_end_s, lag=pp - 1):
            local_step = np.asarray(local_step, np.int64)
            j = local_step - w
            ok = (local_step >= 0) & (j >= 0) & (j < len(idx))
            g = np.where(ok, idx[np.clip(j, 0, max(len(idx) - 1, 0))] if len(idx) else 0, -1) + lag
            ok &= (g >= 0) & (g < n)
            return np.where(ok, at[np.clip(g, 0, max(n - 1, 0))] if n else 0.0, np.nan)

        arrival = log["arrival_s"]
        if bt.concurrency is not None:
            a = log["arrival_step"]
            arrival = np.where(a >= w, when(a), 0.0)
        out["arrival_s"].append(arrival)
        out["first_s"].append(when(log["first_step"]))
        out["last_s"].append(when(log["last_step"]))
        if step_start_s is not None:
            out["admit_s"].append(when(log["admit_step"], step_start_s, 0))
        if tokens:
            owner, step = token_steps(log["first_step"], log["last_step"], log["per_step"], bt.osl, bt.steps)
            out["itl_s"].append(token_gaps(owner, when(step)))
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}


_PCT = ("p50", "p90", "p99")


def _unadmitted(sv: Served) -> np.ndarray:
    """Arrival times (s) of the requests no batcher admitted: online, those arrived or not; offline,
    the rest of a bounded queue (at 0); a closed loop has none waiting beyond its clients."""
    out = []
    for bt in sv.batchers:
        if bt.arrivals is not None:
            out.append(bt.arrivals[bt.admitted :])
        elif bt.concurrency is None and bt.total is not None:
            out.append(np.zeros(max(bt.total - bt.admitted, 0)))
    return np.concatenate(out) if out else np.zeros(0)


@dataclass
class Throughput:
    """Offline or online serving figures of the whole server (all ranks)."""

    output_tokens_per_second: float
    tokens_per_second: float
    input_tokens_per_second: float
    makespan_s: float
    requests: int
    steps: int
    latency: dict
    steady_tokens_per_second: float = 0.0
    steady_output_tokens_per_second: float = 0.0

    def to_json(self) -> dict:
        lat = self.latency
        return {
            "output_tokens_per_second": self.output_tokens_per_second,
            "tokens_per_second": self.tokens_per_second,
            "input_tokens_per_second": self.input_tokens_per_second,
            "steady_tokens_per_second": self.steady_tokens_per_second,
            "steady_output_tokens_per_second": self.steady_output_tokens_per_second,
            "makespan_s": self.makespan_s,
            "requests": self.requests,
            "steps": self.steps,
            **{f"{k}_{p}_s": lat.get(f"{k}_s", {}).get(p) for k in ("ttft", "tpot", "itl") for p in _PCT},
            **{f"ttft_{k}_{p}_s": lat.get(f"{k}_s", {}).get(p) for k in ("queue", "prefill") for p in ("p50", "p99")},
            **lat.get("load", {}),
        }


#: A step is at full load when its batch holds at least this share of the run's largest batch.
FULL_LOAD = 0.95


def steady_window(
    ends: np.ndarray,
    batch: np.ndarray | None = None,
    prefill: np.ndarray | None = None,
    idle: np.ndarray | None = None,
) -> np.ndarray:
    """The steps of the server at full load (bool, one per step; ``ends``: each step's end, s).

    With the steps' batch sizes (``batch``, requests per step): the longest stretch of consecutive steps
    whose batch is within ``FULL_LOAD`` of the run's largest — the plateau of an offline benchmark between
    its ramp-up and its drain — ended at its last step that still admits prompts (``prefill``: prompt tokens
    per step; after it the queue is empty and the drain's shorter decode-only steps begin), when it spans
    at least a tenth of the makespan. The middle half of the run alone read an offline run's ramp as
    steady: with 3,000 requests of 2048/128 on 8 Sohu chips the batch still grew towards its 1,920 there,
    and the output tokens/s read 4,660 where the plateau gives 5,731 (a hand audit).

    Without such a plateau: an offline run (``idle`` given and never positive: every request queued at
    t = 0, few enough to be served in one wave) has no steady state, and the whole run is returned (its
    middle half was the prefill of that wave: 966 output tokens/s against the benchmark's 4,618 for 200
    requests); an online run (idle time between arrivals), or no batch given, the steps whose end falls in
    the middle half of the run, away from its start from empty and its drain."""
    span = float(ends[-1]) if len(ends) else 0.0
    middle = (ends > 0.25 * span) & (ends <= 0.75 * span)
    if batch is None or not len(batch) or batch.max() <= 0:
        return middle
    i0, i1 = _longest_run(batch >= FULL_LOAD * batch.max())
    if prefill is not None and prefill[i0 : i1 + 1].any():
        i1 = i0 + int(np.flatnonzero(prefill[i0 : i1 + 1])[-1])
    start = float(ends[i0 - 1]) if i0 > 0 else 0.0
    if float(ends[i1]) - start < 0.1 * span:
        offline = idle is not None and not (np.asarray(idle) > 0).any()
        return np.ones(len(ends), bool) if offline else middle
    window = np.zeros(len(ends), bool)
    window[i0 : i1 + 1] = True
    return window


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """First and last index of the longest stretch of consecutive True in ``mask`` (the first if tied)."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k]) - 1


def throughput(cfg: EmuConfig, sv: Served, osl: int, seconds: np.ndarray | None = None) -> Throughput:
    """Server throughput of a served schedule: tokens ÷ makespan (first arrival to last token), × ranks
    (what ``trtllm-bench`` reports); ``steady_*``: the same over ``steady_window``."""
    s = sv.seconds if seconds is None else seconds
    ends = np.cumsum(s + sv.idle_s)
    span = float(ends[-1]) if len(ends) else 0.0
    ranks = cfg.mapping.ranks
    b = sv.batch
    out_tok = float(b.emitted_tokens.sum()) * ranks
    in_tok = float(b.prefill_tokens.sum()) * ranks
    w = steady_window(ends, b.batch, b.prefill_tokens, sv.idle_s)
    wt = float((s + sv.idle_s)[w].sum())
    st_out = float(b.emitted_tokens[w].sum()) * ranks / wt if wt else 0.0
    st_all = float((b.emitted_tokens[w] + b.prefill_tokens[w]).sum()) * ranks / wt if wt else 0.0
    t = request_times(sv, ends, tokens=True, step_start_s=ends - s)
    lat = latency(t["arrival_s"], t["first_s"], t["last_s"], osl, itl_s=t["itl_s"], admit_s=t["admit_s"])
    lat["load"] = load_figures(t["arrival_s"], t["admit_s"], t["last_s"], ends - s, _unadmitted(sv))
    return Throughput(
        out_tok / span if span else 0.0,
        (out_tok + in_tok) / span if span else 0.0,
        in_tok / span if span else 0.0,
        span,
        int(b.completed.sum()) * ranks,
        len(b),
        lat,
        st_all,
        st_out,
    )
