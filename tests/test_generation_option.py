"""An empty --generation is a usage error saying so (from a bad-input pass: it was looked up as a generation
named '' and then reported as `sohu`, the default, in a second error that contradicted the first)."""

import pytest

from perfonto.cli import main


@pytest.mark.parametrize("argv", [["check"], ["explain", "mfu"], ["analyze", "x.csv", "--out", "o"]])
def test_an_empty_generation_is_a_usage_error(argv, capsys):
    assert main(argv + ["--generation", " "]) == 2
    err = capsys.readouterr().err
    assert "argument --generation: is empty; name a generation" in err and "sohu`" not in err
