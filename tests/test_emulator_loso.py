"""Leave-one-source-out validation (issue 30): the other cited sources, their TTFT/ITL figures, and the
errors per engine profile and figure kind, with hand-worked numbers."""

from __future__ import annotations

import re

import math
from types import SimpleNamespace

import pytest

from perfonto.emulator import calibration, source_validation
from perfonto.emulator.calibration import design_params
from perfonto.emulator.calibration_rows import PERF_OVERVIEW, Row, load_sources
from perfonto.emulator.source_validation import by_metric, by_profile, figures, leave_source_out


def test_the_other_sources_cite_their_page_and_every_row_names_a_listed_source():
    sources, rows = load_sources()
    trt = {"nvidia-blog-405b-modelopt", "nim-llama-3.3-70b-h100", "trtllm-blog-deepseek-r1-best-perf"}
    trt |= {"gpustack-perf-lab-qwen3-32b-h100-trtllm"}
    vllm = {"vllm-perf-benchmark-build-9515", "gpustack-perf-lab-qwen3-h100"}
    assert set(sources) == trt | vllm
    for k, s in sources.items():
        where = s.get("url", "").startswith("https://") or (
            s.get("repo") and s.get("path") and len(s.get("commit", "")) == 40
        )
        assert where and s["quote"] and s["engine"] and s["profile"] == ("trtllm" if k in trt else "vllm")
    # every measured figure of a source is in its quote, as the page writes it (the vLLM CI rows' output
    # tokens/s are 8 × 128 / the quoted mean latency: tests/test_emulator_vllm_profile.py)
    for r in (r for r in rows if r.source != "vllm-perf-benchmark-build-9515"):
        q = sources[r.source]["quote"]
        for v in (r.value, r.ttft_ms, r.itl_ms):
            if v:  # as a whole number in the quote (66.6 must not pass for 66.61), trailing zeros allowed
                forms = "|".join(re.escape(f) for f in {f"{v:,g}", f"{v:g}", f"{v}"})
                assert re.search(rf"(?<![\d.,])(?:{forms})0*(?![\d,]|\.\d)", q), (r.label, v)
    nim = [r for r in rows if r.source == "nim-llama-3.3-70b-h100"]
    assert len(nim) == 9 and all(r.concurrency > 0 and r.ttft_ms > 0 and r.itl_ms > 0 for r in nim)
    assert PERF_OVERVIEW not in {r.source for r in rows}


def test_a_row_citing_an_unlisted_source_is_refused(tmp_path):
    p = tmp_path / "s.yaml"
    row = "{source: b, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 1, osl: 2, value: 3}"
    p.write_text(f"sources: {{a: {{url: x, profile: trtllm}}}}\nrows:\n  - {row}\n")
    with pytest.raises(ValueError, match="s.yaml:3: row 1: source `b` is not listed under `sources`; listed: a"):
        load_sources(p)


class _Prep:
    """A prepared row whose prediction is ``scale`` × its measurement when mxu_eff_max is 0.5."""

    def __init__(self, row: Row, scale: float):
        self.row, self.scale = row, scale
        self.cfg = SimpleNamespace(a=SimpleNamespace(replace=lambda **kw: kw))

    def predict(self, a: dict) -> float:
        return self.row.value * self.scale * a["mxu_eff_max"] / 0.5


def _row(source: str, model: str = "llama-3.1-8b", value: float = 100.0, isl: int = 128) -> Row:
    return Row(model, "h100", 1, "fp8", isl, 128, value, source=source)


def test_leave_one_source_out_fits_on_the_other_sources_only(monkeypatch):
    seen = {}

    def fake_fit(preps, starts=1, **kw):
        srcs = tuple(sorted({p.row.source for p in preps}))
        seen[srcs] = len(preps)
        # a fit on source a alone finds mxu_eff_max 0.5; on b alone 0.6; on both 0.55
        return {"parameters": {"mxu_eff_max": {("a",): 0.5, ("b",): 0.6}.get(srcs, 0.55)}}

    monkeypatch.setattr(source_validation, "fit", fake_fit)
    preps = [_Prep(_row("a"), 1.0), _Prep(_row("a", isl=256), 1.0), _Prep(_row("b", value=200.0), 1.1)]
    out = leave_source_out(preps, [])
    assert seen == {("b",): 1, ("a",): 2}  # holding a out fits on b's one row; holding b out, on a's two
    # a's rows under b's fit (0.6): 100 × 1.0 × 0.6/0.5 = 120 → +20 % each; geomean 20 %
    assert out["a"]["dense"]["geomean_error"] == pytest.approx(0.2)
    assert out["a"]["fit_sources"] == ["b"] and out["a"]["fit_rows"] == 1
    # b's row under a's fit (0.5): 200 × 1.1 × 0.5/0.5 = 220 → +10 %
    assert out["b"]["figures"][0]["predicted"] == pytest.approx(220.0)
    assert out["b"]["dense"]["geomean_error"] == pytest.approx(0.1)
    assert out["b"]["moe"] is None and out["b"]["ttft"] is None


def test_a_source_alone_is_predicted_with_the_design_values(monkeypatch):
    monkeypatch.setattr(source_validation, "fit", lambda *a, **k: pytest.fail("nothing to fit on"))
    out = leave_source_out([_Prep(_row("a"), 1.0)], [])
    assert out["a"]["parameters"] == design_params() and out["a"]["fit_rows"] == 0


def test_closed_loop_rows_compare_ttft_and_itl(monkeypatch):
    r = Row("llama-3.3-70b", "h100", 2, "fp8", 5000, 500, 50.0, source="n", concurrency=1, ttft_ms=400.0, itl_ms=20.0)
    monkeypatch.setattr(
        source_validation, "replay", lambda row, params: {"value": 55.0, "ttft_ms": 300.0, "itl_ms": 25.0}
    )
    f = {x["metric"]: x for x in figures(r, {})}
    assert f["throughput"]["error"] == pytest.approx(0.1)
    assert f["ttft"]["error"] == pytest.approx(-0.25) and f["itl"]["error"] == pytest.approx(0.25)
    m = by_metric(list(f.values()))
    # TTFT 300 vs 400: |ln 0.75| = 0.28768 → exp − 1 = 1/0.75 − 1 = 0.3333
    assert m["ttft"]["geomean_error"] == pytest.approx(1 / 0.75 - 1)
    assert m["itl"]["geomean_error"] == pytest.approx(0.25)
    assert m["dense"]["n"] == 1 and m["moe"] is None


def test_errors_by_profile_with_sources_left_out_by_hand():
    rows = [{"model": "llama-3.1-8b", "family": "llama-3", "predicted": 110.0, "measured": 100.0}]
    fig = {"row": "x", "model": "llama-3.1-8b", "kind": "dense"}
    loso = {
        PERF_OVERVIEW: {
            "figures": [{**fig, "source": PERF_OVERVIEW, "metric": "throughput", "predicted": 80.0, "measured": 100.0}]
        },
        "n": {
            "figures": [
                {**fig, "source": "n", "metric": "throughput", "predicted": 100.0, "measured": 100.0},
                {**fig, "source": "n", "metric": "ttft", "predicted": 300.0, "measured": 400.0},
                {**fig, "source": "n", "metric": "itl", "predicted": 22.0, "measured": 20.0},
            ]
        },
    }
    others = [{**fig, "source": "n", "metric": "ttft", "predicted": 500.0, "measured": 400.0}]
    out = by_profile({"rows": rows}, None, loso=loso, others=others, source_profile={"n": "trtllm"})
    t = out["trtllm"]["kinds"]
    # dense, sources left out: 80 vs 100 and 100 vs 100 → exp((|ln 0.8| + 0)/2) − 1 = exp(0.11157) − 1 = 0.11803
    assert t["dense"]["leave_one_source_out"]["geomean_error"] == pytest.approx(math.exp(-math.log(0.8) / 2) - 1)
    assert t["dense"]["leave_one_source_out"]["geomean_error"] == pytest.approx(0.11803, abs=1e-5)
    assert t["ttft"]["leave_one_source_out"]["geomean_error"] == pytest.approx(1 / 0.75 - 1)
    assert t["itl"]["leave_one_source_out"]["geomean_error"] == pytest.approx(0.1)
    assert t["ttft"]["shipped_fit_other_sources"]["geomean_error"] == pytest.approx(0.25)
    assert t["ttft"]["in_sample"] is None and t["ttft"]["target"] == 0.25 and t["moe"]["leave_one_source_out"] is None
    assert out["trtllm"]["sources"] == ["n", PERF_OVERVIEW] and "2 cited sources" in out["trtllm"]["loso_note"]


def test_a_closed_loop_replay_at_concurrency_1_obeys_aiperfs_identity():
    """One client, back to back: each request takes TTFT + (osl − 1) × ITL (AIPerf's ITL), so the
    output throughput is osl / (TTFT + (osl − 1) × ITL) — the check the NIM page's own rows pass (500
    tokens in 406.77 ms + 499 × 18.58 ms = 9.68 s: 51.6 tokens/s, the table's 51.67)."""
    r = Row("llama-3.1-8b", "h100", 1, "fp8", 128, 32, 1.0, source="x", concurrency=1, ttft_ms=1.0, itl_ms=1.0)
    f = source_validation.replay(r, design_params())
    assert f["value"] == pytest.approx(32 / ((f["ttft_ms"] + 31 * f["itl_ms"]) / 1e3), rel=1e-6)
    assert 0 < f["itl_ms"] < f["ttft_ms"]  # the first token carries the 128-token prompt


class _Lin:
    """A prepared row predicting 100 × mxu_eff_max / 0.5 output tokens/s against 100 measured."""

    row = Row("llama-3.1-8b", "h100", 1, "fp8", 128, 128, 100.0, source="a")
    cfg = SimpleNamespace(a=SimpleNamespace(replace=lambda **kw: SimpleNamespace(**kw)))

    def predict(self, a, full: bool = True) -> float:
        return 100.0 * a.mxu_eff_max / 0.5


def test_the_prior_pulls_an_underdetermined_constant_toward_its_design_value():
    # without the prior the row alone sets mxu_eff_max: 100 × x / 0.5 = 100 → x = 0.5
    assert calibration.fit([_Lin()], names=["mxu_eff_max"], starts=1)["parameters"]["mxu_eff_max"] == pytest.approx(
        0.5, abs=1e-3
    )
    # with prior 1: minimise ln(2x)² + (u − u0)², u = (x − 0.3)/0.7, u0 = (0.9 − 0.3)/0.7 = 0.857;
    # stationary where ln(2x)/x + (u − u0)/0.7 = 0: at x = 0.5 the slope is (0.2857 − 0.857)/0.7 < 0, so
    # x > 0.5, and x < 0.9 (there ln(2x)/x > 0 and u = u0): the fit lands between the row and the design
    x = calibration.fit([_Lin()], names=["mxu_eff_max"], starts=1, prior=1.0)["parameters"]["mxu_eff_max"]
    assert 0.5 < x < 0.9
    assert math.log(2 * x) / x + ((x - 0.3) / 0.7 - 0.6 / 0.7) / 0.7 == pytest.approx(0.0, abs=2e-3)


@pytest.mark.parametrize(
    "argv,why",
    [
        (["--loso-prior", "-1"], "--loso-prior must be a weight between 0 and 1e+06 (got -1"),
        (["--loso-prior", "1e308"], "--loso-prior must be a weight between 0 and 1e+06 (got 1e+308"),
        (["--loso-prior", "nan"], "--loso-prior must be a weight between 0 and 1e+06 (got nan"),
        (["--sources", "/nonexistent/sources.yaml"], "/nonexistent/sources.yaml"),
    ],
)
def test_bad_arguments_are_refused_before_the_replays(argv, why, capsys, monkeypatch):
    from perfonto.cli import main

    monkeypatch.setattr(calibration, "prepare", lambda *a, **k: pytest.fail("replayed before refusing"))
    assert main(["validate-emulator", *argv]) == 1
    assert why in capsys.readouterr().err
