"""`perfonto analyze RUNFOLDER` whose ground_truth.json names a model perfonto does not know (a file from
another emulator version, a model since renamed) or none (written by hand) ended, after the whole
evaluation, in "internal error: KeyError: unknown model …" (``emulator.claim.run_context`` → ``get_model``,
only to decide the public-claim comparison). The comparison is skipped with a note naming the file and
the model; the rest of the report is written.

Also for `analyze` (finding 4): under the embedded engine the page blamed the capture for the missing per-op
attribution ("the capture has no trace with device op spans") though a trace was read, and the serving
latencies lost their record counts and "capped by the run length" warnings."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

from perfonto.cli import main
from perfonto.emulator.claim import run_context


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("claim_model") / "run"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        args = ["run", "--model", "llama-3.1-8b", "--chips", "1", "--duration", "0.2s", "--out", str(out), "--json"]
        assert main(args) == 0
    return out, json.loads((out / "ground_truth.json").read_text())


def _folder(tmp_path, run, gt: dict):
    src, _ = run
    d = tmp_path / "capture"
    d.mkdir()
    for f in ("counters.parquet", "requests.parquet", "trace.parquet", "sync.parquet"):
        shutil.copy(src / f, d / f)
    (d / "ground_truth.json").write_text(json.dumps(gt))
    return d


@pytest.mark.parametrize("model", ["llama-3.2-1b", None])
def test_analyze_skips_the_claim_with_a_note_naming_the_file_and_model(tmp_path, run, model, capsys):
    _, gt = run
    gt = dict(gt)
    if model is None:
        del gt["model"]
    else:
        gt["model"] = model
    d = _folder(tmp_path, run, gt)
    assert main(["analyze", str(d), "--out", str(tmp_path / "out")]) == 0  # was: internal error, exit 1
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    said = "names the model 'llama-3.2-1b', which this perfonto does not know" if model else "names no `model`"
    note = next(n for n in doc["notes"] if "public claim" in n)
    assert note.startswith(f"{(d / 'ground_truth.json').resolve()}: {said}, so the comparison with the public claim")
    assert "known models: " in note and "llama-3.1-8b" in note
    assert doc.get("claim") is None
    assert doc["assumptions"]  # the run's modelling assumptions are still reported
    assert doc["metrics"]["tokens_per_second"]["value"] > 0  # and the evaluation
    assert "internal error" not in capsys.readouterr().err


def test_run_context_with_a_known_model_still_compares(run):
    _, gt = run
    ctx = run_context("sohu", gt)
    assert ctx["claim"] is not None and "notes" not in ctx
    assert ctx["claim"]["scenario_matches"] is False  # llama-3.1-8b on 1 chip is not the claim's scenario
    bad = run_context("sohu", dict(gt, model="no-such-model"), "x/ground_truth.json")
    assert bad["claim"] is None
    assert bad["notes"][0].startswith("x/ground_truth.json: names the model 'no-such-model', which this perfonto")


def test_embedded_engine_keeps_populations_and_says_why_there_is_no_per_op(tmp_path, run):
    src, _ = run
    out = tmp_path / "emb"
    assert main(["analyze", str(src), "--engine", "embedded", "--out", str(out)]) == 0
    doc = json.loads((out / "report.json").read_text())
    memory = json.loads((src / "report.json").read_text())  # `perfonto run`: the in-memory engine
    assert doc["engine"] == "embedded"
    reduced = [n for n, m in memory["metrics"].items() if m.get("of")]
    assert {"ttft_p50", "tpot_p50", "itl_p50"} <= set(reduced)
    for n in reduced:  # the same value, count, unfinished and warning as the in-memory engine's
        assert doc["metrics"][n] == memory["metrics"][n], n
    assert "count" in doc["metrics"]["itl_p50"]
    assert any("per-op attribution" in n and "--engine memory" in n for n in doc["notes"])
    page = tmp_path / "page.html"
    assert main(["report", str(out), "--html", str(page), "--no-timeline"]) == 0
    text = page.read_text()
    assert "No per-op attribution: the embedded engine" in text and "<code>--engine memory</code>" in text
    assert "the capture has no trace with device op spans" not in text
