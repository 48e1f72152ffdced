"""A steady-state window for serving metrics (issue 29, point 6): the longest interval whose concurrency
stays at or above a declared fraction of its peak, and the serving figures over it beside the full run's.

Concurrency is the number of requests in flight at each instant, from the request records
(``requests.parquet``): a request is in flight from its admission into the running batch (its arrival
when the records have no admission time) to its completion (the end of the run when it has not
completed). It is a step function; its peak is its maximum over the run, and the window is the longest
interval ``[start, end)`` on which it is ``≥ fraction × peak`` (the earliest of equally long ones).
Ramp-up (the batch filling) and drain (the last requests finishing) fall outside it. Records with times
below 0 and at or after it (the emulator's warm-up: the requests it admitted before t = 0 that were still
decoding at 0, with their warm-up times; the ones it finished are not listed) describe a run that starts
at 0: the full run is ``(0, end]`` and a warm-up request is in flight from 0.

Over the window (times in seconds on the records' clock):
- output tokens per second: output tokens emitted in ``(start, end]`` over ``end − start`` (a token is
  emitted at the end of the step that produced it, so one emitted at ``start`` was made before);
- tokens per second: those plus the prompt tokens of requests whose first token is in ``(start, end]``
  (their prefill ends with the first token);
- requests per second: completions in ``(start, end]`` over the duration;
- the latency reductions of the catalog (``ttft_p50``, ``tpot_p99``, ``itl_p50`` …), evaluated with their own
  formulas over the requests that entered flight (admission, else arrival) in ``[start, end)`` — the
  measurement-window rule of serving benchmarks (a request belongs to the window it was sent in), read at
  admission so that an offline run, whose requests all arrive at 0, still has a population;
- energy per output token and per token (all tokens), where the caller gives the energy the counters saw
  over the window (``analysis.energy_checks.energy_between``).

Source of the rule: the steady-state (measurement) window of serving benchmarks, e.g. MLPerf Inference's
"performance sample" window without warm-up and the run's tail, and GenAI-Perf's stability window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEFAULT_FRACTION = 0.9
#: A window holding less of the run than this is a burst, not a steady state (a new user's --rate 200 run:
#: 8.2 % of the run, output 28,650 tokens/s above the 25,600 offered), and the reports say so.
BURST_SHARE = 0.25


@dataclass
class SteadyState:
    """The window and its figures: ``start``/``end`` (s, records' clock), ``peak`` and ``threshold``
    (requests in flight), ``fraction``; ``window`` and ``full``: {figure: value} over the window and
    over the whole run (tok/s, req/s, the latency metrics in their catalog units, J/token)."""

    fraction: float
    start: float
    end: float
    peak: float
    threshold: float
    window: dict[str, float | None] = field(default_factory=dict)
    full: dict[str, float | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    requests_in_window: int = 0
    requests_total: int = 0  # every record: the full run's latency population
    run_start: float = 0.0  # s: the first instant of the records
    run_end: float = 0.0  # s: the end of the run (the last instant of the records unless given)

    def to_json(self) -> dict:
        """The JSON form (``report.json``'s ``steady_state``)."""
        return {
            "fraction": self.fraction,
            "start_s": self.start,
            "end_s": self.end,
            "duration_s": self.end - self.start,
            "share_of_run": (self.end - self.start) / (self.run_end - self.run_start)
            if self.run_end > self.run_start
            else None,
            "peak_concurrency": self.peak,
            "threshold": self.threshold,
            "requests_in_window": self.requests_in_window,
            "requests_total": self.requests_total,
            "run_start_s": self.run_start,
            "run_end_s": self.run_end,
            "metrics": {
                k: {"steady_state": _num(self.window.get(k)), "full_run": _num(self.full.get(k)), "unit": u}
                for k, u in self.units.items()
            },
        }


def _num(v) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def offline_queue_note(seconds: float) -> str:
    """What an offline run's TTFT and E2E are, in the words both reports print: every request was queued
    ``seconds`` before the run (its warm-up), so they are mostly that wait."""
    return (
        f"note: offline, every request was queued when the server started, {seconds:,.1f} s before the run (its "
        "warm-up), so TTFT and E2E are mostly that wait; TPOT and ITL are the serving latencies of this scenario."
    )


def in_words(doc: dict) -> tuple[str, str | None, str | None]:
    """``(window, span, latencies)``: report.json's ``steady_state`` ``doc`` in the words both reports print
    (terminal and HTML): the window and whether it is the whole run; the full run's span (the request
    records', which can differ from the counters'); the two latency populations. The last two are None for
    a report written before they were recorded."""
    whole = doc.get("share_of_run") is not None and doc["share_of_run"] >= 0.999
    window = (
        f"{doc['start_s']:.4g} s to {doc['end_s']:.4g} s ({doc['duration_s']:.4g} s), requests in flight "
        f"≥ {doc['fraction'] * 100:g} % of the peak of {doc['peak_concurrency']:g} (--steady-state); "
        + ("the whole run: no ramp-up or drain fell below that level" if whole else "ramp-up and drain left out")
    )
    share = doc.get("share_of_run")
    if share is not None and share < BURST_SHARE:  # online arrivals: the peak is a burst, not a level
        window += (
            f"; it holds {share * 100:.1f} % of the run: the concurrency seldom stays near its peak (arrivals at "
            "a rate: the peak is a burst), so these figures are the burst's — read the full run's, or lower "
            "--steady-state"
        )
    if "run_end_s" not in doc:
        return window, None, None
    span = f"full run: the request records' span, {doc['run_start_s']:.4g} s to {doc['run_end_s']:.4g} s"
    latencies = (
        f"latencies: the {doc['requests_in_window']:,} requests admitted in the window, against all "
        f"{doc['requests_total']:,} records for the full run (one not yet complete has no TPOT)"
    )
    return window, span, latencies


def check_fraction(fraction: float) -> float:
    """``fraction`` when it is in (0, 1]; else ValueError saying what to give."""
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"--steady-state must be a fraction of the peak concurrency in (0, 1], got {fraction!r}")
    return float(fraction)


def concurrency(begin: np.ndarray, finish: np.ndarray, run_end: float) -> tuple[np.ndarray, np.ndarray]:
    """The in-flight step function of requests ``[begin_i, finish_i)``: ``(times, level)`` where
    ``level[k]`` holds on ``[times[k], times[k+1])`` (the last level until ``run_end``). ``begin``,
    ``finish``: float (N,) s; a NaN ``finish`` is ``run_end`` (still in flight); a NaN ``begin`` is
    not in flight. A request finishing where another begins hands over without a dip."""
    ok = np.isfinite(begin)
    b = begin[ok]
    f = np.where(np.isfinite(finish[ok]), finish[ok], run_end)
    f = np.maximum(f, b)
    times = np.concatenate([b, f])
    steps = np.concatenate([np.ones(b.size), -np.ones(f.size)])
    order = np.lexsort((steps, times))  # at one instant the finishes (-1) and begins (+1) net out
    times, steps = times[order], steps[order]
    uniq, first = np.unique(times, return_index=True)
    level = np.cumsum(steps)[np.r_[first[1:] - 1, times.size - 1]] if times.size else np.zeros(0)
    return uniq, level


def longest_above(times: np.ndarray, level: np.ndarray, threshold: float, run_end: float) -> tuple[float, float]:
    """The longest ``[start, end)`` on which the step function ``(times, level)`` (``concurrency``) is
    ``≥ threshold``; the earliest of equally long ones. Raises ValueError when it never is."""
    ends = np.r_[times[1:], max(run_end, times[-1] if times.size else run_end)]
    best, cur = None, None
    for t0, t1, lv in zip(times, ends, level):
        if lv >= threshold:
            cur = (cur[0] if cur is not None else t0, t1)
            if best is None or cur[1] - cur[0] > best[1] - best[0]:
                best = cur
        else:
            cur = None
    if best is None or best[1] <= best[0]:
        raise ValueError(f"the concurrency never reaches {threshold:g} requests in flight for any time")
    return float(best[0]), float(best[1])


def _col(columns: dict, name: str) -> np.ndarray | None:
    v = columns.get(name)
    if v is None:
        return None
    odd = [x for x in v if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float, np.number)))]
    if odd:
        bad = odd[0]
        raise ValueError(f"`{name}` holds {bad!r}, not a time in seconds or a count; write numbers (null: unknown)")
    return np.asarray([np.nan if x is None else x for x in v], dtype=np.float64)


def _token_lists(columns: dict) -> list[np.ndarray]:
    """Each request's output-token times (float (n,) s; a null list or instant left out)."""
    out = []
    for t in columns.get("request.token_times") or []:
        a = np.asarray([np.nan if x is None else x for x in (t or [])], dtype=np.float64)
        out.append(a[np.isfinite(a)])
    return out


def _rates(columns: dict, lo: float, hi: float) -> dict[str, float | None]:
    """Tokens/s, output tokens/s and requests/s over ``(lo, hi]`` from the record columns."""
    dur = hi - lo
    times = _token_lists(columns)
    out_tok = sum(int(np.count_nonzero((t > lo) & (t <= hi))) for t in times)
    first, inp, comp = (
        _col(columns, "request.first_token_time"),
        _col(columns, "request.input_tokens"),
        _col(columns, "request.completion_time"),
    )
    rates: dict[str, float | None] = {"output_tokens_per_second": out_tok / dur if times else None}
    if first is not None and inp is not None and times:
        prefilled = (first > lo) & (first <= hi) & np.isfinite(inp)
        rates["tokens_per_second"] = (out_tok + float(inp[prefilled].sum())) / dur
    if comp is not None:
        rates["requests_per_second"] = float(np.count_nonzero((comp > lo) & (comp <= hi))) / dur
    return rates


RATE_UNITS = {"tokens_per_second": "tok/s", "output_tokens_per_second": "tok/s", "requests_per_second": "req/s"}
LATENCIES = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "tpot_mean", "itl_p50", "itl_p99")


def _latencies(graph, columns: dict, keep: np.ndarray | None) -> dict[str, float | None]:
    """The catalog's latency reductions (``LATENCIES`` it has) over the records ``keep`` selects (all: None)."""
    from perfonto.metrics.population import evaluate_records, records_from_columns

    names = [n for n in LATENCIES if n in graph.record_metrics]
    if not names:
        return {}
    cols = {k: ([x for x, k_ in zip(v, keep) if k_] if keep is not None else list(v)) for k, v in columns.items()}
    values = evaluate_records(graph, records_from_columns(graph.generation, cols))
    return {n: _num(values.get(n)) for n in names}


def steady_state(
    graph, columns: dict, fraction: float = DEFAULT_FRACTION, run_end: float | None = None, energy=None
) -> SteadyState:
    """The steady-state window of a run and its serving figures beside the full run's.

    ``graph``: the compiled catalog (its record metrics give the latencies); ``columns``: the request
    records as plain columns (``{"request.arrival_time": [...], "request.token_times": [[...], ...]}``,
    ``read_columns``); ``fraction``: of the peak concurrency, in (0, 1]; ``run_end``: the end of the run (s;
    default the last instant in the records); ``energy(lo, hi) -> (joules, covered_lo, covered_hi) | None``:
    the energy the counters saw over an interval, for energy per output token and per token.

    Raises:
        ValueError: a fraction outside (0, 1], records without arrival and completion times, or no request.
    """
    check_fraction(fraction)
    arrival, comp = _col(columns, "request.arrival_time"), _col(columns, "request.completion_time")
    if arrival is None or comp is None:
        raise ValueError("the request records have no arrival_time or completion_time: no concurrency to follow")
    adm = _col(columns, "request.admission_time")
    begin = adm if adm is not None and np.isfinite(adm).any() else arrival
    last = [float(np.max(t)) for t in _token_lists(columns) if len(t)]
    first = [float(np.min(t)) for t in _token_lists(columns) if len(t)]
    known = np.r_[arrival, begin, comp, last, first]  # the run spans every instant the records hold
    known = known[np.isfinite(known)]
    if not known.size:
        raise ValueError("the request records hold no request with a time")
    end = float(run_end) if run_end is not None else float(known.max())
    t0 = float(known.min())
    if t0 < 0.0 <= end:  # a warm-up before t = 0, listed only by its requests still in flight at 0: the run is (0, end]
        t0 = 0.0
    times, level = concurrency(np.maximum(begin, t0), comp, end)
    peak = float(level.max()) if level.size else 0.0
    if peak <= 0:
        raise ValueError("no request is in flight for any time (each completes where it is admitted)")
    lo, hi = longest_above(times, level, fraction * peak, end)
    in_window = np.isfinite(begin) & (begin >= lo) & (begin < hi)
    ss = SteadyState(
        fraction, lo, hi, peak, fraction * peak, requests_in_window=int(in_window.sum()), requests_total=len(arrival)
    )
    ss.run_start, ss.run_end = t0, end
    ss.window, ss.full = _rates(columns, lo, hi), _rates(columns, t0, end)
    ss.units = {k: RATE_UNITS[k] for k in ss.window}
    lat_w, lat_f = _latencies(graph, columns, in_window), _latencies(graph, columns, None)
    ss.window |= lat_w
    ss.full |= lat_f
    ss.units |= {n: graph.record_metrics[n].unit_text for n in lat_w}
    if energy is not None:
        _energy_per_token(ss, columns, energy, (lo, hi), (t0, end))
    return ss


def _energy_per_token(ss: SteadyState, columns: dict, energy, window, full) -> None:
    """J per output token and per token (prompt + output) over the window and the run, from ``energy``."""
    for key, (lo, hi) in (("window", window), ("full", full)):
        got = energy(lo, hi)
        if got is None:
            continue
        joules, a, b = got[:3]
        if len(got) == 5:  # the counters' tokens over the same windows as the joules
            n_out, n_all = got[3], got[4]
        else:  # the records' tokens over the windows' span
            r = _rates(columns, a, b)
            n_out, n_all = ((r.get(k) or 0.0) * (b - a) for k in ("output_tokens_per_second", "tokens_per_second"))
        vals = getattr(ss, key)
        vals["energy_per_output_token"] = joules / n_out if n_out else None
        vals["energy_per_token"] = joules / n_all if n_all else None
    ss.units |= {"energy_per_output_token": "J/output_token", "energy_per_token": "J/token"}


def read_columns(path: str | Path, gen) -> dict:
    """The request records of ``requests.parquet`` as plain columns keyed by record field
    (``request.arrival_time``); the written (not derived) fields the file has.

    Raises:
        DumpError: the file cannot be read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perfonto.metrics.windows import DumpError

    try:
        table = pq.read_table(str(path))
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(f"{path}: not a readable request-records file ({exc})") from None
    cols = {}
    for name, f in gen.record_fields.items():
        if gen.records[f.record]["derived_from"] is None and f.field in table.column_names:
            cols[name] = table.column(f.field).to_pylist()
    return cols
