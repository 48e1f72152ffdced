"""The one table of generated artefacts (`perfonto.targets`, issue 32): every target a command offers is in
it, each option a target reads is an argument of every command that offers it, and its emitters give the
bytes the golden-file test checks (tests/test_golden_artifacts.py) for the fixture catalog."""

from __future__ import annotations

import argparse
import pytest

from perfonto.cli import build_parser
from perfonto.targets import TARGETS, offered_by, target

COMMANDS = ("codegen", "export", "docs")


def _command_parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _offered(command: str) -> set[str]:
    """The target names the command's parser accepts (`codegen --target`, `export FORMAT`); `docs` writes
    one thing, its site."""
    p = _command_parser(command)
    for action in p._actions:
        if action.dest == "target":
            assert action.choices, f"`{command}`'s target argument lists no choices"
            return set(action.choices)
    return {"docs-site"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_target_a_command_offers_is_in_the_registry(command):
    offered = _offered(command)
    missing = offered - set(TARGETS)
    assert not missing, f"`perfonto {command}` offers {sorted(missing)}, which perfonto.targets does not list"
    assert offered == set(offered_by(command))
    assert all(command in TARGETS[name].commands for name in offered)


def test_every_registered_target_is_offered_by_a_command():
    for t in TARGETS.values():
        assert t.commands and set(t.commands) <= set(COMMANDS), t.name
        assert all(t.name in _offered(c) for c in t.commands), t.name
        assert t.files and t.help and t.needs in ("nothing", "generation", "graph", "graphs"), t.name


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_targets_options_are_arguments_of_its_commands(name):
    t = TARGETS[name]
    for command in t.commands:
        if t.needs == "graphs":  # the docs site's options are the catalogs the command compiled
            continue
        dests = {a.dest for a in _command_parser(command)._actions}
        assert set(t.options) <= dests, (command, set(t.options) - dests)


def test_an_unknown_target_is_refused_by_name():
    with pytest.raises(KeyError, match="no target named 'bogus'; the targets are python, sql"):
        target("bogus")


@pytest.fixture(scope="module")
def alpha():
    from test_golden_artifacts import _graph

    from perfonto.metrics.catalog import Catalog

    g = _graph()
    return Catalog(generation=g.generation, graph=g)


@pytest.mark.parametrize(
    "name,golden",
    [
        ("python", "alpha_evaluator.py"),
        ("c-header", "alpha.h"),
        ("docs", "alpha.md"),
        ("perf-json", "alpha.perf.json"),
    ],
)
def test_the_registry_emits_the_golden_files(alpha, name, golden):
    from test_golden_artifacts import ARTIFACTS

    t = TARGETS[name]
    emitted = t.emit(alpha, {o: None for o in t.options})
    assert list(emitted.files) == [golden]  # the golden file is named as the command names its output
    assert emitted.files[golden] == ARTIFACTS[golden](alpha.graph)


def test_the_collector_schema_says_each_registers_scale(tmp_path):
    """An architect's collector writer could not convert: `collector.json` said `"unit": "B"` for a register
    counted in 64-byte lines (scale 64) and `FLOP` for one counted in units of 1024 FLOP."""
    import json

    from perfonto.cli import main

    assert main(["codegen", "--target", "collector", "--out", str(tmp_path)]) == 0
    cols = {c["name"]: c for c in json.loads((tmp_path / "sohu.collector.json").read_text())["columns"]}
    assert (cols["sram.read_bytes"]["unit"], cols["sram.read_bytes"]["scale"]) == ("B", 64)
    assert (cols["mxu.flops_fp8"]["unit"], cols["mxu.flops_fp8"]["scale"]) == ("FLOP", 1024)
    assert all("scale" in c for n, c in cols.items() if n not in ("host", "chip", "timestamp_ns"))
