"""Issue 30, item 1: serving-engine profiles as data (emulator/data/engine_profiles.yaml), selected with
``--engine-profile``; validate-emulator's errors per profile and model kind."""

from __future__ import annotations

import math

import pytest

from perfonto.cli import main
from perfonto.emulator.assumptions import fitted_assumptions
from perfonto.emulator.source_validation import by_profile
from perfonto.emulator.engine_profiles import EngineProfileError, load_profiles, profile
from perfonto.emulator.project import project

KW = dict(model="llama-3.1-8b", chips=1, isl=1000, osl=1000, num_requests=200)


def test_trtllm_profile_is_todays_calibrated_behaviour():
    base = project("h200", **KW)
    prof = project("h200", engine_profile="trtllm", **KW)
    # the gpu preset already starts from fitted.yaml with link_eff 0.80 and trtllm-bench's sizing: nothing changes
    assert prof.config.a == base.config.a and prof.engine == base.engine
    assert prof.figures.output_tokens_per_second == base.figures.output_tokens_per_second
    assert prof.config.a.mxu_eff_max == fitted_assumptions().mxu_eff_max
    assert profile("trtllm").sources and "perf-overview.md @ 00f37686" in profile("trtllm").sources[0]


def test_sohu_profile_sets_its_stated_kernels_and_scheduler():
    pr = project("sohu", engine_profile="sohu", **KW)
    a = pr.config.a
    assert (a.mxu_eff_max, a.mxu_half_rows, a.kv_read_eff, a.op_overhead_s, a.host_step_s) == (
        0.95,
        16.0,
        0.85,
        0.0,
        5.0e-6,
    )
    e = pr.engine
    assert (e.max_batch, e.token_budget, e.chunked_prefill) == (256, 2048, True)
    assert pr.to_json()["engine_profile"] == "sohu" and profile("sohu").sources == ()


def test_a_malformed_profile_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("profiles:\n  x:\n    kernels: {dense_gemm: {kv_read_eff: 0.5}}\n    scheduler: trtllm-bench\n")
    with pytest.raises(EngineProfileError, match="dense_gemm sets kv_read_eff; it may set mxu_eff_max"):
        load_profiles(str(bad))
    bad.write_text("profiles:\n  x:\n    kernels: {tensor_cores: {}}\n    scheduler: {max_batch: 8}\n")
    with pytest.raises(EngineProfileError, match="unknown op class 'tensor_cores'"):
        load_profiles(str(bad))
    with pytest.raises(EngineProfileError, match="no engine profile 'sglang'; profiles: trtllm, vllm, sohu"):
        profile("sglang")


def test_cli_refuses_an_unknown_profile(capsys):
    rc = main(["project", "--generation", "h200", "--model", "llama-3.1-8b", "--chips", "1", "--engine-profile", "x"])
    assert rc == 1 and "no engine profile 'x'" in capsys.readouterr().err


def test_errors_by_profile_and_kind_by_hand():
    rows = [
        {"model": "llama-3.1-8b", "family": "llama-3", "predicted": 110.0, "measured": 100.0},
        {"model": "llama-3.1-8b", "family": "llama-3", "predicted": 90.0, "measured": 100.0},
        {"model": "qwen3-235b-a22b", "family": "qwen3", "predicted": 150.0, "measured": 100.0},
    ]
    lofo = {
        "llama-3": {"rows": [{"predicted": 120.0, "measured": 100.0}]},
        "qwen3": {"rows": [{"predicted": 50.0, "measured": 100.0}]},
    }
    out = by_profile({"rows": rows}, lofo)
    t = out["trtllm"]["kinds"]
    # dense in sample: exp((ln 1.1 + |ln 0.9|)/2) − 1 = exp((0.09531 + 0.10536)/2) − 1 = exp(0.100335) − 1 = 0.10554
    assert t["dense"]["in_sample"]["geomean_error"] == pytest.approx(math.exp((math.log(1.1) - math.log(0.9)) / 2) - 1)
    assert t["dense"]["in_sample"]["geomean_error"] == pytest.approx(0.10554, abs=1e-5)
    assert t["moe"]["in_sample"]["geomean_error"] == pytest.approx(0.5)  # one row, 150/100
    assert t["dense"]["leave_one_family_out"]["geomean_error"] == pytest.approx(0.2)
    assert t["moe"]["leave_one_family_out"]["geomean_error"] == pytest.approx(1.0)  # 50 vs 100: a factor 2
    # one cited source: nothing to leave out
    assert t["dense"]["leave_one_source_out"] is None and "1 cited source" in out["trtllm"]["loso_note"]
    assert out["sohu"]["rows"] == 0 and "assumptions" in out["sohu"]["note"]
    # vllm's source is not given here: no figures, the note says so
    assert "kinds" not in out["vllm"] and "no cited public rows" in out["vllm"]["note"]


def test_run_takes_the_profile(tmp_path):
    from perfonto import emulator

    r = emulator.run(
        "sohu", model="llama-3.1-8b", chips=1, duration_s=0.01, out_dir=tmp_path, engine_profile="sohu", max_batch=64
    )
    gt = r.ground_truth
    # the profile's scheduler (2048 tokens per step, chunked) with the max batch given on top
    assert (gt["token_budget"], gt["max_batch"], gt["chunked_prefill"]) == (2048, 64, True)


def test_sweep_takes_the_profile(capsys):
    import json

    argv = ["sweep", "--generation", "sohu", "--model", "llama-3.1-8b", "--chips", "1", "--engine-profile", "sohu"]
    argv += ["--vary", "isl=128,256", "--requests", "50", "--no-cache", "--jobs", "1", "--json"]
    assert main(argv) == 0
    pts = json.loads(capsys.readouterr().out)["points"]
    assert [p["engine"] for p in pts] == ["max batch 256, 2048 tokens per step, chunked prompts"] * 2


def test_a_profile_replaces_the_presets_engine_statements():
    # vllm chunks prompts: the trtllm preset's "whole prompts per step (no chunking)" must not be printed beside it
    base = project("h100", **KW).named
    prof = project("h100", engine_profile="vllm", **KW).named
    assert any("whole prompts per step (no chunking)" in s for s in base)
    assert not any("no chunking" in s or "trtllm-bench" in s for s in prof)
    assert list(prof[-len(profile("vllm").named) :]) == list(profile("vllm").named)
    # the execution model's statements stay
    assert "one kernel per op: activations go through HBM between ops" in prof
    assert any(s.startswith("KV cache: 90 %") for s in prof)


def test_run_report_states_the_profiles_engine(tmp_path):
    from perfonto import emulator
    from perfonto.emulator.claim import run_context

    r = emulator.run("h100", model="llama-3.1-8b", chips=1, duration_s=0.01, out_dir=tmp_path, engine_profile="vllm")
    assert r.ground_truth["engine_profile"] == "vllm"
    says = run_context("h100", r.ground_truth)["preset_says"]
    assert says[-len(profile("vllm").named) :] == list(profile("vllm").named)
    assert not any("no chunking" in s for s in says)


def test_help_names_every_profile(capsys):
    with pytest.raises(SystemExit):
        main(["project", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in load_profiles():
        assert name in text.split("engine_profiles.yaml:")[1].split(")")[0]


def test_fp4_weights_without_fp4_math_say_so():
    """H100 has no FP4 matrix math: FP4 weights run FP8 math, which the projection states; B200 has it."""
    note = [s for s in project("h100", dtype="fp4", **KW).named if "dequantised on load" in s]
    assert note and note[0].startswith("FP4 weights run FP8 matrix math: h100 has no FP4 matrix math")
    assert not any("dequantised" in s for s in project("b200", dtype="fp4", **KW).named)
    assert not any("dequantised" in s for s in project("h100", dtype="fp8", **KW).named)


def test_a_profile_keeps_the_presets_statements_whose_constants_it_leaves():
    """The sohu profile sets no all-reduce rate: the preset's 80 % (still in force) stays stated; trtllm and
    vllm state their own, and the preset's is not repeated."""
    from perfonto.emulator.presets import resolve

    p = resolve("h100")
    sohu = p.stated(profile("sohu"))
    assert "NVLink collectives at 80 % of the link rate (nccl-tests bus bandwidth)" in sohu
    assert not any("trtllm-bench sizes them" in s for s in sohu)
    for name in ("trtllm", "vllm"):
        said = p.stated(profile(name))
        assert sum("80 % of the link rate" in s for s in said) == 1, said
    cons = resolve("sohu", "conservative").stated(profile("sohu"))
    assert "all-reduces at 80 % of the link rate" in cons
    assert any(s.startswith("HBM efficiency, all-to-all and expert load imbalance") for s in cons)
    assert not any(s.startswith("matrix-engine and KV-read efficiencies") for s in cons)


def test_skipped_refits_are_said_not_run_not_missing():
    # a new user read `--no-loso`'s 'leave one source out n/a (no figures) … : n/a' as missing data
    import io

    from rich.console import Console

    from perfonto.commands.validate_emulator import _print_profiles

    one = {"geomean_error": 0.2, "worst_error": 0.3, "n": 4}
    kind = {
        "in_sample": one,
        "shipped_fit_other_sources": one,
        "leave_one_source_out": None,
        "leave_one_family_out": None,
        "target": 0.15,
    }
    prof = {"trtllm": {"kinds": {"dense": kind}, "loso_note": "x"}}
    buf = io.StringIO()
    _print_profiles(Console(file=buf, width=300), prof, {"loso": "--no-loso", "loo": "--no-loo"})
    text = buf.getvalue()
    assert "leave one source out not run (--no-loso)" in text and "leave one family out not run (--no-loo)" in text
    assert "vs ≤ 15 %: not judged" in text and "no figures" not in text
    buf = io.StringIO()
    _print_profiles(Console(file=buf, width=300), prof)  # refits that ran and found no figures: as before
    assert "leave one source out n/a (no figures)" in buf.getvalue()


def test_a_profile_on_another_familys_chip_is_stated_as_a_what_if():
    """The sohu profile (Etched's design assumptions) on an h100, or trtllm's fitted GPU constants on sohu:
    applied, and stated as a what-if; on its own family nothing is added (left alone in stop 48)."""
    from perfonto.emulator.project import project

    on_gpu = project("h100", model="llama-3.1-8b", chips=1, isl=128, osl=16, num_requests=20, engine_profile="sohu")
    assert any("engine profile sohu describes Etched Sohu" in n and "gpu family" in n for n in on_gpu.named)
    own = project("h100", model="llama-3.1-8b", chips=1, isl=128, osl=16, num_requests=20, engine_profile="trtllm")
    assert not any("what-if" in n for n in own.named)
    assert not any("what-if" in n for n in profile("sohu").foreign_note("sohu"))
    (note,) = profile("trtllm").foreign_note("sohu")
    assert "its constants are a what-if, not a description of that chip's own serving stack" in note
