"""Issue 2 acceptance: the main job end to end, checked against the emulator's ground truth."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return out


def run_json(capsys, out, *extra):
    rc = main(["run", "--json", "--out", str(out), *extra])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    doc = json.loads(cap.out)  # stdout holds the JSON object alone
    return doc, cap.err


def test_default_run_json(capsys, tmp_path):
    doc, err = run_json(capsys, tmp_path)
    assert "compiled catalog" in err
    assert (doc["generation"], doc["model"], doc["chips"]) == ("sohu", "llama3-70b", 8)
    assert set(doc["outputs"]) >= {"counters", "ground_truth", "metrics", "evaluator", "docs"}
    for path in doc["outputs"].values():
        assert (tmp_path / path.split("/")[-1]).exists() or path.endswith(".md")
    m = doc["metrics"]
    truth = json.loads(open(doc["outputs"]["ground_truth"]).read())

    _check_ranges(m)
    _check_topdown(doc, m)
    _check_against_truth(doc, m, truth)
    # the window table is written with one row per window and chip
    t = pq.read_table(doc["outputs"]["metrics"])
    windows = round(truth["duration_s"] / 1e-3)  # 1 ms samples over the measured duration
    assert t.num_rows == windows * 8 and "mfu" in t.column_names
    _check_steady_state(m, truth)


def _check_steady_state(m: dict, truth: dict) -> None:
    """Issue 30, item 4: the default run measures whole engine steps of a warm server. Its steps take
    ~0.337 s, so 1 s asked for is 3 whole steps (1.010 s measured, not 2 finished steps of 1.000 s);
    tokens/s within 3 % of `project`'s steady state for the same scenario (97,670 tok/s here), FLOPs per
    token within 2 % of the model's (request_flops / (2048 + 128) = 1.398e11 FLOP for Llama-3-70B), and
    TPOT, ITL, E2E and completed requests have values (the warm-up's requests still decoding at t = 0)."""
    from perfonto.emulator.project import project, request_flops

    assert truth["requested_duration_s"] == 1.0 and 1.0 < truth["duration_s"] < 1.02
    p = project("sohu", model="llama3-70b", chips=8, isl=2048, osl=128)
    steady = p.figures.steady_tokens_per_second
    assert m["tokens_per_second"]["value"] == pytest.approx(steady, rel=0.03)
    model_flops_per_token = request_flops(p.config, 2048, 128) / (2048 + 128)
    assert truth["flops"] / truth["tokens"] == pytest.approx(model_flops_per_token, rel=0.02)
    for name in ("tpot_p50", "itl_p50", "e2e_latency_p50"):
        assert m[name]["value"] is not None and m[name]["value"] > 0, name
    assert m["requests_completed"]["value"] > 0 and truth["requests_completed"] > 0


def _check_ranges(m: dict) -> None:
    """Utilisation-type metrics lie in [0, 100] percent (or [0, 1] as ratios)."""
    for name, v in m.items():
        if v["value"] is None:
            continue
        if v["unit"] in ("percent", "%") and ("utilization" in name or name.startswith("topdown.") or name == "mfu"):
            assert 0 <= v["value"] <= 100, (name, v)
        if v["unit"] == "ratio":
            assert 0 <= v["value"] <= 1, (name, v)


def _check_topdown(doc: dict, m: dict) -> None:
    """The top-down split sums to 100 % and the bottleneck is its largest node."""
    td = [
        m[n]["value"]
        for n in (
            "topdown.compute_bound",
            "topdown.memory_bound",
            "topdown.interconnect_bound",
            "topdown.host_bound",
            "topdown.idle",
        )
    ]
    assert sum(td) == pytest.approx(100.0, abs=1e-4)
    assert doc["bottleneck"] in {
        "topdown.compute_bound",
        "topdown.memory_bound",
        "topdown.interconnect_bound",
        "topdown.host_bound",
        "topdown.idle",
    }
    assert m[doc["bottleneck"]]["value"] == max(td)


def _check_against_truth(doc: dict, m: dict, truth: dict) -> None:
    """Bandwidth within the chips' peak; the emulator's ground truth within 0.5 %; server rates the sum of
    the chips'."""
    # HBM read + write bandwidth within chips x per-chip peak (7.2 TB/s assumed per chip)
    assert (m["hbm.read_bandwidth"]["value"] + m["hbm.write_bandwidth"]["value"]) <= 8 * 7200
    # agreement with the emulator's ground truth (within 0.5 %)
    assert m["mfu"]["value"] / 100 == pytest.approx(truth["mfu"], rel=5e-3)
    assert m["tokens_per_second"]["value"] == pytest.approx(truth["tokens_per_second"], rel=5e-3)
    assert m["output_tokens_per_second"]["value"] == pytest.approx(
        truth["output_tokens"] / truth["duration_s"], rel=5e-3
    )
    assert m["hbm.read_bandwidth"]["value"] * 1e9 == pytest.approx(
        truth["hbm_read_bytes"] / truth["duration_s"], rel=5e-3
    )
    assert m["energy_per_token"]["value"] == pytest.approx(truth["energy_j"] / truth["tokens"], rel=5e-3)
    # rates are server totals: one chip's value times 8 for this symmetric TP job
    # (each chip measures its windows on its own clock, so chips differ by their drift, ~1e-4)
    assert m["mxu.achieved_flops"]["value"] == pytest.approx(
        sum(pc["metrics"]["mxu.achieved_flops"] for pc in doc["per_chip"]), rel=1e-9
    )


def test_long_run_wraps_32_bit_counters_and_still_matches_truth(capsys, tmp_path):
    # 3 s at 1.5 GHz is 4.5e9 core cycles, past 2^32 (4.29e9): every 32-bit cycle counter wraps at least once
    doc, _ = run_json(capsys, tmp_path, "--duration", "3s", "--sample-period", "10ms", "--chips", "4")
    truth = json.loads(open(doc["outputs"]["ground_truth"]).read())
    raw = pq.read_table(doc["outputs"]["counters"], columns=["chip", "seq.elapsed_cycles"])
    el = raw.column("seq.elapsed_cycles").to_numpy()[raw.column("chip").to_numpy() == 0].astype(np.int64)
    assert (np.diff(el) < 0).any(), "the 32-bit counter did not wrap; the test would prove nothing"
    m = doc["metrics"]
    d = truth["duration_s"]
    assert m["mfu"]["value"] / 100 == pytest.approx(truth["mfu"], rel=5e-3)
    assert m["tokens_per_second"]["value"] == pytest.approx(truth["tokens"] / d, rel=5e-3)
    assert m["hbm.write_bandwidth"]["value"] * 1e9 == pytest.approx(truth["hbm_write_bytes"] / d, rel=5e-3)
    cyc = sum(truth["topdown_s"].values())
    assert m["topdown.compute_bound"]["value"] / 100 == pytest.approx(truth["topdown_s"]["compute"] / cyc, rel=5e-3)
    assert m["topdown.interconnect_bound"]["value"] / 100 == pytest.approx(
        truth["topdown_s"]["collective"] / cyc, rel=5e-3
    )
    assert m["power.average"]["value"] == pytest.approx(truth["energy_j"] / d, rel=5e-3)


def test_run_reports_text(capsys, tmp_path):
    assert main(["run", "--out", str(tmp_path), "--duration", "200ms", "--chips", "2"]) == 0
    out = capsys.readouterr().out
    assert "Dominant bottleneck" in out and "Per chip" in out and "mfu" in out


def test_run_rejects_unknown_model(capsys, tmp_path):
    assert main(["run", "--out", str(tmp_path), "--model", "gpt-17"]) == 2
    assert "gpt-17" in capsys.readouterr().err
