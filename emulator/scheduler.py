"""Continuous batching (iteration-level scheduling, as in Orca, vLLM, Sarathi-Serve and TensorRT-LLM's
in-flight batching; simulated step by step as in Vidur).

Scenarios:

- offline: every request is queued at t = 0 (``num_requests``, or an unbounded queue), as in
  maximum-throughput benchmarks (``trtllm-bench throughput``);
- online: requests arrive at given times (``arrivals``, e.g. a Poisson process, ``poisson_arrivals``);
  a step admits only the requests that have arrived by its start;
- closed loop (``concurrency`` N): N clients each send a request, and a new one as soon as their
  previous one completes (vLLM bench ``--max-concurrency``, GenAI-Perf ``--concurrency``): request
  ``i ≥ N`` arrives when the ``(i − N + 1)``-th request completes, at the end of that step, so the
  schedule does not depend on the step times (arrivals are logged as steps, ``request_log``).

Every request has ``isl`` prompt and ``osl`` output tokens. Each step (one forward pass):

1. every running request whose prompt is done decodes: one token, or with speculative decoding
   (``draft_tokens`` k > 0, MTP or a draft model) it verifies k draft tokens in ``1 + k`` rows and
   emits ``1 + j`` tokens, ``j`` the drafts accepted (Leviathan et al., ICML 2023: with a per-draft
   acceptance rate α, ``E[1 + j] = (1 − α^(k+1)) / (1 − α)``). ``j`` is drawn once per step from the
   seed (``j = i`` with probability ``α^i (1 − α)`` for ``i < k``, ``α^k`` for ``k``) and shared by
   the step's decoding requests — exact for one request in flight, the right mean for many;
2. the rest of the token budget goes to prompts, first to partly prefilled ones (in admission order),
   then to newly admitted requests. With ``chunked_prefill`` a prompt may be split over steps
   (Sarathi-Serve); without it a prompt runs whole in one step and is admitted only when all of it
   fits in the budget left (TensorRT-LLM's default). Admission stops at ``max_batch`` running
   requests or when the KV cache cannot hold another request's peak KV (``isl + osl − 1 + k``
   tokens, rounded up to pages; reserved at admission, so no request is ever preempted:
   TensorRT-LLM's ``GUARANTEED_NO_EVICT``).

A request's first output token is sampled by the step that finishes its prompt; every later step
emits one more (or ``1 + j``); it completes with its ``osl``-th token (a last step emits only what is
left) and frees its KV cache at the step's end. The batcher logs, per request, its arrival and the
steps of its first and last token, and the tokens a decoding request emits at each step
(``request_log``), from which ``latency`` computes TTFT, TPOT and ITL once steps have times.
"""

from __future__ import annotations

import numpy as np

from .latency import latency, percentiles
from .steps import ROW, StepBatch, token_steps
from perfonto.ontology.errors import PerfontoError


#: The most draft tokens a request verifies per step (MTP drafts 1–3, EAGLE up to about 8 in the engines'
#: defaults; 1000 drafts on a 128-token output projected the claim preset slower than the conservative one).
MAX_DRAFT_TOKENS = 16


class SchedulerError(PerfontoError, ValueError):
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
        concurrency: closed loop with this many requests in flight (``num_requests`` in all, None:
            without end); exclusive with ``arrivals``.
        draft_tokens: speculative decoding, draft tokens verified per decoding request and step (0: off).
        acceptance: probability that each draft token is accepted (given the previous ones were).
        seed: seeds the draws of accepted drafts.

    Raises:
        SchedulerError: a request's peak KV cache does not fit, a prompt can never fit the budget
            without chunking, or a parameter is out of range.
    """

    def __init__(
        self,
        *,
        isl: int,
        osl: int,
        token_budget: int,
        max_batch: int,
        kv_capacity_tokens: int,
        num_requests: int | None = None,
        page_tokens: int = 16,
        chunked_prefill: bool = True,
        arrivals: np.ndarray | None = None,
        concurrency: int | None = None,
        draft_tokens: int = 0,
        acceptance: float = 0.0,
        seed: int = 0,
    ):
        for name, v in (
            ("isl", isl),
            ("osl", osl),
            ("token_budget", token_budget),
            ("max_batch", max_batch),
            ("page_tokens", page_tokens),
        ):
            if int(v) < 1:
                raise SchedulerError(f"{name} must be ≥ 1 (got {v})")
        if concurrency is not None and (int(concurrency) < 1 or arrivals is not None):
            raise SchedulerError(f"concurrency must be ≥ 1 and excludes arrival times (got {concurrency})")
        if not 0 <= int(draft_tokens) <= MAX_DRAFT_TOKENS or not 0.0 <= float(acceptance) <= 1.0:
            raise SchedulerError(
                f"draft tokens must be 0 … {MAX_DRAFT_TOKENS} and the acceptance rate in [0, 1] "
                f"(got {draft_tokens}, {acceptance})"
            )
        self.k, self.alpha = int(draft_tokens), float(acceptance)
        self.concurrency = None if concurrency is None else int(concurrency)
        self._rng = np.random.default_rng([int(seed), 0xD4AF7])
        if self.k and self.k + 1 > int(token_budget):
            raise SchedulerError(
                f"{self.k} draft tokens need {self.k + 1} rows per decoding request, more than the "
                f"{token_budget}-token step"
            )
        self.isl, self.osl = int(isl), int(osl)
        self.token_budget, self.max_batch = int(token_budget), int(max_batch)
        self.page = int(page_tokens)
        self.chunked = bool(chunked_prefill)
        if not self.chunked and self.isl > self.token_budget:
            raise SchedulerError(
                f"a {self.isl}-token prompt never fits a {self.token_budget}-token step without "
                f"chunked prefill; raise the token budget or enable chunking"
            )
        self.reserve = -(-(self.isl + self.osl - 1 + self.k) // self.page) * self.page
        self.capacity = int(kv_capacity_tokens)
        if self.reserve > self.capacity:
            raise SchedulerError(
                f"one request needs {self.reserve} KV tokens but only {max(self.capacity, 0)} fit beside "
                f"the weights; use more chips, a smaller dtype or shorter isl/osl"
            )
        self.arrivals = None if arrivals is None else np.asarray(arrivals, np.float64)
        self.total = (
            len(self.arrivals) if self.arrivals is not None else (None if num_requests is None else int(num_requests))
        )
        self.admitted = 0
        self.reserved = 0
        self.steps = 0
        # prompts in progress (admission order): tokens prefilled so far, request ids
        self.pf_done = np.zeros(0, np.int64)
        self.pf_ids = np.zeros(0, np.int64)
        # decoding requests, grouped by the step f that sampled their first token (f increasing). With D(s)
        # the tokens a decoding request emits in steps [0, s) (``_D``; D(s) = s without speculation), a
        # request of group f has emitted 1 + D(s) − D(f + 1) tokens before step s (``_gD`` holds D(f + 1)),
        # so every per-request sum is a sum over groups
        self._gf = np.zeros(64, np.int64)
        self._gn = np.zeros(64, np.int64)
        self._gD = np.zeros(64, np.int64)
        self._gids: list[np.ndarray] = []
        self._gh = self._gt = 0
        self.n_dec = 0
        self._sum_gD = 0  # Σ n·D(f + 1) over the groups
        self._D = 0
        self._per_step: list[int] = []  # tokens a decoding request emits at each step
        self._arrive_log: list[tuple[int, int]] = []  # closed loop: (step, arrivals at its end)
        self._first: list[tuple[int, np.ndarray]] = []
        self._last: list[tuple[int, np.ndarray]] = []
        self._admit_log: list[tuple[int, int, int]] = []  # (step, first request id, count)

    @property
    def running(self) -> int:
        """Requests admitted and not finished."""
        return self.n_dec + len(self.pf_done)

    # ---- queue ----------------------------------------------------------------------------------
    def arrived(self, now: float) -> int:
        """Requests that have arrived by ``now`` (s; closed loop: by the start of the next step)."""
        if self.concurrency is not None:
            n = self.concurrency + self.completed
            return n if self.total is None else min(n, self.total)
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
        n = min(
            self.max_batch - self.running,
            (self.capacity - self.reserved) // self.reserve,
            per,
            self.arrived(now) - self.admitted,
        )
        return max(n, 0)

    # ---- one step -------------------------------------------------------------------------------
    def _draw(self) -> int:
        """Tokens a decoding request emits this step: 1 + the drafts accepted (see the module docstring)."""
        if self.k == 0:
            return 1
        j = 0
        while j < self.k and self._rng.random() < self.alpha:
            j += 1
        return 1 + j

    def step(self, now: float = 0.0) -> tuple[int, ...]:
        """Schedule one step starting at ``now`` (s); returns the ``StepBatch`` row (``steps.ROW`` ints)."""
        isl, page, k = self.isl, self.page, self.k
        h, t = self._gh, self._gt
        gn, gD = self._gn[h:t], self._gD[h:t]
        n_dec = self.n_dec
        A = self._draw() if n_dec else 1
        self._A = A
        e_sum = n_dec * (1 + self._D) - self._sum_gD  # Σ tokens emitted before this step
        rows = n_dec * (k + 1)
        keys = (k + 1) * (n_dec * isl + e_sum) + n_dec * k * (k + 1) // 2  # Σ over rows of keys attended
        kv_dec = n_dec * isl + e_sum + n_dec * (A - 1)
        kv_alloc = int(((isl + 1 + self._D - gD + k + page - 1) // page * page) @ gn) if n_dec else 0
        spec = (0, 0, n_dec * k, k if n_dec else 0)  # emitted, accepted (filled in by _close), draft rows, passes
        budget = max(self.token_budget - rows, 0)
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
            row = (
                rows,
                keys,
                full * isl + last,
                n_new,
                full * isl * (isl + 1) // 2 + last * (last + 1) // 2,
                0,
                rows + full,
                0,
                n_dec + n_new,
                kv_dec + full * isl + last,
                kv_alloc + full * pages_isl + (-(-last // page) * page),
            ) + spec
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
        row = (
            rows,
            keys,
            int(q.sum()),
            len(q),
            int((q * p + q * (q + 1) // 2).sum()),
            int(p.sum()),
            rows + n_first,
            0,
            n_dec + len(new_done),
            kv_dec + int(new_done.sum()),
            kv_alloc + int(((new_done + page - 1) // page * page).sum()),
        ) + spec
        self.pf_done, self.pf_ids = new_done[~first], ids[~first]
        return self._close(row, ids[first])

    def _close(self, row: tuple, first_ids: np.ndarray) -> tuple[int, ...]:
        """End the step: retire the decode groups that emitted their last token, start a group with the
        requests that sampled their first, log both; fills in the completed, emitted and accepted
        counts of ``row``."""
        st, osl, A = self.steps, self.osl, self._A
        h = self._gh
        gn, gD = self._gn[h : self._gt], self._gD[h : self._gt]
        n_dec = self.n_dec
        D_next = self._D + A  # D(st + 1)
        # a group is done when 1 + D(st + 1) − D(f + 1) ≥ osl; groups are in order of D(f + 1)
        kd = int(np.searchsorted(gD, 1 + D_next - osl, side="right")) if n_dec else 0
        n_done = int(gn[:kd].sum()) if kd else 0
        emitted = n_dec * A
        if kd:  # the last step of a request emits only what is left of its osl
            left = osl - (1 + self._D - gD[:kd])
            emitted -= int(((A - left) * gn[:kd]).sum())
        accepted = emitted - n_dec
        fin_ids = self._gids[h : h + kd]
        if kd:
            self.n_dec -= n_done
            self._sum_gD -= int(gD[:kd] @ gn[:kd])
            self._gh = h + kd
        self._D = D_next
        self._per_step.append(A)
        if len(first_ids):
            self._first.append((st, first_ids))
            emitted += len(first_ids)
            if osl == 1:
                fin_ids = fin_ids + [first_ids]
                n_done += len(first_ids)
            else:
                self._push(st, first_ids)
        if n_done:
            self._last.append((st, np.concatenate(fin_ids)))
            if self.concurrency is not None:
                self._arrive_log.append((st, n_done))
        self.reserved -= n_done * self.reserve
        self.steps += 1
        return row[:7] + (n_done,) + row[8:11] + (emitted, accepted) + row[13:]

    def _push(self, f: int, ids: np.ndarray) -> None:
        """Append a decode group of first step ``f`` (compacting the ring when its head has moved on)."""
        h, t = self._gh, self._gt
        if t == len(self._gf):
            live = t - h
            cap = max(64, 2 * live + 1)
            gf, gn, gD = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.int64)
            gf[:live], gn[:live], gD[:live] = self._gf[h:t], self._gn[h:t], self._gD[h:t]
            self._gf, self._gn, self._gD, self._gids = gf, gn, gD, self._gids[h:t]
            self._gh, self._gt = h, t = 0, live
        self._gf[t], self._gn[t], self._gD[t] = f, len(ids), self._D
        self._gids.append(ids)
        self._gt = t + 1
        self.n_dec += len(ids)
        self._sum_gD += self._D * len(ids)

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
        """Per admitted request (index = admission order): ``arrival_s`` (0 offline and for the first
        clients of a closed loop), ``arrival_step`` (closed loop: the step at whose end the request
        arrived, −1 for the first ``concurrency``; −1 otherwise), ``admit_step``, ``first_step`` and
        ``last_step`` (the batcher's step indices of its admission and of its first and last token; −1
        if not yet); and ``per_step``: (steps,) tokens a decoding request emits at each step
        (``steps.token_steps`` spreads each request's tokens over its steps)."""
        n = self.admitted
        first = np.full(n, -1, np.int64)
        last = np.full(n, -1, np.int64)
        admit = np.full(n, -1, np.int64)
        for s, ids in self._first:
            first[ids] = s
        for s, ids in self._last:
            last[ids] = s
        for s, a0, k in self._admit_log:
            admit[a0 : a0 + k] = s
        arr = self.arrivals[:n] if self.arrivals is not None else np.zeros(n)
        arrive = np.full(n, -1, np.int64)
        i = self.concurrency or 0
        for s, cnt in self._arrive_log:
            arrive[i : min(i + cnt, n)] = s
            i += cnt
        return {
            "arrival_s": arr,
            "arrival_step": arrive,
            "admit_step": admit,
            "first_step": first,
            "last_step": last,
            "per_step": np.array(self._per_step, np.int64),
        }


__all__ = [
    "ContinuousBatcher",
    "ROW",
    "SchedulerError",
    "StepBatch",
    "latency",
    "percentiles",
    "poisson_arrivals",
    "token_steps",
]
