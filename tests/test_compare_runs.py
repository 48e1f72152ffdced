"""Issue 31, part 1: `perfonto compare-runs` — two captures metric by metric, a moving-block bootstrap interval
from the window values, a verdict, metrics in one run only, and an exit code for CI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.analysis.compare_runs import MIN_WINDOWS, block_bootstrap, compare, load_run, regressions
from perfonto.cli import main


def test_the_bootstrap_sees_a_shift_and_not_noise():
    rng = np.random.default_rng(1)
    a = 100 + rng.normal(0, 5, 400)
    change, lo, hi = block_bootstrap(a, a + 3.0)
    assert change == pytest.approx(3.0) and 0 < lo < 3.0 < hi  # a shift of 0.6 sigma over 400 windows is seen
    change, lo, hi = block_bootstrap(a, a.copy())
    assert change == 0 and lo < 0 < hi
    assert block_bootstrap(a, a + 3.0) == block_bootstrap(a, a + 3.0)  # a fixed seed: the same interval every time
    assert all(math.isnan(x) for x in block_bootstrap(a[: MIN_WINDOWS - 1], a))


def test_autocorrelated_noise_widens_the_interval():
    """Windows are not independent: a slow wander must widen the interval, which blocks do and
    resampling single windows would not."""
    rng = np.random.default_rng(2)
    walk = np.cumsum(rng.normal(0, 1, 1000))
    b = np.cumsum(rng.normal(0, 1, 1000))
    _, lo, hi = block_bootstrap(walk, b)
    _, lo1, hi1 = block_bootstrap(rng.permutation(walk), rng.permutation(b))
    assert hi - lo > 2 * (hi1 - lo1)


def _run(folder: Path, values: dict[str, np.ndarray], report_extra: dict | None = None, unit: str = "percent") -> Path:
    folder.mkdir(parents=True)
    W = len(next(iter(values.values())))
    cols = {"window": pa.array(np.repeat(np.arange(W), 2)), "chip": pa.array(np.tile([0, 1], W))}
    cols.update({n: pa.array(np.repeat(v, 2)) for n, v in values.items()})
    pq.write_table(pa.table(cols), folder / "metrics.parquet")
    report = {
        "generation": "sohu",
        "metrics": {n: {"value": float(np.nanmean(v)), "unit": unit} for n, v in values.items()},
        "topdown": {},
        "ops": {"rows": []},
        "bottleneck": "topdown.memory_bound",
        **(report_extra or {}),
    }
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def test_synthetic_runs_verdicts_one_run_only_and_exit_codes(tmp_path, capsys):
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 1, 200)
    base = _run(tmp_path / "a", {"mfu": 40 + noise, "mbu": 30 + noise, "only_a": 1 + 0 * noise})
    other = _run(tmp_path / "b", {"mfu": 36 + noise[::-1], "mbu": 30 + noise[::-1], "only_b": 2 + 0 * noise})
    res = compare(load_run(base), load_run(other))
    assert res["metrics"]["mfu"]["verdict"] == "decreased" and res["metrics"]["mfu"]["relative"] == pytest.approx(
        -0.1, abs=1e-3
    )
    lo, hi = res["metrics"]["mfu"]["relative_interval"]
    assert lo < res["metrics"]["mfu"]["window_change"] / 40.048 < hi < 0 and not res["metrics"]["mfu"]["differs"]
    assert res["metrics"]["mbu"]["verdict"] == "no change"
    assert res["only_in"] == {"only_a": "baseline", "only_b": str(other)}
    assert (
        regressions(res, [("mfu", -5.0)])
        and not regressions(res, [("mfu", -20.0)])
        and not regressions(res, [("mfu", +5.0)])
    )
    assert main(["compare-runs", str(base), str(other), "--fail-on-regression", "mfu:-5"]) == 1
    assert "regression: mfu: -9.99 % (40.0483 → 36.0483 percent), past -5 %" in capsys.readouterr().out
    assert main(["compare-runs", str(base), str(other), "--fail-on-regression", "mfu:-20", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["comparisons"][0]["metrics"]["mfu"]["verdict"] == "decreased"
    assert (
        main(["compare-runs", str(base), str(other), "--fail-on-regression", "only_b:-5"]) == 2
    )  # a usage error, not a regression
    assert "`only_b` has a value in one run only" in capsys.readouterr().err
    assert main(["compare-runs", str(base), str(other), "--fail-on-regression", "mfuu:-5"]) == 2
    assert "`mfuu` is not a metric of these runs; did you mean `mfu`?" in capsys.readouterr().err
    assert main(["compare-runs", str(base), str(base), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {m["verdict"] for m in doc["comparisons"][0]["metrics"].values()} == {"no change"}


def test_a_metric_from_zero_and_strict_json(tmp_path, capsys):
    """A metric that is 0 in the baseline (a peer wait that appears) has no relative change, but its verdict
    comes from the windows; --json is strict JSON (no NaN, no Infinity)."""
    rng = np.random.default_rng(4)
    base = _run(tmp_path / "a", {"wait": np.zeros(100), "few": np.r_[1.0, np.full(99, np.nan)]})
    other = _run(tmp_path / "b", {"wait": 12 + rng.normal(0, 1, 100), "few": np.r_[2.0, np.full(99, np.nan)]})
    res = compare(load_run(base), load_run(other))
    w = res["metrics"]["wait"]
    assert w["relative"] is None and w["verdict"] == "increased" and w["window_interval"][0] > 10
    assert res["metrics"]["few"]["verdict"] == f"too few windows (< {MIN_WINDOWS})"
    assert main(["compare-runs", str(base), str(other), "--json", "--fail-on-regression", "wait:+5"]) == 1
    text = capsys.readouterr().out

    def refuse(c):
        raise ValueError(c)

    doc = json.loads(text, parse_constant=refuse)
    assert doc["comparisons"][0]["metrics"]["wait"]["relative"] is None
    assert main(["compare-runs", str(base), str(other)]) == 0
    assert "new (baseline 0)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, want",
    [
        (["compare-runs", "nowhere", "nowhere2"], "nowhere: no readable report.json"),
        (["compare-runs", "a", "b", "--fail-on-regression", "mfu"], "write METRIC:PCT"),
        (["compare-runs", "a", "b", "--fail-on-regression", "mfu:0"], "write METRIC:PCT"),
        (["compare-runs", "a", "b", "--confidence", "2"], "a confidence is between 0.5 and 1"),
        (["compare-runs", "a"], "give a baseline and at least one run"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, capsys, monkeypatch, argv, want):
    monkeypatch.chdir(tmp_path)
    assert main(argv) in (1, 2)
    err = capsys.readouterr().err
    assert want in err and "Traceback" not in err and "internal error" not in err


FAST_HBM = """generation: sohu_fasthbm
extends: sohu
description: Sohu with HBM bandwidth x1.5 (a compare-runs test).
spec:
  hbm.peak_bandwidth: {value: 10.8, unit: TB/s, provenance: assumed, source: "Sohu's 7.2 TB/s x 1.5",
                       description: HBM peak bandwidth per chip.}
"""


@pytest.mark.slow
def test_hbm_x1_5_moves_the_memory_metrics_and_nothing_else_that_must_stay(tmp_path, capsys):
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "fast.yaml").write_text(FAST_HBM)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "--duration", "0.3s", "--out", str(a)]) == 0
    assert main(["run", "--duration", "0.3s", "--catalog", str(tmp_path / "fast"), "--out", str(b)]) == 0
    capsys.readouterr()
    assert main(["compare-runs", str(a), str(b), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["comparisons"][0]["metrics"]
    for name in ("mbu", "hbm.bandwidth_utilization", "roofline.ridge_point", "topdown.memory_bound"):  # must move, down
        assert m[name]["verdict"] == "decreased" and m[name]["relative_interval"][1] < 0, (name, m[name])
    assert m["roofline.ridge_point"]["relative"] == pytest.approx(
        -1 / 3, rel=1e-9
    )  # peak FLOP/s over 1.5 × the bandwidth
    for name in ("hbm.occupancy", "kv_cache_tokens", "batch_size"):  # must not move
        assert m[name]["verdict"] == "no change", (name, m[name])
    # doorbells ring once a step (~3 windows of a 0.3 s run): not a change, and not "no change" either
    assert m["pcie.doorbell_rate"]["verdict"].startswith("too few windows with a value ≠ 0"), m["pcie.doorbell_rate"]
    assert main(["compare-runs", str(a), str(a), "--json"]) == 0
    same = json.loads(capsys.readouterr().out)["comparisons"][0]["metrics"]
    assert {v["verdict"] for v in same.values()} <= {"no change", f"too few windows (< {MIN_WINDOWS})"}  # a == b
    assert main(["compare-runs", str(a), str(b), "--fail-on-regression", "mbu:-10"]) == 1
    assert main(["compare-runs", str(a), str(b), "--fail-on-regression", "mbu:-50"]) == 0
    _the_page_in_chromium(tmp_path, a, b, m, capsys)


def _the_page_in_chromium(tmp_path, a, b, metrics, capsys):
    """The HTML compare page loads in headless Chromium with no console error and shows both runs."""
    import re

    from test_report_browser import browser, run_browser

    page = tmp_path / "cmp.html"
    assert main(["compare-runs", str(a), str(b), "--html", str(page)]) == 0
    capsys.readouterr()
    if browser() is None:
        pytest.skip("no Chromium on this machine: install Debian's `chromium` package (.ci/run does)")
    res = run_browser(["--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()], tmp_path / "profile")
    assert res.returncode == 0, res.stderr[-2000:]
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    dom = res.stdout
    assert 'data-ready="yes"' in dom and 'data-images-loaded="1"' in dom  # the roofline with arrows decoded
    assert f'data-baseline="{a}"' in dom and f'data-run="{b}"' in dom
    for name in ("mbu", "roofline.ridge_point"):
        for run, key in (("baseline", "baseline"), ("run", "value")):
            got = re.search(rf'data-value="([^"]+)" data-metric="{re.escape(name)}" data-run="{run}"', dom)
            assert got and float(got.group(1)) == metrics[name][key], (name, run)


def test_a_metric_of_few_events_says_so_and_its_gate_fails(tmp_path, capsys):
    """tokens/s of a 1 s run at 1 ms windows: tokens count when a step ends, so ~3 windows of ~330 hold them
    all (a new user's slow-chip run lost 13.6 % and read "no change", and the gate passed). The verdict says
    there are too few windows with a value, and a gate past its threshold fails saying it cannot tell."""
    W = 1000
    a, b = np.zeros(W), np.zeros(W)
    a[[300, 630, 960]] = 32_000_000.0  # three steps' tokens per 1 ms window
    b[[340, 700]] = 32_000_000.0 * 1.3
    base, other = _run(tmp_path / "a", {"tokens_per_second": a}), _run(tmp_path / "b", {"tokens_per_second": b})
    res = compare(load_run(base), load_run(other))
    m = res["metrics"]["tokens_per_second"]
    assert m["verdict"] == "too few windows with a value ≠ 0 (3 and 2 < 10): run longer"
    assert m["relative"] == pytest.approx(-0.1333, abs=1e-3)
    (line,) = regressions(res, [("tokens_per_second", -5.0)])
    assert "past -5 %, not told from the noise: too few windows" in line
    assert not regressions(res, [("tokens_per_second", -20.0)])  # not past it: nothing to tell
    assert main(["compare-runs", str(base), str(other), "--fail-on-regression", "tokens_per_second:-5"]) == 1
    capsys.readouterr()


def test_the_verdict_is_about_the_run_level_change_it_sits_beside(tmp_path, capsys):
    """A new user's slow-chip comparison read "arithmetic_intensity +0.03 % [-7.59 %, -1.40 %] decreased": the
    change was the run's, the interval and verdict the window means'. The interval is now the run-level
    change's (the window bootstrap's spread around it), so a run value that did not move reads "no change",
    marked where the window means moved; and a metric that is never negative has no interval below −100 %."""
    rng = np.random.default_rng(7)
    a, b = 100 + rng.normal(0, 3, 400), 95 + rng.normal(0, 3, 400)  # window means −5 %, beyond the noise
    base, other = _run(tmp_path / "a", {"ai": a}), _run(tmp_path / "b", {"ai": b})
    for folder, value in ((base, 588.43), (other, 588.43 * 1.0003)):  # the run-level values: +0.03 %
        doc = json.loads((folder / "report.json").read_text())
        doc["metrics"]["ai"]["value"] = value
        (folder / "report.json").write_text(json.dumps(doc))
    m = compare(load_run(base), load_run(other))["metrics"]["ai"]
    lo, hi = m["relative_interval"]
    assert m["relative"] == pytest.approx(3e-4) and lo < 3e-4 < hi and hi - lo < 0.02
    assert m["verdict"] == "no change" and m["differs"]
    assert m["window_relative"] == pytest.approx(-0.05, abs=0.01) and m["window_interval"][1] < 0
    assert main(["compare-runs", str(base), str(other), "--all", "--fail-on-regression", "ai:-1"]) == 0
    out = capsys.readouterr().out
    assert "+0.03 % *" in out and "no change" in out and "decreased" not in out

    sparse_a, sparse_b = np.zeros(200), np.zeros(200)  # events in a few windows: resamples of only zeros
    sparse_a[[10, 90, 150]], sparse_b[[40, 120]] = 5.0, 4.0
    base, other = _run(tmp_path / "c", {"r": sparse_a}), _run(tmp_path / "d", {"r": sparse_b})
    m = compare(load_run(base), load_run(other))["metrics"]["r"]
    assert m["relative"] == pytest.approx(8 / 15 - 1) and m["relative_interval"][0] >= -1.0
    assert m["verdict"].startswith("too few windows with a value ≠ 0")


def test_a_metric_in_another_unit_is_not_compared(tmp_path, capsys):
    """Found by a session trying to break perfonto: a run analysed with a catalog whose `mfu` is in 1 against one
    whose `mfu` is in percent read "26.0091 → 0.439101 percent −98.31 % decreased" and failed its gate. The
    unit differs: the metric is listed, not compared, and a gate on it is a usage error."""
    rng = np.random.default_rng(9)
    a = _run(tmp_path / "a", {"mfu": 26 + rng.normal(0, 1, 100), "mbu": 40 + rng.normal(0, 1, 100)})
    b = _run(tmp_path / "b", {"mfu": 0.26 + rng.normal(0, 0.01, 100), "mbu": 40 + rng.normal(0, 1, 100)})
    doc = json.loads((b / "report.json").read_text())
    doc["metrics"]["mfu"]["unit"] = "1"
    (b / "report.json").write_text(json.dumps(doc))
    res = compare(load_run(a), load_run(b))
    assert "mfu" not in res["metrics"] and res["units_differ"] == {"mfu": ["percent", "1"]} and "mbu" in res["metrics"]
    assert main(["compare-runs", str(a), str(b), "--fail-on-regression", "mfu:-5"]) == 2
    assert "is in percent in the baseline and in 1 in the run" in capsys.readouterr().err
    assert main(["compare-runs", str(a), str(b)]) == 0
    assert "not compared, the unit differs" in " ".join(capsys.readouterr().out.split())


def test_edge_windows_never_turn_the_verdict_against_the_run_level_change():
    """Found by a review: with the baseline's windows all 0 (a run-level value of 1.0 from elsewhere) and the run's
    around 0.55, the run-level −50 % read "increased" (the windows' verdict); and a never-negative metric whose run
    windows are all 0 had an interval below −100 %."""
    from perfonto.analysis.compare_runs import _metric

    boot = {"n_boot": 2000, "confidence": 0.95, "seed": 0}
    rng = np.random.default_rng(1)
    m = _metric(1.0, 0.5, np.zeros(100), 0.5 + 0.1 * rng.random(100), "x", boot)
    assert m["relative"] == -0.5 and m["verdict"] == "decreased" and m["differs"]  # the windows rose
    lo, hi = m["relative_interval"]
    assert lo < -0.5 < hi < 0
    m = _metric(1.0, 0.0, 1 + rng.random(100), np.zeros(100), "x", boot)
    assert m["relative"] == -1.0 and m["relative_interval"][0] >= -1.0 and m["verdict"] == "decreased"


def test_two_runs_alike_say_so_in_one_line_not_an_empty_table(tmp_path, capsys):
    """Two runs with nothing changed printed the table's header with no row above "N metric(s) with no
    change" (read as a failed comparison); now one line says nothing moved and how many were compared."""
    rng = np.random.default_rng(4)
    noise = rng.normal(0, 1, 200)
    a = _run(tmp_path / "a", {"mfu": 40 + noise, "mbu": 30 + noise})
    b = _run(tmp_path / "b", {"mfu": 40 + noise[::-1], "mbu": 30 + noise[::-1]})
    assert main(["compare-runs", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "no metric changed beyond the noise at 95 % confidence: 2 metric(s) compared (--all lists them)" in out
    assert "metric (unit)" not in out  # no table without a row
    assert main(["compare-runs", str(a), str(b), "--all"]) == 0
    out = capsys.readouterr().out
    assert "metric (unit)" in out and "mfu (percent)" in out
