"""Continuous batching (iteration-level scheduling, as in Orca, vLLM, Sarathi-Serve and TensorRT-LLM's
in-flight batching; simulated step by step as in Vidur).

Scenarios:

- offline: every request is queued at t = 0 (``num_requests``, or an unbounded queue), as in
  maximum-throughput benchmarks (``trtllm-bench throughput``);
- online: requests arrive at given times (``arrivals``, e.g. a Poisson process, ``poisson_arrivals``);
  a step admits only the requests that have arrived by its start.

Every request has ``isl`` prompt and ``osl`` output tokens. Each step (one forward pass):

1. every running request whose prompt is done decodes one token;
2. the rest of the token budget goes to prompts, first to partly prefilled ones (in admission order),
   then to newly admitted requests. With ``chunked_prefill`` a prompt may be split over steps
   (Sarathi-Serve); without it a prompt runs whole in one step and is admitted only when all of it
   fits in the budget left (TensorRT-LLM's default). Admission stops at ``max_batch`` running
   requests or when the KV cache cannot hold another request's peak KV (``isl + osl − 1`` tokens,
   rounded up to pages; reserved at admission, so no request is ever preempted: TensorRT-LLM's
   ``GUARANTEED_NO_EVICT``).

A request's first output token is sampled by the step that finishes its prompt; every later step
samples one more; it completes with its ``osl``-th token and frees its KV cache at the step's end.
The batcher logs, per request, its arrival time and the steps of its first and last token, from
which ``latency`` computes TTFT and TPOT once steps have times.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass
class StepBatch:
    """Per-step aggregates of a block of steps (every field an int64 array of length ``steps``).

    decode_tokens: tokens decoded (one per decoding request).
    decode_keys: Σ over decode tokens of the keys each attends to (its KV history + itself).
    prefill_tokens: prompt tokens in this step's chunks.
    prefill_chunks: number of prompt chunks.
    prefill_pairs: Σ over chunks of causal (query, key) pairs ``q·p + q(q+1)/2`` (chunk of ``q``
        tokens after ``p`` tokens of history).
    prefill_history: Σ over chunks of ``p`` (KV tokens read back from HBM).
    head_tokens: rows through the LM head = tokens sampled (decodes + prompts finished this step).
    completed: requests that produced their last token in this step.
    batch: requests taking part in the step.
    kv_tokens: tokens held in the KV cache during the step (after its writes).
    kv_alloc_tokens: KV tokens allocated (whole pages).
    """

    decode_tokens: np.ndarray
    decode_keys: np.ndarray
    prefill_tokens: np.ndarray
    prefill_chunks: np.ndarray
    prefill_pairs: np.ndarray
    prefill_history: np.ndarray
    head_tokens: np.ndarray
    completed: np.ndarray
    batch: np.ndarray
    kv_tokens: np.ndarray
    kv_alloc_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.decode_tokens)

    @property
    def tokens(self) -> np.ndarray:
        """Tokens through the decoder layers (decode + prefill)."""
        return self.decode_tokens + self.prefill_tokens

    def take(self, n: int) -> "StepBatch":
        """The first ``n`` steps."""
        return StepBatch(**{f.name: getattr(self, f.name)[:n] for f in fields(self)})

    def select(self, idx: np.ndarray) -> "StepBatch":
        """The steps at indices ``idx``."""
        return StepBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def from_rows(rows: list[tuple]) -> "StepBatch":
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), 11)
        return StepBatch(*(arr[:, i].copy() for i in range(11)))

    @staticmethod
    def empty(n: int = 1) -> "StepBatch":
        return StepBatch(*([np.zeros(n, np.int64)] * 11))

    @staticmethod
    def concat(parts: list["StepBatch"]) -> "StepBatch":
        return StepBatch(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) if parts
                            else np.zeros(0, np.int64) for f in fields(StepBatch)})


class SchedulerError(ValueError):
    """Scenario parameters that cannot be served (bad lengths, KV cache too small)."""


def poisson_arrivals(rate_per_s: float, n: int, seed: int = 0) -> np.ndarray:
    """Arrival times (s) of ``n`` requests of a Poisson process of ``rate_per_s`` (exponential gaps)."""
    if not rate_per_s > 0:
        raise SchedulerError(f"arrival rate must be > 0 (got {rate_per_s})")
    gaps = np.random.default_rng([int(seed), 0x5EED]).exponential(1.0 / rate_per_s, int(n))
    return np.cumsum(gaps)


class ContinuousBatcher:
    """Continuous batching with (optionally chunked) prefill, offline or online.

    Args:
        isl, osl: prompt and output tokens per request (≥ 1).
        token_budget: tokens per step (decode tokens + prompt tokens; TensorRT-LLM ``max_num_tokens``).
        max_batch: most requests running at once (``max_batch_size``).
        kv_capacity_tokens: KV-cache tokens that fit beside the weights (per scheduler rank).
        num_requests: requests queued at t = 0 (None: unbounded, the server never runs dry).
        page_tokens: KV page size in tokens.
        chunked_prefill: split prompts over steps to fill the budget.
        arrivals: sorted arrival times in s (online); overrides ``num_requests``.

    Raises:
        SchedulerError: a request's peak KV cache does not fit, a prompt can never fit the budget
            without chunking, or a parameter is < 1.
    """

    def __init__(self, *, isl: int, osl: int, token_budget: int, max_batch: int, kv_capacity_tokens: int,
                 num_requests: int | None = None, page_tokens: int = 16, chunked_prefill: bool = True,
                 arrivals: np.ndarray | None = None):
        for name, v in (("isl", isl), ("osl", osl), ("token_budget", token_budget), ("max_batch", max_batch),
                        ("page_tokens", page_tokens)):
            if int(v) < 1:
                raise SchedulerError(f"{name} must be ≥ 1 (got {v})")
        self.isl, self.osl = int(isl), int(osl)
        self.token_budget, self.max_batch = int(token_budget), int(max_batch)
        self.page = int(page_tokens)
        self.chunked = bool(chunked_prefill)
        if not self.chunked and self.isl > self.token_budget:
            raise SchedulerError(f"a {self.isl}-token prompt never fits a {self.token_budget}-token step without "
                                 f"chunked prefill; raise the token budget or enable chunking")
        self.reserve = -(-(self.isl + self.osl - 1) // self.page) * self.page
        self.capacity = int(kv_capacity_tokens)
        if self.reserve > self.capacity:
            raise SchedulerError(f"one request needs {self.reserve} KV tokens but only {max(self.capacity, 0)} fit beside "
                                 f"the weights; use more chips, a smaller dtype or shorter isl/osl")
        self.arrivals = None if arrivals is None else np.asarray(arrivals, np.float64)
        self.total = len(self.arrivals) if self.arrivals is not None else (None if num_requests is None else int(num_requests))
        self.admitted = 0
        self.reserved = 0
        self.steps = 0
        # prompts in progress (admission order): tokens prefilled so far, request ids
        self.pf_done = np.zeros(0, np.int64)
        self.pf_ids = np.zeros(0, np.int64)
        # decoding requests, grouped by the step f that sampled their first token (f increasing): a request
        # of group f has sampled s − f tokens before step s, so every per-request sum is a sum over groups
        self._gf = np.zeros(64, np.int64)
        self._gn = np.zeros(64, np.int64)
        self._gids: list[np.ndarray] = []
        self._gh = self._gt = 0
        self.n_dec = 0
        self._sum_fn = 0  # Σ n·f over the groups
        self._first: list[tuple[int, np.ndarray]] = []
        self._last: list[tuple[int, np.ndarray]] = []
        self._admit_log: list[tuple[int, int, int]] = []  # (step, first request id, count)

    @property
    def running(self) -> int:
        """Requests admitted and not finished."""
        return self.n_dec + len(self.pf_done)

    # ---- queue ----------------------------------------------------------------------------------
    def arrived(self, now: float) -> int:
        """Requests that have arrived by ``now`` (s)."""
        if self.arrivals is None:
            return self.total if self.total is not None else self.admitted + self.max_batch + 1
        return int(np.searchsorted(self.arrivals, now, side="right"))

    @property
    def finished(self) -> bool:
        """No running request and none left to arrive or queued."""
        return self.running == 0 and self.total is not None and self.admitted >= self.total

    @property
    def completed(self) -> int:
        """Requests that have produced their last token."""
        return self.admitted - self.running

    def idle(self, now: float) -> bool:
        """Nothing to run at ``now``: no running request and none queued."""
        return self.running == 0 and self.arrived(now) <= self.admitted

    def next_arrival(self) -> float | None:
        """Arrival time of the next request not yet arrived (online), else None."""
        if self.arrivals is None or self.admitted >= len(self.arrivals):
            return None
        return float(self.arrivals[self.admitted])

    def _admit(self, tokens_left: int, now: float) -> int:
        if tokens_left <= 0:
            return 0
        per = -(-tokens_left // self.isl) if self.chunked else tokens_left // self.isl
        n = min(self.max_batch - self.running, (self.capacity - self.reserved) // self.reserve, per,
                self.arrived(now) - self.admitted)
        return max(n, 0)

    # ---- one step -------------------------------------------------------------------------------
    def step(self, now: float = 0.0) -> tuple[int, ...]:
        """Schedule one step starting at ``now`` (s); returns the ``StepBatch`` row (11 ints)."""
        isl, page, st = self.isl, self.page, self.steps
        h, t = self._gh, self._gt
        gf, gn = self._gf[h:t], self._gn[h:t]
        n_dec = self.n_dec
        keys = n_dec * (isl + st) - self._sum_fn          # Σ over decode tokens of isl + (tokens sampled)
        kv_alloc = int(((isl + st - gf + page - 1) // page * page) @ gn) if n_dec else 0
        budget = max(self.token_budget - n_dec, 0)
        if len(self.pf_done) == 0:  # no prompt in progress (the usual case): plain integer arithmetic
            n_new = self._admit(budget, now)
            full, last = n_new, 0
            if n_new and self.chunked and budget < n_new * isl:
                full, last = n_new - 1, budget - (n_new - 1) * isl
            a0 = self.admitted
            if n_new:
                self._admit_log.append((self.steps, self.admitted, n_new))
                self.reserved += n_new * self.reserve
                self.admitted += n_new
            pages_isl = -(-isl // page) * page
            row = (n_dec, keys, full * isl + last, n_new, full * isl * (isl + 1) // 2 + last * (last + 1) // 2, 0,
                   n_dec + full, 0, n_dec + n_new, keys + full * isl + last,
                   kv_alloc + full * pages_isl + (-(-last // page) * page))
            first_ids = np.arange(a0, a0 + full, dtype=np.int64)
            if last:
                self.pf_done, self.pf_ids = np.array([last], np.int64), np.array([a0 + full], np.int64)
            return self._close(row, first_ids)
        done, ids = self.pf_done, self.pf_ids
        need = isl - done
        alloc = np.clip(budget - (np.cumsum(need) - need), 0, need)
        if not self.chunked:
            alloc = np.where(alloc == need, alloc, 0)
        left = budget - int(alloc.sum())
        n_new = self._admit(left, now)
        if n_new:
            new = np.full(n_new, isl, np.int64)
            if self.chunked and left < n_new * isl:
                new[-1] = left - (n_new - 1) * isl
            done = np.concatenate([done, np.zeros(n_new, np.int64)])
            ids = np.concatenate([ids, np.arange(self.admitted, self.admitted + n_new, dtype=np.int64)])
            alloc = np.concatenate([alloc, new])
            self._admit_log.append((self.steps, self.admitted, n_new))
            self.reserved += n_new * self.reserve
            self.admitted += n_new
        chunk = alloc > 0
        p, q = done[chunk], alloc[chunk]
        new_done = done + alloc
        first = new_done == isl
        n_first = int(first.sum())
        row = (n_dec, keys, int(q.sum()), len(q), int((q * p + q * (q + 1) // 2).sum()), int(p.sum()), n_dec + n_first, 0,
               n_dec + len(new_done), keys + int(new_done.sum()), kv_alloc + int(((new_done + page - 1) // page * page).sum()))
        self.pf_done, self.pf_ids = new_done[~first], ids[~first]
        return self._close(row, ids[first])

    def _close(self, row: tuple, first_ids: np.ndarray) -> tuple[int, ...]:
        """End the step: retire the decode groups that sampled their last token, start a group with the
        requests that sampled their first, log both; ``row[7]`` (completed) is filled in here."""
        st, osl = self.steps, self.osl
        h = self._gh
        gf, gn = self._gf[h:self._gt], self._gn[h:self._gt]
        k = int(np.searchsorted(gf, st - osl + 1, side="right")) if self.n_dec else 0  # f + osl − 1 ≤ st
        n_done = int(gn[:k].sum()) if k else 0
        fin_ids = self._gids[h:h + k]
        if k:
            self.n_dec -= n_done
            self._sum_fn -= int(gf[:k] @ gn[:k])
            self._gh = h + k
        if len(first_ids):
            self._first.append((st, first_ids))
            if osl == 1:
                fin_ids = fin_ids + [first_ids]
                n_done += len(first_ids)
            else:
                self._push(st, first_ids)
        if n_done:
            self._last.append((st, np.concatenate(fin_ids)))
        self.reserved -= n_done * self.reserve
        self.steps += 1
        return row[:7] + (n_done,) + row[8:]

    def _push(self, f: int, ids: np.ndarray) -> None:
        """Append a decode group of first step ``f`` (compacting the ring when its head has moved on)."""
        h, t = self._gh, self._gt
        if t == len(self._gf):
            live = t - h
            cap = max(64, 2 * live + 1)
            gf, gn = np.zeros(cap, np.int64), np.zeros(cap, np.int64)
            gf[:live], gn[:live] = self._gf[h:t], self._gn[h:t]
            self._gf, self._gn, self._gids = gf, gn, self._gids[h:t]
            self._gh, self._gt = h, t = 0, live
        self._gf[t], self._gn[t] = f, len(ids)
        self._gids.append(ids)
        self._gt = t + 1
        self.n_dec += len(ids)
        self._sum_fn += f * len(ids)

    def run(self, steps: int, now: float = 0.0) -> StepBatch:
        """Schedule up to ``steps`` more steps at time ``now`` (fewer when nothing is left to run)."""
        rows = []
        for _ in range(int(steps)):
            if self.finished or self.idle(now):
                break
            rows.append(self.step(now))
        return StepBatch.from_rows(rows)

    # ---- per-request log ------------------------------------------------------------------------
    def request_log(self) -> dict[str, np.ndarray]:
        """Per admitted request (index = admission order): ``arrival_s`` (0 offline), ``admit_step``,
        ``first_step`` and ``last_step`` (the batcher's step indices of its admission and of its first
        and last token; −1 if not yet)."""
        n = self.admitted
        first = np.full(n, -1, np.int64)
        last = np.full(n, -1, np.int64)
        admit = np.full(n, -1, np.int64)
        for s, ids in self._first:
            first[ids] = s
        for s, ids in self._last:
            last[ids] = s
        for s, a0, k in self._admit_log:
            admit[a0:a0 + k] = s
        arr = self.arrivals[:n] if self.arrivals is not None else np.zeros(n)
        return {"arrival_s": arr, "admit_step": admit, "first_step": first, "last_step": last}


def percentiles(x: np.ndarray) -> dict[str, float | None]:
    """``{"p50", "p99", "mean"}`` of ``x`` (None when empty)."""
    x = np.asarray(x, np.float64)
    if len(x) == 0:
        return {"p50": None, "p99": None, "mean": None}
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99)), "mean": float(x.mean())}


def latency(arrival_s: np.ndarray, first_s: np.ndarray, last_s: np.ndarray, osl: int, t0: float = 0.0) -> dict:
    """TTFT and TPOT of requests from their arrival, first-token and last-token times (s; NaN = not seen).

    TTFT = first − max(arrival, t0); TPOT = (last − first) / (osl − 1) (requests with ``osl > 1``).
    Requests whose first token is before ``t0`` or not seen are left out.

    Returns:
        ``{"ttft_s": {p50, p99, mean}, "tpot_s": {...}, "requests": n}``.
    """
    arrival = np.maximum(np.asarray(arrival_s, np.float64), t0)
    first, last = np.asarray(first_s, np.float64), np.asarray(last_s, np.float64)
    sel = np.isfinite(first) & (first >= t0)
    ttft = (first - arrival)[sel]
    ok = sel & np.isfinite(last) & (osl > 1)
    tpot = ((last - first) / max(osl - 1, 1))[ok]
    return {"ttft_s": percentiles(ttft), "tpot_s": percentiles(tpot), "requests": int(sel.sum())}
