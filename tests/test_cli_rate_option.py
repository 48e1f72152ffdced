"""``--rate`` is one argparse type (``commands.workload_args.request_rate``) in every command that takes it:
a value ``perfonto.values.rate`` refuses is a usage error (exit 2) with that rule's words, in
``project``, ``run`` and the what-if commands alike; a good one reaches the command as a float."""

from __future__ import annotations

import argparse
import json

import pytest

from perfonto.cli import main
from perfonto.commands.workload_args import request_rate
from perfonto.values import ValueRuleError, rate


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "x", ""])
@pytest.mark.parametrize("command", ["project", "run", "sweep", "sensitivity", "compare"])
def test_a_bad_rate_is_the_same_usage_error_everywhere(command, text, capsys):
    with pytest.raises(ValueRuleError) as rule:
        rate(text, "rate")
    argv = [command] + (["sohu", "caelius"] if command == "compare" else []) + ["--rate", text, "--json"]
    assert main(argv) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error == "argument --rate: " + str(rule.value).removeprefix("rate: ")


def test_a_good_rate_is_a_float():
    assert request_rate("2.5") == 2.5 and request_rate("1e3") == 1000.0
    with pytest.raises(argparse.ArgumentTypeError, match="a rate is above 0"):
        request_rate("0")
