"""``perfonto sweep``: project a grid of points in parallel, find where the bottleneck changes.

``run_points`` evaluates points over a process pool (``concurrent.futures.ProcessPoolExecutor``,
``jobs`` workers), cached rows first (``points.Cache``), calling ``progress(done, total)`` as rows
come in. ``sweep`` runs the grid of a list of knobs and locates every change of bottleneck along
the first knob (the x axis; the other knobs make the series): between two neighbouring points
whose bottlenecks differ, the crossing is bisected — in ln x for positive values — until the
bracket is narrower than ``tol`` (relative; integer knobs to neighbouring integers), so the
reported crossing does not depend on how coarse the grid is.
"""

from __future__ import annotations

import itertools
import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .knobs import Knob, KnobError, Point, grid
from .points import Cache, Target, check_preset, evaluate_point
from .pool import fill, workers


def _work(target: Target, point: Point, folder) -> dict:
    return evaluate_point(target, point, Cache(folder))


def run_points(
    target: Target, points: list[Point], *, jobs: int | None = None, cache: Cache | None = None, progress=None
) -> list[dict]:
    """Rows of ``points`` in their order. ``jobs``: worker processes (default: the cores; 1 runs here).

    Raises:
        KnobError: the base generation does not load.
    """
    cache = cache or Cache(None)
    rows: list[dict | None] = [None] * len(points)
    todo = []
    for i, pt in enumerate(points):
        key = _key(target, pt, cache)
        hit = cache.get(key) if key else None
        if hit is not None:
            rows[i] = hit
        else:
            todo.append(i)
    done = len(points) - len(todo)
    if progress:
        progress(done, len(points))
    return fill(
        rows,
        todo,
        lambda i: evaluate_point(target, points[i], cache),
        lambda i: (_work, target, points[i], cache.folder),
        jobs=workers(jobs, len(todo)),
        total=len(points),
        done=done,
        progress=progress,
    )


def _key(target, pt, cache):
    from .points import point_key

    return point_key(target, pt) if cache.folder is not None else None


@dataclass
class SweepResult:
    """Rows of a sweep (one per point, grid order), the knobs, and the crossings: ``{"knob", "series"
    (the other knobs' values), "at" (the crossing, in the knob's unit; None when no point between "low"
    and "high" runs), "low", "high" (the final bracket: points that run), "from", "to" (bottlenecks below
    and above), and "cannot_run" (only then: ``{"values", "error"}``, the points tried between)}``."""

    knobs: list[Knob]
    rows: list[dict]
    crossings: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """The knobs, points and crossings, each knob's values in its ``unit`` (a clock's GHz)."""
        return {
            "knobs": [{"name": k.name, "values": [k.shown(v) for v in k.values], "unit": k.unit} for k in self.knobs],
            "points": self.shown_rows(),
            "crossings": [self._shown_crossing(c) for c in self.crossings],
        }

    def units(self) -> dict[str, str]:
        """The unit of each knob that has one (``Knob.unit``)."""
        return {k.name: k.unit for k in self.knobs if k.unit}

    def shown_rows(self) -> list[dict]:
        """The rows with each knob's value in its ``unit`` (what the tables and files show)."""
        scaled = [k for k in self.knobs if k.scale != 1.0]
        return [r | {k.name: k.shown(r.get(k.name)) for k in scaled} for r in self.rows] if scaled else self.rows

    def _shown_crossing(self, c: dict) -> dict:
        by = {k.name: k for k in self.knobs}
        series = {n: by[n].shown(v) if n in by else v for n, v in (c.get("series") or {}).items()}
        c = c | {"series": series}  # the other knobs' values in their units too (a clock second: GHz)
        k = by.get(c["knob"])
        if k is None or k.scale == 1.0:
            return c
        out = c | {f: k.shown(c[f]) for f in ("at", "low", "high")} | {"grid": [k.shown(v) for v in c["grid"]]}
        if c.get("cannot_run"):
            out["cannot_run"] = c["cannot_run"] | {"values": [k.shown(v) for v in c["cannot_run"]["values"]]}
        return out


#: Points tried inside a bracket before its crossing is declared between points that run (the points
#: between cannot run: chips = 5, 6, 7 between 4 and 8 for a model of 64 heads).
MAX_TRIES = 8


def _inside(lo, hi, mid, integer: bool, log: bool) -> list:
    """The points to try inside ``(lo, hi)``, the midpoint first: the integers between, nearest the midpoint
    first (at most ``MAX_TRIES``); for a real knob the midpoint, then the quarter points (in ln x when ``log``)."""
    if integer:
        return sorted(range(lo + 1, hi), key=lambda v: (abs(v - mid), v))[:MAX_TRIES]
    at = (lambda t: lo * (hi / lo) ** t) if log else (lambda t: lo + (hi - lo) * t)
    return [mid, at(0.25), at(0.75)]


def _probe(target: Target, base: Point, knob: Knob, tries: list, cache: Cache, failed: list) -> tuple:
    """The first of ``tries`` that runs and its row, or ``(None, None)`` when none does (each that does not
    is added to ``failed`` as ``(value, error)``)."""
    for v in tries:
        row = evaluate_point(target, base.with_values(**{knob.name: v}), cache)
        if not row.get("error"):
            return v, row
        failed.append((v, row["error"]))
    return None, None


def _bisect(target: Target, base: Point, knob: Knob, lo, hi, b_lo: str, tol: float, cache: Cache) -> tuple:
    """The crossing between ``lo`` (bottleneck ``b_lo``) and ``hi`` (another), both points that run:
    ``(low, high, at, cannot_run)``. A point inside that cannot run (a mapping that does not divide) is
    skipped for its neighbours; when none inside runs, the crossing lies somewhere between ``low`` and
    ``high``: ``at`` is None and ``cannot_run`` ``{"values": the points tried, "error": the first one's}``."""
    integer = all(isinstance(v, int) for v in knob.values)
    log = all(isinstance(v, (int, float)) and v > 0 for v in (lo, hi))
    failed: list = []
    for _ in range(60):
        if integer and hi - lo <= 1:
            break
        if not integer and (hi / lo - 1 if log else (hi - lo) / max(abs(hi), 1e-300)) <= tol:
            break
        mid = math.sqrt(lo * hi) if log else (lo + hi) / 2
        if integer:
            mid = int(round(mid))
            if mid in (lo, hi):
                break
        failed.clear()
        v, row = _probe(target, base, knob, _inside(lo, hi, mid, integer, log), cache, failed)
        if row is None:  # nothing between runs: the crossing is somewhere between lo and hi
            values = sorted(x for x, _ in failed)
            return lo, hi, None, {"values": values, "error": failed[0][1]}
        if row.get("bottleneck") == b_lo:
            lo = v
        else:
            hi = v
    at = (math.sqrt(lo * hi) if log else (lo + hi) / 2) if not integer else hi
    return lo, hi, at, None


def _refine(target: Target, base: Point, knob: Knob, lo, hi, b_lo, tol, folder):
    return _bisect(target, base, knob, lo, hi, b_lo, tol, Cache(folder))


MAX_POINTS = 1_000  # grid points of one sweep unless raised (each is an emulator projection, ~0.1-1 s)


def _check_size(knobs: list[Knob], max_points: int) -> None:
    """Refuse a grid of more than ``max_points`` points, counted before any is built."""
    size = 1
    for k in knobs:
        size *= max(1, len(k.values))
    if size > max_points:
        sizes = " × ".join(f"{len(k.values):,} {k.name}" for k in knobs)
        raise KnobError(
            f"the sweep has {size:,} points ({sizes}), more than {max_points:,}; vary fewer values, "
            "or raise the cap with --max-points"
        )


def _pending_crossings(rows: list[dict], x: Knob, others: list[Knob]) -> list[tuple]:
    """The neighbouring grid points along ``x`` that run and whose bottlenecks differ (points between that
    cannot run are passed over), per combination of the other knobs: (those knobs' values, x below, x above,
    the bottleneck below, the one above)."""
    pending = []
    for combo in itertools.product(*(k.values for k in others)):
        fixed = dict(zip((k.name for k in others), combo))
        series = [  # the points that run: a crossing lies between two of them
            (r[x.name], r) for r in rows if not r.get("error") and all(r.get(n) == v for n, v in fixed.items())
        ]
        series.sort(key=lambda t: t[0])
        for (a, ra), (b, rb) in zip(series, series[1:]):
            if ra.get("bottleneck") and rb.get("bottleneck") and ra["bottleneck"] != rb["bottleneck"]:
                pending.append((fixed, a, b, ra["bottleneck"], rb["bottleneck"]))
    return pending


def _refine_all(target: Target, base: Point, x: Knob, pending: list[tuple], tol: float, cache: Cache, jobs) -> list:
    """Each pending crossing bisected to ``tol`` (in worker processes when more than one job)."""
    jobs = workers(jobs, len(pending))
    if pending and jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = [
                pool.submit(_refine, target, base.with_values(**fixed), x, a, b, fa, tol, cache.folder)
                for fixed, a, b, fa, _ in pending
            ]
            return [f.result() for f in futs]
    return [_bisect(target, base.with_values(**fixed), x, a, b, fa, tol, cache) for fixed, a, b, fa, _ in pending]


def sweep(
    target: Target,
    base: Point,
    knobs: list[Knob],
    *,
    jobs: int | None = None,
    cache: Cache | None = None,
    progress=None,
    tol: float = 0.005,
    max_points: int = MAX_POINTS,
) -> SweepResult:
    """Project the grid of ``knobs`` over ``base`` and locate the bottleneck crossings along the
    first numeric knob (module docstring); ``tol``: relative width of a refined crossing.

    Raises:
        KnobError: an empty sweep, a knob given twice, a spec constant the preset sets itself, a grid
            of more than ``max_points`` points (counted before any is built).
    """
    _check_size(knobs, max_points)
    cache = cache or Cache(None)
    points = grid(base, knobs)
    check_preset(target, points)
    rows = run_points(target, points, jobs=jobs, cache=cache, progress=progress)
    xi = next((i for i, k in enumerate(knobs) if all(isinstance(v, (int, float)) for v in k.values)), None)
    if xi is None:
        return SweepResult(knobs, rows)
    x = knobs[xi]
    others = [k for i, k in enumerate(knobs) if i != xi]
    pending = _pending_crossings(rows, x, others)
    results = _refine_all(target, base, x, pending, tol, cache, jobs)
    crossings = []
    for (fixed, a, b, fa, fb), (lo, hi, at, cannot) in zip(pending, results):
        crossings.append(
            {"knob": x.name, "series": fixed, "at": at, "low": lo, "high": hi, "grid": [a, b], "from": fa, "to": fb}
            | ({"cannot_run": cannot} if cannot else {})
        )
    return SweepResult(knobs, rows, crossings)


def write_table(rows: list[dict], path, units: dict[str, str] | None = None, headed: set[str] | None = None) -> str:
    """Write ``rows`` to ``path`` as CSV, Parquet or JSON by its extension, atomically (beside it, then
    renamed: a failure leaves the old file whole); returns the format. ``units`` (column → unit): JSON writes
    ``{"units", "points"}`` (else the bare list of rows), Parquet keeps each column's unit in its field's
    metadata; the columns ``headed`` (the knobs') are headed ``name [unit]`` in CSV and Parquet.

    Raises:
        KnobError: another extension.
        OutputError: it cannot be written (the message names ``path``).
    """
    import json
    from pathlib import Path

    import pyarrow as pa

    from perfonto.outputs import atomic_path

    p = Path(path)
    ext = p.suffix.lower()
    if ext not in (".csv", ".parquet", ".json"):
        raise KnobError(
            f"{p}: the table is written as .csv, .parquet or .json, not {ext or 'a file without extension'}"
        )
    units = units or {}
    with atomic_path(p) as tmp:
        if ext == ".json":
            doc = {"units": units, "points": rows} if units else rows
            tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
            return "json"
        cols = list(dict.fromkeys(k for r in rows for k in r))
        heads = [f"{c} [{units[c]}]" if c in (headed or ()) and units.get(c) else c for c in cols]
        arrays = [pa.array([_cell(r.get(c)) for r in rows]) for c in cols]
        fields = [
            pa.field(h, a.type, metadata={"unit": units[c]} if units.get(c) else None)
            for h, c, a in zip(heads, cols, arrays)
        ]
        table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        if ext == ".csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, tmp)
            return "csv"
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)
        return "parquet"


def _cell(v):
    return v if v is None or isinstance(v, (int, float, str, bool)) else str(v)


__all__ = ["SweepResult", "run_points", "sweep", "write_table"]
