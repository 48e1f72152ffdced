"""The what-if trial's findings (sweep, project): crossings between points that run, a steady window too
short to be steady, a run cut at the step cap, categorical knobs, spec units, speculative knobs, the options
of each command, and the units of the written tables."""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.whatif.knobs import Point, parse_vary
from perfonto.whatif.points import Target, base_generation
from perfonto.whatif.sweep import sweep

#: Llama-3.3-70B (64 attention heads: tp 1, 2, 4, 8, 16, … divide them; 5, 6 and 7 do not), 200 requests of
#: the default 2048/128: compute-bound at tp 4, interconnect-bound at tp 8 on Sohu.
SMALL = (("requests", 200),)


def _gen():
    return base_generation(Target())


# finding 1: a crossing lies between points that run
def test_crossing_between_unrunnable_points_is_not_placed_on_one():
    res = sweep(Target(), Point(workload=SMALL), [parse_vary("chips=4,8", _gen())], jobs=1)
    assert [r["bottleneck"] for r in res.rows] == ["compute", "interconnect"]
    (c,) = res.crossings
    # chips 5, 6, 7 cannot run (64 heads over tp 5, 6, 7): the crossing was read as "at 5" (bracket 4 .. 5)
    assert (c["low"], c["high"], c["at"]) == (4, 8, None)
    assert c["cannot_run"]["values"] == [5, 6, 7] and "do not split over tp" in c["cannot_run"]["error"]


def test_crossing_bisection_keeps_to_points_that_run():
    # 2 .. 8: 4 (the bisection's midpoint) runs and is compute-bound; 6 (the next), 5 and 7 cannot run
    res = sweep(Target(), Point(workload=SMALL), [parse_vary("chips=2,8", _gen())], jobs=1)
    (c,) = res.crossings
    assert (c["grid"], c["low"], c["high"], c["at"]) == ([2, 8], 4, 8, None)


def test_grid_point_that_cannot_run_does_not_hide_the_crossing():
    # chips = 6 cannot run: its neighbours 4 and 8 that do are compared (there was no crossing at all)
    res = sweep(Target(), Point(workload=SMALL), [parse_vary("chips=4,6,8", _gen())], jobs=1)
    assert res.rows[1]["error"]
    (c,) = res.crossings
    assert (c["grid"], c["low"], c["high"], c["at"]) == ([4, 8], 4, 8, None)


def test_sweep_text_says_the_points_between_cannot_run(capsys, monkeypatch):
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    assert main(["sweep", "--vary", "chips=4,8", "--requests", "200", "--jobs", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "bottleneck compute → interconnect between chips = 4 and 8" in out
    assert "chips = 5, 6, 7 between them cannot run" in out
    assert "at chips = 5" not in out


# finding 2: a steady window too short to be steady
def _rows(steady, bench, share):
    return [
        {"x": x, "tokens_per_second": s, "benchmark_tokens_per_second": b, "steady_share": f, "error": None}
        for x, s, b, f in zip((1.0, 2.0), steady, bench, share)
    ]


def _res(rows):
    from perfonto.whatif.knobs import Knob
    from perfonto.whatif.sweep import SweepResult

    return SweepResult([Knob("x", (1.0, 2.0))], rows)


def test_table_keeps_the_steady_figure_when_it_agrees_with_the_benchmark():
    from perfonto.whatif.sweep_notes import STEADY, table_figure

    # both rise (100 → 110, 95 → 104), windows of 40 % and 30 % of their runs: steady, no note
    assert table_figure(_res(_rows((100.0, 110.0), (95.0, 104.0), (0.4, 0.3)))) == (STEADY, None)


def test_table_shows_the_benchmark_when_the_steady_figure_moves_against_it():
    from perfonto.whatif.sweep_notes import BENCHMARK, table_figure

    # steady 66,741 → 64,292 (−3.7 %) while the benchmark goes 66,565 → 67,059 (+0.74 %): apart by 4.4 % > 1 %
    figure, why = table_figure(_res(_rows((66_741.0, 64_292.0), (66_565.0, 67_059.0), (0.44, 0.33))))
    assert figure == BENCHMARK and "66,741 → 64,292" in why and "66,565 → 67,059" in why


def test_table_shows_the_benchmark_when_a_window_holds_under_a_quarter_of_its_run():
    from perfonto.whatif.sweep_notes import BENCHMARK, table_figure

    figure, why = table_figure(_res(_rows((100.0, 110.0), (95.0, 104.0), (0.4, 0.198))))
    assert figure == BENCHMARK and "under 25 % of its run (19.8 % at x=2)" in why


def test_hbm_capacity_sweep_shows_the_benchmark_figure_and_says_why(capsys, monkeypatch):
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    argv = ["sweep", "--vary", "spec.hbm.capacity=138,196GB", "--isl", "8192", "--osl", "1024", "--jobs", "1"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lo, hi = doc["points"]
    # 1,000 requests, a max batch of 640 then 896: the steady window falls as the batch grows, the run's rises
    assert hi["tokens_per_second"] < lo["tokens_per_second"]
    assert hi["benchmark_tokens_per_second"] > lo["benchmark_tokens_per_second"]
    assert hi["steady_share"] < 0.25 < lo["steady_share"] and doc["units"]["steady_share"] == "fraction"
    assert doc["table_figure"] == "benchmark_tokens_per_second" and "benchmark's" in doc["notes"][0]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "tokens/s (benchmark)" in out and f"{hi['benchmark_tokens_per_second']:,.0f}" in out


# finding 3: a run cut at the step cap says so
#: Llama-3.1-8B on one chip, a closed loop of 1 request of 16/64 tokens: 64 steps per request (the prefill
#: step emits the first token, 63 decode steps the rest), one request after the other.
CAPPED = dict(model="llama-3.1-8b", chips=1, isl=16, osl=64, concurrency=1)


def test_projection_cut_at_the_step_cap_says_so(monkeypatch):
    import perfonto.emulator.project as P

    pr = P.project("sohu", **CAPPED, num_requests=5)
    assert pr.step_cap is None and pr.figures.steps == 5 * 64 and pr.figures.requests == 5
    monkeypatch.setattr(P, "MAX_STEPS", 500)
    pr = P.project("sohu", **CAPPED, num_requests=20)
    steps = pr.figures.steps  # the loop stops at the first block that reaches the cap
    assert steps >= 500 and steps < 20 * 64
    assert pr.step_cap == {"max_steps": 500, "requests_completed": steps // 64, "requests_requested": 20}
    assert pr.figures.requests == steps // 64 and pr.to_json()["step_cap"] == pr.step_cap


def test_project_and_sweep_warn_of_the_step_cap(capsys, monkeypatch):
    import perfonto.emulator.project as P

    monkeypatch.setattr(P, "MAX_STEPS", 500)
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    wl = ["--model", "llama-3.1-8b", "--chips", "1", "--osl", "64", "--requests", "20", "--concurrency", "1"]
    assert main(["project", *wl, "--isl", "16"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "of 20 asked: cut at the step cap" in out and "cap of 500 steps" in out and "fewer --requests" in out
    assert main(["sweep", *wl, "--vary", "isl=16,32", "--jobs", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["cut_at_steps"] for r in doc["points"]] == [500, 500]
    assert [r["requests_requested"] for r in doc["points"]] == [20, 20]
    assert doc["notes"][0].startswith("warning: 2 point(s) were cut at the emulator's cap of 500 steps")
    assert not any("TensorRT-LLM" in n for n in doc["notes"])  # the cap, not the default count, is the cause


# finding 5: the bottleneck along a categorical knob
def test_categorical_knob_says_the_bottleneck_differs(capsys, monkeypatch):
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    assert main(["sweep", "--vary", "mapping=tp4-dp2,tp8", "--requests", "200", "--jobs", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["bottleneck"] for r in doc["points"]] == ["memory", "interconnect"] and doc["crossings"] == []
    (note,) = [n for n in doc["notes"] if "bottleneck" in n]
    assert note.startswith("the bottleneck differs between the points (memory at mapping=TP4 × DP2; interconnect")
    assert "mapping is not numeric" in note and "does not change" not in note


def test_bottleneck_does_not_change_only_when_it_does_not():
    from perfonto.whatif.knobs import Knob
    from perfonto.whatif.sweep import SweepResult
    from perfonto.whatif.sweep_notes import bottleneck_note

    rows = [{"m": m, "bottleneck": "compute", "error": None} for m in ("a", "b")]
    assert bottleneck_note(SweepResult([Knob("m", ("a", "b"))], rows)) == (
        "the bottleneck does not change along the sweep (compute)"
    )


# finding 8: an acceptance without draft tokens is refused, as project refuses it
def test_sweep_refuses_acceptance_without_draft_tokens(capsys):
    assert main(["sweep", "--vary", "acceptance=0.5,0.9", "--requests", "200"]) == 2
    err = capsys.readouterr().err
    assert "--vary acceptance applies to speculative decoding only" in err and "draft_tokens=K" in err


# finding 9: each command names its own option for another's
@pytest.mark.parametrize(
    "argv, says",
    [
        (
            ["sweep", "--tp", "4", "--dp", "2", "--vary", "isl=128"],
            "sweep takes the mapping as one option: --mapping tp4-dp2 for --tp 4 --dp 2",
        ),
        (["sensitivity", "--tp", "4"], "sensitivity takes the mapping as one option: --mapping tp4 for --tp 4"),
        (["project", "--tp", "4", "--chips", "8"], "tp 4 × pp 1 × dp 1 = 4 chips, not --chips 8: give --dp 2"),
        (["project", "--batch", "64"], "project has no --batch"),
        (["project", "--mapping", "tp4", "--tp", "4"], "--mapping and --tp/--pp/--dp/--ep/--attention-dp both"),
    ],
)
def test_mapping_and_batch_options_name_the_equivalent(argv, says, capsys):
    assert main(argv) != 0
    assert says in " ".join(capsys.readouterr().err.split())


def test_project_takes_mapping_and_its_chips(capsys):
    assert main(["project", "--mapping", "tp4-dp2", "--requests", "200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["mapping"], doc["chips"]) == ("TP4 × DP2", 8)
    assert main(["project", "--mapping", "tp4", "--requests", "200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["mapping"], doc["chips"]) == ("TP4", 4)  # the chips of the mapping, as in sweep


# finding 7: a bare spec value is in the catalog's declared unit; a refused value is named; a clock changes nothing
def test_bare_spec_values_are_in_the_catalogs_declared_unit():
    gen = _gen()
    clock = parse_vary("spec.clock.core=1.5,3", gen)  # sohu.yaml: core: frequency: {value: 1.5, unit: GHz}
    assert clock.values == (1.5e9, 3e9) and clock.unit == "GHz" and clock.shown(1.5e9) == 1.5
    assert parse_vary("spec.clock.core=1.5GHz,3e9Hz", gen).values == (1.5e9, 3e9)
    assert parse_vary("spec.clock.core=1..2:3", gen).values == (1e9, 1.5e9, 2e9)
    bw = parse_vary("spec.hbm.peak_bandwidth=7.2", gen)  # sohu.yaml: hbm.peak_bandwidth {value: 7.2, unit: TB/s}
    assert bw.values == (7.2,) and bw.unit == "TB/s"


def test_a_value_the_emulator_cannot_model_is_refused_naming_the_vary_value():
    from perfonto.whatif.knobs import KnobError

    with pytest.raises(KnobError) as exc:
        parse_vary("spec.clock.core=1.5,1e-7", _gen())  # 100 Hz, below the 1 MHz the emulator models
    msg = str(exc.value)
    assert msg.startswith("--vary spec.clock.core: the value '1e-7' cannot be projected") and "1 MHz" in msg
    assert "sohu.yaml" not in msg and "fix it under" not in msg and "in GHz" in msg


def test_clock_sweep_says_the_clock_changes_nothing(capsys, monkeypatch):
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    assert main(["sweep", "--vary", "spec.clock.core=1.5,3", "--requests", "200", "--jobs", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    a, b = doc["points"]
    assert (a["spec.clock.core"], b["spec.clock.core"]) == (1.5, 3.0) and doc["units"]["spec.clock.core"] == "GHz"
    assert a["tokens_per_second"] == b["tokens_per_second"]
    (note,) = [n for n in doc["notes"] if "no figure changes" in n]
    assert "along spec.clock.core: the projection's peaks are per second" in note


def test_flat_note_only_for_a_knob_that_moves_nothing():
    from perfonto.whatif.knobs import Knob
    from perfonto.whatif.sweep import SweepResult
    from perfonto.whatif.sweep_notes import flat_notes

    def row(x, y, tps):
        return {"x": x, "y": y, "tokens_per_second": tps, "error": None}

    # x moves nothing (100 at both x for y = 1; 200 at both for y = 2), y moves tokens/s
    res = SweepResult(
        [Knob("x", (1, 2)), Knob("y", (1, 2))], [row(1, 1, 100), row(1, 2, 200), row(2, 1, 100), row(2, 2, 200)]
    )
    (note,) = flat_notes(res)
    assert note.startswith("note: no figure changes along x:")


# finding 12: the written tables keep the knobs' units
def test_written_tables_keep_the_knobs_units(tmp_path, capsys, monkeypatch):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    argv = ["sweep", "--vary", "spec.clock.core=1.5GHz", "--vary", "spec.hbm.peak_bandwidth=7.2,9", "--requests", "200"]
    for name in ("t.csv", "t.json", "t.parquet"):
        assert main([*argv, "--jobs", "1", "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    t = pcsv.read_csv(tmp_path / "t.csv")
    assert t.column("spec.hbm.peak_bandwidth [TB/s]").to_pylist() == [7.2, 9.0]
    assert t.column("spec.clock.core [GHz]").to_pylist() == [1.5, 1.5]  # not 1.5e9
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["units"]["spec.hbm.peak_bandwidth"] == "TB/s" and doc["units"]["mfu"] == "fraction"
    assert [p["spec.clock.core"] for p in doc["points"]] == [1.5, 1.5]
    field = pq.read_schema(tmp_path / "t.parquet").field("spec.hbm.peak_bandwidth [TB/s]")
    assert field.metadata == {b"unit": b"TB/s"}


def test_review_a_zero_steady_figure_is_no_division_by_zero():
    """A review: a point whose steady tokens/s is 0 (no steady window) crashed the note with a
    ZeroDivisionError; such a pair is not compared."""
    from types import SimpleNamespace

    from perfonto.whatif.sweep_notes import _against

    knob = SimpleNamespace(name="spec.hbm.capacity", values=[138.0, 167.0])
    rows = [
        {"spec.hbm.capacity": 138.0, "tokens_per_second": 0.0, "benchmark_tokens_per_second": 100.0},
        {"spec.hbm.capacity": 167.0, "tokens_per_second": 50.0, "benchmark_tokens_per_second": 90.0},
    ]
    assert _against(SimpleNamespace(knobs=[knob], rows=rows)) is None


def test_review_a_crossings_series_shows_the_other_knobs_in_their_units():
    """A review: with a clock as the second knob, crossings[].series kept 1.5e9 (cycles/s) while points[]
    showed 1.5 (GHz), so the two could not be matched."""
    from perfonto.whatif.knobs import Knob
    from perfonto.whatif.sweep import SweepResult

    chips = Knob("chips", (4, 8))
    clock = Knob("spec.clock.core", (1.5e9,), unit="GHz", scale=1e9)
    crossing = {"knob": "chips", "series": {"spec.clock.core": 1.5e9}, "at": 6, "low": 4, "high": 8, "grid": [4, 8]}
    doc = SweepResult([chips, clock], [{"chips": 4, "spec.clock.core": 1.5e9}], [crossing]).to_json()
    assert doc["points"][0]["spec.clock.core"] == doc["crossings"][0]["series"]["spec.clock.core"] == 1.5
