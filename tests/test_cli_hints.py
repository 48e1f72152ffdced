"""Usage hints a new user needs: a did-you-mean for a misspelt generation in ``compare``, a located
error for a scenario's ``expect:`` naming no top-down metric, and ``perfonto --help`` saying that
bare ``perfonto`` runs the main job."""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.whatif.catalogs import parts
from perfonto.whatif.points import Target
from perfonto.whatif.scenarios import ScenarioError, load_scenarios


def test_compare_suggests_the_generation_meant(capsys):
    assert main(["compare", "sohu", "caelus", "--json"]) == 2
    assert (
        json.loads(capsys.readouterr().out)["error"]
        == "generation `caelus` does not load: no generation named `caelus` (did you mean `caelius`?)"
    )


def test_a_scenario_expecting_an_unknown_metric_is_a_located_error(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text('scenarios:\n  slow2:\n    run: {slow_chip: "1:1.5"}\n    expect: interconnect.peer_wiat\n')
    base = parts(Target())[0]
    heads = [m for m, x in base.graph.metrics.items() if "topdown" in x.groups]
    with pytest.raises(ScenarioError) as e:
        load_scenarios(bad, base.generation, heads)
    (d,) = e.value.diagnostics
    assert (d.span.file, d.span.line, d.span.col) == (str(bad), 4, 13)
    assert "no top-down metric `interconnect.peer_wiat`" in d.message and "`topdown.interconnect.peer_wait`" in d.hint
    # the `topdown.` prefix may be left out: the short name is the full metric, and the run can meet it
    bad.write_text('scenarios:\n  slow2:\n    run: {slow_chip: "1:1.5"}\n    expect: interconnect.peer_wait\n')
    _, scs = load_scenarios(bad, base.generation, heads)
    assert next(s for s in scs if s.name == "slow2").expect == "topdown.interconnect.peer_wait"


def test_coverage_refuses_the_scenario_file(tmp_path, capsys):
    bad = tmp_path / "s.yaml"
    bad.write_text('scenarios:\n  slow2:\n    run: {slow_chip: "1:1.5"}\n    expect: interconnect.peer_wiat\n')
    assert main(["coverage", "--scenarios", str(bad), "--only", "slow-chip,slow2", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (
        "scenarios do not load" in doc["error"]
        and "did you mean `topdown.interconnect.peer_wait`" in doc["diagnostics"][0]["hint"]
    )


def test_help_says_bare_perfonto_runs_the_main_job(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "`perfonto` with no arguments runs the whole main job (`perfonto run` on its defaults" in out


def test_an_unknown_preset_or_engine_profile_is_a_usage_error(capsys):
    """A breaker: `run --preset bogus` and `run --engine-profile vlm` exited 1 (a data error) where `compare
    --preset-a bogus` exited 2; an option naming nothing that exists is a usage error."""
    from perfonto.cli import main

    assert main(["run", "--preset", "bogus", "--json"]) == 2
    assert "no preset 'bogus'" in json.loads(capsys.readouterr().out)["error"]
    assert main(["run", "--engine-profile", "vlm", "--json"]) == 2
    assert "no engine profile 'vlm'" in json.loads(capsys.readouterr().out)["error"]
    assert main(["project", "--preset", "bogus", "--json"]) == 2


def test_a_chip_count_the_heads_do_not_split_over_names_the_option_run_has(capsys):
    """A breaker: `run --chips 3` advised `--tp with --dp or --pp`, which `run` does not take."""
    from perfonto.cli import main

    assert main(["run", "--chips", "3", "--json"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert "possible tp: 1, 2, 4, 8" in err and "give --chips N, N one of those" in err and "--dp" not in err


def test_a_catalog_read_from_the_cache_is_not_said_to_be_compiled(tmp_path, monkeypatch, capsys):
    """A new user: every command said "compiled catalog: … (0.02 s)" on a cache hit, while the README says a
    second process does not compile the catalog."""
    from perfonto.cli import main

    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    argv = ["run", "--duration", "20ms", "--chips", "2", "--json", "--out"]
    assert main([*argv, str(tmp_path / "a")]) == 0
    first = capsys.readouterr().err
    assert main([*argv, str(tmp_path / "b")]) == 0
    second = capsys.readouterr().err
    assert "compiled catalog: generation" in first and "compiled catalog (read from the cache): generation" in second


def test_an_unknown_option_close_to_a_known_one_is_named(capsys):
    """`perfonto run --chip 8` was refused with no word of `--chips` (a new user); abbreviations stay refused."""
    assert main(["run", "--chip", "8"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --chip 8; did you mean `--chips`" in err, err
    assert main(["run", "--zzz"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("unrecognized arguments: --zzz")
