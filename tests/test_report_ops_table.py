"""The per-op table names its two views apart: `roofline side` (the op's intensity against the ridge point)
and `bound (cycles)` (where its cycles went, top-down); where they disagree, as for a projection just below
the ridge, a line under the table names the ops and says which is which."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rich.console import Console

from perfonto.report_ops import render_ops


def _row(op, side, bound, intensity):
    return {
        "op": op,
        "time_share": 0.1,
        "work": "matrix",
        "flops_per_s": 5e15,
        "intensity": intensity,
        "efficiency": 0.6,
        "side": side,
        "ceiling": "FP8",
        "bound": bound,
    }


def _render(rows) -> str:
    console = Console(record=True, width=200)
    render_ops(SimpleNamespace(ops=rows, attribution=None), console)
    return console.export_text()


def test_an_op_below_the_ridge_whose_cycles_are_compute_is_explained():
    # ridge 1250 FLOP/B (9 PFLOP/s over 7.2 TB/s): qkv_proj at 1089 FLOP/B is on the memory side, its cycles compute
    text = _render(
        [
            _row("ffn_gate_up", "compute", "topdown.compute_bound", 3613.0),
            _row("qkv_proj", "memory", "topdown.compute_bound", 1089.1),
            _row("allreduce", "link", "topdown.interconnect_bound", 0.25),
        ]
    )
    assert "roofline side" in text and "bound (cycles)" in text
    assert "roofline side and bound differ for qkv_proj:" in text  # only it: link/interconnect agree


def test_no_line_when_every_op_agrees():
    text = _render([_row("ffn_down", "compute", "topdown.compute_bound", 2402.6)])
    assert "differ" not in text


def test_analyze_lists_what_it_read_apart_from_what_it_wrote():
    """`perfonto analyze` listed its capture's files as `outputs:` (a new user's trial); only what lies in
    the report's own folder was written."""
    from perfonto.report import _written_and_read

    got = _written_and_read(
        {
            "counters": "/data/run/counters.parquet",
            "ground_truth": "/data/run/ground_truth.json",
            "metrics": "/out/an/metrics.parquet",
            "docs": "/out/an/docs/sohu.md",
            "report": "/out/an/report.json",
        }
    )
    assert list(got["outputs"]) == ["metrics", "docs", "report"]
    assert list(got["read"]) == ["counters", "ground_truth"]
    run = _written_and_read({"counters": "/out/r/counters.parquet", "report": "/out/r/report.json"})
    assert run == {"outputs": {"counters": "/out/r/counters.parquet", "report": "/out/r/report.json"}, "read": {}}


def test_a_whole_count_prints_without_decimals():
    """`requests_completed 45.000 request` read as a measurement with three decimals (a new user's trial)."""
    from perfonto.analysis.report_json import format_value

    assert format_value(45.0, "request") == "45 request"
    assert format_value(1965.0, "token") == "1,965 token"
    assert format_value(45.5, "request") == "45.500 request"  # a mean count keeps its decimals
    assert format_value(2.0, "J") == "2.000 J" and format_value(3e9, "B") == "3e+09 B"


def test_an_op_the_windows_cannot_tell_from_its_neighbours_is_not_reliable(tmp_path, capsys):
    """A what-if audit's decode run (8 clients, 128/2048, 1 ms windows over µs ops): the op table gave
    ffn_norm 1.48 TFLOP of matrix work at 24 FLOP/B, marked reliable (ground truth: no matrix work, 0.8
    FLOP/B), because the rate model fit the windows while the norm always ran beside its GEMMs. The
    split-half estimate (rates fitted on even against odd windows) now marks such a row ≈."""
    from perfonto.cli import main

    out = tmp_path / "dec"
    args = ["run", "--isl", "128", "--osl", "2048", "--concurrency", "8", "--duration", "300ms", "--out", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    rows = {r["op"]: r for r in json.loads((out / "report.json").read_text())["ops"]["rows"]}
    truth = json.loads((out / "ground_truth.json").read_text())["by_op"]
    norm = rows["ffn_norm"]
    assert truth["ffn_norm"]["flops"] == 0  # no matrix work in truth
    assert (
        norm["work"] == "vector"
        or (norm["reliable"] is False and "≈ ffn_norm" in text)
        or (norm["determined"] is False and norm["work"] is None and "? ffn_norm" in text)  # left out, not guessed
    ), norm
    assert rows["ffn_gate_up"]["reliable"] is True  # the GEMMs themselves are told apart
