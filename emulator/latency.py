"""Serving latencies by the serving-benchmark definitions (vLLM ``benchmark_serving``, GenAI-Perf):

- TTFT: first output token − arrival, over requests with a first token;
- TPOT: (last token − first token) ÷ (output tokens − 1), over completed requests with ≥ 2 tokens;
- ITL: every gap between consecutive output tokens of a request (``osl − 1`` gaps per request, never
  the TTFT); with speculative decoding a step emits several tokens of a request at one instant, so
  some gaps are 0 (the request-record definition of ``token_gap``, ``ontology`` records);
percentiles linear-interpolated (numpy's default).
"""

from __future__ import annotations

import numpy as np


def percentiles(x: np.ndarray) -> dict[str, float | None]:
    """``{"p50", "p99", "mean"}`` of ``x`` (None when empty)."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return {"p50": None, "p99": None, "mean": None}
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)), "mean": float(x.mean())}


def token_gaps(owner: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Gaps between consecutive tokens of the same request: ``owner`` and ``times`` (one entry per
    token, in request then time order; NaN times dropped first)."""
    owner, times = np.asarray(owner), np.asarray(times, np.float64)
    ok = np.isfinite(times)
    owner, times = owner[ok], times[ok]
    if len(times) < 2:
        return np.zeros(0)
    same = owner[1:] == owner[:-1]
    return np.diff(times)[same]


def latency(
    arrival_s: np.ndarray,
    first_s: np.ndarray,
    last_s: np.ndarray,
    osl: int,
    t0: float = 0.0,
    itl_s: np.ndarray | None = None,
) -> dict:
    """TTFT and TPOT of requests from their arrival, first-token and last-token times (s; NaN = not
    seen), and ITL from ``itl_s`` (the token gaps, ``token_gaps``), by the module's definitions.

    Requests whose first token is before ``t0`` or not seen are left out.

    Returns:
        ``{"ttft_s": {p50, p99, mean}, "tpot_s": {...}, "itl_s": {...}, "requests": n}``.
    """
    arrival = np.maximum(np.asarray(arrival_s, np.float64), t0)
    first, last = np.asarray(first_s, np.float64), np.asarray(last_s, np.float64)
    sel = np.isfinite(first) & (first >= t0)
    ttft = (first - arrival)[sel]
    ok = sel & np.isfinite(last) & (osl > 1)
    tpot = ((last - first) / max(osl - 1, 1))[ok]
    itl = np.zeros(0) if itl_s is None else np.asarray(itl_s, np.float64)
    return {
        "ttft_s": percentiles(ttft),
        "tpot_s": percentiles(tpot),
        "itl_s": percentiles(itl),
        "requests": int(sel.sum()),
    }


__all__ = ["latency", "percentiles", "token_gaps"]
