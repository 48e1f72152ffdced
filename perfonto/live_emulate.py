"""The emulator as a live source for ``perfonto serve --emulate``.

The emulator (``perfonto.emulator.run``) produces whole runs, not a stream. This source therefore
emulates **in chunks** of ``chunk_s`` simulated seconds (chunk k with seed ``seed + k``, each starting
from a warm server, ``warmup_steps``), one chunk ahead of the wall clock in a background thread, and
**replays each chunk's raw register samples paced by the wall clock**: a sample is pushed once the
wall clock has passed its time since the first sample (chip 0's device clock). So what is served is
real emulator output at the real sampling rate, but:

- chunks are independent runs: their timestamps are shifted to follow on from the previous chunk,
  and each chunk's first sample is a new baseline — the one window that would span two chunks is not
  evaluated (one window per chunk: 0.1 % at 1 s chunks of 1 ms samples);
- memory holds at most two chunks (the one being replayed and the next), so it is bounded by
  ``chunk_s`` × rate × chips × registers.
With ``duration_s`` the source stops after that much simulated (= wall) time; a duration of at most
one chunk is exactly ``emulator.run(..., duration_s)``'s counter dump, sample for sample.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from perfonto import emulator
from perfonto.analysis.follow import read_part
from perfonto.analysis.live import SampleBlock


class EmulatedSource:
    """Chunked, wall-clock-paced emulation (module docstring). ``knobs``: the keyword arguments of
    ``emulator.run`` besides the generation, duration, seed and output folder (model, chips,
    sample_period_s, isl, osl, warmup_steps, slow_chip, throttled_link, router_skew).

    ``start()`` emulates the first chunk before returning, so bad knobs raise ``ValueError`` there
    (with the emulator's message); ``blocks(stop)`` then yields the paced samples. ``tick_s``: the
    shortest wait between two pushes (samples due meanwhile are pushed together). With
    ``realtime=False`` chunks are yielded as soon as they are emulated (benchmarks).
    """

    def __init__(
        self,
        gen,
        *,
        seed: int,
        duration_s: float | None,
        chunk_s: float = 1.0,
        tick_s: float = 0.05,
        realtime: bool = True,
        clock: Callable[[], float] = time.monotonic,
        **knobs,
    ):
        self.gen, self.seed, self.duration_s, self.chunk_s = gen, seed, duration_s, chunk_s
        self.tick_s, self.realtime, self.clock, self.knobs = tick_s, realtime, clock, knobs
        self.period_ns = int(round(knobs["sample_period_s"] * 1e9))
        self._dir = Path(tempfile.mkdtemp(prefix="perfonto-serve-"))
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_ts: np.ndarray | None = None
        self.chunks = 0
        self.error: str | None = None
        self.lag_s: float | None = None
        self.finished = False
        self._last_due_ns = 0

    def _durations(self) -> Iterator[float]:
        if self.duration_s is None:
            while True:
                yield self.chunk_s
        left = self.duration_s
        while left > 0:
            d = min(self.chunk_s, left)
            if d * 1e9 < 2 * self.period_ns and left < self.duration_s:
                return  # a remainder under two samples: no window would fit
            yield d
            left -= d

    def _emulate(self, k: int, d: float) -> SampleBlock:
        out = self._dir / f"chunk-{k}"
        try:
            res = emulator.run(self.gen, duration_s=d, seed=self.seed + k, out_dir=out, **self.knobs)
            block = read_part(res.counters_path, self.gen)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        ts = block.timestamps_ns.copy()
        if self._last_ts is not None:
            ts += (self._last_ts + self.period_ns - ts[0])[None, :]
        block.timestamps_ns = ts
        block.new_baseline = k > 0
        block.source = f"emulator chunk {k} (seed {self.seed + k}, {d:g} s)"
        self._last_ts = ts[-1].copy()
        self.chunks += 1
        return block

    def start(self) -> None:
        """Emulate the first chunk (raises ``ValueError`` for bad knobs), then keep one chunk ahead
        in a background thread."""
        durations = self._durations()
        first = self._emulate(0, next(durations))
        self._queue.put(first)
        self._thread = threading.Thread(target=self._produce, args=(durations,), name="perfonto-emulator", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self, durations) -> None:
        try:
            for k, d in enumerate(durations, start=1):
                if self._stop.is_set() or not self._put(self._emulate(k, d)):
                    return
        except Exception as exc:  # reported through status and /healthz; the server keeps its last values
            self.error = f"emulation failed: {type(exc).__name__}: {exc}"
        self._put(None)

    def blocks(self, stop: threading.Event) -> Iterator[SampleBlock]:
        """Yield the samples as they fall due (module docstring) until the duration is served, the
        emulation fails, or ``stop`` is set."""
        origin = None
        while not stop.is_set():
            try:
                block = self._queue.get(timeout=0.2)
            except queue.Empty:
                if origin is not None and self.realtime:
                    self.lag_s = max(0.0, self.clock() - (origin[1] + (self._last_due_ns - origin[0]) * 1e-9))
                continue
            if block is None:
                break
            if not self.realtime:
                yield block
                continue
            t0 = block.timestamps_ns[:, 0]
            if origin is None:
                origin = (int(t0[0]), self.clock())
            due = origin[1] + (t0 - origin[0]) * 1e-9
            i, S = 0, block.samples
            while i < S and not stop.is_set():
                now = self.clock()
                j = int(np.searchsorted(due, now, side="right"))
                if j > i:
                    self.lag_s = max(0.0, now - float(due[j - 1]))
                    self._last_due_ns = int(t0[j - 1])
                    yield block.slice(i, j)
                    i = j
                    stop.wait(self.tick_s)
                else:
                    stop.wait(max(0.0, float(due[i]) - now))
        self.finished = True

    def close(self) -> None:
        """Stop the background emulation and remove its scratch folder."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)

    def status(self) -> dict:
        """``kind``, ``chunks`` emulated, ``lag_s`` behind the wall clock, ``errors``, ``error`` and
        ``problem``: the emulation falls behind the wall clock (``lag_s`` past ``max(2 s, 2 chunks)``)."""
        late = self.lag_s is not None and not self.finished and self.lag_s > max(2.0, 2 * self.chunk_s)
        return {
            "kind": "emulate",
            "chunks": self.chunks,
            "lag_s": self.lag_s,
            "problem": (
                f"the emulation is {self.lag_s:.1f} s behind the wall clock: it cannot keep up (fewer --chips, "
                "a longer --sample-period or a smaller model)"
                if late
                else None
            ),
            "errors": int(self.error is not None),
            "error": self.error,
            "finished": self.finished,
        }
