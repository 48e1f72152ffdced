"""Compare captures: a baseline run and one or more others (``perfonto run`` or ``analyze`` folders of the
same catalog), metric by metric, with an interval that says whether a change is more than the noise.

Per metric: the run-level server values of both runs (``report.json``) and their relative change — the
figure the table shows and the verdict is about; and, from the per-window values (``metrics.parquet``,
or the ``metrics/host=…`` parts), how much that change could be noise: a moving-block bootstrap
(Künsch 1989: blocks of ⌈W^(1/3)⌉ consecutive windows drawn with replacement, each run on its own,
``n_boot`` resamples, a fixed seed so the same folders give the same interval) of the mean over windows
of the per-window mean over chips. ``window_change`` / ``window_interval`` are that change in window
means and its percentile interval. ``relative_interval`` is the run-level relative change with the
bootstrap's spread: ``(1 + run change) × (m_b* / m_a*) ÷ (m_b / m_a) − 1`` over the resamples (``m*`` a
resample's window mean), so it is centred on the figure shown and, for a metric that is never negative,
never below −100 % (a ratio of means, not a difference over the baseline). The verdict: "increased" or
"decreased" when that interval excludes zero, else "no change" — never "decreased" beside a run-level
change of +0.03 % (a new user's slow-chip comparison read so: the verdict followed the window means).
(With no positive window means, the bootstrap's differences over the run-level baseline, shifted to the
run's change, cut at −100 % for a never-negative metric.) ``differs`` marks a metric whose window means
moved where its run-level value did not (or the reverse):
windows weigh unequally in the run's totals. Direction-free on purpose: whether more
is better depends on the metric (tokens/s, TTFT), so ``regressions`` takes a signed threshold per metric
(``mfu:-5`` fails on a drop of more than 5 %, ``ttft_p99:+10`` on a rise of more than 10 %).

A request-level metric (TTFT, TPOT, ITL, E2E: one value over request records, ``population`` in report.json) has
no window series: its interval is a block bootstrap over each run's request records (``analysis.compare_records``),
and where the records are not at hand it has none and its verdict says so (``no interval: …``); a
``--fail-on-regression`` rule on it then fails when the change is past it, as for too few windows.

Metrics with a value in one run only are listed (``only_in``), not dropped; a metric whose unit differs
between the runs (two catalogs' metrics of one name: ``mfu`` in percent and in 1) is not compared but
listed (``units_differ``), and a gate on it is a usage error; the top-down shares and the
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
    "run_interval",
    "finite",
    "regressions",
    "undecided",
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


def _resampled_means(a: np.ndarray, b: np.ndarray, *, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``n_boot`` moving-block bootstrap resamples of the mean of each series (NaNs dropped; blocks of
    ⌈n^(1/3)⌉ windows, each series resampled on its own, one seeded generator); None when either has
    fewer than ``MIN_WINDOWS`` values."""
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size < MIN_WINDOWS or b.size < MIN_WINDOWS:  # too few windows to tell a change from the noise
        return None
    rng = np.random.default_rng(seed)

    def means(x: np.ndarray) -> np.ndarray:
        n = x.size
        L = max(1, math.ceil(n ** (1 / 3)))
        k = math.ceil(n / L)
        starts = rng.integers(0, n - L + 1, size=(n_boot, k))
        idx = (starts[:, :, None] + np.arange(L)[None, None, :]).reshape(n_boot, -1)[:, :n]
        return x[idx].mean(axis=1)

    mb = means(b)  # b first: the order the draws were always taken in (the same seed, the same interval)
    return means(a), mb


def block_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    resampled: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float, float, float]:
    """The change ``mean(b) − mean(a)`` of two series of window values and its moving-block bootstrap
    interval at ``confidence`` (NaNs dropped; blocks of ⌈n^(1/3)⌉ windows, each series resampled on
    its own). Returns (change, low, high); NaNs when either series has fewer than ``MIN_WINDOWS`` values.

    Source: H. R. Künsch, "The jackknife and the bootstrap for general stationary observations",
    Annals of Statistics 17 (1989); percentile interval. ``resampled``: ``_resampled_means(a, b)`` when the
    caller has them (the same draws for the same seed).
    """
    boot = resampled if resampled is not None else _resampled_means(a, b, n_boot=n_boot, seed=seed)
    if boot is None:
        return math.nan, math.nan, math.nan
    change = float(np.nanmean(b[np.isfinite(b)]) - np.nanmean(a[np.isfinite(a)]))
    lo, hi = np.quantile(boot[1] - boot[0], [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return change, float(lo), float(hi)


def run_interval(
    a: np.ndarray,
    b: np.ndarray,
    rel: float,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    base: float | None = None,
    resampled: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[float, float]:
    """The interval of a run-level relative change ``rel`` (``b_run / a_run − 1``, ``base`` = ``a_run``) at
    ``confidence``, with the spread of the window means' moving-block bootstrap. Where the windows and both
    run values are never negative and both window means positive: the percentiles of ``(1 + rel) ×
    (m_b* / m_a*) ÷ (m_b / m_a) − 1`` (a ratio of non-negative means). Otherwise the bootstrap's differences
    over the run-level baseline ``|base|`` (the baseline's window mean when not given), shifted to ``rel``;
    for never-negative values it is cut at −100 % (such a metric cannot fall further). NaNs where the
    bootstrap has too few windows or there is no scale (a baseline of 0). ``resampled``: as ``block_bootstrap``'s."""
    boot = resampled if resampled is not None else _resampled_means(a, b, n_boot=n_boot, seed=seed)
    if boot is None:
        return math.nan, math.nan
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    ma, mb = float(a.mean()), float(b.mean())
    q = [(1 - confidence) / 2, 1 - (1 - confidence) / 2]
    never_negative = a.min() >= 0 and b.min() >= 0 and (base is None or base >= 0) and rel >= -1
    if never_negative and ma > 0 and mb > 0 and rel > -1:
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample of only zeros: an unbounded ratio
            r = np.where(boot[0] > 0, boot[1] / boot[0], np.where(boot[1] > 0, np.inf, 1.0))
        lo, hi = np.quantile((1 + rel) * r / (mb / ma) - 1, q, method="inverted_cdf")  # no inf − inf
        return float(lo), float(hi)
    scale = abs(base) if base is not None else abs(ma)
    if scale == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(rel + ((boot[1] - boot[0]) - (mb - ma)) / scale, q)
    if never_negative:
        lo, hi = max(lo, -1.0), max(hi, -1.0)
    return float(lo), float(hi)


def _events(w: np.ndarray | None) -> int | None:
    """Windows with a finite non-zero value: a metric of events that land in few windows (tokens count
    when a step ends: a 1 ms window of a 0.33 s step) has as many observations as those windows."""
    return None if w is None else int(np.count_nonzero(np.isfinite(w) & (w != 0)))


#: The verdict on a metric constant over every window of each run (a per-run draw, e.g. the emulator's seed
#: splitting bytes over HBM stacks): its interval has zero width, and the run-to-run spread is not measured.
CONSTANT = (
    "no interval: constant over each run's windows, so the windows measure no noise; a value drawn once per run "
    "(a seed) varies between runs — compare repeated runs"
)


def _constant(w: np.ndarray | None) -> bool:
    """Whether a window series holds one value (up to round-off) wherever it has one."""
    if w is None:
        return False
    v = np.asarray(w, dtype=np.float64)
    v = v[np.isfinite(v)]
    return v.size >= MIN_WINDOWS and float(np.ptp(v)) <= 1e-9 * max(float(np.max(np.abs(v))), 1e-300)


def _verdict(
    lo: float, hi: float, a: float | None, b: float | None, nz_a: int | None = None, nz_b: int | None = None
) -> str:
    if a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=0.0):
        return "no change"  # the same value up to floating-point round-off (a sum taken in another order)
    if math.isnan(lo) or math.isnan(hi):  # an interval bound may be infinite (a resample of zeros), never NaN
        return f"too few windows (< {MIN_WINDOWS})"
    if nz_a is not None and nz_b is not None and max(nz_a, nz_b) < MIN_WINDOWS:
        # a handful of non-zero windows in each run (a 1 s run holds ~3 engine steps): no interval tells a change
        return f"too few windows with a value ≠ 0 ({nz_a} and {nz_b} < {MIN_WINDOWS}): run longer"
    if lo > 0:
        return "increased"
    if hi < 0:
        return "decreased"
    return "no change"


def _metric(
    a: float, b: float, wa: np.ndarray | None, wb: np.ndarray | None, unit: str, boot: dict, same_gen: bool = True
) -> dict:
    """One metric's comparison (``compare``'s ``metrics`` entry): run-level values ``a`` → ``b``, the window
    values ``wa``, ``wb`` (None where a run has none), ``boot`` the bootstrap's ``n_boot``, ``confidence``,
    ``seed``; ``same_gen``: the runs are of one generation, so a value constant over each run's windows that
    differs between them is a per-run draw (``CONSTANT``), not a spec constant the what-if changed."""
    rel = (b - a) / abs(a) if a else 0.0 if b == a else None  # none from a baseline of 0, but 0 → 0 is +0 %
    change = lo = hi = math.nan
    rel_lo = rel_hi = None
    if wa is not None and wb is not None:
        draws = _resampled_means(wa, wb, n_boot=boot["n_boot"], seed=boot["seed"])  # once, for both intervals
        change, lo, hi = block_bootstrap(wa, wb, **boot, resampled=draws)
        if rel is not None and draws is not None:
            rl, rh = run_interval(wa, wb, rel, base=a, **boot, resampled=draws)
            rel_lo, rel_hi = (rl, rh) if math.isfinite(rl) else (None, None)
    win_rel = mean_a = mean_b = None  # the window means and their relative change, for ``differs``
    if wa is not None and wb is not None and np.isfinite(wa).any() and np.isfinite(wb).any():
        mean_a, mean_b = float(np.nanmean(wa)), float(np.nanmean(wb))
        win_rel = (mean_b - mean_a) / abs(mean_a) if mean_a else None
    if rel is None or rel_lo is None:  # from a baseline of 0, or no run-level interval: the windows' verdict
        verdict = _verdict(lo, hi, a, b, _events(wa), _events(wb))
    else:
        verdict = _verdict(rel_lo, rel_hi, a, b, _events(wa), _events(wb))
    if same_gen and verdict in ("increased", "decreased") and _constant(wa) and _constant(wb):
        verdict = CONSTANT  # a zero-width interval: the windows show no noise, not that there is none
    moved = ("increased", "decreased")
    window_verdict = _verdict(lo, hi, mean_a, mean_b) if mean_a is not None else None
    return {
        "unit": unit,
        "baseline": a,
        "value": b,
        "change": b - a,
        "relative": rel,
        "window_change": change,
        "window_interval": [lo, hi],
        "window_relative": win_rel,
        "relative_interval": [rel_lo, rel_hi],
        "verdict": verdict,
        "differs": bool(  # the windows moved where the run did not, the reverse, or the other way
            rel is not None
            and window_verdict is not None
            and (window_verdict in moved or verdict in moved)
            and window_verdict != verdict
        ),
    }


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
    from .compare_records import is_request_level, record_metric

    metrics, only, units, records = {}, {}, {}, {}  # records: each run's request records, read once
    names = list(dict.fromkeys(list(base.report["metrics"]) + list(other.report["metrics"])))
    for name in names:
        a, b = base.value(name), other.value(name)
        if a is None and b is None:
            continue
        if a is None or b is None:
            only[name] = "baseline" if b is None else str(other.path)
            continue
        if base.unit(name) != other.unit(name):  # another catalog's metric of that name: not the same quantity
            units[name] = [base.unit(name), other.unit(name)]
            continue
        boot = {"n_boot": n_boot, "confidence": confidence, "seed": seed}
        same = base.generation == other.generation
        metrics[name] = _metric(a, b, base.windows.get(name), other.windows.get(name), base.unit(name), boot, same)
        if is_request_level(base.report, name) or is_request_level(other.report, name):  # no window series
            metrics[name] |= record_metric(base, other, name, boot, records)
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
        "units_differ": units,
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


def undecided(m: dict) -> bool:
    """Whether a compared metric ``m`` has no verdict on its change: too few windows or records to tell, or
    a request-level metric without its records (``no interval: …``)."""
    return m["verdict"].startswith(("too few", "no interval"))


def regressions(result: dict, rules: list[tuple[str, float]]) -> list[str]:
    """The rules (metric, signed percent) that ``result`` crosses: a negative percent is crossed by a drop of
    more than its size, a positive one by a rise of more than it, where the verdict says the change is
    beyond the noise, or where the run-level change is past it and there are too few windows (or records) to
    tell, or no interval (a request-level metric without its records): a gate that cannot decide fails, saying
    so. Raises ``CompareError`` for a metric the runs do not both have."""
    out = []
    for name, pct in rules:
        m = result["metrics"].get(name)
        if m is None:
            from perfonto.ontology.diagnostics import did_you_mean

            differ = (result.get("units_differ") or {}).get(name)
            why = (
                "has a value in one run only"
                if name in result["only_in"]
                else f"is in {differ[0] or 'no unit'} in the baseline and in {differ[1] or 'no unit'} in the run "
                "(two catalogs' metrics of one name): not compared"
                if differ
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
        elif undecided(m) and past:  # a gate that cannot tell does not pass silently
            out.append(
                f"{name}: {rel:+.2f} % ({m['baseline']:.6g} → {m['value']:.6g} {m['unit']}), past {pct:+g} %, not "
                f"told from the noise: {m['verdict']}"
            )
    return out
