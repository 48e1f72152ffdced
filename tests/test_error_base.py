"""Issue 32: one base for every error perfonto raises for bad input (``perfonto.ontology.errors.PerfontoError``),
kept alongside each class's built-in base, so ``except PerfontoError`` catches them all and ``except ValueError``
still catches what it caught."""

from __future__ import annotations

import importlib

import pytest

from perfonto.ontology.errors import PerfontoError

ERRORS = {
    "analysis.spans": "AttributionError",
    "analysis.crosschip": "RunError",
    "analysis.compare_runs": "CompareError",
    "analysis.timeline": "TimelineError",
    "analysis.follow": "PartError",
    "capture.dump_io": "DumpError",
    "capture.partitions": "PathEscapeError",
    "emulator.presets": "PresetError",
    "emulator.scheduler": "SchedulerError",
    "emulator.parallel": "MappingError",
    "emulator.hardware": "HardwareSpecError",
    "emulator.quantities": "BindingError",
    "interop.exprparse": "ParseError",
    "interop.ir": "Unsupported",
    "interop.build": "ImportFailure",
    "ontology.diagnostics": "CatalogError",
    "ontology.derive": "DeriveError",
    "ontology.units": "UnitError",
    "ontology.kinds": "UnsupportedKind",
    "ontology.files": "FileReadError",
    "cli": "UsageError",
    "outputs": "OutputError",
    "values": "ValueRuleError",
    "whatif.scenarios": "ScenarioError",
    "whatif.knobs": "KnobError",
    "commands.common": "CommandError",
}


@pytest.mark.parametrize("module, name", sorted(ERRORS.items()))
def test_every_public_error_is_a_perfonto_error(module, name):
    cls = getattr(importlib.import_module(f"perfonto.{module}"), name)
    assert issubclass(cls, PerfontoError)


def test_value_errors_stay_value_errors():
    from perfonto.capture.dump_io import DumpError
    from perfonto.ontology.units import UnitError

    assert issubclass(DumpError, ValueError) and issubclass(UnitError, ValueError)


def test_an_uncaught_perfonto_error_is_a_clean_cli_error(monkeypatch, capsys):
    """A PerfontoError a command lets through is printed as an error (exit 1), not as an internal error."""
    import json

    from perfonto.cli import main
    from perfonto.commands import check

    def boom(args):
        raise PerfontoError("a refusal nobody turned into a message")

    monkeypatch.setattr(check, "cmd_check", boom)
    assert main(["check", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "a refusal nobody turned into a message" and "internal error" not in err
