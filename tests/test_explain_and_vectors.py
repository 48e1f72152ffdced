"""`perfonto explain`, `perfonto graph` and `perfonto test` (catalog test vectors)."""

import json

import numpy as np
import pytest

from helpers import compile_src
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import Windows
from perfonto.cli import main


def test_explain_mfu(capsys):
    assert main(["explain", "mfu"]) == 0
    out = capsys.readouterr().out
    assert "formula: (model_flops_rate / mxu.achieved_flops * hfu) if" in out  # model FLOPs' share x hfu (issue 29)
    assert "declared [percent]" in out and "conversion factor 1" in out  # unit derivation: hfu is a percent already
    assert "seq.model_flops (counter, FLOP, 64-bit, scale 1024, per chip)" in out  # tree down to signals
    assert "interval (window duration" in out
    assert "caelius: available" in out and "source: Chowdhery" in out


def test_explain_unit_steps_fit_a_terminal(capsys):
    """The step-by-step unit table was padded to its longest expression (~150 columns for mfu, a new
    user's trial): a step longer than the column stands on its own line with its unit below it."""
    from perfonto.metrics.explain import STEP_WIDTH

    assert main(["explain", "mfu"]) == 0
    lines = capsys.readouterr().out.split("unit, step by step:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    achieved = next(x for x in lines if x.startswith("  mxu.achieved_flops "))
    assert achieved[2 + STEP_WIDTH + 2 :].startswith("TFLOP/s")
    long = next(i for i, x in enumerate(lines) if x.startswith("  model_flops_rate / mxu.achieved_flops * hfu if"))
    assert lines[long + 1].strip().startswith("%")
    assert all(x[2 + STEP_WIDTH : 4 + STEP_WIDTH] == "  " for i, x in enumerate(lines) if i != long)  # one column


def test_explain_unavailable_and_unknown(capsys):
    assert main(["explain", "hbm.refresh_overhead", "--generation", "caelius"]) == 1
    assert "removed in generation `caelius`" in capsys.readouterr().err
    assert main(["explain", "mfuu"]) == 2
    assert "did you mean `mfu`" in capsys.readouterr().err


def test_graph_mermaid_and_dot(capsys):
    assert main(["graph", "topdown.memory_bound"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("flowchart LR")
        and '"seq.memory_cycles (signal)"' in out
        and "topdown.cycles [core_cycle]" in out
    )
    assert out.count("-->") == 7
    assert main(["graph", "topdown.memory_bound", "--format", "dot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("digraph perfonto {") and out.count("->") == 7


def test_shipped_vectors_pass_and_cover_every_metric(capsys, library):
    assert main(["test", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] == 0 and doc["passed"] > 0
    assert main(["test"]) == 0
    out = capsys.readouterr().out
    assert f"({len(library.metrics) + len(library.record_metrics)} metrics checked" in out


def test_failing_vector_exits_1(tmp_path, capsys):
    p = tmp_path / "x.vectors.yaml"
    p.write_text(
        "generation: sohu\nvectors:\n  - name: wrong\n    interval: 1 s\n    inputs: {pcie.rx_bytes: 1 GB}\n"
        "    expect: {pcie.rx_bandwidth: 2 GB/s}\n"
    )
    assert main(["test", str(p)]) == 1
    out = capsys.readouterr().out
    assert f"{p}:6:33: FAIL" in out and "expected 2" in out


def test_no_vectors_exits_1(tmp_path, capsys):
    assert main(["test", str(tmp_path)]) == 1


# Cases of issue 4 that need their own generation or formula


def test_case5_cycles_per_instruction_to_ns(tmp_path):
    from perfonto.ontology import load_generation

    p = tmp_path / "g.yaml"
    p.write_text(
        "generation: g\ndescription: 2 GHz\nclock_domains:\n  core: {frequency: {value: 2, unit: GHz, provenance: "
        "assumed}}\nblocks:\n  cpu:\n    description: a core\n    clock: core\n    signals:\n"
        "      busy: {kind: counter, unit: core_cycle, width: 64, description: busy cycles}\n"
        "      inst: {kind: counter, unit: instruction, width: 64, description: instructions}\n"
    )
    gen, d = load_generation(p)
    g = compile_src(gen, "metric t [ns/instruction] = cpu.busy / cpu.inst / spec.clock.core")
    assert not g.errors
    for inst, want in ((0.0, None), (50.0, 5.0)):
        w = Windows(np.ones((1, 1)), {"cpu.busy": np.full((1, 1), 500.0), "cpu.inst": np.full((1, 1), inst)})
        v = evaluate(g, w)["t"][0, 0]
        assert (np.isnan(v) and not np.isinf(v)) if want is None else v == pytest.approx(want)


@pytest.fixture(scope="module")
def dies(tmp_path_factory):
    from perfonto.ontology import load_generation

    p = tmp_path_factory.mktemp("d") / "dies.yaml"
    p.write_text("""\
generation: dies
description: a part with 8 dies of 38 cores each
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
spec:
  die.hbm_peak: {value: 665.6, unit: GB/s, provenance: assumed, scope: instance}
  die.cores: {value: 38, unit: "1", provenance: assumed, scope: system}
blocks:
  die:
    description: one die
    clock: core
    instances: {die: 8}
    signals:
      active_cycles: {kind: counter, unit: core_cycle, width: 64, description: active cycles of the die}
      busy_core_cycles: {kind: counter, unit: core_cycle, width: 64,
                         description: busy cycles summed over the die's cores}
  mem:
    description: chip-wide memory
    clock: core
    signals:
      bytes: {kind: counter, unit: B, width: 64, description: "bytes moved, chip-wide"}
""")
    gen, d = load_generation(p)
    assert gen is not None, [x.render() for x in d]
    return gen


def test_case6_clock_term_per_die_is_not_summed(dies):
    # eight dies each report 1,000,000 active cycles; busy cycles over all 304 cores sum to 152,000,000
    g = compile_src(
        dies, "metric util [percent] = sum(die.busy_core_cycles) / (spec.die.cores * sum(die.active_cycles))"
    )
    assert not g.errors, [x.render() for x in g.errors]
    w = Windows(
        np.ones((1, 1)),
        {
            "die.active_cycles": np.full((1, 1, 8), 1e6),
            "die.busy_core_cycles": np.full((1, 1, 8), 152e6 / 8),
            "mem.bytes": np.zeros((1, 1)),
        },
    )
    assert evaluate(g, w)["util"][0, 0] == pytest.approx(50.0)
    # per die, the same: the clock term stays per die
    g2 = compile_src(dies, "metric util [percent] = die.busy_core_cycles / (spec.die.cores * die.active_cycles)")
    assert evaluate(g2, w)["util"][0, 0] == pytest.approx(np.full(8, 50.0))


def test_case7_per_die_peak_must_be_rolled_up(dies):
    bad = compile_src(dies, "metric u [percent] = mem.bytes / interval / spec.die.hbm_peak")
    assert [d.code for d in bad.errors] == ["scope"]
    good = compile_src(dies, "metric u [percent] = mem.bytes / interval / sum(spec.die.hbm_peak)")
    assert not good.errors
    w = Windows(
        np.ones((1, 1)),
        {
            "die.active_cycles": np.zeros((1, 1, 8)),
            "die.busy_core_cycles": np.zeros((1, 1, 8)),
            "mem.bytes": np.full((1, 1), 2021.97e9),
        },
    )
    assert evaluate(good, w)["u"][0, 0] == pytest.approx(37.97, abs=0.005)


def test_chip_wide_peak_against_per_instance_value_is_a_scope_error(sohu):
    g = compile_src(sohu, "metric u [percent] = hbm.read_bytes / (spec.hbm.peak_bandwidth * interval)")
    assert [d.code for d in g.errors] == ["scope"]


def test_case9_gauge_holding_a_rate_is_not_a_total(sohu, tmp_path):
    from perfonto.ontology import load_generation

    p = tmp_path / "r.yaml"
    p.write_text(
        "generation: r\nextends: sohu\ndescription: adds a rate gauge\nblocks:\n  pcie:\n    signals:\n"
        "      rx_rate: {kind: gauge, unit: KiB/s, description: host-to-device rate as reported by firmware}\n"
    )
    gen, _ = load_generation(p)
    g = compile_src(gen, "metric total [B] = pcie.rx_rate")
    (d,) = g.errors
    assert d.code == "unit-mismatch" and "pcie.rx_rate" in d.message and "gauge" in d.message
    ok = compile_src(gen, "metric a [MiB/s] = pcie.rx_rate\nmetric b [MB/s] = pcie.rx_rate")
    w = Windows(
        np.ones((1, 1)),
        {
            n: np.zeros((1, 1) + tuple(s for _, s in sig.axes))
            for n, sig in list(gen.signals.items()) + list(gen.fields.items())
        },
    )
    w.values["pcie.rx_rate"][:] = 2_048_000
    out = evaluate(ok, w)
    assert out["a"][0, 0] == pytest.approx(2000.0) and out["b"][0, 0] == pytest.approx(2097.152)


def test_case12_rewrites_keep_values(sohu):
    from perfonto.codegen.python_evaluator import generate, load

    text = (
        "metric a [tok] = seq.input_tokens + seq.output_tokens\nmetric b [tok] = a - seq.output_tokens\n"
        "metric c [tok] = a + 3 * seq.output_tokens\nmetric d [tok] = (seq.input_tokens + seq.output_tokens) * 2\n"
    )
    g = compile_src(sohu, text)
    mod = load(generate(g))
    vals = {
        n: np.zeros((1, 1) + tuple(s for _, s in sig.axes))
        for n, sig in list(sohu.signals.items()) + list(sohu.fields.items())
    }
    vals["seq.input_tokens"][:] = 100
    vals["seq.output_tokens"][:] = 20
    out = mod.evaluate(vals, np.ones((1, 1)))
    assert [float(out[k][0, 0]) for k in "abcd"] == [120.0, 100.0, 180.0, 240.0]


@pytest.mark.parametrize(
    "body, code, line",
    [
        ("  - name: x\n    intervall: 1 s\n    expect: {mfu: 1}\n", "unknown-field", 4),
        ("  - name: x\n    expect: {mxu.utilization: 5 GHz}\n", "vector-expect", 4),
        ("  - name: x\n    expect: {mxu.utilization: eighty}\n", "vector-expect", 4),
        ("  - name: x\n    interval: 9 ** 9 ** 9 ms\n    expect: {mfu: 1}\n", "unit-mismatch", 4),
        ("  - name: x\n    records: {request.arrival_time: [abc]}\n    expect: {ttft: [1]}\n", "vector-records", 4),
        (
            "  - name: x\n    records: {request.arrival_time: [0, 1], request.first_token_time: [0.3]}\n    expect: "
            "{ttft: [1]}\n",
            "vector-records",
            4,
        ),
        ("  - name: x\n    records: {request.token_times: [0.3]}\n    expect: {itl: [1]}\n", "vector-records", 4),
    ],
)
def test_bad_vectors_are_located_diagnostics(tmp_path, capsys, body, code, line):
    p = tmp_path / "x.vectors.yaml"
    p.write_text("generation: sohu\nvectors:\n" + body)
    assert main(["test", str(p), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    hit = [d for d in doc["diagnostics"] if d["code"] == code]
    assert hit and hit[0]["line"] == line, doc["diagnostics"]
