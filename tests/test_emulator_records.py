"""Request records (requests.parquet) and the latency ground truth they give (issue 9, item 1)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto import emulator
from perfonto.emulator.records import latency_truth
from perfonto.emulator.parallel import Mapping
from perfonto.metrics.population import read_records
from helpers import SHORT_STEPS

COLUMNS = [
    "request_id",
    "rank",
    "arrival_time",
    "admission_time",
    "first_token_time",
    "completion_time",
    "input_tokens",
    "output_tokens",
    "token_times",
]


def _records(r):
    t = pq.read_table(r.requests_path)
    return t, {c: t.column(c).to_pylist() for c in t.column_names}


def _sohu_8b(out_dir, chips=1, **kw):
    """Llama-3-8B on Sohu, sampled every 5 ms."""
    return emulator.run("sohu", model="llama3-8b", chips=chips, sample_period_s=0.005, out_dir=out_dir, **kw)


def test_offline_drained_run_has_every_token(tmp_path):
    R, isl, osl = 12, 256, 9
    r = _sohu_8b(tmp_path, duration_s=0.3, isl=isl, osl=osl, num_requests=R)
    t, c = _records(r)
    assert t.column_names == COLUMNS and t.num_rows == R
    assert c["output_tokens"] == [osl] * R and c["input_tokens"] == [isl] * R
    ends = r.timeline.ends / r.hardware.core_hz
    starts = r.timeline.starts / r.hardware.core_hz
    for i in range(R):
        tt = c["token_times"][i]
        assert len(tt) == osl and np.all(np.diff(tt) > 0)
        assert tt[0] == c["first_token_time"][i] and tt[-1] == c["completion_time"][i]
        assert c["arrival_time"][i] == 0.0 <= c["admission_time"][i] < tt[0]  # offline: queued at t = 0
        assert np.isin(tt, ends).all() and c["admission_time"][i] in starts  # step ends / starts
    gt = r.ground_truth
    first = np.array(c["first_token_time"])
    tpot = (np.array(c["completion_time"]) - first) / (osl - 1)
    itl = np.concatenate([np.diff(x) for x in c["token_times"]])
    assert len(itl) == R * (osl - 1) == gt["latency_itl_gaps"]  # n − 1 gaps, never the TTFT
    assert gt["ttft_p50_s"] == np.percentile(first, 50) and gt["ttft_p99_s"] == np.percentile(first, 99)
    assert gt["tpot_p50_s"] == pytest.approx(np.percentile(tpot, 50), rel=1e-12)
    assert gt["itl_p99_s"] == np.percentile(itl, 99) and gt["itl_p50_s"] == np.percentile(itl, 50)
    assert gt["requests_completed"] == R and gt["output_tokens"] == R * osl


def test_records_read_by_the_metric_layer(sohu, tmp_path):
    r = emulator.run(sohu, duration_s=0.5, sample_period_s=0.005, warmup_steps=50, out_dir=tmp_path, **SHORT_STEPS)
    recs = read_records(r.requests_path, sohu)
    ttft = recs.fields["request.first_token_time"] - recs.fields["request.arrival_time"]
    gaps = recs.fields["token_gap.duration"]
    gt = r.ground_truth
    assert gt["ttft_p50_s"] == pytest.approx(np.nanpercentile(ttft, 50), rel=1e-12)
    assert len(gaps) == gt["latency_itl_gaps"] > 0 and gt["itl_p50_s"] == pytest.approx(
        np.percentile(gaps, 50), rel=1e-12
    )
    # the warm-up's requests (admitted before t = 0) are listed when still decoding at t = 0 (issue 30):
    # none completed before the run; offline, every request arrived at the warm-up's start
    adm, arr = recs.fields["request.admission_time"], recs.fields["request.arrival_time"]
    comp = recs.fields["request.completion_time"]
    warm = adm < 0
    assert warm.any() and (adm >= 0).any()
    assert np.all(arr == arr[0]) and arr[0] <= np.nanmin(adm) < 0
    assert np.all(np.isnan(comp[warm]) | (comp[warm] >= 0))


def test_unfinished_run_still_writes_records(tmp_path):
    """An offline run that finishes no request in the window: completion null, tokens so far."""
    r = emulator.run("sohu", duration_s=0.05, sample_period_s=0.001, isl=2048, osl=1024, out_dir=tmp_path)
    t, c = _records(r)
    assert t.num_rows > 0 and all(x is None for x in c["completion_time"])
    assert all(n == len(tt) < 1024 for n, tt in zip(c["output_tokens"], c["token_times"]))
    gt = r.ground_truth
    assert gt["tpot_p50_s"] is None and gt["latency_tpot_requests"] == 0 and gt["requests_completed"] == 0


def test_online_records_within_the_run(tmp_path):
    r = _sohu_8b(tmp_path, duration_s=0.5, isl=128, osl=16, rate=200.0)
    t, c = _records(r)
    arr = np.array(c["arrival_time"])
    assert t.num_rows > 50 and (arr <= 0.5).all() and (np.diff(arr) > 0).all()
    adm = np.array([np.nan if x is None else x for x in c["admission_time"]])
    first = np.array([np.nan if x is None else x for x in c["first_token_time"]])
    ok = np.isfinite(adm)
    assert (adm[ok] >= arr[ok]).all() and (first[np.isfinite(first)] > adm[np.isfinite(first)]).all()
    assert np.isnan(adm).sum() < t.num_rows  # most were admitted
    truth = latency_truth(t)
    assert truth["ttft_p50_s"] == r.ground_truth["ttft_p50_s"] > 0


def test_ranks_are_copies(tmp_path):
    r = _sohu_8b(tmp_path, chips=2, mapping=Mapping(tp=1, dp=2), duration_s=0.2, isl=128, osl=8, num_requests=8)
    t, c = _records(r)
    assert t.num_rows == 8 and sorted(set(c["rank"])) == [0, 1]
    assert sum(c["output_tokens"]) == r.ground_truth["output_tokens"] == 8 * 8
