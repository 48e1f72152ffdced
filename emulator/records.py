"""Request records (``requests.parquet``): one row per request of the run, with the time
of every output token, and the serving latencies they give (ground truth).

Times are seconds since the start of the run on the host clock (``emulator.clocks``). A request is
*admitted* at the start of the step whose scheduler first gives it prompt tokens; a token is
*emitted* at the end of the step that samples it (the end of that step's host transfer), ``pp − 1``
steps later with pipeline stages. A step emits one token per decoding request, or with speculative
decoding 1 + its accepted drafts, all at the step's end: several ``token_times`` of a request can be
equal (one emission: ITL, the catalog's ``itl`` and ``latency_truth`` count the gaps between emissions,
never a 0). A closed-loop request arrives when the request it replaces
emitted its last token.

Which requests: offline, every request is queued at t = 0 (arrival 0); an unbounded queue lists the
requests admitted in the run, a bounded one also those still queued at the end (admission null).
Online, every request whose arrival is within the run. With warm-up steps (the server starts warm,
``warmup_steps``) on one scheduler rank (no pipeline stages), offline and in a closed loop, the
warm-up's steps are timed too and laid end to end up to t = 0: the requests it admitted that were
still decoding at t = 0 are listed with their warm-up times (negative), so a short run still has
completed requests (TPOT, E2E); offline, every request then arrives at the warm-up's start (queued
since the server started, so TTFT and E2E include that wait); a closed loop's first clients arrive
there too. Otherwise the warm-up's requests are left out. Fields not reached by the end of the run are null
(``completion_time`` of a request still decoding); ``output_tokens`` counts the tokens emitted so far.
Scheduler ranks are identical copies (``serving``), so each request row appears once per rank
(column ``rank``), as the server's token counters count every rank.

Latency ground truth (``latency_truth``), definitions of ``metrics/library/latency.metrics``:
TTFT = first token − arrival over requests with a first token; TPOT = (completion − first token) ÷
(output tokens − 1) over completed requests with ≥ 2 output tokens; ITL = every gap between
consecutive tokens of a request (never the TTFT); percentiles linear-interpolated (numpy's default).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .steps import token_steps

SCHEMA = pa.schema(
    [
        pa.field("request_id", pa.int64()),
        pa.field("rank", pa.int32()),
        pa.field("arrival_time", pa.float64()),
        pa.field("admission_time", pa.float64()),
        pa.field("first_token_time", pa.float64()),
        pa.field("completion_time", pa.float64()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("token_times", pa.list_(pa.float64())),
    ]
)


_EPS = 1e-12  # a time at the run's end is still in it


class _StepTimes:
    """One scheduler rank's steps on the global timeline: its local step numbers (after ``warmup``
    warm-up steps) to global ones (``idx``), and to the host time (s) its tokens are emitted (the end of
    the global step ``pp − 1`` later, the pipeline's depth; NaN past the run or ``duration_s``)."""

    def __init__(self, idx, warmup: int, pp: int, step_end_s: np.ndarray, duration_s: float, warm_s=None):
        self.idx, self.w, self.pp, self.step_end_s, self.duration_s = idx, warmup, pp, step_end_s, duration_s
        # the warm-up steps laid end to end up to t = 0 (s, ≤ 0): their ends and starts; None without
        # their durations or with pipeline stages (``serving.Served.warmup_ends_s``)
        self.warm_end_s = self.warm_begin_s = None
        if warm_s is not None and len(warm_s) == warmup and pp == 1:
            self.warm_end_s = -(np.cumsum(warm_s[::-1])[::-1] - warm_s)
            self.warm_begin_s = self.warm_end_s - warm_s

    @property
    def timed_warmup(self) -> bool:
        """Whether the warm-up steps have times (one scheduler rank, a warm-up that ran)."""
        return self.warm_end_s is not None and self.w > 0

    def glob(self, local):
        """Global step of each local step; −1 for a warm-up step or one past the timed steps."""
        idx = self.idx
        j = np.asarray(local, np.int64) - self.w
        ok = (j >= 0) & (j < len(idx))
        return np.where(ok, idx[np.clip(j, 0, max(len(idx) - 1, 0))] if len(idx) else 0, -1)

    def emitted(self, local):
        """Host time (s) the tokens of each local step are emitted; NaN when not in the run."""
        n = len(self.step_end_s)
        g = self.glob(local)
        g = np.where(g >= 0, g + self.pp - 1, -1)
        ok = (g >= 0) & (g < n)
        t = np.where(ok, self.step_end_s[np.clip(g, 0, max(n - 1, 0))] if n else 0.0, np.nan)
        if self.timed_warmup:  # a warm-up step's tokens: emitted at its end, before t = 0
            loc = np.asarray(local, np.int64)
            wm = (loc >= 0) & (loc < self.w)
            t = np.where(wm, self.warm_end_s[np.clip(loc, 0, self.w - 1)], t)
        return np.where(t <= self.duration_s + _EPS, t, np.nan)


def _admissions(log: dict, st: _StepTimes, step_start_s: np.ndarray) -> np.ndarray:
    """Each request's admission time: the start of the step that admitted it (NaN when that was a
    warm-up step, is not timed, or starts past the run)."""
    n = len(st.step_end_s)  # the timed steps
    ga = st.glob(log["admit_step"])
    ok_a = (ga >= 0) & (ga < n) & (log["admit_step"] >= st.w)
    adm = np.where(ok_a, step_start_s[np.clip(ga, 0, max(n - 1, 0))] if n else 0.0, np.nan)
    if st.timed_warmup:  # admitted by a warm-up step: its start, before t = 0
        a = np.asarray(log["admit_step"], np.int64)
        wm = (a >= 0) & (a < st.w)
        adm = np.where(wm, st.warm_begin_s[np.clip(a, 0, st.w - 1)], adm)
    return np.where(adm <= st.duration_s + _EPS, adm, np.nan)


def _kept(bt, log: dict, adm: np.ndarray, st: _StepTimes) -> tuple[np.ndarray, np.ndarray]:
    """Which requests get a record (offline, admitted in the run or from a bounded queue; online,
    arrived in the run; offline and closed loop with a timed warm-up, also those the warm-up admitted
    that were still decoding at t = 0), and every request's arrival time (offline: 0, or with a timed
    warm-up the warm-up's start: every request was queued when the server started)."""
    w, duration_s = st.w, st.duration_s
    before_run = (log["admit_step"] >= 0) & (log["admit_step"] < w)
    arrival = np.asarray(log["arrival_s"], np.float64)
    if bt.arrivals is None:
        keep = ~before_run & (np.isfinite(adm) | (bt.total is not None))
        if st.timed_warmup:
            last = np.asarray(log["last_step"], np.int64)
            carried = before_run & ((last < 0) | (last >= w))  # in flight when the run began
            keep |= carried
            if bt.concurrency is None:  # offline: every request was queued when the server started
                arrival = np.full_like(arrival, st.warm_begin_s[0])
    else:
        keep = ~before_run & (arrival <= duration_s + _EPS)
    return keep, arrival


def _tokens(bt, log: dict, keep: np.ndarray, st: _StepTimes, osl: int):
    """Each request's emitted token times (a list per request), their count, its first token's time and
    its completion time (the last token's, when all ``osl`` were emitted in the run)."""
    first, last = log["first_step"], log["last_step"]
    # every token's local step: one at the first step, then the step's emission count (several with
    # speculative decoding) up to the last step (steps.token_steps)
    owner, loc = token_steps(np.where(keep, first, -1), last, log["per_step"], osl, bt.steps)
    t = st.emitted(loc)
    good = np.isfinite(t)
    t, owner = t[good], owner[good]
    cnt = np.bincount(owner, minlength=len(first))
    splits = np.split(t, np.cumsum(cnt)[:-1]) if len(first) else []
    first_t = np.array([s[0] if len(s) else np.nan for s in splits])
    done = (last >= 0) & (cnt == osl)
    comp = np.where(done & (cnt > 0), np.array([s[-1] if len(s) else np.nan for s in splits]), np.nan)
    return splits, cnt, first_t, comp


def _unadmitted(bt, duration_s: float, cols: dict[str, list], t0: float = 0.0) -> None:
    """Append the requests never admitted (queued at the end of a bounded offline run, or arrived
    online) to ``cols``: an arrival and nothing else; none for a closed loop."""
    total = bt.total if bt.arrivals is None else int(np.searchsorted(bt.arrivals, duration_s + _EPS, side="right"))
    if bt.concurrency is not None:  # a closed loop's clients send their next request once admitted is done
        total = None
    if total is not None and total > bt.admitted:
        m = total - bt.admitted
        arr = np.full(m, t0) if bt.arrivals is None else np.asarray(bt.arrivals[bt.admitted : total], np.float64)
        cols["arrival"].append(arr)
        for key in ("admission", "first", "completion"):
            cols[key].append(np.full(m, np.nan))
        cols["out"].append(np.zeros(m, np.int64))
        cols["times"].extend(np.zeros(0) for _ in range(m))


def _rank_records(bt, st: _StepTimes, step_start_s: np.ndarray, osl: int, cols: dict[str, list]) -> None:
    """Append one scheduler rank's requests (``bt``'s log) to ``cols``."""
    log = bt.request_log()
    w = st.w
    if bt.concurrency is not None:  # a closed-loop request arrives when the one it replaces has left
        a = log["arrival_step"]
        arr_t = st.emitted(a)
        if st.timed_warmup:  # a first client (−1) arrived when the server started; others when one left
            arrival_s = np.where(a >= 0, arr_t, st.warm_begin_s[0])
        else:
            arrival_s = np.where(a >= w, arr_t, 0.0)
        log = {**log, "arrival_s": arrival_s}
    adm = _admissions(log, st, step_start_s)
    keep, arrival = _kept(bt, log, adm, st)
    splits, cnt, first_t, comp = _tokens(bt, log, keep, st, osl)
    sel = np.flatnonzero(keep)
    cols["arrival"].append(arrival[sel])
    cols["admission"].append(adm[sel])
    cols["first"].append(first_t[sel] if len(sel) else np.zeros(0))
    cols["completion"].append(comp[sel] if len(sel) else np.zeros(0))
    cols["out"].append(cnt[sel])
    cols["times"].extend(splits[i] for i in sel)
    _unadmitted(bt, st.duration_s, cols, st.warm_begin_s[0] if st.timed_warmup else 0.0)


def _records_table(cols: dict[str, list], isl: int, ranks: int) -> pa.Table:
    """The records table: each request once per rank, times null where not finite."""
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items() if k != "times"}
    rows = len(cat["arrival"])
    times = cols["times"]

    def nullable(x):
        x = np.tile(x, ranks)
        return pa.array(x, pa.float64(), mask=~np.isfinite(x))

    flat = np.concatenate(times) if times else np.zeros(0)
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in times])]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.float64()))
    return pa.table(
        {
            "request_id": pa.array(np.arange(rows * ranks, dtype=np.int64)),
            "rank": pa.array(np.repeat(np.arange(ranks, dtype=np.int32), rows)),
            "arrival_time": nullable(cat["arrival"]),
            "admission_time": nullable(cat["admission"]),
            "first_token_time": nullable(cat["first"]),
            "completion_time": nullable(cat["completion"]),
            "input_tokens": pa.array(np.full(rows * ranks, int(isl), np.int64)),
            "output_tokens": pa.array(np.tile(cat["out"].astype(np.int64), ranks)),
            "token_times": pa.concat_arrays([lists] * ranks) if ranks > 1 and rows else lists,
        },
        schema=SCHEMA,
    )


def request_records(
    sv, step_start_s: np.ndarray, step_end_s: np.ndarray, *, isl: int, osl: int, ranks: int, duration_s: float
) -> pa.Table:
    """The request records of a served schedule (``serving.Served``) whose global steps start and end
    at ``step_start_s`` / ``step_end_s`` (host s; only the timed steps). See the module docstring."""
    pp = len(sv.batchers)
    cols: dict[str, list] = {k: [] for k in ("arrival", "admission", "first", "completion", "out", "times")}
    warm_s = sv.warmup_seconds or [None] * pp
    for bt, idx, w, ws in zip(sv.batchers, sv.local_index, sv.warmup, warm_s):
        _rank_records(bt, _StepTimes(idx, w, pp, step_end_s, duration_s, ws), step_start_s, osl, cols)
    return _records_table(cols, isl, ranks)


def write_records(path: Path, table: pa.Table) -> None:
    pq.write_table(table, str(path))


def _pct(x: np.ndarray) -> tuple[float | None, float | None]:
    if len(x) == 0:
        return None, None
    return float(np.percentile(x, 50)), float(np.percentile(x, 99))


def latency_truth(table: pa.Table) -> dict:
    """``ttft_p50_s`` … ``itl_p99_s`` (s; None over an empty population) and the population sizes
    (``latency_requests``, ``latency_tpot_requests``, ``latency_itl_gaps``) of the records."""

    def col(name):
        return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)

    arrival, first, comp = col("arrival_time"), col("first_token_time"), col("completion_time")
    out = table.column("output_tokens").to_numpy()
    ttft = (first - arrival)[np.isfinite(first) & np.isfinite(arrival)]
    ok = np.isfinite(comp) & np.isfinite(first) & (out >= 2)
    tpot = ((comp - first) / np.maximum(out - 1, 1))[ok]
    lists = table.column("token_times").combine_chunks() if table.num_rows else None
    if lists is not None and len(lists):
        offs = lists.offsets.to_numpy()
        offs = offs - offs[0]
        vals = lists.flatten().to_numpy(zero_copy_only=False)
        d = np.diff(vals)
        inner = np.ones(len(d), bool)
        inner[offs[1:-1][(offs[1:-1] > 0) & (offs[1:-1] < len(vals))] - 1] = False  # gaps across two requests
        inner &= d != 0  # tokens of one speculative step are one emission: ITL is between emissions
        itl = d[inner] if len(vals) else np.zeros(0)
    else:
        itl = np.zeros(0)
    res = {}
    for name, x in (("ttft", ttft), ("tpot", tpot), ("itl", itl)):
        p50, p99 = _pct(x)
        res[f"{name}_p50_s"], res[f"{name}_p99_s"] = p50, p99
    res.update(latency_requests=int(len(ttft)), latency_tpot_requests=int(len(tpot)), latency_itl_gaps=int(len(itl)))
    return res


__all__ = ["SCHEMA", "latency_truth", "request_records", "write_records"]
