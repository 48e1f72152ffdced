"""``--spark-master`` is read by ``--engine spark`` only: given without it, the analysis ran here, not on the
cluster, and nothing said so (a data engineer who forgot ``--engine spark`` took the job for a cluster one)."""

from __future__ import annotations

from perfonto.cli import main


def test_spark_master_without_the_spark_engine_is_a_usage_error(tmp_path, capsys):
    rows = ["chip,timestamp_ns,seq.elapsed_cycles"] + [f"0,{i * 1_000_000},{(i + 1) * 1000}" for i in range(6)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    args = [
        "analyze",
        str(tmp_path / "d.csv"),
        "--spark-master",
        "spark://127.0.0.1:7077",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--spark-master spark://127.0.0.1:7077 applies to --engine spark only" in err and "add --engine spark" in err
    assert not (tmp_path / "o").exists()
    assert main(["analyze", str(tmp_path / "d.csv"), "--out", str(tmp_path / "o")]) == 0  # without it: as before
