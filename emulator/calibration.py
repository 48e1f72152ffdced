"""Calibration of the efficiency model against public measurements, and its validation.

Rows (``emulator/data/calibration.yaml``): offline throughput of TensorRT-LLM on H100, H200 and B200
(output tokens/s of the group), from its perf-overview page — the 16 ``shipped`` rows copied from
``../shared/data/calibration`` and further ``perf-overview`` rows of the same page, each citing its
table (dense Llama 3 and the Qwen3-235B-A22B mixture of experts).
Each row is replayed as its benchmark ran (``project``: the row's model, GPU, TP, dtype and lengths,
trtllm-bench's engine sizing, the perf page's request count) under the GPU family's preset.

The schedule of an offline benchmark does not depend on time, so each row is scheduled once; only
the step times depend on the fitted constants (``assumptions.FITTED_BOUNDS``). ``fit`` minimises
``Σ_rows ln(predicted/measured)²`` over those constants within their physical bounds (trust-region
reflective least squares, ``scipy.optimize.least_squares``), shared by every GPU, model and length;
to keep each evaluation fast it times an even subsample of each row's steps (each standing for its
neighbours), and ``validate`` then times every step. ``leave_one_out`` refits without each row in
turn and predicts it; ``leave_family_out`` refits without a whole model family (every Llama 3
row, or every Qwen3 row) and predicts that family — a check that the constants describe the
hardware and the mapping rather than the rows or the models they were fitted on.

Error measures: a row's error is ``predicted/measured − 1``; its size ``max(p/m, m/p) − 1``;
``geomean_error = exp(mean |ln(p/m)|) − 1``; ``worst_error`` = the largest size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from .assumptions import DATA, FITTED_BOUNDS, Assumptions, load_fitted
from .ops import EmuConfig, stack_work, step_seconds
from .parallel import Mapping
from .project import geomean_error, project
from .scheduler import StepBatch

FIT_STEPS = 600  # steps timed per row during the fit


@dataclass(frozen=True)
class Row:
    """One measurement: ``value`` output tokens/s of ``model`` on ``tp`` × ``gpu`` at ``dtype``."""

    model: str
    gpu: str
    tp: int
    dtype: str
    isl: int
    osl: int
    value: float
    pp: int = 1
    set: str = "shipped"  # shipped (the 16 public rows of ../shared) or perf-overview (further rows of the page)
    cite: str = ""

    @property
    def family(self) -> str:
        """The model family (``models.yaml``), e.g. ``llama-3``, ``qwen3``."""
        from .models import get_model

        return get_model(self.model).family

    @property
    def label(self) -> str:
        par = f"TP{self.tp}" + (f"PP{self.pp}" if self.pp > 1 else "")
        return f"{self.model} {self.gpu} {par} {self.dtype} {self.isl}/{self.osl}"


def load_rows(path: str | Path | None = None) -> tuple[dict, list[Row]]:
    """The calibration file (``emulator/data/calibration.yaml`` by default): header fields and rows."""
    p = Path(path) if path else DATA / "calibration.yaml"
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    rows = [
        Row(
            str(r["model"]),
            str(r["gpu"]),
            int(r.get("tp", 1)),
            str(r.get("dtype", "fp8")),
            int(r["isl"]),
            int(r["osl"]),
            float(r["value"]),
            int(r.get("pp", 1)),
            str(r.get("set", "shipped")),
            str(r.get("cite", "")),
        )
        for r in doc["rows"]
    ]
    return {k: v for k, v in doc.items() if k != "rows"}, rows


@dataclass
class Prepared:
    """A row's schedule and work, ready to be timed under any assumptions."""

    row: Row
    cfg: EmuConfig
    output_tokens: float  # whole server
    work: dict  # stacked work of every step
    sample: dict  # stacked work of the fit's subsample
    sample_weight: np.ndarray  # steps each sampled step stands for
    batch: StepBatch

    def seconds(self, a: Assumptions, full: bool = True) -> float:
        """Makespan (s) under ``a`` (every step, or the weighted subsample)."""
        if full:
            return float(step_seconds(self.work, self.cfg, a).sum())
        return float(step_seconds(self.sample, self.cfg, a) @ self.sample_weight)

    def predict(self, a: Assumptions, full: bool = True) -> float:
        """Output tokens/s of the server under ``a``."""
        return self.output_tokens / self.seconds(a, full)


@lru_cache(maxsize=256)
def prepare(row: Row, fit_steps: int = FIT_STEPS) -> Prepared:
    """Schedule ``row``'s benchmark once (GPU preset; ``Mapping.default`` over ``tp`` chips, ``pp`` stages).

    Cached per process: the schedule and the work do not depend on the fitted constants, which
    ``validate`` and ``fit`` apply when they time the steps."""
    from .models import get_model

    m = get_model(row.model)
    mp = Mapping.default(m, row.tp)
    mp = dataclasses.replace(mp, pp=row.pp)
    pr = project(row.gpu, model=row.model, chips=mp.chips, isl=row.isl, osl=row.osl, dtype=row.dtype, mapping=mp)
    cfg, sv = pr.config, pr.served
    work = stack_work(sv.batch, cfg)
    n = len(sv.batch)
    k = max(1, -(-n // fit_steps))
    starts = np.arange(0, n, k)
    mid = np.minimum(starts + k // 2, n - 1)
    weight = np.diff(np.append(starts, n)).astype(np.float64)
    sample = {f: v[mid] for f, v in work.items()}
    return Prepared(row, cfg, float(sv.batch.head_tokens.sum()) * cfg.mapping.ranks, work, sample, weight, sv.batch)


def _assumptions(base: Assumptions, names: list[str], x: np.ndarray) -> Assumptions:
    return base.replace(**dict(zip(names, map(float, x))))


def fit(
    preps: list[Prepared], *, names: list[str] | None = None, x0: dict | None = None, starts: int = 3, seed: int = 0
) -> dict:
    """Fit ``names`` (default every fitted constant) to the rows of ``preps``.

    Starts from ``x0`` (default: the design values of ``Assumptions()``) and ``starts − 1`` seeded
    random points within the bounds; keeps the best. Returns ``{"parameters": {...}, "cost": ..., "residuals": [...]}``.
    """
    from scipy.optimize import least_squares

    names = names or list(FITTED_BOUNDS)
    base = preps[0].cfg.a
    lo = np.array([FITTED_BOUNDS[n][0] for n in names])
    hi = np.array([FITTED_BOUNDS[n][1] for n in names])
    meas = np.log(np.array([p.row.value for p in preps]))

    def resid(u):
        a = _assumptions(base, names, lo + u * (hi - lo))
        return np.log([p.predict(a, full=False) for p in preps]) - meas

    design = Assumptions()  # start from the design defaults, not from a previous fit: reproducible
    first = np.array([(x0 or {}).get(n, getattr(design, n)) for n in names], float)
    rng = np.random.default_rng(seed)
    inits = [np.clip((first - lo) / (hi - lo), 0.0, 1.0)] + [
        rng.uniform(0.05, 0.95, len(names)) for _ in range(starts - 1)
    ]
    best = None
    for u0 in inits:
        r = least_squares(
            resid,
            u0,
            bounds=(0.0, 1.0),
            method="trf",
            x_scale=1.0,
            diff_step=1e-3,
            xtol=1e-10,
            ftol=1e-10,
            max_nfev=400,
        )
        if best is None or r.cost < best.cost:
            best = r
    u = np.where(best.x < 1e-6, 0.0, np.where(best.x > 1 - 1e-6, 1.0, best.x))  # at a bound: exactly the bound
    x = lo + u * (hi - lo)
    return {
        "parameters": {n: float(f"{v:.4g}") for n, v in zip(names, x)},
        "cost": float(best.cost),
        "residuals": [float(v) for v in best.fun],
    }


def validate(preps: list[Prepared], params: dict | None = None) -> dict:
    """Predicted vs measured for every prepared row (every step timed) under each row's preset
    assumptions with ``params`` (default: the current ``fitted.yaml``) as the fitted constants.
    Returns ``{"rows", "geomean_error", "worst_error"}``."""
    rows = []
    if params is None:
        params = {k: v for k, v in load_fitted()["parameters"].items() if k in FITTED_BOUNDS}
    for p in preps:
        pred = p.predict(p.cfg.a.replace(**(params or {})))
        r = p.row
        ratio = pred / r.value
        rows.append(
            {
                "model": r.model,
                "family": r.family,
                "gpu": r.gpu,
                "tp": r.tp,
                "pp": r.pp,
                "dtype": r.dtype,
                "isl": r.isl,
                "osl": r.osl,
                "set": r.set,
                "cite": r.cite,
                "measured": r.value,
                "predicted": pred,
                "error": ratio - 1.0,
                "abs_log_error": abs(float(np.log(ratio))),
            }
        )
    out = {"rows": rows, **summary(rows)}
    out["shipped"] = summary([x for x in rows if x["set"] == "shipped"])
    return out


def summary(rows: list[dict]) -> dict:
    """``{"geomean_error", "worst_error", "n"}`` of rows with ``predicted`` and ``measured``."""
    if not rows:
        return {"geomean_error": 0.0, "worst_error": 0.0, "n": 0}
    pred = np.array([x["predicted"] for x in rows])
    meas = np.array([x["measured"] for x in rows])
    worst = float(np.max(np.maximum(pred / meas, meas / pred)) - 1.0)
    return {"geomean_error": geomean_error(pred, meas), "worst_error": worst, "n": len(rows)}


def leave_family_out(preps: list[Prepared], full_fit: dict, progress: Callable[[int, int], None] | None = None) -> dict:
    """For each model family: refit on the other families' rows (one start, from the design values of
    ``Assumptions()``, never from the full fit: a constant the other families cannot pin down — the
    all-to-all efficiency without MoE rows — stays at its design value instead of leaking the held-out
    rows' fit) and predict the family's rows. Returns ``{family: {"rows": [...], geomean_error,
    worst_error, n}}``; ``full_fit`` gives the parameters when no other family is left."""
    fams = sorted({p.row.family for p in preps})
    out = {}
    for i, fam in enumerate(fams):
        rest = [p for p in preps if p.row.family != fam]
        params = fit(rest, starts=1)["parameters"] if rest else full_fit["parameters"]
        rows = []
        for p in (p for p in preps if p.row.family == fam):
            pred = p.predict(p.cfg.a.replace(**params))
            rows.append(
                {"row": p.row.label, "measured": p.row.value, "predicted": pred, "error": pred / p.row.value - 1.0}
            )
        out[fam] = {"rows": rows, **summary(rows)}
        if progress:
            progress(i + 1, len(fams))
    return out


#: Issue 30's targets on the out-of-sample geomean error, by model kind (and for latency rows).
TARGETS = {"dense": 0.15, "moe": 0.30, "ttft_itl": 0.25}


def _kind(model: str) -> str:
    from .models import get_model

    return "moe" if get_model(model).is_moe else "dense"


def by_profile(res: dict, loo_family: dict | None, rows_are_profiles: bool = True) -> dict:
    """Per engine profile (``engine_profiles.yaml``) and model kind (``dense`` / ``moe``): ``in_sample``
    (``summary`` over the profile's validated rows of that kind), ``leave_one_source_out`` (None with
    ``loso_note`` when the profile cites fewer than two sources: nothing to leave out) and
    ``leave_one_family_out`` (the rows of the kind's families predicted by fits without them, from
    ``loo_family``; None when not run). ``res``: ``validate``'s result; its rows belong to the profiles
    whose ``calibration.file`` is the shipped calibration file (``rows_are_profiles``; False when the
    caller validated another file). A profile without cited rows gets ``{"rows": 0, "note"}``."""
    from .engine_profiles import load_profiles

    fam_kind = {r["family"]: _kind(r["model"]) for r in res["rows"]}
    out = {}
    for name, prof in load_profiles().items():
        if not (rows_are_profiles and prof.calibration_file == "emulator/data/calibration.yaml"):
            out[name] = {"rows": 0, "note": "no cited public rows: its constants are stated assumptions"}
            continue
        kinds = {}
        for kind in ("dense", "moe"):
            rows = [r for r in res["rows"] if _kind(r["model"]) == kind]
            lofo = None
            if loo_family is not None:
                lofo = summary([x for f, v in loo_family.items() if fam_kind.get(f) == kind for x in v["rows"]])
            kinds[kind] = {
                "in_sample": summary(rows),
                "leave_one_source_out": None,
                "leave_one_family_out": lofo,
                "target": TARGETS[kind],
            }
        note = (
            f"{len(prof.sources)} cited source(s): leave-one-source-out needs two"
            if len(prof.sources) < 2
            else "leave-one-source-out not computed: the rows do not name their source"
        )
        out[name] = {"rows": len(res["rows"]), "sources": list(prof.sources), "kinds": kinds, "loso_note": note}
    return out


def leave_one_out(preps: list[Prepared], full_fit: dict, progress: Callable[[int, int], None] | None = None) -> dict:
    """Refit without each row (from the full fit's values) and predict it. Returns
    ``{"rows": [{label, measured, predicted, error}], "geomean_error", "worst_error"}``."""
    out = []
    for i, p in enumerate(preps):
        rest = preps[:i] + preps[i + 1 :]
        f = fit(rest, x0=full_fit["parameters"], starts=1)
        a = p.cfg.a.replace(**f["parameters"])
        pred = p.predict(a)
        out.append({"row": p.row.label, "measured": p.row.value, "predicted": pred, "error": pred / p.row.value - 1.0})
        if progress:
            progress(i + 1, len(preps))
    pred = np.array([x["predicted"] for x in out])
    meas = np.array([x["measured"] for x in out])
    worst = float(np.max(np.maximum(pred / meas, meas / pred)) - 1.0) if out else 0.0
    return {"rows": out, "geomean_error": geomean_error(pred, meas), "worst_error": worst}


def write_fitted(path: Path, fitted: dict, validation: dict, header: dict, loo: dict | None = None) -> None:
    """Write ``fitted.yaml``: the parameters with their meaning and bounds, and how they were fitted."""
    doc = {
        "about": "Efficiency-model constants fitted by `perfonto calibrate` (emulator/calibration.py) on "
        "emulator/data/calibration.yaml; reproduce with `perfonto calibrate`.",
        "source": header.get("source", ""),
        "method": "least squares on ln(predicted/measured) over all rows, trust-region reflective within the "
        "bounds below (scipy.optimize.least_squares), 3 starts",
        "parameters": {k: float(v) for k, v in fitted["parameters"].items()},
        "meaning": {
            k: f"{FITTED_BOUNDS[k][2]} (bounds {FITTED_BOUNDS[k][0]:g} .. {FITTED_BOUNDS[k][1]:g})"
            for k in fitted["parameters"]
        },
        "fit": {
            "rows": len(validation["rows"]),
            "geomean_error": round(validation["geomean_error"], 4),
            "worst_error": round(validation["worst_error"], 4),
        },
    }
    doc["fit"]["shipped_rows"] = {
        "n": validation["shipped"]["n"],
        "geomean_error": round(validation["shipped"]["geomean_error"], 4),
        "worst_error": round(validation["shipped"]["worst_error"], 4),
    }
    if loo is not None:
        doc["leave_one_family_out"] = {
            fam: {
                "rows": v["n"],
                "geomean_error": round(v["geomean_error"], 4),
                "worst_error": round(v["worst_error"], 4),
            }
            for fam, v in loo.items()
        }
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True), encoding="utf-8")
    load_fitted.cache_clear()
