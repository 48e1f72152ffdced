"""Serving latencies by the serving-benchmark definitions (vLLM ``benchmark_serving``, GenAI-Perf):

- TTFT: first output token − arrival, over requests with a first token;
- TPOT: (last token − first token) ÷ (output tokens − 1), over completed requests with ≥ 2 tokens;
- ITL: every gap between consecutive *emissions* of a request (never the TTFT): with speculative or
  multi-token decoding a step emits several tokens of a request at one instant, one emission, so ITL
  is a per-step latency there (vLLM's per-chunk ITL; the catalog's ``token_gap`` records and its
  ``itl`` metric count alike), while TPOT stays per token; without it, ``osl − 1`` gaps a request;
percentiles (p50, p90, p99) linear-interpolated (numpy's default).

TTFT splits in two at the start of the step that admits the request (``admit_s``):

- queue: arrival → that step's start — waiting in the queue while the batch or the KV cache is full
  (it grows without bound when the offered load exceeds the capacity), plus the scheduling delay of
  a request arriving mid-step (it waits for the next step boundary);
- prefill: that step's start → the first token — the prompt's step(s) (spread over several with
  chunked prefill and a token budget below the prompt) up to the end of the step that finishes the
  prompt, whose forward pass samples the first token (the first decode step is that step: no engine
  runs a separate pass for it).
"""

from __future__ import annotations

import numpy as np


def percentiles(x: np.ndarray) -> dict[str, float | None]:
    """``{"p50", "p90", "p99", "mean"}`` of ``x`` (None when empty)."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    p50, p90, p99 = (float(v) for v in np.percentile(x, [50, 90, 99]))
    return {"p50": p50, "p90": p90, "p99": p99, "mean": float(x.mean())}


def token_gaps(owner: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Gaps (s) between consecutive emissions of the same request: ``owner`` and ``times`` (one entry per
    token, in request then time order; NaN times dropped first); tokens of one request at one instant
    (one speculative step's) are one emission, so no gap is 0."""
    owner, times = np.asarray(owner), np.asarray(times, np.float64)
    ok = np.isfinite(times)
    owner, times = owner[ok], times[ok]
    if len(times) < 2:
        return np.zeros(0)
    gaps = np.diff(times)
    return gaps[(owner[1:] == owner[:-1]) & (gaps != 0)]


def latency(
    arrival_s: np.ndarray,
    first_s: np.ndarray,
    last_s: np.ndarray,
    osl: int,
    t0: float = 0.0,
    itl_s: np.ndarray | None = None,
    admit_s: np.ndarray | None = None,
) -> dict:
    """TTFT and TPOT of requests from their arrival, first-token and last-token times (s; NaN = not
    seen), and ITL from ``itl_s`` (the token gaps, ``token_gaps``), by the module's definitions; with
    ``admit_s`` (start of each request's admitting step, s) TTFT's two parts, ``queue_s`` and
    ``prefill_s`` (per request they add up to its TTFT).

    Requests whose first token is before ``t0`` or not seen are left out.

    Returns:
        ``{"ttft_s": {p50, p90, p99, mean}, "tpot_s": {...}, "itl_s": {...}, "requests": n}``, and
        ``"queue_s"``, ``"prefill_s"`` with ``admit_s``.
    """
    arrival = np.maximum(np.asarray(arrival_s, np.float64), t0)
    first, last = np.asarray(first_s, np.float64), np.asarray(last_s, np.float64)
    sel = np.isfinite(first) & (first >= t0)
    ttft = (first - arrival)[sel]
    ok = sel & np.isfinite(last) & (osl > 1)
    tpot = ((last - first) / max(osl - 1, 1))[ok]
    itl = np.zeros(0) if itl_s is None else np.asarray(itl_s, np.float64)
    out = {
        "ttft_s": percentiles(ttft),
        "tpot_s": percentiles(tpot),
        "itl_s": percentiles(itl),
        "requests": int(sel.sum()),
    }
    if admit_s is not None:
        start = np.maximum(np.asarray(admit_s, np.float64), arrival)
        out["queue_s"] = percentiles((start - arrival)[sel])
        out["prefill_s"] = percentiles((first - start)[sel])
    return out


def load_figures(
    arrival_s: np.ndarray,
    admit_s: np.ndarray,
    last_s: np.ndarray,
    step_start_s: np.ndarray,
    pending_arrival_s: np.ndarray | None = None,
) -> dict[str, float]:
    """How many requests wait and are in flight at the start of each step (s; one scheduler rank).

    ``arrival_s``, ``admit_s`` (start of the admitting step) and ``last_s`` (last token) per admitted
    request (NaN: not seen, counted as not yet admitted / not done); ``pending_arrival_s``: arrivals of
    requests never admitted. At a step start ``t``: queued = arrived by ``t`` − admitted by ``t``; in
    flight = arrived by ``t`` − completed by ``t``. Below capacity both stay bounded; above it they
    grow linearly, at (offered − served) requests/s.

    Returns:
        ``{"queued_max", "queued_end", "in_flight_max", "in_flight_mean"}`` (requests; ``queued_end``
        at the last step's start; 0 without steps).
    """
    pend = np.zeros(0) if pending_arrival_s is None else np.asarray(pending_arrival_s, np.float64)
    arr = np.concatenate([np.asarray(arrival_s, np.float64), pend])
    arr = np.sort(arr[np.isfinite(arr)])
    t = np.asarray(step_start_s, np.float64)
    if len(t) == 0:
        return {"queued_max": 0, "queued_end": 0, "in_flight_max": 0, "in_flight_mean": 0.0}
    adm = np.sort(np.asarray(admit_s, np.float64)[np.isfinite(admit_s)])
    done = np.sort(np.asarray(last_s, np.float64)[np.isfinite(last_s)])
    n_arr = np.searchsorted(arr, t, side="right")
    queued = n_arr - np.searchsorted(adm, t, side="right")
    flight = n_arr - np.searchsorted(done, t, side="right")
    return {
        "queued_max": int(queued.max()),
        "queued_end": int(queued[-1]),
        "in_flight_max": int(flight.max()),
        "in_flight_mean": float(flight.mean()),
    }


__all__ = ["latency", "load_figures", "percentiles", "token_gaps"]
