"""`perfonto validate`: every metric with a ground-truth counterpart within 0.5 % on three workloads."""

from perfonto.cli import main


def test_validate_passes_and_ends_with_the_worst_error(capsys):
    assert main(["validate"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("worst error: ")
    checks = [line for line in out if "%" in line and not line.startswith(("worst", "workload"))]
    assert len({line.split()[0] + line.split()[1] for line in checks}) >= 3  # three workloads
    assert "0 over 0.5 %" in out[-2]
