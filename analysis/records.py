"""Serving figures of a run that come from event records rather than counter windows: latency
metrics over request records (``metrics.population``) with the population each one covers (and a
warning when the run's end cut it short), the records checked against the request counters, and
the compute / communication / idle time split from the device trace (``metrics.timesplit``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.population import Records, evaluate_records, read_records
from perfonto.metrics.timesplit import time_split
from perfonto.ontology import kinds


def record_metrics(graph: MetricGraph, requests_path: str | Path) -> dict[str, np.ndarray | float]:
    """Every record metric of the catalog over the run's ``requests.parquet``."""
    return evaluate_records(graph, read_records(requests_path, graph.generation))


def read_and_evaluate(graph: MetricGraph, requests_path: str | Path) -> tuple[Records, dict[str, np.ndarray | float]]:
    """The run's records and every record metric over them."""
    rec = read_records(requests_path, graph.generation)
    return rec, evaluate_records(graph, rec)


def _reduced(m) -> ir.Node | None:
    """The argument of the population reduction in a record metric's formula (None if none)."""
    stack = [m.ir]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Rollup) and n.func in ("p50", "p90", "p99", "mean", "count"):
            return n.arg
        stack.extend(ir.children(n))
    return None


def record_populations(graph: MetricGraph, rec: Records, values: dict) -> dict[str, dict]:
    """What each reduction over records covers: ``{metric: {"population", "of", "count", "without_value",
    "unfinished", "before_run"?, "warning"?}}``. ``before_run``: of the values, those complete (the latest
    instant they need, e.g. the first token for TTFT) at or before 0, the run's start on the records' clock (the
    emulator's warm-up requests). ``count``: records the reduction used (non-null values); ``without_value``:
    records of the population left out (null); ``unfinished``: of those, the ones that had started (the
    earliest instant the value needs — arrival, first token — is set) but not reached the end the
    value needs by the end of the run: a request still waiting for its first token, or still decoding. Percentiles and
    means over a population with unfinished records are capped by the run length (the slowest are missing), and
    say so in ``warning``."""
    out: dict[str, dict] = {}
    for name, m in graph.record_metrics.items():
        if m.population is not None:
            continue
        arg = _reduced(m)
        found = _reduced_values(graph, rec, values, arg) if arg is not None else None
        if found is None:
            continue
        of, v, fields = found
        gen = graph.generation
        pop = (
            (graph.record_metrics[of].population if of in graph.record_metrics else gen.record_fields[of].record)
            if (of in graph.record_metrics or of in gen.record_fields)
            else None
        )
        null = np.isnan(v)
        times = _time_fields(gen, rec, fields, v.shape)
        first = next((f for f in times if all(_precedes(rec.fields[f], rec.fields[g]) for g in times if g != f)), None)
        # started: the earliest instant the value needs (arrival, first token) is there
        started = np.isfinite(rec.fields[first]) if first is not None else np.zeros(v.shape, bool)
        unfinished = int((null & started).sum())
        doc = {
            "population": pop,
            "of": of,
            "count": int((~null).sum()),
            "without_value": int(null.sum()),
            "unfinished": unfinished,
        }
        last = next((f for f in times if all(_precedes(rec.fields[g], rec.fields[f]) for g in times if g != f)), None)
        before = int((~null & (rec.fields[last] <= 0)).sum()) if last is not None else 0  # at 0: the step ending there
        if before:  # records on a clock where the run starts at 0 (the emulator's warm-up: at or below 0)
            doc["before_run"] = before
        func = next((n.func for n in ir.walk(m.ir) if isinstance(n, ir.Rollup)), "")
        if unfinished and func in ("p50", "p90", "p99", "mean"):
            doc["warning"] = (
                f"capped by the run length: {unfinished} {pop or 'record'}(s) of the population had not finished "
                f"`{of}` by the end of the run; the slowest are the likeliest to be missing, so the value is "
                "biased low — run longer"
            )
        out[name] = doc
    return out


def _reduced_values(graph: MetricGraph, rec: Records, values: dict, arg) -> tuple[str, np.ndarray, set] | None:
    """(what a reduction reduces, its values, the record fields it reads) for a reduction's argument ``arg``
    (a metric or a record field); None for another expression."""
    import networkx as nx

    gen = graph.generation
    if isinstance(arg, ir.MetricRef):
        fields = {a for a in nx.ancestors(graph.graph, arg.metric) if a in gen.record_fields}
        return arg.metric, np.asarray(values.get(arg.metric, []), dtype=np.float64), fields
    if isinstance(arg, ir.Input):
        return arg.signal, np.asarray(rec.fields.get(arg.signal, []), dtype=np.float64), {arg.signal}
    return None


def _time_fields(gen, rec: Records, fields: set, shape: tuple) -> list[str]:
    """The fields among ``fields`` that are instants (in a unit of time) with one value per record."""
    sec = gen.registry.Quantity(1, gen.registry.second).dimensionality
    return [
        f
        for f in sorted(fields)
        if f in rec.fields
        and rec.fields[f].shape == shape
        and gen.registry.Quantity(1, gen.record_fields[f].unit).dimensionality == sec
    ]


def _precedes(a: np.ndarray, b: np.ndarray) -> bool:
    """Instant field ``a`` comes no later than ``b`` in every record where both are set."""
    both = np.isfinite(a) & np.isfinite(b)
    return bool(both.any()) and bool(np.all(a[both] <= b[both]))


def records_vs_counters(gen, rec: Records, windows) -> str | None:
    """A note when the records and the counters disagree on how many requests completed in the run:
    the records list the requests that arrived in it (admissions before the run — a warm-up — are
    not written), while a counter of requests (unit ``request``) counts every completion."""
    comp = rec.fields.get("request.completion_time")
    counters = [
        n
        for n, s in gen.signals.items()
        if kinds.of(s).window == "increase" and s.unit_text in ("request", "req", "requests")
    ]
    if comp is None or not counters or windows is None:
        return None
    name = counters[0]
    v = windows.values.get(name)
    if v is None:
        return None
    counted = float(np.nansum(v))
    listed = int(np.isfinite(comp).sum())
    if abs(counted - listed) < 0.5:
        return None
    return f"the request records list {listed} request(s) completed in the run but `{name}` counts {counted:.0f}: " + (
        f"{counted - listed:.0f} completed request(s) are not in the records (admitted before the run began, e.g. "
        "during a warm-up), so the latency metrics (ttft, tpot, itl, e2e, requests_completed) do not cover them"
        if counted > listed
        else "the records hold completions the counters did not count (another window or host?)"
    )


def trace_time_split(trace_path: str | Path, windows) -> dict:
    """Shares of chip time (summed over chips) that are compute only, communication only, both at
    once, and idle, from the device spans of ``trace.parquet``: ``op`` spans are compute (matrix,
    vector or memory work), ``collective`` spans communication; each chip's window is its first to
    last counter sample on its own clock. Unions, so overlapping streams count once."""
    t = pq.read_table(trace_path, columns=["kind", "chip", "start_ns", "end_ns", "clock"]).to_pydict()
    kind = np.array([str(k) for k in t["kind"]])
    chip = np.asarray(t["chip"])
    start = np.asarray(t["start_ns"], dtype=np.float64)
    end = np.asarray(t["end_ns"], dtype=np.float64)
    device = np.array([str(c) != "host" for c in t["clock"]], dtype=bool)
    totals = {"compute_only": 0.0, "communication_only": 0.0, "overlap": 0.0, "idle": 0.0}
    window_total = 0.0
    starts = windows.start_ns
    for ci in range(windows.interval.shape[1]):
        lo = float(starts[0, ci])
        hi = float(starts[-1, ci] + windows.interval[-1, ci] * 1e9)
        on = device & (chip == ci)
        comp = np.stack([start[on & (kind == "op")], end[on & (kind == "op")]], axis=1)
        comm = np.stack([start[on & (kind == "collective")], end[on & (kind == "collective")]], axis=1)
        ts = time_split(comp, comm, lo, hi)
        for k, v in ts.shares.items():
            totals[k] += v * ts.window
        window_total += ts.window
    return {k: v / window_total for k, v in totals.items()} if window_total > 0 else {k: None for k in totals}
