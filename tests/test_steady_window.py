"""``serving.steady_window``: a projection's steady figures are the server at full load — the plateau of
its largest batch while prompts are still admitted — not the middle half of the run, which on an offline
benchmark of 3,000 requests still held the ramp (a hand audit: steady output 4,660 tokens/s against the
plateau's 5,731; the run measured 5,725.6)."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.emulator.project import project
from perfonto.emulator.serving import steady_window

DEFAULT = dict(model="llama3-70b", chips=8, isl=2048, osl=128)  # perfonto run's and project's defaults


def test_the_claim_presets_chunked_plateau_is_found():
    """Chunked prefill keeps the batch between 121 and 126 (not one value): the plateau is the batch within
    ``FULL_LOAD`` of its largest, so Sohu's claim preset reads its steady state (it read its whole run, ramp
    and drain included, 468k tokens/s, at a 98 % threshold)."""
    f = project("sohu", preset="claim", **DEFAULT).figures
    assert f.steady_tokens_per_second > 1.1 * f.tokens_per_second


def test_steady_figures_do_not_depend_on_the_request_count():
    few = project("sohu", **DEFAULT).figures  # 3,000 requests: the ramp takes ~40 % of the benchmark
    many = project("sohu", num_requests=20_000, **DEFAULT).figures  # the ramp a small part
    assert few.steady_output_tokens_per_second == pytest.approx(many.steady_output_tokens_per_second, rel=2e-3)
    assert few.steady_tokens_per_second == pytest.approx(many.steady_tokens_per_second, rel=2e-3)


def test_the_window_is_the_full_batch_while_prompts_are_admitted():
    sv = project("sohu", **DEFAULT).served
    b, ends = sv.batch, np.cumsum(sv.seconds + sv.idle_s)
    w = np.flatnonzero(steady_window(ends, b.batch, b.prefill_tokens))
    assert (b.batch[w] >= 0.95 * b.batch.max()).all()  # no ramp step
    assert b.prefill_tokens[w[-1]] > 0 and b.prefill_tokens[w[-1] + 1 :].max() == 0  # ends where the drain begins
    assert np.all(np.diff(w) == 1)  # one stretch of steps
    # by hand: output tokens/s over the window = emitted tokens × ranks (TP8: the 8 chips are one rank) / seconds
    out = b.emitted_tokens[w].sum() * 1 / (sv.seconds + sv.idle_s)[w].sum()
    assert out == pytest.approx(project("sohu", **DEFAULT).figures.steady_output_tokens_per_second, rel=1e-9)


def test_without_a_plateau_the_middle_half_online_and_the_whole_run_offline():
    ends = np.arange(1.0, 101.0)
    flat = np.full(100, 7)
    rising = np.arange(100)  # full load only at the very end: no plateau a tenth of the run long
    middle = (ends > 25) & (ends <= 75)
    assert (steady_window(ends) == middle).all()
    idle_online = np.r_[np.zeros(99), 0.5]  # idle time between arrivals: an online run
    assert (steady_window(ends, rising, np.ones(100), idle_online) == middle).all()
    assert steady_window(ends, rising, np.ones(100), np.zeros(100)).all()  # offline, one wave: no steady state
    assert steady_window(ends, flat, np.ones(100)).all()  # a closed loop at its concurrency: all of it
    dip = np.r_[np.full(30, 7), np.full(5, 3), np.full(65, 7)]  # the longest stretch at full load, not first-to-last
    w = np.flatnonzero(steady_window(ends, dip, np.ones(100)))
    assert (w[0], w[-1]) == (35, 99)


def test_an_offline_run_of_one_wave_reads_its_benchmark_figures_as_steady():
    """200 requests fit one batch: no plateau; the middle half was the wave's prefill (966 output tok/s
    against the benchmark's 4,618, a design review); it is now the whole run."""
    f = project("sohu", num_requests=200, **DEFAULT).figures
    assert f.steady_output_tokens_per_second == pytest.approx(f.output_tokens_per_second, rel=1e-9)
