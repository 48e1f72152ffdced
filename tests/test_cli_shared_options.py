"""One declaration per option idea (issue 32): the workload options of `project`, `run`, `serve` and the
what-if commands come from `perfonto.commands.workload_args.workload_options`, so each is described the same
way in every command's `--help`, while every command keeps its own default values."""

from __future__ import annotations

import argparse

import pytest

from perfonto.cli import UsageError, build_parser
from perfonto.commands.common import CATALOG_HELP
from perfonto.commands.workload_args import _workload_specs, workload_options

WORKLOAD_COMMANDS = ("project", "run", "serve", "emulate", "sweep", "sensitivity", "compare")
#: Options whose name is a shared one's but whose meaning is the command's own: `serve --duration` stops
#: the live source (default: never); elsewhere it is the simulated time.
OWN_MEANING = {("serve", "duration")}


def _command_parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _options(command: str) -> dict[str, argparse.Action]:
    return {a.dest: a for a in _command_parser(command)._actions if a.option_strings}


def _parse(command: str, *argv: str) -> argparse.Namespace:
    return build_parser(command).parse_args([command, *argv])


def test_a_workload_option_reads_the_same_in_every_command():
    specs = _workload_specs()
    seen = {name: [] for name in specs}
    for command in WORKLOAD_COMMANDS:
        for name, action in _options(command).items():
            if name in specs and (command, name) not in OWN_MEANING:
                seen.setdefault(name, []).append(command)
                assert action.help.startswith(specs[name]["what"] + " (default: "), (command, name, action.help)
    # the options the brief found declared several times are now shared by the commands that have them
    assert set(seen["model"]) >= {"project", "run", "serve", "sweep", "sensitivity", "compare"}
    assert set(seen["requests"]) == {"project", "run", "sweep", "sensitivity", "compare"}
    assert set(seen["engine_profile"]) == {"project", "run", "sweep", "sensitivity", "compare"}
    assert set(seen["warmup_steps"]) == set(seen["slow_chip"]) | {"emulate"} == {"run", "serve", "emulate"}


@pytest.mark.parametrize(
    "command, expected",
    [
        ("project", dict(model="llama3-70b", chips=8, isl=2048, osl=128, dtype="fp8", kv_dtype=None, tp=None)),
        ("project", dict(draft_tokens=0, acceptance=None, rate=None, concurrency=None, requests=None)),
        ("run", dict(model="llama3-70b", chips=8, isl=2048, osl=128, preset=None, requests=None, draft_tokens=0)),
        ("serve", dict(model="llama3-70b", chips=8, isl=2048, osl=128)),
        ("sweep", dict(model=None, chips=None, isl=None, osl=None, dtype=None, mapping=None, requests=None)),
        ("compare", dict(model=None, chips=None, batch=None, rate=None, concurrency=None)),
    ],
)
def test_each_command_keeps_its_default_values(command, expected):
    argv = ("--emulate",) if command == "serve" else ("sohu", "caelius") if command == "compare" else ()
    args = _parse(command, *argv)
    assert {k: getattr(args, k) for k in expected} == expected


def test_the_help_names_the_default_a_what_if_command_fills_in():
    from perfonto.whatif.points import DEFAULTS

    specs = _workload_specs()
    assert {k: specs[k]["default"] for k in DEFAULTS} == DEFAULTS
    helps = {name: a.help for name, a in _options("sweep").items()}
    for name, value in DEFAULTS.items():
        assert f"(default: {value}" in helps[name], (name, helps[name])


def test_emulating_commands_keep_the_chip_limit_and_project_does_not():
    from perfonto.emulator.run import MAX_CHIPS

    assert _parse("project", "--chips", "2048").chips == 2048
    assert f"1 … {MAX_CHIPS})" in _options("run")["chips"].help  # the help says the limit the type applies
    for command, argv in (("run", ()), ("serve", ("--emulate",))):
        with pytest.raises(UsageError, match="at most 1024 chips"):
            _parse(command, *argv, "--chips", "2048")


def test_model_choices_are_checked_by_argparse_except_in_the_what_if_commands():
    with pytest.raises(UsageError, match="invalid choice: 'gpt-5'"):
        _parse("project", "--model", "gpt-5")
    assert _parse("sweep", "--model", "gpt-5").model == "gpt-5"  # refused later, as a JSON error under --json


def test_rate_and_concurrency_exclude_each_other_everywhere():
    for command in ("project", "run", "sweep"):
        with pytest.raises(UsageError, match="not allowed with"):
            _parse(command, "--rate", "2", "--concurrency", "4")


def test_catalog_folder_help_is_one_text():
    for command in ("check", "export", "analyze", "serve", "codegen", "docs"):
        assert _options(command)["catalog"].help == CATALOG_HELP, command


def test_export_and_analyze_declare_out_force_json_through_output_options():
    for command in ("export", "analyze"):
        order = [a.dest for a in _command_parser(command)._actions if a.dest in ("out", "force", "json")]
        assert order == ["out", "force", "json"], command


def test_an_unknown_workload_option_is_refused_by_name():
    with pytest.raises(KeyError, match="not workload options: chip"):
        workload_options(argparse.ArgumentParser(), "model", chip={"default": 1})


@pytest.mark.parametrize("command", ["project", "run"])
def test_acceptance_without_draft_tokens_is_refused(command, tmp_path, capsys):
    # it was accepted and silently ignored: the projection ran without speculative decoding
    from perfonto.cli import main

    out = tmp_path / "o"
    assert (
        main(
            [command, "--acceptance", "0.5", "--out", str(out)]
            if command == "run"
            else [command, "--acceptance", "0.5"]
        )
        == 2
    )
    assert "give --draft-tokens K" in capsys.readouterr().err
    assert not out.exists()


def test_acceptance_defaults_to_0_7_with_draft_tokens():
    from perfonto.commands.project import scenario_of

    args = _parse("project", "--draft-tokens", "3")
    assert scenario_of(args)["acceptance"] == 0.7
    assert scenario_of(_parse("project", "--draft-tokens", "3", "--acceptance", "0.4"))["acceptance"] == 0.4
    assert scenario_of(_parse("project"))["acceptance"] == 0.0


def test_an_online_run_says_it_starts_empty(tmp_path, capsys):
    # a new user read '400 warm-up steps' on a --rate run that started from an empty server
    from perfonto.cli import main

    argv = ["run", "--model", "llama-3.1-8b", "--chips", "1", "--isl", "128", "--osl", "16", "--duration", "50ms"]
    assert main([*argv, "--rate", "50", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "online: the server starts empty at t = 0" in err and "warm-up steps" not in err
