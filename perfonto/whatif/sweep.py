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
    (the other knobs' values), "at" (the crossing, in the knob's unit), "low", "high" (the final
    bracket), "from", "to" (bottlenecks below and above)}``."""

    knobs: list[Knob]
    rows: list[dict]
    crossings: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "knobs": [{"name": k.name, "values": list(k.values), "unit": k.unit} for k in self.knobs],
            "points": self.rows,
            "crossings": self.crossings,
        }


def _bisect(target: Target, base: Point, knob: Knob, lo, hi, b_lo: str, tol: float, cache: Cache) -> tuple:
    integer = all(isinstance(v, int) for v in knob.values)
    log = all(isinstance(v, (int, float)) and v > 0 for v in (lo, hi))
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
        row = evaluate_point(target, base.with_values(**{knob.name: mid}), cache)
        if row.get("bottleneck") == b_lo:
            lo = mid
        else:
            hi = mid
    at = (math.sqrt(lo * hi) if log else (lo + hi) / 2) if not integer else hi
    return lo, hi, at


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
    """The neighbouring grid points along ``x`` whose bottlenecks differ, per combination of the other
    knobs: (those knobs' values, x below, x above, the bottleneck below, the one above)."""
    pending = []
    for combo in itertools.product(*(k.values for k in others)):
        fixed = dict(zip((k.name for k in others), combo))
        series = [(r[x.name], r) for r in rows if all(r.get(n) == v for n, v in fixed.items())]
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
    for (fixed, a, b, fa, fb), (lo, hi, at) in zip(pending, results):
        crossings.append(
            {"knob": x.name, "series": fixed, "at": at, "low": lo, "high": hi, "grid": [a, b], "from": fa, "to": fb}
        )
    return SweepResult(knobs, rows, crossings)


def write_table(rows: list[dict], path) -> str:
    """Write ``rows`` to ``path`` as CSV, Parquet or JSON by its extension, atomically (beside it, then
    renamed: a failure leaves the old file whole); returns the format.

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
    with atomic_path(p) as tmp:
        if ext == ".json":
            tmp.write_text(json.dumps(rows, indent=2), encoding="utf-8")
            return "json"
        cols = list(dict.fromkeys(k for r in rows for k in r))
        table = pa.table({c: pa.array([_cell(r.get(c)) for r in rows]) for c in cols})
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
