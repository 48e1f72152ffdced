"""Spec constants the emulator cannot model, and runs whose one step outlasts any sensible run, are
refused with the file and line (a breaker's HBM of 1e-20 TB/s crashed the timeline with an IndexError,
1e-9 asked for 1.4 TiB, 1e-4 sampled 1.9M windows of a 10 ms run and was killed)."""

from __future__ import annotations

import pytest

from perfonto.cli import main

RUN = ["run", "--duration", "10ms", "--chips", "1", "--warmup-steps", "0"]


def _gen(tmp_path, value):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "g.yaml").write_text(
        "generation: slowhbm\nextends: sohu\ndescription: d\nspec:\n"
        f"  hbm.peak_bandwidth: {{value: {value}, unit: TB/s, provenance: assumed, source: x, description: d}}\n"
    )
    return d


@pytest.mark.parametrize("value", ["1e-300", "1e-20", "1e-12", "1e-9", "1e-4"])
def test_a_figure_below_the_emulators_floor_names_its_line(tmp_path, capsys, value):
    d = _gen(tmp_path, value)
    assert main([*RUN, "--catalog", str(d), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err
    assert "g.yaml:5: spec constant `spec.hbm.peak_bandwidth`" in err and "below the 1 GB/s" in err


def test_a_step_far_longer_than_the_run_is_refused_before_sampling_it(tmp_path, capsys):
    d = _gen(tmp_path, "2e-3")  # 2 GB/s: one step of Llama-3-70B on one chip takes ~95 s
    assert main([*RUN, "--catalog", str(d), "--out", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err
    assert "the engine step in progress at --duration 0.01 s ends at" in err and "give a --duration" in err
