"""Compare captures: a baseline run and one or more others (``perfonto run`` or ``analyze`` folders of the
same catalog), metric by metric, with an interval that says whether a change is more than the noise.

Per metric: the run-level server values of both runs (``report.json``) and their relative change; and,
from the per-window values (``metrics.parquet``, or the ``metrics/host=…`` parts), the change in the mean
over windows of the per-window mean over chips with a moving-block bootstrap interval (Künsch 1989:
blocks of ⌈W^(1/3)⌉ consecutive windows drawn with replacement, each run on its own, ``n_boot``
resamples, a fixed seed so the same folders give the same interval), also given relative to the
baseline's window mean. The verdict is the bootstrap's: "increased" or "decreased" when that interval
excludes zero, else "no change". The run-level change and the change in window means differ where
windows weigh differently in the run's totals (``differs`` marks a run-level change outside the
interval). Direction-free on purpose: whether more
is better depends on the metric (tokens/s, TTFT), so ``regressions`` takes a signed threshold per metric
(``mfu:-5`` fails on a drop of more than 5 %, ``ttft_p99:+10`` on a rise of more than 10 %).

Metrics with a value in one run only are listed (``only_in``), not dropped; the top-down shares and the
per-op table (time share per op class) are compared side by side too.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from perfonto.ontology.errors import PerfontoError

MIN_WINDOWS = 10  # windows with a value, per run, for an interval

__all__ = [
    "MIN_WINDOWS",
    "CompareError",
    "RuleError",
    "RunValues",
    "load_run",
    "block_bootstrap",
    "compare",
    "finite",
    "regressions",
]


class CompareError(PerfontoError, ValueError):
    """A folder that is not a run or analyze output, or runs that cannot be compared (the message says why)."""


class RuleError(CompareError):
    """A ``--fail-on-regression`` rule naming a metric the runs do not both have (a usage error)."""


@dataclass
class RunValues:
    """One run: ``report`` (its report.json), ``windows`` metric → per-window mean over chips (W,)."""

    path: Path
    report: dict
    windows: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def generation(self) -> str:
        return str(self.report.get("generation", "?"))

    def value(self, name: str) -> float | None:
        m = (self.report.get("metrics") or {}).get(name)
        v = m.get("value") if isinstance(m, dict) else None
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    def unit(self, name: str) -> str:
        m = (self.report.get("metrics") or {}).get(name)
        return str(m.get("unit", "")) if isinstance(m, dict) else ""


def load_run(folder: str | Path) -> RunValues:
    """A run or analyze output folder: its report and its per-window values.

    Raises:
        CompareError: no report.json, or one that is not perfonto's, or window values that cannot be read.
    """
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    p = Path(folder)
    try:
        report = json.loads((p / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(
            f"{p}: no readable report.json ({getattr(exc, 'strerror', None) or exc}); give a folder written "
            "by `perfonto run` or `perfonto analyze`"
        ) from None
    if not isinstance(report, dict) or not isinstance(report.get("metrics"), dict):
        raise CompareError(f"{p / 'report.json'}: not a perfonto report (no `metrics`)")
    src = p / "metrics.parquet" if (p / "metrics.parquet").is_file() else p / "metrics"
    windows: dict[str, np.ndarray] = {}
    if src.exists():
        try:
            t = ds.dataset(str(src), format="parquet", partitioning="hive").to_table()
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary by version; named, not raised raw
            raise CompareError(f"{src}: window values not readable ({exc}); run the command again") from None
        if "window" in t.column_names:
            order = np.asarray(t.column("window").to_numpy(zero_copy_only=False), dtype=np.int64)
            uniq, inv = np.unique(order, return_inverse=True)
            for name in report["metrics"]:
                if name not in t.column_names or not _numeric(t.schema.field(name).type):
                    continue
                v = np.asarray(pc.cast(t.column(name), "float64").to_numpy(zero_copy_only=False), dtype=np.float64)
                ok = np.isfinite(v)
                s = np.bincount(inv[ok], weights=v[ok], minlength=len(uniq))
                n = np.bincount(inv[ok], minlength=len(uniq))
                with np.errstate(invalid="ignore", divide="ignore"):
                    windows[name] = np.where(n > 0, s / np.maximum(n, 1), np.nan)
    return RunValues(p, report, windows)


def _numeric(t) -> bool:
    import pyarrow as pa

    return pa.types.is_floating(t) or pa.types.is_integer(t)


def block_bootstrap(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """The change ``mean(b) − mean(a)`` of two series of window values and its moving-block bootstrap
    interval at ``confidence`` (NaNs dropped; blocks of ⌈n^(1/3)⌉ windows, each series resampled on
    its own). Returns (change, low, high); NaNs when either series has fewer than ``MIN_WINDOWS`` values.

    Source: H. R. Künsch, "The jackknife and the bootstrap for general stationary observations",
    Annals of Statistics 17 (1989); percentile interval.
    """
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < MIN_WINDOWS or b.size < MIN_WINDOWS:  # too few windows to tell a change from the noise
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    change = float(b.mean() - a.mean())

    def means(x: np.ndarray) -> np.ndarray:
        n = x.size
        L = max(1, math.ceil(n ** (1 / 3)))
        k = math.ceil(n / L)
        starts = rng.integers(0, n - L + 1, size=(n_boot, k))
        idx = (starts[:, :, None] + np.arange(L)[None, None, :]).reshape(n_boot, -1)[:, :n]
        return x[idx].mean(axis=1)

    d = means(b) - means(a)
    lo, hi = np.quantile(d, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return change, float(lo), float(hi)


def _events(w: np.ndarray | None) -> int | None:
    """Windows with a finite non-zero value: a metric of events that land in few windows (tokens count
    when a step ends: a 1 ms window of a 0.33 s step) has as many observations as those windows."""
    return None if w is None else int(np.count_nonzero(np.isfinite(w) & (w != 0)))


def _verdict(
    lo: float, hi: float, a: float | None, b: float | None, nz_a: int | None = None, nz_b: int | None = None
) -> str:
    if a is not None and b is not None and a == b:
        return "no change"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"too few windows (< {MIN_WINDOWS})"
    if nz_a is not None and nz_b is not None and max(nz_a, nz_b) < MIN_WINDOWS:
        # a handful of non-zero windows in each run (a 1 s run holds ~3 engine steps): no interval tells a change
        return f"too few windows with a value ≠ 0 ({nz_a} and {nz_b} < {MIN_WINDOWS}): run longer"
    if lo > 0:
        return "increased"
    if hi < 0:
        return "decreased"
    return "no change"


def compare(base: RunValues, other: RunValues, *, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict:
    """``other`` against the baseline ``base``: ``metrics`` (name → baseline, value, change, relative,
    interval, verdict, unit), ``only_in`` (name → which run has a value), ``topdown`` and ``ops``
    side by side; ``note`` when the runs are of different generations (a what-if: metrics are matched by
    name). Raises ``CompareError`` for runs that share no metric."""
    shared = set(base.report["metrics"]) & set(other.report["metrics"])
    if not shared:
        raise CompareError(f"{other.path}: shares no metric with the baseline {base.path}; compare runs of one catalog")
    note = (
        None
        if base.generation == other.generation
        else f"runs of different generations ({base.generation} → {other.generation}): metrics matched by name"
    )
    metrics, only = {}, {}
    names = list(dict.fromkeys(list(base.report["metrics"]) + list(other.report["metrics"])))
    for name in names:
        a, b = base.value(name), other.value(name)
        if a is None and b is None:
            continue
        if a is None or b is None:
            only[name] = "baseline" if b is None else str(other.path)
            continue
        wa, wb = base.windows.get(name), other.windows.get(name)
        if wa is not None and wb is not None:
            change, lo, hi = block_bootstrap(wa, wb, n_boot=n_boot, confidence=confidence, seed=seed)
            mean_a = float(np.nanmean(wa)) if np.isfinite(wa).any() else math.nan
        else:
            change, lo, hi, mean_a = math.nan, math.nan, math.nan, math.nan
        rel = (b - a) / abs(a) if a else None  # no relative change from a baseline of 0
        rel_lo = rel_hi = None
        if mean_a and math.isfinite(mean_a) and math.isfinite(lo):
            rel_lo, rel_hi = lo / abs(mean_a), hi / abs(mean_a)
        metrics[name] = {
            "unit": base.unit(name),
            "baseline": a,
            "value": b,
            "change": b - a,
            "relative": rel,
            "window_change": change,
            "window_interval": [lo, hi],
            "relative_interval": [rel_lo, rel_hi],
            "verdict": _verdict(lo, hi, a, b, _events(wa), _events(wb)),
            "differs": bool(rel is not None and rel_lo is not None and not (rel_lo <= rel <= rel_hi)),
        }
    td = sorted(set(base.report.get("topdown") or {}) | set(other.report.get("topdown") or {}))
    topdown = {n: [(base.report.get("topdown") or {}).get(n), (other.report.get("topdown") or {}).get(n)] for n in td}
    return {
        "baseline": str(base.path),
        "run": str(other.path),
        "generation": base.generation,
        "note": note,
        "confidence": confidence,
        "n_boot": n_boot,
        "metrics": metrics,
        "only_in": only,
        "topdown": topdown,
        "ops": _ops(base.report, other.report),
        "bottleneck": [base.report.get("bottleneck"), other.report.get("bottleneck")],
    }


def _ops(a: dict, b: dict) -> dict:
    def rows(r):
        ops = r.get("ops") or {}
        return {str(x.get("op")): x.get("time_share") for x in (ops.get("rows") or []) if isinstance(x, dict)}

    ra, rb = rows(a), rows(b)
    return {op: [ra.get(op), rb.get(op)] for op in sorted(set(ra) | set(rb))}


def finite(doc):
    """``doc`` with every NaN or infinite float as None (strict JSON has neither)."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite(v) for v in doc]
    return doc


def regressions(result: dict, rules: list[tuple[str, float]]) -> list[str]:
    """The rules (metric, signed percent) that ``result`` crosses: a negative percent is crossed by a drop of
    more than its size, a positive one by a rise of more than it, where the verdict says the change is
    beyond the noise, or where the run-level change is past it and there are too few windows to tell
    (a gate that cannot decide fails, saying so). Raises ``CompareError`` for a metric the runs do not
    both have."""
    out = []
    for name, pct in rules:
        m = result["metrics"].get(name)
        if m is None:
            from perfonto.ontology.diagnostics import did_you_mean

            why = (
                "has a value in one run only"
                if name in result["only_in"]
                else "is not a metric of these runs; "
                f"{did_you_mean(name, result['metrics']) or 'see compare-runs --all'}"
            )
            raise RuleError(f"--fail-on-regression {name}: `{name}` {why}")
        if m["relative"] is None:  # from a baseline of 0: any significant change is past any percent
            rel = math.copysign(math.inf, m["change"])
        else:
            rel = 100 * m["relative"]
        past = (pct < 0 and rel < pct) or (pct > 0 and rel > pct)
        if m["verdict"] in ("increased", "decreased") and past:
            out.append(f"{name}: {rel:+.2f} % ({m['baseline']:.6g} → {m['value']:.6g} {m['unit']}), past {pct:+g} %")
        elif m["verdict"].startswith("too few") and past:  # a gate that cannot tell does not pass silently
            out.append(
                f"{name}: {rel:+.2f} % ({m['baseline']:.6g} → {m['value']:.6g} {m['unit']}), past {pct:+g} %, not "
                f"told from the noise: {m['verdict']}"
            )
    return out
