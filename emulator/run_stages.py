"""Stages of one emulator run (``run.run``): the chips' sampling grid on their own clocks, the
timelines of the scheduled steps cut at the end of the run, the side outputs (request records, sync
reads, trace) and the speculative-decoding truth.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from .clocks import sync_reads
from .lockstep import lockstep_tables
from .records import request_records, write_records
from .serving import Engine
from .steps import StepBatch
from .timeline import Timeline, concat_tables, step_lengths, take_steps
from .trace import write_trace


def device_grid(t_grid: np.ndarray, clocks, f: float) -> tuple[int, np.ndarray, np.ndarray, int, int]:
    """The sampling grid on each chip's clock: the run's duration in ns, each sample's core cycle in host
    time (samples, chips), each sample's device time stamp, the last sample's cycle on any chip and the
    run's end (host time) in core cycles."""
    d_ns = int(t_grid[-1])  # the run's duration (each chip's own clock)
    drift = np.array([c.drift for c in clocks])
    host_ns = t_grid[:, None] / (1.0 + drift[None, :])  # when each chip's sample happens, host time
    s_cyc = np.rint(host_ns * (f / 1e9)).astype(np.int64)  # (samples, chips)
    t_dev = np.array([c.offset_ns for c in clocks], np.int64)[None, :] + t_grid[:, None]
    end = int(s_cyc[-1].max())  # the last sample of any chip
    end_host = int(round(d_ns * f / 1e9))  # host time d_ns, in core cycles
    return d_ns, s_cyc, t_dev, end, end_host


def whole_step_duration(
    ends_cycles: np.ndarray, duration_s: float, period_s: float, f: float, drift_max: float
) -> float:
    """The measured duration (s) that ends at a step boundary: the end of the step in progress at
    ``duration_s`` (host time), stretched by the largest clock drift ``drift_max`` (a fraction, 1e-4 =
    100 ppm) so that every chip's last sample, taken on its own clock, falls after it, then rounded up
    to a whole number of sample periods. ``ends_cycles``: (steps,) end of each scheduled step in core
    cycles of host time (``Timeline.ends``); ``f``: core clock (Hz). Unchanged when the server drained
    before ``duration_s`` (no step in progress).

    Why: tokens count when a step ends, so a run that stops inside a step counts that step's work but
    none of its tokens; over a few steps that skews tokens/s and FLOPs per token by up to one step's
    share (issue 30: a 1 s run of 0.34 s steps showed 65k tok/s for a 97k tok/s steady state).
    """
    end = duration_s * f
    k = int(np.searchsorted(ends_cycles, end, side="left"))
    if k >= len(ends_cycles):
        return duration_s
    step_end_s = float(ends_cycles[k]) / f * (1.0 + drift_max)
    periods = int(np.ceil(step_end_s / period_s - 1e-9))
    return max(duration_s, periods * period_s)


def timelines(b: StepBatch, idle: np.ndarray, cfg, profiles, counts, horizon: int):
    """The scheduled steps (``b``) and one timeline per chip profile: the steps up to the one in progress
    at ``horizon`` (core cycles), idle to the horizon when the server drained before it."""
    tables = lockstep_tables(b, cfg, idle, profiles, counts) if len(b) else None
    if tables is not None:  # keep the steps up to the one in progress at the end
        ends = np.cumsum(step_lengths(tables[0], cfg.plan))
        k = int(np.searchsorted(ends, horizon, side="right"))
        if k < len(b):
            tables, b = [take_steps(t, k + 1) for t in tables], b.take(k + 1)
    tl0 = Timeline.build(tables[0], cfg.plan) if tables is not None else None
    if tl0 is None or tl0.ends[-1] <= horizon:  # drained (or nothing to do) before the end: idle to the end
        tail = horizon - (int(tl0.ends[-1]) if tl0 is not None else 0) + 1
        extra = lockstep_tables(StepBatch.empty(1), cfg, np.array([tail]), profiles, counts)
        tables = extra if tables is None else [concat_tables([t, e]) for t, e in zip(tables, extra)]
    return b, [Timeline.build(t, cfg.plan) for t in tables]


def write_side_outputs(out: Path, sv, b: StepBatch, tls: list[Timeline], cfg, isl: int, osl: int, trace_args: tuple):
    """Write ``requests.parquet``, ``sync.parquet`` and ``trace.parquet`` into ``out``. ``trace_args``:
    (profile of each chip, clocks, leaders, end in host core cycles, seed, duration in ns, trace detail).
    Returns the request records, the three paths, the trace's description and the end times (s) of the
    timed steps."""
    prof_of, clocks, leaders, end_host, seed, d_ns, trace_detail = trace_args
    f = cfg.hw.core_hz
    n_timed = min(len(b), len(tls[0]))
    starts_s, ends_s = tls[0].starts[:n_timed] / f, tls[0].ends[:n_timed] / f
    records = request_records(sv, starts_s, ends_s, isl=isl, osl=osl, ranks=cfg.mapping.ranks, duration_s=d_ns * 1e-9)
    requests_path = out / "requests.parquet"
    write_records(requests_path, records)
    sync_path = out / "sync.parquet"
    pq.write_table(sync_reads(clocks, d_ns, seed), str(sync_path))
    trace_path = out / "trace.parquet"
    trace_info = write_trace(trace_path, tls, prof_of, clocks, cfg, leaders, end_host, trace_detail)
    return records, requests_path, sync_path, trace_path, trace_info, ends_s


def speculative_truth(b: StepBatch, eng: Engine, ranks: int) -> dict:
    """Speculative decoding over the scheduled steps (whole server): ``draft_tokens`` (k), ``acceptance``
    (α), ``accepted_draft_tokens``, ``decode_steps`` (steps with a decoding request) and
    ``tokens_per_decode_step`` (the mean tokens a decoding request emits per step; expected
    ``(1 − α^(k+1)) / (1 − α)``)."""
    dec = b.decode_tokens > 0
    n_req = float(b.decode_tokens[dec].sum()) / (eng.draft_tokens + 1)
    accepted = float(b.accepted_tokens.sum())
    return {
        "draft_tokens": int(eng.draft_tokens),
        "acceptance": float(eng.acceptance),
        "accepted_draft_tokens": accepted * ranks,
        "decode_steps": int(dec.sum()),
        "tokens_per_decode_step": (n_req + accepted) / n_req if n_req else None,
    }


__all__ = ["device_grid", "speculative_truth", "timelines", "write_side_outputs"]
