"""A performance architect's trial of the emulator and what-if commands (s56, report E):

1. the presets' assumption text states the layout as run ("tensor parallel over the 8 chips" was printed
   for a TP1 projection and a 1-chip run; the claim preset's "8 data-parallel replicas" likewise);
2. validate-emulator's summary names its worst row with the table's signed error beside the symmetric one
   (the summary said "worst 8.3 %" where the table showed that row as −7.7 %);
3. a chip count the heads do not split over is a usage error (2) in `project` as in `run` (project gave 1);
4. a model or generation named in another case gets a did-you-mean (none before);
5. a user's file named like an output is refused before the emulation runs, not after it.
"""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.emulator.parallel import Mapping
from perfonto.emulator.presets import resolve

FAST = dict(isl=64, osl=8, num_requests=16)  # a projection of a few steps


def test_the_layout_words_follow_the_mapping():
    from perfonto.emulator.presets import layout_words

    assert layout_words(Mapping(tp=1)) == "the whole model on one chip (TP1): no chip-to-chip traffic"
    assert (
        layout_words(Mapping(tp=8))
        == "tensor parallel over the 8 chips (TP8): ring all-reduces not overlapped with compute"
    )
    assert layout_words(Mapping(dp=8), overlapped=True) == (
        "8 data-parallel replicas, each chip serving its own requests: no chip-to-chip traffic"
    )
    two = layout_words(Mapping(tp=4, dp=2))
    assert two.startswith("tensor parallel over 4 chips (TP4)") and "2 data-parallel replicas" in two


def test_a_tp1_projection_states_no_all_reduce_over_8_chips():
    from perfonto.emulator.project import project

    named = project("sohu", model="llama-3.1-8b", chips=1, **FAST).named
    assert "the whole model on one chip (TP1): no chip-to-chip traffic" in named
    assert not any("8 chips" in s or "all-reduces not overlapped" in s for s in named), named
    claim = project("sohu", model="llama-3.1-8b", chips=1, preset="claim", **FAST).named
    assert not any("8 data-parallel replicas" in s for s in claim), claim
    eight = project("sohu", model="llama-3.1-8b", chips=8, **FAST).named  # the claim's case still reads as before
    assert "tensor parallel over the 8 chips (TP8): ring all-reduces not overlapped with compute" in eight


def test_project_json_and_the_claim_section_say_the_run_layout(capsys):
    assert main(["project", "--model", "llama-3.1-8b", "--chips", "1", "--isl", "64", "--osl", "8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for said in [doc["assumptions"], *(p["assumptions"] for p in doc["presets"].values())]:
        assert not any("8 chips" in s or "8 data-parallel" in s for s in said), said
    # the claim's own scenario (8 chips, DP8 under the claim preset) keeps its 8 replicas
    stated = resolve("sohu", "claim").stated(mapping=Mapping(dp=8))
    assert any(s.startswith("8 data-parallel replicas, each chip serving its own requests") for s in stated)


def test_a_1_chip_run_report_says_one_chip(tmp_path):
    """The report's assumptions (``claim.run_context``, as ``run_job`` makes them) of a 1-chip emulation."""
    import perfonto
    from perfonto.emulator.claim import run_context

    emu = perfonto.emulate(model="llama-3.1-8b", chips=1, duration=0.05, isl=64, osl=8, out=tmp_path / "r")
    ctx = run_context("sohu", emu.ground_truth)
    assert "the whole model on one chip (TP1): no chip-to-chip traffic" in ctx["preset_says"]
    assert "mapping TP1 over 1 chip" in ctx["assumptions"]  # was "over 1 chips"
    assert not any("8 chips" in s for s in ctx["assumptions"]), ctx["assumptions"]


def test_validate_emulator_summary_names_the_worst_row_as_the_table_shows_it():
    """b200 fp4 2048/128: measured 1339, predicted 1236 → the table's 1236/1339 − 1 = −7.7 %, the
    symmetric 1339/1236 − 1 = 8.3 %; the summary gave 8.3 % alone, a figure no row of the table shows."""
    from perfonto.commands.validate_emulator import ERRORS_SAID, summary_lines

    row = dict(model="llama-3.3-70b", gpu="b200", tp=1, pp=1, dtype="fp4", isl=2048, osl=128, set="shipped")
    rows = [
        {**row, "measured": 1339.0, "predicted": 1236.0, "error": 1236 / 1339 - 1},
        {**row, "isl": 128, "measured": 1000.0, "predicted": 1050.0, "error": 0.05},
    ]
    res = {"rows": rows, "geomean_error": 0.065, "worst_error": 0.0833, "shipped": {"geomean_error": 0.065, "n": 2}}
    lines = summary_lines(res)
    assert lines[0] == ERRORS_SAID and "max(p/m, m/p) − 1" in ERRORS_SAID and "predicted ÷ measured − 1" in ERRORS_SAID
    assert "worst 8.3 % (llama-3.3-70b b200 TP1 fp4 2048/128: -7.7 % in the table)" in lines[2], lines


@pytest.mark.parametrize(
    "argv",
    [
        ["project", "--chips", "3"],
        ["project", "--chips", "3", "--json"],
        ["project", "--chips", "8", "--tp", "3", "--dp", "3"],  # 9 chips, not 8
        ["run", "--chips", "3", "--duration", "0.05s"],
    ],
)
def test_a_chip_count_the_model_does_not_split_over_is_a_usage_error(argv, tmp_path, capsys):
    extra = ["--out", str(tmp_path / "o")] if argv[0] == "run" else []
    assert main([*argv, *extra]) == 2
    assert not (tmp_path / "o").exists()


def test_weights_that_do_not_fit_stay_a_failure_not_a_usage_error(capsys):
    # 70B BF16 on one chip: 141.1 GB + 4 GB reserve > 144 GB — the scenario's limit, not an option mistake
    assert main(["project", "--model", "llama3-70b", "--dtype", "bf16", "--chips", "1"]) == 1
    assert "141.1 GB" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, meant",
    [
        (["run", "--model", "Llama3-70B"], "`llama3-70b`"),
        (["project", "--model", "LLAMA-3.1-8B"], "`llama-3.1-8b`"),
        (["run", "--generation", "SOHU", "--duration", "0.05s"], "`sohu`"),
        (["project", "--generation", "SOHU"], "`sohu`"),
    ],
)
def test_a_name_in_another_case_gets_a_did_you_mean(argv, meant, tmp_path, capsys):
    extra = ["--out", str(tmp_path / "o")] if argv[0] == "run" else []
    assert main([*argv, *extra]) == 2  # refused (names are exact), not silently accepted
    err = capsys.readouterr().err
    assert f"did you mean {meant}" in err, err
    assert not (tmp_path / "o").exists()


def test_emulate_names_the_model_it_meant():
    import perfonto

    with pytest.raises(perfonto.Error, match="did you mean `llama-3.1-8b`"):
        perfonto.emulate(model="Llama-3.1-8B", chips=1, duration=0.05)


def _spy_on_the_emulator(monkeypatch) -> list:
    """``emulator.run`` replaced by a wrapper that records each call (its signature kept: the callers read it)."""
    import functools

    from perfonto import emulator

    calls, real = [], emulator.run

    @functools.wraps(real)
    def spy(*a, **kw):
        calls.append(kw)
        return real(*a, **kw)

    monkeypatch.setattr(emulator, "run", spy)
    return calls


def test_a_user_file_named_like_an_output_is_refused_before_the_run(tmp_path, monkeypatch):
    from perfonto.job import run_job
    from perfonto.outputs import OutputError

    out = tmp_path / "uo"
    out.mkdir()
    (out / "report.json").write_text("x")
    calls = _spy_on_the_emulator(monkeypatch)
    with pytest.raises(OutputError, match="report.json: perfonto did not write this file"):
        run_job(model="llama-3.1-8b", chips=1, duration_s=0.05, isl=64, osl=8, out=out, force=True)
    assert calls == []  # refused before emulating (it emulated and evaluated, then refused)
    assert (out / "report.json").read_text() == "x"


def test_the_api_docstrings_name_what_the_user_sees(tmp_path):
    import perfonto
    from perfonto.api import Result
    from perfonto.ontology.diagnostics import Span

    doc = Result.window.__doc__
    emu = perfonto.emulate(model="llama-3.1-8b", chips=1, duration=0.05, isl=64, osl=8, out=tmp_path / "r")
    cols = perfonto.evaluate(perfonto.load_catalog(), emu.counters).window.column_names
    assert cols[:4] == ["window", "chip", "start_ns", "interval_s"]
    for c in [*cols[:4], "out_of_bounds"]:
        assert f"``{c}``" in doc, c
    d = perfonto.Diagnostic("error", "unknown-generation", "m", Span("f.yaml", 1, 1))
    said = perfonto.Diagnostic.to_json.__doc__ or ""
    assert all(f"``{k}``" in said for k in d.to_json()), said
    assert "``perfonto.Error``" in perfonto.__doc__ and "``PerfontoError``" in perfonto.__doc__
