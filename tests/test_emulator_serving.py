"""Serving: the scheduler (offline, online, chunked or whole prompts, against a plain reference), engine
sizing, parallel mappings, latency figures, presets and the ``project`` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from perfonto import emulator
from perfonto.emulator.models import get_model
from perfonto.emulator.ops import EmuConfig
from perfonto.emulator.parallel import Mapping, Precision
from perfonto.emulator.scheduler import poisson_arrivals
from perfonto.emulator.steps import token_steps
from perfonto.emulator.serving import trtllm_bench_engine
from perfonto.cli import main

from test_emulator import PAGE, batcher, scheduler_workloads


class _Reference:
    """Per-request arrays, one numpy pass per step: the plain statement of the scheduling rules, with
    ``k`` draft tokens per decoding request (emitting ``A`` tokens at each step, capped at ``osl``) and
    an optional closed loop of ``conc`` requests in flight."""

    def __init__(self, isl, osl, budget, max_batch, cap, n, page, chunked, k=0, conc=None):
        self.isl, self.osl, self.budget, self.max_batch, self.cap, self.total, self.page = (
            isl,
            osl,
            budget,
            max_batch,
            cap,
            n,
            page,
        )
        self.chunked, self.k, self.conc = chunked, k, conc
        self.reserve = -(-(isl + osl - 1 + k) // page) * page
        self.done = np.zeros(0, np.int64)
        self.gen = np.zeros(0, np.int64)
        self.reserved = self.admitted = self.completed = 0

    def step(self, A=1):
        isl, osl, k = self.isl, self.osl, self.k
        done, gen = self.done, self.gen
        dec = done >= isl
        n_dec = int(dec.sum())
        keys = int(((k + 1) * (isl + gen[dec]) + k * (k + 1) // 2).sum())
        budget = max(self.budget - n_dec * (k + 1), 0)
        need = isl - done
        alloc = np.clip(budget - (np.cumsum(need) - need), 0, need)
        if not self.chunked:
            alloc = np.where(alloc == need, alloc, 0)
        left = budget - int(alloc.sum())
        per = -(-left // isl) if self.chunked else left // isl
        arrived = self.total if self.conc is None else min(self.total, self.conc + self.completed)
        n_new = (
            max(
                0,
                min(
                    self.max_batch - len(done), (self.cap - self.reserved) // self.reserve, per, arrived - self.admitted
                ),
            )
            if left > 0
            else 0
        )
        if n_new:
            new = np.full(n_new, isl, np.int64)
            if self.chunked and left < n_new * isl:
                new[-1] = left - (n_new - 1) * isl
            done, gen = (
                np.concatenate([done, np.zeros(n_new, np.int64)]),
                np.concatenate([gen, np.zeros(n_new, np.int64)]),
            )
            alloc, dec = np.concatenate([alloc, new]), np.concatenate([dec, np.zeros(n_new, bool)])
            self.reserved += n_new * self.reserve
            self.admitted += n_new
        chunk = alloc > 0
        p, q = done[chunk], alloc[chunk]
        new_done = done + alloc
        first = chunk & (new_done == isl)
        emit = np.where(dec, np.minimum(A, osl - gen), 0) + first
        kv = np.where(dec, isl + gen + A - 1, new_done)
        alloc_kv = np.where(dec, isl + gen + k, new_done)
        gen_after = gen + emit
        fin = gen_after >= osl
        self.done, self.gen = new_done[~fin], gen_after[~fin]
        self.reserved -= int(fin.sum()) * self.reserve
        self.completed += int(fin.sum())
        emitted = int(emit.sum())
        return (
            n_dec * (k + 1),
            keys,
            int(q.sum()),
            len(q),
            int((q * p + q * (q + 1) // 2).sum()),
            int(p.sum()),
            n_dec * (k + 1) + int(first.sum()),
            int(fin.sum()),
            len(new_done),
            int(kv.sum()),
            int((-(-alloc_kv // self.page) * self.page).sum()),
            emitted,
            emitted - int(first.sum()) - n_dec,
            n_dec * k,
            k if n_dec else 0,
        )


@settings(max_examples=60, deadline=None)
@given(
    **scheduler_workloads(700),
    chunked=st.booleans(),
    k=st.sampled_from([0, 0, 1, 3]),
    alpha=st.floats(0.0, 1.0),
    conc=st.sampled_from([None, None, 1, 5]),
)
@example(isl=1, osl=1, budget=1, max_batch=1, cap_mult=1, n=4, chunked=False, k=0, alpha=0.0, conc=5)  # conc > n
def test_scheduler_matches_the_reference(isl, osl, budget, max_batch, cap_mult, n, chunked, k, alpha, conc):
    budget = max(budget, k + 1)
    if not chunked:
        budget = max(budget, isl)
    s, capacity = batcher(
        isl,
        osl,
        budget,
        max_batch,
        cap_mult,
        n,
        draft_tokens=k,
        chunked_prefill=chunked,
        acceptance=alpha,
        concurrency=conc,
    )
    ref = _Reference(isl, osl, budget, max_batch, capacity, n, PAGE, chunked, k, conc)
    rows = []
    while not s.finished:
        rows.append(s.step())
        assert len(rows) < 100_000
    log = s.request_log()  # built once: per step it rebuilds every request's log (quadratic in the steps)
    for i, row in enumerate(rows):  # the reference replays the steps with the tokens each step emitted
        assert row == ref.step(log["per_step"][i]), i + 1
    b = emulator.StepBatch.from_rows(rows)
    assert b.prefill_tokens.sum() == n * isl and b.emitted_tokens.sum() == n * osl and b.completed.sum() == n
    if not chunked:
        assert (b.prefill_tokens % isl == 0).all() and b.prefill_history.sum() == 0  # whole prompts only
    assert (log["first_step"] >= 0).all()
    if k == 0:
        assert (log["last_step"] - log["first_step"] == osl - 1).all()
    owner, step = token_steps(log["first_step"], log["last_step"], log["per_step"], osl, s.steps)
    assert (np.bincount(owner, minlength=n) == osl).all()  # every request's osl tokens, no more
    assert (np.bincount(step, minlength=len(rows)) == b.emitted_tokens).all()  # at the steps that emitted them
    if conc is not None:  # request i >= conc arrives when the (i - conc + 1)-th request completes
        done_at = np.sort(log["last_step"])  # conc > n: every request arrives at the start, none waits
        assert (log["arrival_step"][conc:] == done_at[: max(n - conc, 0)]).all() and (
            log["arrival_step"][:conc] == -1
        ).all()
        running = np.array([((log["admit_step"] <= t) & (log["last_step"] >= t)).sum() for t in range(len(rows))])
        assert running.max() <= conc


def test_online_admits_only_arrived_requests_and_reports_latency():
    arr = poisson_arrivals(20.0, 200, seed=3)
    assert len(arr) / arr[-1] == pytest.approx(20.0, rel=0.15) and (np.diff(arr) > 0).all()
    r = emulator.project.project("h100", model="llama-3.1-8b", chips=1, isl=256, osl=32, rate=20.0, num_requests=200)
    f = r.figures.to_json()
    assert r.figures.requests == 200
    # under light load a request waits for nothing: TTFT ≈ one prefill step, TPOT ≈ one decode step
    assert 0 < f["ttft_p50_s"] < 0.1 and 0 < f["tpot_p50_s"] < 0.02 and f["ttft_p99_s"] >= f["ttft_p50_s"]
    assert f["output_tokens_per_second"] == pytest.approx(20.0 * 32, rel=0.2)  # the offered load
    sv = r.served
    assert (sv.idle_s > 0).any()  # the server idles between arrivals


def test_trtllm_bench_engine_by_hand():
    from perfonto.ontology import load_generation

    from perfonto.emulator.assumptions import fitted_assumptions
    from perfonto.emulator.hardware import hardware_from_generation

    g, _ = load_generation("h200")
    hw = hardware_from_generation(g)
    cfg = EmuConfig(get_model("llama-3.3-70b"), hw, fitted_assumptions(), Mapping(tp=1), Precision.of("fp8"))
    # 0.9 × (141e9 − 70.55e9) / (163,840 B × 2176) = 177.9 requests → batch 192 (multiple of 32);
    # tokens 177.9 × (1 + 2048/128) = 3024 → 3072 (multiple of 256); whole prompts: ≥ 2048 + 192
    e = trtllm_bench_engine(cfg, 2048, 128)
    assert (e.max_batch, e.token_budget, e.chunked_prefill) == (192, 3072, False)
    e = trtllm_bench_engine(cfg, 128, 128)  # 1512 requests → 1536; tokens 3024 → 3072
    assert (e.max_batch, e.token_budget) == (1536, 3072)


def test_pipeline_and_attention_dp_keep_the_work(tmp_path):
    """The same requests under PP2 × TP2 or with data-parallel attention do the same model work (the
    matrix engine's padding differs with the rows per GEMM)."""
    m = get_model("mixtral-8x7b")
    runs = {}
    for name, mp in {
        "tp4": Mapping(tp=4, ep=4),
        "pp2": Mapping(tp=2, pp=2, ep=2),
        "adp": Mapping(tp=4, ep=4, attn_dp=True),
    }.items():
        runs[name] = emulator.run(
            "h100",
            model=m.name,
            chips=4,
            mapping=mp,
            duration_s=0.5,
            sample_period_s=5e-3,
            isl=64,
            osl=4,
            num_requests=8,
            chunked_prefill=False,
            out_dir=tmp_path / name,
        ).ground_truth
    for g in runs.values():
        assert g["requests_completed"] == 8 and g["output_tokens"] == 32
    assert runs["pp2"]["model_flops"] == pytest.approx(runs["tp4"]["model_flops"], rel=1e-9)
    assert runs["adp"]["model_flops"] == pytest.approx(runs["tp4"]["model_flops"], rel=1e-9)
    assert all(g["flops"] >= g["model_flops"] for g in runs.values())
    assert runs["pp2"]["c2c_bytes_by_collective"]["send_recv"] > 0
    assert (
        runs["adp"]["c2c_bytes_by_collective"]["all_to_all"] > 0
        and runs["adp"]["c2c_bytes_by_collective"]["allreduce"] == 0
    )
    assert (
        runs["tp4"]["c2c_bytes_by_collective"]["all_to_all"] == 0
        and runs["tp4"]["c2c_bytes_by_collective"]["allreduce"] > 0
    )


def test_fp4_weights_without_fp4_math_run_fp8(tmp_path):
    h100 = emulator.run(
        "h100", model="llama-3.1-8b", chips=1, dtype="fp4", duration_s=0.1, sample_period_s=5e-3, out_dir=tmp_path / "a"
    ).ground_truth
    b200 = emulator.run(
        "b200", model="llama-3.1-8b", chips=1, dtype="fp4", duration_s=0.1, sample_period_s=5e-3, out_dir=tmp_path / "b"
    ).ground_truth
    assert h100["flops_fp4"] == 0 and h100["flops_fp8"] > 0
    assert b200["flops_fp4"] > 0 and b200["weight_bytes_per_chip"] < 0.6 * 8.03e9 + 2.2e9


def test_sohu_presets_beside_the_claim(capsys):
    assert (
        main(
            [
                "project",
                "--generation",
                "sohu",
                "--model",
                "llama3-70b",
                "--chips",
                "8",
                "--isl",
                "2048",
                "--osl",
                "128",
                "--dtype",
                "fp8",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    for k in ("output_tokens_per_second", "tokens_per_second", "ttft_p50_s", "tpot_p50_s"):
        assert doc[k] > 0, k
    assert set(doc["presets"]) == {"conservative", "claim"}
    c = doc["claim"]
    assert c["tokens_per_second"] == 500000 and c["scenario_matches"]
    assert c["by_preset"]["claim"]["reaches_claim"] and not c["by_preset"]["conservative"]["reaches_claim"]
    assert c["needs"]["sustained_flops_per_chip"] == pytest.approx(500000 * c["needs"]["flops_per_token"] / 8)
    assert c["assumptions_needed"] and all(doc["presets"][p]["assumptions"] for p in ("claim", "conservative"))
    assert main(["project", "--generation", "sohu", "--chips", "8"]) == 0
    out = capsys.readouterr().out
    assert "Public claim" in out and "What the claim needs" in out and "conservative" in out


def test_project_errors_exit_1_and_usage_errors_2(capsys):
    assert main(["project", "--generation", "h100", "--model", "llama-3.1-405b", "--chips", "1", "--json"]) == 1
    cap = capsys.readouterr()
    assert json.loads(cap.out)["ok"] is False and "410.1 GB per chip" in cap.err and "use more chips" in cap.err
    assert main(["project", "--model", "gpt-17"]) == 2


def test_project_skips_a_preset_beside_the_chosen_one_that_cannot_serve(capsys):
    # a new user's trial: Qwen3-235B under the conservative preset failed as a whole because the claim
    # preset (one whole model per chip) cannot hold its 236 GB of weights on a 144 GB chip
    assert main(["project", "--model", "qwen3-235b-a22b", "--preset", "conservative", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["presets"]) == {"conservative"} and "236.4 GB per chip" in doc["skipped_presets"]["claim"]
    assert doc["tokens_per_second"] > 0
    # the chosen preset itself still fails as a whole
    assert main(["project", "--model", "qwen3-235b-a22b", "--preset", "claim", "--json"]) == 1


def test_project_compares_with_the_claim_only_on_its_scenario(capsys):
    # `project --rate 20` printed the offered load as '0.09 × the claim (falls short of it)' with
    # scenario_matches true, and an HBM need of 995 % of the peak from the low-load bytes per token
    assert main(["project", "--concurrency", "8", "--requests", "32", "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["claim"]
    assert c["scenario_matches"] is False and "by_preset" not in c and "needs" not in c
    assert main(["project", "--concurrency", "8", "--requests", "32"]) == 0
    out = capsys.readouterr().out
    assert "not the claim's" in out and "What the claim needs" not in out and "× the claim" not in out
    # a mapping, KV dtype or engine profile of one's own is another scenario too (--tp 8 forced the claim
    # preset to TP8: 335k tok/s 'compared' with the claim)
    for extra in (["--tp", "8"], ["--kv-dtype", "bf16"], ["--engine-profile", "vllm"]):
        assert main(["project", "--json", *extra]) == 0
        assert json.loads(capsys.readouterr().out)["claim"]["scenario_matches"] is False, extra


def test_tp_that_does_not_split_the_heads_is_refused_with_the_possible_degrees():
    # a bad-input pass: TP3 of Llama-70B (64 heads) projected 21.33 heads a chip, TP1024 0.0625
    from perfonto.emulator.parallel import MappingError

    m = get_model("llama-3.3-70b")
    with pytest.raises(
        MappingError, match=r"64 attention heads \(8 KV heads\) .* tp = 3 chips; possible tp: 1, 2, 4, 8, 16"
    ):
        Mapping(tp=3).check(m)
    with pytest.raises(MappingError, match="tp = 1024"):
        Mapping(tp=1024).check(m)
    Mapping(tp=16).check(m)  # KV heads replicated over 16: as engines run it
    Mapping(tp=8, ep=8, attn_dp=True).check(get_model("qwen3-235b-a22b"))  # attention data-parallel: TP1 attention
    # a layout that does not split: a usage error, as in run
    assert main(["project", "--generation", "h200", "--model", "llama-3.3-70b", "--chips", "3", "--json"]) == 2


def test_draft_tokens_are_bounded():
    from perfonto.emulator.scheduler import MAX_DRAFT_TOKENS

    assert MAX_DRAFT_TOKENS == 16
    assert main(["project", "--draft-tokens", "17"]) == 2
    with pytest.raises(ValueError, match="draft tokens must be 0 … 16"):
        emulator.project.project(
            "h100", model="llama-3.1-8b", chips=1, isl=128, osl=128, draft_tokens=1000, num_requests=4
        )
