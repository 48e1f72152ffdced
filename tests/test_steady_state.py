"""A steady-state window for serving metrics (issue 29, point 6), on a hand-built request trace with a
ramp-up, a plateau and a drain; every figure worked by hand below.

The trace (times in s; every request sends 100 prompt tokens; A and B emit one token a second from one
second after admission to completion, C emits its first token at 10.5 s then one a second):
    A: 2 requests, arrival = admission 0,  tokens 1, 2, …, 60        (60 tokens, completes at 60)
    B: 3 requests, arrival = admission 5,  tokens 6, 7, …, 55        (50 tokens, completes at 55)
    C: 5 requests, arrival = admission 10, tokens 10.5, 11, 12, …, 50 (41 tokens, completes at 50)
In flight: [0, 5) 2, [5, 10) 5, [10, 50) 10, [50, 55) 5, [55, 60) 2: a ramp, a plateau at the peak of 10,
and a drain. At 0.9 the threshold is 9 requests, held on [10, 50); at 0.5 it is 5, held on [5, 55).
"""

import math

import numpy as np
import pytest

from perfonto.analysis.steady_state import check_fraction, concurrency, longest_above, steady_state


def _trace() -> dict:
    groups = [  # (requests, arrival, token times)
        (2, 0.0, [float(t) for t in range(1, 61)]),
        (3, 5.0, [float(t) for t in range(6, 56)]),
        (5, 10.0, [10.5] + [float(t) for t in range(11, 51)]),
    ]
    cols: dict[str, list] = {
        k: []
        for k in (
            "request.arrival_time",
            "request.admission_time",
            "request.first_token_time",
            "request.completion_time",
            "request.input_tokens",
            "request.output_tokens",
            "request.token_times",
        )
    }
    for n, arrival, times in groups:
        for _ in range(n):
            cols["request.arrival_time"].append(arrival)
            cols["request.admission_time"].append(arrival)
            cols["request.first_token_time"].append(times[0])
            cols["request.completion_time"].append(times[-1])
            cols["request.input_tokens"].append(100)
            cols["request.output_tokens"].append(len(times))
            cols["request.token_times"].append(times)
    return cols


def test_concurrency_of_the_trace():
    c = _trace()
    times, level = concurrency(np.asarray(c["request.admission_time"]), np.asarray(c["request.completion_time"]), 60.0)
    assert times.tolist() == [0, 5, 10, 50, 55, 60]
    assert level.tolist() == [2, 5, 10, 5, 2, 0]
    assert longest_above(times, level, 9, 60.0) == (10.0, 50.0)
    assert longest_above(times, level, 5, 60.0) == (5.0, 55.0)


def test_steady_state_window_and_its_figures(library):
    s = steady_state(library, _trace(), 0.9)
    assert (s.start, s.end, s.peak, s.threshold) == (10.0, 50.0, 10.0, 9.0)
    assert s.requests_in_window == 5  # the C requests entered flight in [10, 50)
    # output tokens emitted in (10, 50]: A 2 x 40 (11..50) + B 3 x 40 (11..50) + C 5 x 41 (10.5, 11..50) = 405
    assert s.window["output_tokens_per_second"] == pytest.approx(405 / 40)  # 10.125 tok/s
    # plus the prompts whose prefill ended in (10, 50] (C's first tokens at 10.5): 5 x 100
    assert s.window["tokens_per_second"] == pytest.approx((405 + 500) / 40)  # 22.625 tok/s
    assert s.window["requests_per_second"] == pytest.approx(5 / 40)  # C completes at 50
    # the full run (0, 60]: 2 x 60 + 3 x 50 + 5 x 41 = 475 output tokens, 1,000 prompt tokens, 10 completions
    assert s.full["output_tokens_per_second"] == pytest.approx(475 / 60)  # 7.92 tok/s: ramp and drain dilute it
    assert s.full["tokens_per_second"] == pytest.approx((475 + 1000) / 60)
    assert s.full["requests_per_second"] == pytest.approx(10 / 60)
    # TTFT: C's 0.5 s in the window; over the run 5 x 0.5 s and 5 x 1 s, median (0.5 + 1) / 2 = 0.75 s
    assert s.window["ttft_p50"] == pytest.approx(500.0) and s.full["ttft_p50"] == pytest.approx(750.0)
    # TPOT: C's (50 - 10.5) / 40 = 0.9875 s/token; A and B (60 - 1) / 59 = (55 - 6) / 49 = 1 s/token;
    # run median (0.9875 + 1) / 2 = 0.99375 s/token
    assert s.window["tpot_p50"] == pytest.approx(987.5) and s.full["tpot_p50"] == pytest.approx(993.75)
    assert s.units["ttft_p50"] == "ms" and s.units["output_tokens_per_second"] == "tok/s"
    doc = s.to_json()
    assert doc["start_s"] == 10.0 and doc["duration_s"] == 40.0 and doc["share_of_run"] == pytest.approx(40 / 60)
    assert doc["metrics"]["output_tokens_per_second"] == {
        "steady_state": pytest.approx(10.125),
        "full_run": pytest.approx(475 / 60),
        "unit": "tok/s",
    }


def test_a_lower_fraction_takes_in_part_of_the_ramp_and_drain(library):
    s = steady_state(library, _trace(), 0.5)
    assert (s.start, s.end, s.threshold) == (5.0, 55.0, 5.0)
    # (5, 55]: A 2 x 50 (6..55) + B 3 x 50 (6..55) + C 5 x 41 = 455 tokens over 50 s
    assert s.window["output_tokens_per_second"] == pytest.approx(455 / 50)


def test_energy_per_token_over_the_window(library):
    # a steady 100 W: 4,000 J over [10, 50]; 405 output tokens and 405 + 500 = 905 tokens in all
    s = steady_state(library, _trace(), 0.9, energy=lambda lo, hi: (100.0 * (hi - lo), lo, hi))
    assert s.window["energy_per_output_token"] == pytest.approx(4000 / 405)  # 9.88 J per output token
    assert s.window["energy_per_token"] == pytest.approx(4000 / 905)  # 4.42 J per token (prompt + output)
    # the run: 6,000 J over 475 output tokens
    assert s.full["energy_per_output_token"] == pytest.approx(6000 / 475)


def test_a_request_still_in_flight_at_the_end_counts_until_the_end():
    begin, finish = np.array([0.0, 1.0, 2.0]), np.array([3.0, math.nan, 4.0])
    times, level = concurrency(begin, finish, 5.0)
    assert times.tolist() == [0, 1, 2, 3, 4, 5] and level.tolist() == [1, 2, 3, 2, 1, 0]
    assert longest_above(times, level, 2, 5.0) == (1.0, 4.0)


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5, float("nan")])
def test_a_fraction_outside_zero_to_one_is_refused(fraction):
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        check_fraction(fraction)


def test_records_without_requests_are_refused(library):
    empty = {k: [] for k in _trace()}
    with pytest.raises(ValueError, match="no request"):
        steady_state(library, empty, 0.9)


@pytest.mark.slow
def test_analyze_reports_the_steady_state_and_the_energy_checks(tmp_path, capsys):
    """`perfonto analyze --steady-state 0.5` on an emulated run sampled every 0.5 ms: the steady-state
    section beside the full run's values, every window marked as shorter than sohu's 1 ms power sensor,
    and the energy counter agreeing with the integrated power (no disagreement reported)."""
    import json

    from perfonto import emulator
    from perfonto.cli import main

    run = tmp_path / "run"
    emulator.run(
        "sohu", model="llama3-8b", chips=1, duration_s=0.3, sample_period_s=5e-4, isl=256, osl=16,
        num_requests=200, rate=400, out_dir=run,
    )  # fmt: skip
    code = main(["analyze", str(run), "--out", str(tmp_path / "out"), "--json", "--steady-state", "0.5"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    ss = doc["steady_state"]
    assert ss["fraction"] == 0.5 and ss["threshold"] == 0.5 * ss["peak_concurrency"]
    assert 0 <= ss["start_s"] < ss["end_s"] <= 0.3 + 1e-9
    row = ss["metrics"]["output_tokens_per_second"]
    assert row["unit"] == "tok/s" and row["steady_state"] > 0 and row["full_run"] > 0
    assert set(ss["metrics"]) >= {"ttft_p50", "tpot_p50", "energy_per_output_token", "energy_per_token"}
    # 0.3 s at 0.5 ms: 600 windows, every one half the sensor's 1 ms
    (avg,) = doc["energy_checks"]["averaging"]
    assert (avg["signal"], avg["windows_marked"], avg["windows"]) == ("power.power", 600, 600)
    (cc,) = doc["energy_checks"]["cross_checks"]
    assert cc["counter"] == "power.energy" and cc["disagree"] == []
    assert any("trailing average over 0.001 s" in n for n in doc["notes"])
    assert not any("disagree beyond" in n for n in doc["notes"])


def test_the_terminal_table_shows_both_columns(library):
    from types import SimpleNamespace

    from rich.console import Console

    from perfonto.report_steady import render_steady_state

    console = Console(record=True, width=200)
    render_steady_state(SimpleNamespace(steady_state=steady_state(library, _trace(), 0.9).to_json()), console)
    text = console.export_text()
    flat = " ".join(text.split())  # the title wraps at the table's width
    assert "Steady state: 10 s to 50 s (40 s), requests in flight ≥ 90 % of the peak of 10" in flat
    row = next(line for line in text.splitlines() if "output_tokens_per_second" in line)
    assert "10.12 tok/s" in row and "7.917 tok/s" in row  # 405 / 40 and 475 / 60
    row = next(line for line in text.splitlines() if "ttft_p50" in line)
    assert "500 ms" in row and "750 ms" in row


def test_a_request_still_queued_has_null_times_and_is_not_in_flight(library):
    c = _trace()  # plus one request that arrived at 20 s and was never admitted: no times, no tokens
    for k, v in (("arrival_time", 20.0), ("input_tokens", 100), ("output_tokens", 0)):
        c[f"request.{k}"].append(v)
    for k in ("admission_time", "first_token_time", "completion_time", "token_times"):
        c[f"request.{k}"].append(None)
    s = steady_state(library, c, 0.9)
    assert (s.start, s.end, s.requests_in_window) == (10.0, 50.0, 5)  # arrived in [10, 50) but never in flight
    assert s.window["output_tokens_per_second"] == pytest.approx(405 / 40)
    assert s.window["ttft_p50"] == pytest.approx(500.0)  # its TTFT is null, left out


def test_an_offline_run_selects_its_latency_population_at_admission(library):
    c = _trace()  # every request queued at 0 (offline), admitted as before
    c["request.arrival_time"] = [0.0] * 10
    s = steady_state(library, c, 0.9)
    assert (s.start, s.end, s.requests_in_window) == (10.0, 50.0, 5)  # C, admitted at 10
    assert s.window["ttft_p50"] == pytest.approx(10_500.0)  # 10.5 s from arrival at 0 to its first token
    assert s.window["tpot_p50"] == pytest.approx(987.5)


def test_the_table_says_when_the_window_is_the_whole_run_and_what_each_column_is_over():
    """A window that is the whole run is not said to leave a ramp-up out; the caption names the full run's
    span (the records', not the counters') and the two latency populations (a new user read 97,428 beside
    the server level's 97,336 tok/s, and steady TTFT beside another full-run TTFT, with no word on why)."""
    from types import SimpleNamespace

    from rich.console import Console

    from perfonto.report_steady import render_steady_state

    doc = {
        "fraction": 0.9,
        "start_s": 0.0,
        "end_s": 1.005,
        "duration_s": 1.005,
        "share_of_run": 1.0,
        "peak_concurrency": 1920.0,
        "requests_in_window": 45,
        "requests_total": 1965,
        "run_start_s": 0.0,
        "run_end_s": 1.005,
        "metrics": {"tokens_per_second": {"steady_state": 97428.0, "full_run": 97428.0, "unit": "tok/s"}},
    }
    for share, says in ((1.0, "the whole run"), (0.6, "ramp-up and drain left out")):
        console = Console(record=True, width=300)
        render_steady_state(SimpleNamespace(steady_state=doc | {"share_of_run": share}), console)
        text = " ".join(console.export_text().split())  # the caption wraps at the table's width
        assert says in text and ("ramp-up and drain left out" in text) == (share < 1)
        assert "the request records' span, 0 s to 1.005 s" in text and "45 requests admitted" in text
        assert "all 1,965 records" in text


def test_a_window_that_is_a_burst_says_so():
    """A --rate 200 run's window held 8.2 % of the run, and its output tokens/s (28,650) passed the 25,600
    offered (a new user's trial): under a quarter of the run the words say it is a burst."""
    from perfonto.analysis.steady_state import in_words

    doc = {"fraction": 0.9, "start_s": 1.933, "end_s": 2.342, "duration_s": 0.4088, "peak_concurrency": 178.0}
    assert "the peak is a burst" in in_words(doc | {"share_of_run": 0.082})[0]
    assert "burst" not in in_words(doc | {"share_of_run": 0.6})[0]
