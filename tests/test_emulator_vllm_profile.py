"""Issue 30, item 1: the vLLM engine profile, checked (never fitted) on its own cited rows — vLLM's CI
performance benchmark, latency tests on H200 (emulator/data/calibration_sources.yaml)."""

from __future__ import annotations

import re

import pytest

from perfonto.emulator import calibration, source_validation
from perfonto.emulator.calibration import prepare
from perfonto.emulator.calibration_rows import PERF_OVERVIEW, Row, load_sources
from perfonto.emulator.source_validation import by_profile, fitted_sources, leave_source_out
from perfonto.emulator.engine_profiles import profile

SRC = "vllm-perf-benchmark-build-9515"


def test_vllm_rows_are_the_quoted_mean_latencies_as_output_tokens_per_second():
    sources, rows = load_sources()
    src = sources[SRC]
    assert src["profile"] == "vllm" and src["url"].endswith("/builds/9515")
    quote = src["quote"]
    assert "Input length: 32 tokens" in quote and "Output length: 128 tokens" in quote and "fixed (8)" in quote
    test_of = {"llama-3.3-70b": "latency_llama70B_tp4", "llama-3.1-8b": "latency_llama8B_tp1"}
    test_of["mixtral-8x7b"] = "latency_mixtral8x7B_tp2"
    mine = [r for r in rows if r.source == SRC]
    assert sorted(r.model for r in mine) == sorted(test_of)
    for r in mine:
        m = re.search(re.escape(test_of[r.model]) + r" \| H200 \| ([0-9.]+) \|", quote)
        assert m, r.model
        mean_s = float(m.group(1)) / 1e3
        assert (r.gpu, r.isl, r.osl, r.num_requests, r.concurrency, r.dtype) == ("h200", 32, 128, 8, 0, "bf16")
        assert f"tp{r.tp}" in test_of[r.model].lower()
        # 8 requests × 128 output tokens in the mean end-to-end latency
        assert r.value == pytest.approx(8 * 128 / mean_s, rel=1e-5)


def test_the_vllm_profile_is_checked_never_fitted():
    p = profile("vllm")
    assert p.fitted and p.calibration_file == "emulator/data/calibration_sources.yaml"
    assert p.sources and "builds/9515" in p.sources[0]
    sources, _ = load_sources()
    fit = fitted_sources({k: v["profile"] for k, v in sources.items()})
    assert SRC not in fit and PERF_OVERVIEW in fit
    assert {k for k, v in sources.items() if v["profile"] == "trtllm"} <= fit
    with pytest.raises(ValueError, match="no engine profile: x \\('sglang'\\)"):
        fitted_sources({"x": "sglang"})


def test_leave_source_out_never_fits_on_a_source_outside_fit_only(monkeypatch):
    small = dict(gpu="h200", dtype="bf16", isl=32, osl=128, num_requests=8)
    a = prepare(Row(model="llama-3.1-8b", tp=1, value=1000.0, source="a", **small))
    b = prepare(Row(model="llama-3.1-8b", tp=1, value=1200.0, source="b", **small))
    v = prepare(Row(model="llama-3.1-8b", tp=1, value=1228.671, source=SRC, **small))
    seen = []

    def fake_fit(train, **kw):
        seen.append(sorted({p.row.source for p in train}))
        return {"parameters": calibration.design_params()}

    monkeypatch.setattr(source_validation, "fit", fake_fit)
    out = leave_source_out([a, b, v], [], fit_only={"a", "b"})
    assert seen == [["b"], ["a"], ["a", "b"]]  # sources in order a, b, then the vLLM one: fitted on a and b
    assert out[SRC]["fit_sources"] == ["a", "b"] and out[SRC]["dense"]["n"] == 1
    seen.clear()
    leave_source_out([a, b, v], [])  # without fit_only every other source is fitted on
    assert seen == [["b", SRC], ["a", SRC], ["a", "b"]]


def test_by_profile_reports_the_vllm_rows_without_in_sample_figures():
    cal = [{"model": "llama-3.1-8b", "family": "llama-3", "predicted": 110.0, "measured": 100.0}]
    fig = {"source": SRC, "kind": "dense", "metric": "throughput", "measured": 100.0}
    others = [{**fig, "predicted": 125.0}, {**fig, "kind": "moe", "predicted": 50.0}]
    loso = {SRC: {"figures": [{**fig, "predicted": 80.0}]}}
    lofo = {"llama-3": {"rows": [{"predicted": 120.0, "measured": 100.0}]}}
    out = by_profile({"rows": cal}, lofo, loso=loso, others=others, source_profile={SRC: "vllm"})
    v = out["vllm"]
    assert v["fitted"] is False and v["rows"] == 0 and v["sources"] == [SRC] and "never fitted" in v["loso_note"]
    k = v["kinds"]
    assert k["dense"]["in_sample"] is None and k["dense"]["leave_one_family_out"] is None
    assert k["dense"]["shipped_fit_other_sources"]["geomean_error"] == pytest.approx(0.25)
    assert k["moe"]["shipped_fit_other_sources"]["geomean_error"] == pytest.approx(1.0)  # 50 vs 100: a factor 2
    assert k["dense"]["leave_one_source_out"]["geomean_error"] == pytest.approx(0.25)  # 80 vs 100: 1/0.8 − 1
    # the trtllm profile keeps its calibration rows and leave-one-family-out figures
    assert out["trtllm"]["fitted"] is True and out["trtllm"]["kinds"]["dense"]["in_sample"]["n"] == 1


GPUSTACK = "gpustack-perf-lab-qwen3-h100"
GPUSTACK_TRT = "gpustack-perf-lab-qwen3-32b-h100-trtllm"


def _case(quote: str, model: str, isl: int) -> str:
    """The page's result block of the random case ``isl`` for ``model`` (the vLLM quote holds both pages)."""
    part = quote.split("Qwen3-32B page:")[model == "qwen3-32b"] if "Qwen3-32B page:" in quote else quote
    return part.split(f"# random {({4000: '4K', 2000: '2K', 128: '128'})[isl]} input")[1]


@pytest.mark.parametrize(
    "src,engine,models",
    [(GPUSTACK, (1024, 8192, True), ("qwen3-14b", "qwen3-32b")), (GPUSTACK_TRT, (2048, 8192, True), ("qwen3-32b",))],
)
def test_gpustack_rows_are_the_quoted_figures_of_runs_that_generated_the_stated_lengths(src, engine, models):
    """Each GPUStack row is a random case whose page figures agree with one another: output tokens/s ×
    benchmark duration = generated tokens (the page's rounding), within 1 % of prompts × the stated output
    length (the rule that keeps a row: the replay generates the stated lengths). Every prompt was in flight at
    once: a closed loop of all of them, checked and never fitted; TTFT and TPOT are the page's means."""
    sources, rows = load_sources()
    s = sources[src]
    assert len(s["commit"]) == 40 and s["profile"] == ("vllm" if src == GPUSTACK else "trtllm")
    mine = [r for r in rows if r.source == src]
    assert sorted((r.model, r.isl, r.osl) for r in mine) == sorted(
        (m, i, o) for m in models for i, o in ((4000, 200), (2000, 100), (128, 4))
    )
    lat = s["quote"].split("cases' latencies")[1]
    for r in mine:
        part = _case(s["quote"].split("cases' latencies")[0], r.model, r.isl)
        n = int(re.search(r"Successful requests: (\d+)", part).group(1))
        secs = float(re.search(r"Benchmark duration \(s\): ([0-9.]+)", part).group(1))
        made = int(re.search(r"Total generated tokens: (\d+)", part).group(1))
        rate = float(re.search(r"Output token throughput \(tok/s\): ([0-9.]+)", part).group(1))
        assert (r.value, r.num_requests, r.concurrency, r.gpu, r.tp) == (rate, n, n, "h100", 1)
        assert rate * secs == pytest.approx(made, rel=2e-4)
        assert made == pytest.approx(n * r.osl, rel=0.01)
        figs = _case(lat, r.model, r.isl)
        assert r.ttft_ms == float(re.search(r"Mean TTFT \(ms\): ([0-9.]+)", figs).group(1))
        assert r.itl_ms == float(re.search(r"Mean TPOT \(ms\): ([0-9.]+)", figs).group(1))
        eng = r.scenario()["engine"]
        assert (eng.max_batch, eng.token_budget, eng.chunked_prefill) == engine
    assert {r.dtype for r in mine} == ({"bf16"} if src == GPUSTACK else {"fp8"})


def test_a_row_states_chunked_prefill_only_with_the_sizing_it_chunks_into(tmp_path):
    base = "{source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 1, osl: 2, value: 3"
    p = tmp_path / "s.yaml"
    for bad, why in (
        (", chunked_prefill: true}", "chunked_prefill needs the max_batch and token_budget"),
        (", max_batch: 8, token_budget: 64, chunked_prefill: yes please}", "chunked_prefill is true or false"),
    ):
        p.write_text(f"sources: {{a: {{url: x, profile: trtllm}}}}\nrows:\n  - {base}{bad}\n")
        with pytest.raises(ValueError, match=f"s.yaml:3: row 1: .*{why}"):
            load_sources(p)
    p.write_text(f"sources: {{a: {{url: x, profile: trtllm}}}}\nrows:\n  - {base}, max_batch: 8, token_budget: 64}}\n")
    assert load_sources(p)[1][0].scenario()["engine"].chunked_prefill is False  # trtllm-bench's whole prompts
