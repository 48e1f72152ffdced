"""Issue 30, item 3: latency under load — the queue grows and TTFT with it when the offered load
exceeds the capacity, stays bounded below it; a closed loop beyond the batch waits by Little's law;
a chunked prompt is spread over the steps its token budget gives; TTFT/ITL percentiles p50/p90/p99."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfonto.cli import main
from perfonto.emulator.project import project
from perfonto.emulator.serving import Engine, request_times

# Llama-3.1-8B on one Sohu chip with a small engine (batch of 32), so the capacity is the batch's, not a
# burst: offline, 640 requests are 20 batch generations
ENGINE = Engine(max_batch=32, token_budget=2048, chunked_prefill=True)
KW = dict(model="llama-3.1-8b", chips=1, isl=512, osl=64, engine=ENGINE)


def _capacity() -> float:
    """Offline capacity (requests/s) at full load: steady output tokens/s ÷ osl."""
    off = project("sohu", num_requests=640, **KW)
    return off.figures.steady_output_tokens_per_second / 64


def _ttft_by_arrival(pr):
    sv = pr.served
    ends = np.cumsum(sv.seconds + sv.idle_s)
    t = request_times(sv, ends)
    order = np.argsort(t["arrival_s"])
    return t["arrival_s"][order], (t["first_s"] - t["arrival_s"])[order]


def test_above_capacity_the_queue_and_ttft_grow_linearly():
    mu = _capacity()
    lam, n = 2.0 * mu, 400
    pr = project("sohu", num_requests=n, rate=lam, **KW)
    a, ttft = _ttft_by_arrival(pr)
    assert len(a) == n and np.isfinite(ttft).all()
    # FIFO at service rate μ: request i (arriving at a ≈ i/λ) is admitted at ≈ i/μ, so its wait is
    # a·(λ/μ − 1) = a·(λ − μ)/μ: slope (2μ − μ)/μ = 1 s of TTFT per s of arrival time
    late = slice(n // 4, n)
    slope = np.polyfit(a[late], ttft[late], 1)[0]
    assert slope == pytest.approx(1.0, rel=0.2)
    assert ttft[-n // 10 :].mean() > 50 * ttft[: n // 10].mean()
    f = pr.figures.to_json()
    # the last arrival comes at ≈ n/λ; by then μ·n/λ = n/2 requests have been served: ≈ n/2 − 32 (the batch)
    # = 168 still wait
    assert f["queued_max"] == pytest.approx(n / 2 - 32, rel=0.25)
    # the queue is TTFT's bulk: the wait of the last request ≈ (n/λ)·1 s/s, p99 ≈ that
    assert f["ttft_queue_p99_s"] == pytest.approx(n / lam, rel=0.25)
    assert f["ttft_p50_s"] < f["ttft_p90_s"] < f["ttft_p99_s"]
    assert f["itl_p50_s"] <= f["itl_p90_s"] <= f["itl_p99_s"]


def test_below_capacity_ttft_stays_bounded():
    mu = _capacity()
    n = 120
    pr = project("sohu", num_requests=n, rate=0.5 * mu, **KW)
    a, ttft = _ttft_by_arrival(pr)
    # at half the capacity the batch never fills (≈ 0.5·μ·E2E ≈ 16 of 32 in flight): no queue; TTFT is the
    # wait for the next step boundary plus the prompt's step, and does not grow over the run
    assert abs(np.polyfit(a, ttft, 1)[0]) < 0.01
    assert ttft[-n // 4 :].mean() < 2 * ttft[: n // 4].mean()
    f = pr.figures.to_json()
    assert f["queued_max"] == 0 and f["in_flight_max"] <= 32
    # TTFT = queue + prefill per request; the queue part is below one step (a request arriving mid-step)
    assert f["ttft_queue_p99_s"] < f["ttft_prefill_p99_s"] + f["itl_p99_s"]


def test_closed_loop_beyond_the_batch_waits_by_littles_law():
    b = ENGINE.max_batch
    at_batch = project("sohu", concurrency=b, num_requests=10 * b, **KW).figures.to_json()
    twice = project("sohu", concurrency=2 * b, num_requests=20 * b, **KW).figures.to_json()
    # Little's law, N = X·(W + S): the server holds B requests, each for S ≈ (osl − 1)·TPOT, so X = B/S; at
    # N = 2B the wait W = N/X − S = 2S − S = S: half the clients queue a whole request's decode
    s = 63 * twice["tpot_p50_s"]
    assert twice["ttft_queue_p50_s"] == pytest.approx(s, rel=0.2)
    # at N = B nobody waits for a slot: TTFT is the prompt's step (and at most a step to the boundary)
    assert at_batch["ttft_p50_s"] < 0.1 * twice["ttft_p50_s"]


def test_chunked_prefill_spreads_a_long_prompt_over_its_steps():
    eng = Engine(max_batch=4, token_budget=2048, chunked_prefill=True)
    pr = project("sohu", model="llama-3.1-8b", chips=1, isl=8192, osl=4, engine=eng, num_requests=1)
    b, sec = pr.served.batch, pr.served.seconds
    # 8192 prompt tokens at 2048 per step: ⌈8192/2048⌉ = 4 steps of 2048, the 4th samples the first token,
    # then 3 decode steps emit tokens 2–4
    assert b.prefill_tokens.tolist() == [2048, 2048, 2048, 2048, 0, 0, 0]
    assert b.emitted_tokens.tolist() == [0, 0, 0, 1, 1, 1, 1]
    f = pr.figures.to_json()
    assert f["ttft_p50_s"] == pytest.approx(sec[:4].sum(), rel=1e-9)
    assert f["ttft_queue_p50_s"] == 0.0 and f["ttft_prefill_p50_s"] == pytest.approx(sec[:4].sum(), rel=1e-9)
    whole = project(
        "sohu",
        model="llama-3.1-8b",
        chips=1,
        isl=8192,
        osl=4,
        engine=Engine(max_batch=4, token_budget=8192, chunked_prefill=False),
        num_requests=1,
    )
    assert whole.served.batch.prefill_tokens.tolist() == [8192, 0, 0, 0]


def test_project_json_and_table_give_p90(capsys):
    assert main(["project", "--generation", "sohu", "--model", "llama-3.1-8b", "--chips", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for k in ("ttft", "itl", "tpot"):
        assert doc[f"{k}_p50_s"] <= doc[f"{k}_p90_s"] <= doc[f"{k}_p99_s"]
    assert doc["ttft_queue_p50_s"] + doc["ttft_prefill_p50_s"] > 0 and "queued_max" in doc


def test_the_sohu_profile_chunks_a_long_prompt_over_four_steps():
    # the sohu engine profile states chunked prefill in 2048-token steps: ⌈8192/2048⌉ = 4 steps of 2048
    pr = project("sohu", model="llama-3.1-8b", chips=1, isl=8192, osl=2, engine_profile="sohu", num_requests=1)
    assert pr.served.batch.prefill_tokens.tolist() == [2048, 2048, 2048, 2048, 0]
    assert pr.figures.to_json()["ttft_p50_s"] == pytest.approx(pr.served.seconds[:4].sum(), rel=1e-9)


def test_request_counts_are_capped_given_or_derived(tmp_path):
    """10^8 requests were killed for memory: a given count, a concurrency, and the count a rate derives
    from the duration are refused past the caps, before anything is written."""
    import pytest

    from perfonto import emulator
    from perfonto.emulator.knobs import WorkloadError
    from perfonto.emulator.project import project
    from perfonto.emulator.run import MAX_CONCURRENCY, MAX_REQUESTS

    kw = dict(model="llama-3.1-8b", chips=1, isl=128, osl=16)
    with pytest.raises(WorkloadError, match="num_requests must be a whole number between 1 and 1000000"):
        project("h100", num_requests=MAX_REQUESTS + 1, **kw)
    with pytest.raises(WorkloadError, match="concurrency must be a whole number between 1 and 10000"):
        project("h100", concurrency=MAX_CONCURRENCY + 1, **kw)
    out = tmp_path / "r"
    with pytest.raises(WorkloadError, match="needs 150,000,016 requests .* more than 1,000,000"):
        emulator.run("h100", duration_s=1.0, rate=1e8, out_dir=out, **kw)
    assert not out.exists()
