"""What the scheduler hands the timing model: per-step aggregates of a block of steps (``StepBatch``),
and where each request's output tokens land among the steps (``token_steps``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass
class StepBatch:
    """Per-step aggregates of a block of steps (every field an int64 array of length ``steps``).

    decode_tokens: rows decoded: ``1 + k`` per decoding request with ``k`` draft tokens to verify
        (speculative decoding / MTP), one without.
    decode_keys: Σ over decode rows of the keys each attends to (its KV history + itself).
    prefill_tokens: prompt tokens in this step's chunks.
    prefill_chunks: number of prompt chunks.
    prefill_pairs: Σ over chunks of causal (query, key) pairs ``q·p + q(q+1)/2`` (chunk of ``q``
        tokens after ``p`` tokens of history).
    prefill_history: Σ over chunks of ``p`` (KV tokens read back from HBM).
    head_tokens: rows through the LM head: every decode row and each prompt finished this step.
    completed: requests that produced their last token in this step.
    batch: requests taking part in the step.
    kv_tokens: tokens held in the KV cache during the step (after its writes).
    kv_alloc_tokens: KV tokens allocated (whole pages).
    emitted_tokens: output tokens the step emits (a decoding request emits 1 + its accepted drafts,
        a finished prompt its first token); default ``head_tokens`` (no speculation).
    accepted_tokens: draft tokens accepted (emitted beyond one per decoding request); default 0.
    draft_rows: draft tokens proposed (``k`` per decoding request); default 0.
    draft_passes: sequential passes of the draft network (``k`` when any request decodes); default 0.
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
    emitted_tokens: np.ndarray | None = None
    accepted_tokens: np.ndarray | None = None
    draft_rows: np.ndarray | None = None
    draft_passes: np.ndarray | None = None

    def __post_init__(self):
        if self.emitted_tokens is None:
            self.emitted_tokens = np.asarray(self.head_tokens, np.int64).copy()
        for name in ("accepted_tokens", "draft_rows", "draft_passes"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(len(self.decode_tokens), np.int64))

    def __len__(self) -> int:
        return len(self.decode_tokens)

    @property
    def tokens(self) -> np.ndarray:
        """Tokens through the decoder layers (decode rows + prefill)."""
        return self.decode_tokens + self.prefill_tokens

    def take(self, n: int) -> "StepBatch":
        """The first ``n`` steps."""
        return StepBatch(**{f.name: getattr(self, f.name)[:n] for f in fields(self)})

    def select(self, idx: np.ndarray) -> "StepBatch":
        """The steps at indices ``idx``."""
        return StepBatch(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @staticmethod
    def from_rows(rows: list[tuple]) -> "StepBatch":
        """From scheduler rows (``ROW`` ints each; 11-int rows of the first scheduler are accepted)."""
        width = max((len(r) for r in rows), default=ROW)
        arr = np.zeros((len(rows), ROW), np.int64)
        if rows:
            arr[:, :width] = np.array(rows, dtype=np.int64).reshape(len(rows), width)
            if width < ROW:
                arr[:, 11] = arr[:, 6]
        return StepBatch(*(arr[:, i].copy() for i in range(ROW)))

    @staticmethod
    def empty(n: int = 1) -> "StepBatch":
        return StepBatch(*([np.zeros(n, np.int64)] * ROW))

    @staticmethod
    def concat(parts: list["StepBatch"]) -> "StepBatch":
        return StepBatch(
            **{
                f.name: np.concatenate([getattr(p, f.name) for p in parts]) if parts else np.zeros(0, np.int64)
                for f in fields(StepBatch)
            }
        )


#: ints per scheduler row (one per ``StepBatch`` field, in order)
ROW = len(fields(StepBatch))


def token_steps(
    first: np.ndarray, last: np.ndarray, per_step: np.ndarray, osl: int, steps_done: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every emitted output token of every request: ``(owner, step)``, both int64, in request then time order.

    A request whose first token is sampled at (local) step ``f`` and last at ``l`` (−1: not yet)
    emits 1 token at ``f``, ``per_step[s]`` tokens at each step ``f < s < l``, and the rest of its
    ``osl`` at ``l``; an unfinished request emits through step ``steps_done − 1``. ``per_step``:
    (steps_done,) tokens a decoding request emits at each step (1 without speculative decoding).
    Requests with ``f < 0`` emitted nothing.
    """
    first, last = np.asarray(first, np.int64), np.asarray(last, np.int64)
    A = np.asarray(per_step, np.int64)
    started = first >= 0
    end = np.where(last >= 0, last, steps_done - 1)
    n = np.where(started, end - first + 1, 0)
    owner = np.repeat(np.arange(len(first)), n)
    step = np.repeat(first, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    count = np.where(step == np.repeat(first, n), 1, A[np.clip(step, 0, max(len(A) - 1, 0))] if len(A) else 1)
    done = np.repeat(last >= 0, n) & (step == np.repeat(end, n)) & (step != np.repeat(first, n))
    if done.any():  # the last step emits what is left of osl
        prior = np.cumsum(count) - count  # tokens before each entry, all requests
        s0 = np.minimum(np.cumsum(n) - n, len(prior) - 1)  # each request's first entry
        before = prior - np.repeat(prior[s0], n)  # tokens of the same request before the entry
        count = np.where(done, osl - before, count)
    count = np.maximum(count, 0)
    return np.repeat(owner, count), np.repeat(step, count)


__all__ = ["ROW", "StepBatch", "token_steps"]
