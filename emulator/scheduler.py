"""Continuous batching with chunked prefill (iteration-level scheduling, as in Orca, vLLM and
Sarathi-Serve; simulated step by step as in Vidur).

Scenario: offline — every request is queued at t = 0 (unbounded queue, or ``num_requests``), each
with ``isl`` prompt tokens and ``osl`` output tokens. Each step (one forward pass of the whole
tensor-parallel group):

1. every running request whose prompt is done decodes one token;
2. the rest of the token budget goes to prompt chunks, first to partly prefilled requests (in
   admission order), then to newly admitted requests. Admission stops at ``max_batch`` running
   requests or when the KV cache cannot hold another request's peak KV (``isl + osl − 1`` tokens,
   rounded up to pages; reserved at admission, so no request is ever preempted).

A request's first output token is sampled by the step that finishes its prompt; every later step
samples one more; it completes with its ``osl``-th token and frees its KV cache at the step's end.

The scheduler does not depend on time (offline), so it runs ahead of the timing model in blocks.
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

    @staticmethod
    def concat(parts: list["StepBatch"]) -> "StepBatch":
        return StepBatch(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) if parts
                            else np.zeros(0, np.int64) for f in fields(StepBatch)})


class SchedulerError(ValueError):
    """Scenario parameters that cannot be served (bad lengths, KV cache too small)."""


class ContinuousBatcher:
    """Offline continuous batching with chunked prefill.

    Args:
        isl, osl: prompt and output tokens per request (≥ 1).
        token_budget: tokens per step (decode tokens + prompt chunk tokens).
        max_batch: most requests running at once.
        kv_capacity_tokens: KV-cache tokens that fit in HBM beside the weights (per TP group).
        num_requests: requests queued at t = 0 (None: unbounded, the server never runs dry).
        page_tokens: KV page size in tokens.

    Raises:
        SchedulerError: a request's peak KV cache does not fit, or a parameter is < 1.
    """

    def __init__(self, *, isl: int, osl: int, token_budget: int, max_batch: int, kv_capacity_tokens: int,
                 num_requests: int | None = None, page_tokens: int = 16):
        for name, v in (("isl", isl), ("osl", osl), ("token_budget", token_budget), ("max_batch", max_batch),
                        ("page_tokens", page_tokens)):
            if int(v) < 1:
                raise SchedulerError(f"{name} must be ≥ 1 (got {v})")
        self.isl, self.osl = int(isl), int(osl)
        self.token_budget, self.max_batch = int(token_budget), int(max_batch)
        self.page = int(page_tokens)
        self.reserve = -(-(self.isl + self.osl - 1) // self.page) * self.page
        self.capacity = int(kv_capacity_tokens)
        if self.reserve > self.capacity:
            raise SchedulerError(f"one request needs {self.reserve} KV tokens but only {self.capacity} fit beside the "
                                 f"weights; use more chips or shorter isl/osl")
        self.remaining = None if num_requests is None else int(num_requests)
        self.done = np.zeros(0, np.int64)  # prompt tokens prefilled, per running request
        self.gen = np.zeros(0, np.int64)   # output tokens sampled, per running request
        self.reserved = 0

    @property
    def finished(self) -> bool:
        """No running request and none left in the queue."""
        return len(self.done) == 0 and self.remaining == 0

    def _admit(self, tokens_left: int) -> int:
        if tokens_left <= 0:
            return 0
        n = min(self.max_batch - len(self.done), (self.capacity - self.reserved) // self.reserve,
                -(-tokens_left // self.isl))
        if self.remaining is not None:
            n = min(n, self.remaining)
            self.remaining -= max(n, 0)
        return max(n, 0)

    def _step(self) -> tuple[int, ...]:
        isl, osl = self.isl, self.osl
        done, gen = self.done, self.gen
        dec = done >= isl
        n_dec = int(dec.sum())
        keys = int((isl + gen[dec]).sum())
        budget = max(self.token_budget - n_dec, 0)
        need = isl - done
        alloc = np.clip(budget - (np.cumsum(need) - need), 0, need)
        left = budget - int(alloc.sum())
        n_new = self._admit(left)
        if n_new:
            new = np.full(n_new, isl, np.int64)
            new[-1] = left - (n_new - 1) * isl if left < n_new * isl else isl
            done = np.concatenate([done, np.zeros(n_new, np.int64)])
            gen = np.concatenate([gen, np.zeros(n_new, np.int64)])
            alloc = np.concatenate([alloc, new])
            dec = np.concatenate([dec, np.zeros(n_new, bool)])
            self.reserved += n_new * self.reserve
        chunk = alloc > 0
        p, q = done[chunk], alloc[chunk]
        pairs = int((q * p + q * (q + 1) // 2).sum())
        history = int(p.sum())
        new_done = done + alloc
        first = chunk & (new_done == isl)
        gen = gen + dec + first
        finished = gen >= osl
        kv = new_done + np.maximum(gen - 1, 0)
        kv_alloc = int((-(-kv // self.page) * self.page).sum())
        n_done = int(finished.sum())
        batch = len(new_done)
        self.done, self.gen = new_done[~finished], gen[~finished]
        self.reserved -= n_done * self.reserve
        return (n_dec, keys, int(q.sum()), len(q), pairs, history, n_dec + int(first.sum()), n_done, batch,
                int(kv.sum()), kv_alloc)

    def run(self, steps: int) -> StepBatch:
        """Schedule up to ``steps`` more steps (fewer when every request has finished)."""
        rows = []
        for _ in range(int(steps)):
            if self.finished:
                break
            rows.append(self._step())
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), 11)
        return StepBatch(*(arr[:, i].copy() for i in range(11)))
