"""Calibration against the public measurements: the shipped rows, the fitted file, hold-out checks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from perfonto.emulator.assumptions import FITTED_BOUNDS, load_fitted
from perfonto.emulator.calibration import fit, load_rows, prepare, validate
from perfonto.emulator.project import geomean_error

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "calibration" / "trtllm-offline-throughput.yaml"


@pytest.fixture(scope="module")
def preps():
    _, rows = load_rows()
    return [prepare(r) for r in rows]


def test_shipped_rows_are_the_public_ones():
    header, rows = load_rows()
    assert "TensorRT-LLM" in header["source"] and len(rows) == 16
    if SHARED.exists():  # a fresh clone without ../shared still has the copy
        shared = yaml.safe_load(SHARED.read_text())["rows"]
        assert [(r["model"], r["gpu"], r["tp"], r["dtype"], r["isl"], r["osl"], r["value"]) for r in shared] == \
            [(r.model, r.gpu, r.tp, r.dtype, r.isl, r.osl, r.value) for r in rows]


def test_geomean_error_definition():
    assert geomean_error(np.array([110.0, 90.0]), np.array([100.0, 100.0])) == pytest.approx(
        np.exp((np.log(1.1) + abs(np.log(0.9))) / 2) - 1)


def test_shipped_rows_within_the_acceptance(preps):
    res = validate(preps)
    assert res["geomean_error"] <= 0.15
    assert res["worst_error"] <= 0.35
    assert all(abs(r["error"]) <= 0.35 for r in res["rows"])


def test_fitted_file_is_what_calibrate_writes(preps):
    """``perfonto calibrate`` reproduces the committed parameters (same rows, same start, same seed)."""
    shipped = load_fitted()["parameters"]
    assert set(shipped) == set(FITTED_BOUNDS)
    f = fit(preps)
    for k, v in shipped.items():
        assert f["parameters"][k] == pytest.approx(v, rel=2e-3, abs=1e-9), k
    lo_hi = {k: FITTED_BOUNDS[k][:2] for k in shipped}
    assert all(lo_hi[k][0] <= v <= lo_hi[k][1] for k, v in shipped.items())


@pytest.mark.parametrize("held_out,why", [
    (lambda r: r.model == "llama-3.1-8b", "another model"),
    (lambda r: (r.isl, r.osl) == (1000, 1000), "another length"),
    (lambda r: r.gpu == "h100", "another GPU"),
    (lambda r: (r.isl, r.osl) in ((128, 128), (128, 2048)), "short prompts"),
])
def test_hold_out_rows_predicted_from_the_others(preps, held_out, why):
    """Fit on the other rows, predict the held-out ones: ≤ 0.20 geomean error (the hidden-row target)."""
    train = [p for p in preps if not held_out(p.row)]
    test = [p for p in preps if held_out(p.row)]
    f = fit(train, starts=1)
    pred = np.array([p.predict(p.cfg.a.replace(**f["parameters"])) for p in test])
    meas = np.array([p.row.value for p in test])
    assert geomean_error(pred, meas) <= 0.20, (why, pred / meas)


def test_validate_emulator_cli_json(capsys):
    from perfonto.cli import main

    assert main(["validate-emulator", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)       # stdout holds the JSON alone
    assert set(doc) == {"rows", "geomean_error", "worst_error"} and len(doc["rows"]) == 16
    assert doc["geomean_error"] <= 0.15 and doc["worst_error"] <= 0.35
    r = doc["rows"][0]
    assert {"model", "gpu", "tp", "dtype", "isl", "osl", "measured", "predicted", "error"} <= set(r)
