"""Record semantics the field needs (issue 15, points 5 and 6), on hand-made records.

Point 5 — several tokens at one instant (speculative or multi-token decoding, chunked streaming): ITL
is one sample per gap between emissions (vLLM benchmark_serving: per streamed chunk; AIPerf:
inter-chunk latency), a zero gap inside an emission is not a sample; TPOT stays per token ((last −
first) / (n − 1), vLLM's TPOT and GenAI-Perf/AIPerf's ITL); ``itl_per_token`` and
``tokens_per_emission`` tell per-step and per-token latencies apart.
Point 6 — which requests each latency covers is stated (population, count, unfinished), a percentile
capped by the run's end says so, and records that miss completions the counters saw are reported."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.analysis.capture import analyse_capture, capture_of
from perfonto.emulator.records import SCHEMA
from perfonto.metrics.population import emission_gaps, evaluate_records, records_from_columns

# one request: first token at 100 ms, then a 3-token speculative step at 130 ms, 1 token at 160 ms,
# 2 tokens at 200 ms (7 tokens); a second request one token at a time: 50, 60, 80 ms
SPEC = {
    "request.arrival_time": [0.0, 0.0],
    "request.first_token_time": [0.10, 0.05],
    "request.completion_time": [0.20, 0.08],
    "request.output_tokens": [7, 3],
    "request.input_tokens": [16, 16],
    "request.admission_time": [0.0, 0.0],
    "request.token_times": [[0.10, 0.13, 0.13, 0.13, 0.16, 0.20, 0.20], [0.05, 0.06, 0.08]],
}


def test_emission_gaps_skip_the_zero_gaps_inside_one_emission():
    d, k = emission_gaps([np.array([0.1, 0.2, 0.2, 0.2, 0.5]), np.array([1.0]), np.array([2.0, 2.0])])
    assert np.allclose(d, [0.1, 0.3]) and list(k) == [3, 1]


def test_multi_token_emissions(library, sohu):
    v = evaluate_records(library, records_from_columns(sohu, SPEC))
    assert np.allclose(v["itl"], [30, 30, 40, 10, 20])  # ms, emission gaps only
    assert np.allclose(v["itl_per_token"], [10, 30, 20, 10, 20])  # ms/token: gap / tokens it delivered
    assert np.allclose(v["tokens_per_emission"], [3, 1, 2, 1, 1])
    assert v["itl_p50"] == pytest.approx(30.0) and v["itl_per_token_p50"] == pytest.approx(20.0)
    assert v["tokens_per_emission_mean"] == pytest.approx(8 / 5)
    assert np.allclose(v["tpot"], [100 / 6, 15])  # (200 - 100) / (7 - 1); (80 - 50) / 2
    assert np.allclose(v["ttft"], [100, 50])
    assert v["itl_mean"] == pytest.approx(26.0)  # zero gaps would have made it 130 / 8


def _capture(tmp_path, sohu, completed_per_window):
    n = len(completed_per_window) + 1
    cum = np.concatenate([[0], np.cumsum(completed_per_window)]).astype(np.uint64)
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 100_000_000),
            "seq.requests_completed": pa.array(cum),
            "seq.elapsed_cycles": pa.array(np.arange(n, dtype=np.uint64) * 150_000_000),
        }
    )
    p = tmp_path / "counters.parquet"
    pq.write_table(t, p)
    return p


def _requests(tmp_path, rows):
    """The emulator's request records (its schema less ``request_id`` and ``rank``) from dicts, a key a
    row leaves out null."""
    schema = pa.schema([f for f in SCHEMA if f.name not in ("request_id", "rank")])
    p = tmp_path / "requests.parquet"
    pq.write_table(pa.table({k: [r.get(k) for r in rows] for k in schema.names}, schema=schema), p)
    return p


#: A request that arrived at 0 and finished in the run: 8 prompt tokens, 2 output tokens at 0.1 and 0.2 s.
FINISHED = {
    "arrival_time": 0.0,
    "admission_time": 0.0,
    "first_token_time": 0.1,
    "completion_time": 0.2,
    "input_tokens": 8,
    "output_tokens": 2,
    "token_times": [0.1, 0.2],
}


def test_populations_are_stated_and_capped_ttft_is_flagged(library, sohu, tmp_path):
    rows = [  # arrived in the run: 2 finished, 1 decoding at the end, 1 still waiting for its first token
        FINISHED,
        {
            "arrival_time": 0.1,
            "admission_time": 0.1,
            "first_token_time": 0.15,
            "completion_time": 0.3,
            "input_tokens": 8,
            "output_tokens": 2,
            "token_times": [0.15, 0.3],
        },
        {
            "arrival_time": 0.2,
            "admission_time": 0.2,
            "first_token_time": 0.25,
            "input_tokens": 8,
            "output_tokens": 1,
            "token_times": [0.25],
        },
        {"arrival_time": 0.35, "input_tokens": 8, "output_tokens": 0, "token_times": []},
        # admitted before the run (warm-up): no arrival time, completed in it — counted by requests_completed
        {
            "admission_time": None,
            "first_token_time": None,
            "completion_time": 0.05,
            "input_tokens": 8,
            "output_tokens": None,
            "token_times": None,
        },
    ]
    counters = _capture(tmp_path, sohu, [1, 1, 1, 0])  # the counters saw 3 completions
    rep = analyse_capture(library, capture_of(counters, _requests(tmp_path, rows)))
    doc = rep.to_json()["metrics"]
    assert doc["requests_completed"]["value"] == 3.0 and doc["requests_completed"]["count"] == 3
    ttft = doc["ttft_p50"]
    assert ttft["population"] == "request" and ttft["of"] == "ttft" and ttft["count"] == 3 and ttft["unfinished"] == 1
    assert "capped by the run length" in ttft["warning"]
    assert doc["e2e_latency_p50"]["count"] == 2 and doc["e2e_latency_p50"]["unfinished"] == 2
    assert "warning" not in doc["itl_p50"]
    assert any("ttft_p50" in n and "capped by the run length" in n for n in rep.notes)
    assert not any("records list" in n for n in rep.notes)  # 3 completions in the records, 3 counted


def test_records_that_miss_completions_the_counters_saw_are_reported(library, sohu, tmp_path):
    rows = [FINISHED]
    counters = _capture(tmp_path, sohu, [40, 43, 1, 0])  # 84 completions counted; 83 came from the warm-up
    rep = analyse_capture(library, capture_of(counters, _requests(tmp_path, rows)))
    (note,) = [n for n in rep.notes if "records list" in n]
    assert (
        "1 request(s) completed" in note
        and "counts 84" in note
        and "83 completed request(s) are not in the records" in note
    )
