"""The interval and verdict of a request-level metric in ``perfonto compare-runs`` (TTFT, TPOT, ITL, E2E
percentiles and means, completed requests): a reduction over request records, with no window series to
bootstrap, so compared over each run's records (``requests.parquet``) instead.

Each run's records of the metric's population (requests; token gaps for ITL) are re-evaluated with the
shipped catalog of the run's generation (``metrics.population``) and checked against ``report.json``
(the same value, or the records are not the ones the report used: no interval). Records close in time
move together (the gaps of one engine step are one step's time; concurrent requests share the batch), so
they are not resampled one by one: the run is cut into ``⌈N^(1/3)⌉`` (at least ``MIN_BLOCKS``) slices of
equal duration (a request by the latest instant its value needs — the first token for TTFT, completion for
E2E —; a gap by the emission that closes it), and a
block bootstrap (Carlstein 1986: whole slices drawn with replacement, each run on its own, ``n_boot``
resamples, a fixed seed so the same folders give the same interval) gives the resampled statistic:
a percentile (numpy's ``linear``, as the catalog's ``p50``/``p90``/``p99``), a mean, a count. The relative
interval is ``(1 + run change) × (s_b* / s_a*) ÷ (s_b / s_a) − 1`` over the resamples, as the windows'.

Without the records (a folder without ``requests.parquet`` and whose ``perfonto.json`` names none, a catalog
folder's metric that the shipped catalog defines otherwise), the metric gets no interval and says why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from perfonto.metrics.population import gap_instants

MIN_BLOCKS = 10  # time slices with records, per run, for an interval (``compare_runs.MIN_WINDOWS``)

__all__ = ["MIN_BLOCKS", "is_request_level", "record_metric"]


def is_request_level(report: dict, name: str) -> bool:
    """Whether ``name`` is one value over request records in ``report`` (``population`` in its entry)."""
    m = (report.get("metrics") or {}).get(name)
    return isinstance(m, dict) and bool(m.get("population")) and not isinstance(m.get("value"), list)


def _requests_file(folder: Path) -> Path | None:
    """The run's request records: ``requests.parquet`` in the folder (``perfonto run``), else the one its
    ``perfonto.json`` names as an input (``perfonto analyze``)."""
    if (folder / "requests.parquet").is_file():
        return folder / "requests.parquet"
    try:
        named = json.loads((folder / "perfonto.json").read_text(encoding="utf-8")).get("inputs", {})
    except (OSError, ValueError, AttributeError):
        return None
    p = named.get("requests.parquet") if isinstance(named, dict) else None
    return Path(p) if isinstance(p, str) and Path(p).is_file() else None


class _Samples:
    """One run's records, evaluated: ``values`` every record metric, ``times`` per population one instant per
    record; ``why`` when they cannot be had."""

    def __init__(self, folder: Path, report: dict):
        self.why: str | None = None
        self.graph = self.rec = None
        self.values: dict = {}
        self.times: dict[str, np.ndarray] = {}
        path = _requests_file(folder)
        if path is None:
            self.why = f"{folder}: no request records (requests.parquet) at hand"
            return
        try:
            from perfonto.metrics.catalog import load_catalog
            from perfonto.metrics.population import evaluate_records, read_records

            cat = load_catalog(None, str(report.get("generation") or "sohu"))
            if cat.graph is None or cat.errors:
                raise ValueError(f"the shipped catalog of `{report.get('generation')}` does not compile")
            self.graph = cat.graph
            self.rec = read_records(path, self.graph.generation)
            self.values = evaluate_records(self.graph, self.rec)
            self.times = _instants(self.graph.generation, self.rec, path)
        except (ValueError, OSError, KeyError) as exc:  # DumpError is a ValueError
            self.why = f"{path}: request records not readable ({exc})"


def _instants(gen, rec, path: Path) -> dict[str, np.ndarray]:
    """One instant per record of each population: a written record type's first instant (arrival), and for a
    derived one (token gaps) the emission that closes each gap, in the order ``emission_gaps`` lists them."""
    import pyarrow.parquet as pq

    from .records import _precedes, _time_fields

    out: dict[str, np.ndarray] = {}
    for rname, info in gen.records.items():
        src = info["derived_from"]
        if src is None:
            fields = {n for n, f in gen.record_fields.items() if f.record == rname}
            times = _time_fields(gen, rec, fields, (rec.size(rname),))
            first = next(
                (f for f in times if all(_precedes(rec.fields[f], rec.fields[g]) for g in times if g != f)), None
            )
            if first is not None:
                out[rname] = rec.fields[first]
            continue
        col = pq.read_table(path, columns=[gen.record_fields[src].field]).column(0).to_pylist()
        closing = gap_instants([np.asarray([] if t is None else t, dtype=np.float64) for t in col])
        if closing.size == rec.size(rname):
            out[rname] = closing
    return out


def _observed(s: _Samples, arg, pop: str) -> np.ndarray | None:
    """When each record's value is known: the latest instant it needs (a TTFT at the first token, an E2E at
    completion: an offline run's requests all arrive at once but finish over the run), else the population's
    instant (``_instants``)."""
    import networkx as nx

    from .records import _precedes, _time_fields

    gen = s.graph.generation
    if pop in gen.records and gen.records[pop]["derived_from"] is None:
        name = getattr(arg, "metric", None) or getattr(arg, "signal", "")
        fields = {name} if name in gen.record_fields else {a for a in nx.ancestors(s.graph.graph, name)}
        times = _time_fields(gen, s.rec, fields & set(gen.record_fields), (s.rec.size(pop),))
        last = next((f for f in times if all(_precedes(s.rec.fields[g], s.rec.fields[f]) for g in times)), None)
        if last is not None:
            return s.rec.fields[last]
    return s.times.get(pop)


def _reduction(graph, name: str) -> tuple[str, object, float] | None:
    """(func, the reduced argument, a constant factor) of a record metric ``func(arg)`` or ``func(arg) × c``."""
    from perfonto.metrics import ir

    m = graph.record_metrics.get(name) if graph is not None else None
    if m is None or m.population is not None:
        return None
    node, k = m.ir, 1.0
    if isinstance(node, ir.Op) and node.op == "mul" and len(node.args) == 2:
        roll = [a for a in node.args if isinstance(a, ir.Rollup)]
        const = [a for a in node.args if isinstance(a, ir.Const)]
        if len(roll) == 1 and len(const) == 1:
            node, k = roll[0], float(const[0].value)
    if not isinstance(node, ir.Rollup) or node.func not in ("p50", "p90", "p99", "mean", "count"):
        return None
    return node.func, node.arg, k


def _series(s: _Samples, name: str, reported: float) -> tuple[str, np.ndarray, np.ndarray, float, str] | str:
    """(func, the argument's values, their instants, the statistic, the population) of ``name`` over ``s``'s
    records, or why not."""
    from perfonto.metrics import ir

    if s.why:
        return s.why
    red = _reduction(s.graph, name)
    if red is None:
        return f"`{name}` is not a percentile, mean or count over records in the shipped catalog"
    func, arg, k = red
    if isinstance(arg, ir.MetricRef):
        v = np.asarray(s.values.get(arg.metric, []), dtype=np.float64)
    elif isinstance(arg, ir.Input):
        v = np.asarray(s.rec.fields.get(arg.signal, []), dtype=np.float64)
    else:
        return f"`{name}` reduces an expression, not a metric or field over records"
    pop = next((a.removeprefix("population.") for a, _ in arg.axes if a.startswith("population.")), "")
    t = _observed(s, arg, pop)
    value = float(s.values.get(name, math.nan))
    if t is None or t.shape != v.shape or not math.isclose(value, reported, rel_tol=1e-9, abs_tol=1e-12):
        return f"`{name}` over the records ({value:.6g}) is not the report's ({reported:.6g}): not the same records"
    return func, v, t, value / k if k else math.nan, pop


def _blocks(t: np.ndarray) -> np.ndarray:
    """Each record's time slice: ``max(MIN_BLOCKS, ⌈N^(1/3)⌉)`` slices of equal duration over the records."""
    n = t.size
    b = max(MIN_BLOCKS, math.ceil(n ** (1 / 3)))
    lo, hi = float(np.min(t)), float(np.max(t))
    if hi <= lo:
        return np.zeros(n, np.intp)
    return np.minimum(((t - lo) / (hi - lo) * b).astype(np.intp), b - 1)


def _resampled(func: str, v: np.ndarray, t: np.ndarray, rng, n_boot: int) -> tuple[np.ndarray, int, int] | None:
    """(``n_boot`` block-bootstrap resamples of the statistic, records used, slices) — None with fewer than
    ``MIN_BLOCKS`` slices holding a value."""
    ok = np.isfinite(t) if func == "count" else np.isfinite(t) & np.isfinite(v)
    v, t = v[ok], t[ok]
    blk = np.unique(_blocks(t), return_inverse=True)[1] if t.size else np.zeros(0, np.intp)
    nb = int(blk.max()) + 1 if blk.size else 0
    if nb < MIN_BLOCKS:
        return None
    counts = rng.multinomial(nb, np.full(nb, 1.0 / nb), size=n_boot)  # slices drawn with replacement
    if func == "count":
        return counts @ np.bincount(blk, weights=np.isfinite(v).astype(float), minlength=nb), int(v.size), nb
    if func == "mean":
        return (
            (counts @ np.bincount(blk, weights=v, minlength=nb)) / (counts @ np.bincount(blk, minlength=nb)),
            v.size,
            nb,
        )
    q = float(func[1:]) / 100
    owner = blk[np.argsort(v, kind="stable")]  # the slice of each record, in the order of the values
    x = np.sort(v, kind="stable")
    pos = [np.flatnonzero(owner == k) for k in range(nb)]  # each slice's records' ranks among all
    h = (counts @ np.bincount(blk, minlength=nb) - 1) * q  # the resample's rank of the percentile (linear)
    k0 = np.floor(h)
    j0, j1 = _first_above(pos, counts, k0, x.size), _first_above(pos, counts, k0 + 1, x.size)
    return x[j0] + (h - k0) * (x[j1] - x[j0]), int(v.size), nb


def _first_above(pos: list[np.ndarray], counts: np.ndarray, rank: np.ndarray, n: int) -> np.ndarray:
    """Per resample (a row of ``counts``: how often each slice was drawn), the record at ``rank`` (0-based) of
    its sorted values: the smallest ``j`` whose records ``0…j`` (in value order), each counted as often as its
    slice was drawn, number more than ``rank``. A bisection over ``j``: no resample is materialised."""
    lo = np.zeros(rank.size, np.int64)
    hi = np.full(rank.size, n - 1, np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        held = sum(counts[:, k] * np.searchsorted(p, mid + 1) for k, p in enumerate(pos))  # records 0…mid, drawn
        above = held > rank
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid + 1)
    return lo


def record_metric(base, other, name: str, boot: dict, cache: dict) -> dict:
    """The interval fields of request-level metric ``name`` (``compare_runs.RunValues`` ``base``, ``other``):
    ``relative_interval``, ``verdict``, ``over`` ("records"), ``records`` and ``blocks`` per run; or, without
    the records, no interval and a verdict that says why (``no interval: …``). ``boot``: ``n_boot``,
    ``confidence``, ``seed``; ``cache``: the runs' evaluated records, by folder."""
    from .compare_runs import _verdict

    a, b = base.value(name), other.value(name)
    runs = []
    for r, reported in ((base, a), (other, b)):
        key = str(r.path)
        if key not in cache:
            cache[key] = _Samples(Path(r.path), r.report)
        runs.append(_series(cache[key], name, reported))
    out = {"over": "records", "relative_interval": [None, None]}
    why = next((x for x in runs if isinstance(x, str)), None)
    if why is not None:
        out["verdict"] = "no change" if math.isclose(a, b, rel_tol=1e-6) else f"no interval: request-level, {why}"
        return out
    (fa, va, ta, sa, pop), (_, vb, tb, sb, _) = runs
    rng = np.random.default_rng(boot["seed"])
    ra, rb = _resampled(fa, va, ta, rng, boot["n_boot"]), _resampled(fa, vb, tb, rng, boot["n_boot"])
    out["population"] = pop
    if ra is None or rb is None:
        n = [x[1] if x is not None else int(np.isfinite(v).sum()) for x, v in ((ra, va), (rb, vb))]
        out["records"] = n
        out["verdict"] = (
            "no change"
            if math.isclose(a, b, rel_tol=1e-6)
            else f"too few {pop} records to tell ({n[0]:,} and {n[1]:,}, in fewer than {MIN_BLOCKS} time slices): "
            "run longer"
        )
        return out
    out["records"], out["blocks"] = [ra[1], rb[1]], [ra[2], rb[2]]
    rel = (b - a) / abs(a) if a else None
    lo = hi = math.nan
    if rel is not None and sa > 0 and sb > 0 and np.all(ra[0] > 0):
        q = [(1 - boot["confidence"]) / 2, 1 - (1 - boot["confidence"]) / 2]
        lo, hi = np.quantile((1 + rel) * (rb[0] / ra[0]) / (sb / sa) - 1, q)
        out["relative_interval"] = [float(lo), float(hi)]
    out["verdict"] = (
        _verdict(float(lo), float(hi), a, b)
        if math.isfinite(lo)
        else ("no change" if math.isclose(a, b, rel_tol=1e-6) else "no interval: request-level, a statistic of 0")
    )
    return out
