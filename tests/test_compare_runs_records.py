"""`perfonto compare-runs` on request-level metrics (TTFT, TPOT, ITL, E2E): they have no window series, so
the verdict was always "too few windows (< 10)" — for tens of thousands of token gaps too — and
`--fail-on-regression itl_p50:+10` always failed as "not told from the noise". Now their interval is a
block bootstrap over each run's request records (``analysis.compare_records``); without the records the
verdict says so and a gate past its threshold fails, saying it cannot tell."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.analysis import compare_records
from perfonto.cli import main

N = 40  # requests per run, one every 0.1 s, three tokens each: two gaps per request, 80 gaps


def _run(folder, gaps_ms, *, records: bool = True, value: float | None = None, offline: bool = False):
    """A run folder: ``report.json`` with ``itl_p50`` (the median of the gaps, ms) and ``ttft_p50``, and
    ``requests.parquet`` whose request ``i`` has both its gaps ``gaps_ms[i]`` long, its first token 0.1 × i + 0.05 s
    into the run and, ``offline``, every request arriving at 0."""
    folder.mkdir()
    first = np.arange(N) * 0.1 + 0.05
    arrival = np.zeros(N) if offline else first - 0.05
    times = [[f, f + g / 1e3, f + 2 * g / 1e3] for f, g in zip(first, gaps_ms)]
    gaps = np.concatenate([np.diff(t) for t in times]) * 1e3
    p50 = float(np.percentile(gaps, 50)) if value is None else value
    ttft = float(np.percentile((first - arrival) * 1e3, 50))
    report = {
        "generation": "sohu",
        "metrics": {
            "itl_p50": {"value": p50, "unit": "ms", "population": "token_gap", "of": "itl", "count": 2 * N},
            "ttft_p50": {"value": ttft, "unit": "ms", "population": "request", "of": "ttft", "count": N},
            "mfu": {"value": 10.0, "unit": "percent"},
        },
    }
    (folder / "report.json").write_text(json.dumps(report))
    if records:
        cols = {
            "arrival_time": arrival,
            "admission_time": arrival,
            "first_token_time": [t[0] for t in times],
            "completion_time": [t[-1] for t in times],
            "input_tokens": np.full(N, 16),
            "output_tokens": np.full(N, 3),
            "token_times": times,
        }
        pq.write_table(pa.table(cols), folder / "requests.parquet")
    return folder


def _compare(*args) -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["compare-runs", *map(str, args), "--json"])
    return rc, json.loads(buf.getvalue())


def test_a_clear_itl_change_gets_a_verdict_and_the_gate_fails_on_it(tmp_path):
    a = _run(tmp_path / "a", [10.0] * N)
    b = _run(tmp_path / "b", [12.0] * N)
    rc, doc = _compare(a, b, "--fail-on-regression", "itl_p50:+10")
    m = doc["comparisons"][0]["metrics"]["itl_p50"]
    assert m["relative"] == pytest.approx(0.2)  # 12 ms / 10 ms − 1
    assert m["verdict"] == "increased"  # was: "too few windows (< 10)"
    assert m["over"] == "records" and m["records"] == [80, 80] and m["blocks"] == [10, 10]
    lo, hi = m["relative_interval"]  # every gap alike: every resample's median is the same
    assert lo == pytest.approx(0.2) and hi == pytest.approx(0.2)
    assert rc == 1 and doc["regressions"] == ["itl_p50: +20.00 % (10 → 12 ms), past +10 %"]
    rc, doc = _compare(a, b, "--fail-on-regression", "itl_p50:+25")
    assert rc == 0 and doc["regressions"] == []


def test_a_change_within_the_spread_of_the_records_is_no_change(tmp_path):
    # b: the first 20 requests' gaps 10 ms, the last 20's 14 ms: the median of the 80 gaps is (10 + 14) / 2 =
    # 12 ms, +20 %; but a resample drawing more early slices than late ones has a median of 10 ms (+0 %), one
    # drawing more late ones 14 ms (+40 %), each with probability P(Binomial(10, ½) ≥ 6) = 37.7 %: the 95 %
    # interval is [+0 %, +40 %], and the change is not told from the spread of the records
    a = _run(tmp_path / "a", [10.0] * N)
    b = _run(tmp_path / "b", [10.0] * (N // 2) + [14.0] * (N // 2))
    rc, doc = _compare(a, b, "--fail-on-regression", "itl_p50:+10")
    m = doc["comparisons"][0]["metrics"]["itl_p50"]
    assert m["baseline"] == pytest.approx(10.0) and m["value"] == pytest.approx(12.0)
    lo, hi = m["relative_interval"]
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.4)
    assert m["verdict"] == "no change"
    assert rc == 0 and doc["regressions"] == []  # was: exit 1, "not told from the noise: too few windows"


def test_without_the_records_it_says_so_and_the_gate_cannot_pass(tmp_path):
    a = _run(tmp_path / "a", [10.0] * N, records=False)
    b = _run(tmp_path / "b", [12.0] * N, records=False)
    rc, doc = _compare(a, b, "--fail-on-regression", "itl_p50:+10")
    m = doc["comparisons"][0]["metrics"]["itl_p50"]
    assert m["verdict"] == f"no interval: request-level, {a}: no request records (requests.parquet) at hand"
    assert m["relative_interval"] == [None, None]
    assert rc == 1 and "not told from the noise: no interval: request-level" in doc["regressions"][0]


def test_records_that_are_not_the_reports_give_no_interval(tmp_path):
    a = _run(tmp_path / "a", [10.0] * N, value=11.0)  # report.json says 11 ms, its records 10 ms
    b = _run(tmp_path / "b", [12.0] * N)
    _, doc = _compare(a, b)
    m = doc["comparisons"][0]["metrics"]["itl_p50"]
    assert m["verdict"].startswith(
        "no interval: request-level, `itl_p50` over the records (10) is not the report's (11)"
    )


def test_the_terminal_says_how_request_level_metrics_are_compared(tmp_path, capsys):
    a = _run(tmp_path / "a", [10.0] * N)
    b = _run(tmp_path / "b", [12.0] * N)
    assert main(["compare-runs", str(a), str(b)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "request-level metrics (itl_p50, ttft_p50) have no window series" in out
    assert "too few windows" not in out


@pytest.mark.parametrize("func", ["p50", "p99", "mean", "count"])
def test_resampled_statistic_equals_the_expanded_resample(func):
    """The bisection (no resample materialised) gives what the resample itself gives: each slice's records
    repeated as often as the slice was drawn, reduced as the catalog reduces (numpy, linear percentiles)."""
    rng = np.random.default_rng(7)
    v = rng.gamma(2.0, 3.0, 300)
    v[::17] = np.nan  # records without a value (a TPOT of an unfinished request)
    t = np.sort(rng.uniform(0, 5, 300))
    got, n, nb = compare_records._resampled(func, v, t, np.random.default_rng(11), 50)
    counts = np.random.default_rng(11).multinomial(nb, np.full(nb, 1 / nb), size=50)  # the same draws
    keep = np.isfinite(t) if func == "count" else np.isfinite(v)
    blk = np.unique(compare_records._blocks(t[keep]), return_inverse=True)[1]
    vv = v[keep]
    for r in range(50):
        x = np.concatenate([vv[blk == k] for k in range(nb) for _ in range(counts[r, k])])
        want = (
            np.isfinite(x).sum()
            if func == "count"
            else x.mean()
            if func == "mean"
            else np.percentile(x, float(func[1:]), method="linear")
        )
        assert got[r] == pytest.approx(want, rel=1e-12)
    assert nb == max(10, int(np.ceil(n ** (1 / 3))))


def test_a_metric_that_is_0_in_both_runs_is_no_change_not_new(tmp_path, capsys):
    a = _run(tmp_path / "a", [10.0] * N, records=False)
    b = _run(tmp_path / "b", [10.0] * N, records=False)
    for run in (a, b):
        doc = json.loads((run / "report.json").read_text())
        doc["metrics"]["power.throttle_ratio"] = {"value": 0.0, "unit": "percent"}
        (run / "report.json").write_text(json.dumps(doc))
    _, doc = _compare(a, b)
    m = doc["comparisons"][0]["metrics"]["power.throttle_ratio"]
    assert m["relative"] == 0.0 and m["verdict"] == "no change"  # was: relative null, shown "new (baseline 0)"
    assert main(["compare-runs", str(a), str(b), "--all"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "power.throttle_ratio" in line)
    assert "+0.00 %" in row and "new" not in row


def test_an_offline_run_s_requests_are_sliced_by_when_their_value_is_known(tmp_path):
    # every request arrives at 0 (queued): sliced by arrival they would be one slice and "too few"; the TTFT is
    # known at the first token, spread over the run: 40 requests in 10 slices. TTFT p50: the first tokens at
    # 0.05 … 3.95 s, median (1.95 + 2.05) / 2 = 2.0 s in both runs — no change, and an interval
    a = _run(tmp_path / "a", [10.0] * N, offline=True)
    b = _run(tmp_path / "b", [12.0] * N, offline=True)
    _, doc = _compare(a, b)
    m = doc["comparisons"][0]["metrics"]["ttft_p50"]
    assert m["baseline"] == pytest.approx(2000.0) and m["value"] == pytest.approx(2000.0)
    assert m["verdict"] == "no change" and m["blocks"] == [10, 10] and m["records"] == [N, N]
