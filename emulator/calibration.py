"""Fitting the efficiency model's constants to public measurements, and its in-sample checks.

Rows (``emulator/data/calibration.yaml``): offline throughput of TensorRT-LLM on H100, H200 and B200
(output tokens/s of the group), from its perf-overview page — the 16 ``shipped`` rows copied from
``../shared/data/calibration`` and further ``perf-overview`` rows of the same page, each citing its
table (dense Llama 3 and the Qwen3-235B-A22B mixture of experts).
Each row is replayed as its benchmark ran (``project``: the row's model, GPU, TP, dtype and lengths,
trtllm-bench's engine sizing, the perf page's request count) under the GPU family's preset.

The schedule of an offline benchmark does not depend on time, so each row is scheduled once; only
the step times depend on the fitted constants (``assumptions.FITTED_BOUNDS``). ``fit`` minimises
``Σ_rows ln(predicted/measured)²`` over those constants within their physical bounds (trust-region
reflective least squares, ``scipy.optimize.least_squares``), shared by every GPU, model and length —
in two stages when there are both dense and MoE rows: the constants of the kernels every model runs on
the dense rows, then the MoE-only ones (``MOE_ONLY``: all-to-all, expert imbalance) on the MoE rows;
to keep each evaluation fast it times an even subsample of each row's steps (each standing for its
neighbours), and ``validate`` then times every step. ``leave_one_out`` refits without each row in
turn and predicts it; ``leave_family_out`` refits without a whole model family (every Llama 3
row, or every Qwen3 row) and predicts that family — a check that the constants describe the
hardware and the mapping rather than the rows or the models they were fitted on.

Rows are read and checked by ``calibration_rows``; the other cited sources are predicted, and the
errors gathered per engine profile, by ``source_validation``.

Error measures: a row's error is ``predicted/measured − 1``; its size ``max(p/m, m/p) − 1``;
``geomean_error = exp(mean |ln(p/m)|) − 1``; ``worst_error`` = the largest size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from .assumptions import FITTED_BOUNDS, Assumptions, load_fitted
from .calibration_rows import Row
from .ops import EmuConfig, stack_work, step_seconds
from .project import geomean_error
from .scheduler import StepBatch

__all__ = [
    "FIT_STEPS",
    "MOE_ONLY",
    "Prepared",
    "design_params",
    "fit",
    "leave_family_out",
    "leave_one_out",
    "model_kind",
    "prepare",
    "summary",
    "validate",
    "write_fitted",
]

FIT_STEPS = 600  # steps timed per row during the fit


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
    pr = row.project()
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


#: The fitted constants that only mixture-of-experts rows depend on (the all-to-all of dispatch and
#: combine, the hottest expert rank's load): ``fit`` sets them on the MoE rows, after the others.
MOE_ONLY = ("a2a_eff", "expert_imbalance")


def _staged(preps: list[Prepared], **kw) -> dict | None:
    """``fit``'s two stages (shared constants on the dense rows, then ``MOE_ONLY`` on the MoE rows),
    or None unless ``preps`` holds both kinds."""
    dense = [p for p in preps if model_kind(p.row.model) == "dense"]
    moe = [p for p in preps if model_kind(p.row.model) == "moe"]
    if not (dense and moe):
        return None
    shared = fit(dense, names=[n for n in FITTED_BOUNDS if n not in MOE_ONLY], **kw)
    # a shared constant no dense row depends on but a MoE row does (FP4 GEMMs with FP4 MoE rows only) is
    # fitted with the MoE-only ones, not written as 'no row depends on it'
    moved = []
    if shared.get("unconstrained"):  # the dense rows left some shared constant free: do the MoE rows read it?
        design = Assumptions()
        loose_moe = set(_unconstrained(moe, moe[0].cfg.a, {n: getattr(design, n) for n in FITTED_BOUNDS}))
        moved = [n for n in shared["unconstrained"] if n not in loose_moe]
    fixed = {k: v for k, v in shared["parameters"].items() if k not in moved}
    own = fit(moe, names=[*moved, *MOE_ONLY], fixed=fixed, **kw)
    shared["unconstrained"] = [n for n in shared.get("unconstrained", []) if n not in moved]
    params = {n: {**shared["parameters"], **own["parameters"]}[n] for n in FITTED_BOUNDS}
    a = preps[0].cfg.a.replace(**params)
    res = [float(np.log(p.predict(a, full=False) / p.row.value)) for p in preps]
    loose = [n for n in FITTED_BOUNDS if n in shared.get("unconstrained", []) + own.get("unconstrained", [])]
    return {"parameters": params, "cost": shared["cost"] + own["cost"], "residuals": res, "unconstrained": loose}


def fit(
    preps: list[Prepared],
    *,
    names: list[str] | None = None,
    x0: dict | None = None,
    starts: int = 3,
    seed: int = 0,
    prior: float = 0.0,
    fixed: dict | None = None,
) -> dict:
    """Fit ``names`` (default every fitted constant) to the rows of ``preps``, the constants in ``fixed``
    held at their values.

    With the default ``names`` and both dense and MoE rows, in two stages (``_staged``): the constants of
    the kernels every model runs (dense GEMM, FP4, KV reads, launch and step overheads) on the dense
    rows, then ``MOE_ONLY`` on the MoE rows with those fixed — a MoE model's attention and dense GEMMs
    run the kernels a dense model's do, so what sets a MoE row apart is left to the MoE terms (grouped
    GEMMs at their tokens per expert, ``emulator.moe``; expert imbalance; all-to-all), never to the
    dense kernels' constants (which one MoE source would otherwise bend for every dense model).

    Otherwise one joint least-squares fit, from ``x0`` (default: the design values of
    ``Assumptions()``) and ``starts − 1`` seeded random points within the bounds; keeps the best.
    ``prior`` > 0 adds, per constant, the residual ``prior × (u − u_design)`` (``u``: the constant's
    place between its bounds, 0 to 1): a constant moves from its design value only as far as the rows
    pay for it — what keeps a refit on fewer rows than constants determined (``leave_source_out``).
    A constant no row's prediction depends on (``_unconstrained``, judged with the others at their design
    values) is not fitted: it keeps its design value and is listed in ``unconstrained``.
    Returns ``{"parameters": {...}, "cost": ..., "residuals": [...], "unconstrained": [...]}`` (the rows'
    residuals, ``ln(predicted/measured)`` on the fit's subsample, in the order of ``preps``).
    """
    if names is None and fixed is None:
        staged = _staged(preps, x0=x0, starts=starts, seed=seed, prior=prior)
        if staged is not None:
            return staged
    from scipy.optimize import least_squares

    names = names or list(FITTED_BOUNDS)
    base = preps[0].cfg.a.replace(**fixed) if fixed else preps[0].cfg.a
    design = Assumptions()  # start from the design defaults, not from a previous fit: reproducible
    order = list(names)
    loose = _unconstrained(preps, base, {n: getattr(design, n) for n in names})
    names = [n for n in names if n not in loose]  # the rest kept at their design values, and said so
    if not names:  # nothing to fit: the rows' residuals at the design values
        at = {n: getattr(design, n) for n in order}
        res = [float(np.log(p.predict(base.replace(**at), full=False) / p.row.value)) for p in preps]
        return {"parameters": at, "cost": 0.5 * float(np.sum(np.square(res))), "residuals": res, "unconstrained": loose}
    lo = np.array([FITTED_BOUNDS[n][0] for n in names])
    hi = np.array([FITTED_BOUNDS[n][1] for n in names])
    meas = np.log(np.array([p.row.value for p in preps]))
    u_design = np.clip((np.array([getattr(design, n) for n in names], float) - lo) / (hi - lo), 0.0, 1.0)

    def resid(u):
        a = _assumptions(base, names, lo + u * (hi - lo))
        r = np.log([p.predict(a, full=False) for p in preps]) - meas
        return np.concatenate([r, prior * (u - u_design)]) if prior else r

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
        "parameters": {n: float(f"{x[names.index(n)]:.4g}") if n in names else getattr(design, n) for n in order},
        "cost": float(best.cost),
        "residuals": [float(v) for v in best.fun[: len(preps)]],
        "unconstrained": loose,
    }


def _unconstrained(preps: list[Prepared], base: Assumptions, at: dict[str, float]) -> list[str]:
    """The constants of ``at`` (name → the value the others are held at) that no row's prediction depends
    on (FP4 GEMM efficiency without an FP4 row, the all-to-all without a MoE row): moved from one bound to
    the other, every prediction stays the same. A fit would set them wherever its random start left them
    and write them as fitted."""
    out = []
    for n in at:
        lo, hi, _ = FITTED_BOUNDS[n]
        a, b = base.replace(**{**at, n: lo}), base.replace(**{**at, n: hi})
        if all(abs(p.predict(a, full=False) / p.predict(b, full=False) - 1) < 1e-12 for p in preps):
            out.append(n)
    return out


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


def model_kind(model: str) -> str:
    """``dense`` or ``moe``: whether ``model`` (``models.yaml``) routes its tokens to experts."""
    from .models import get_model

    return "moe" if get_model(model).is_moe else "dense"


def design_params() -> dict:
    """The fitted constants at their design values (``Assumptions()``): what a refit starts from, and
    what a source is predicted with when no other source has offline rows to fit on."""
    d = Assumptions()
    return {k: float(getattr(d, k)) for k in FITTED_BOUNDS}


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


def write_fitted(
    path: Path,
    fitted: dict,
    validation: dict,
    header: dict,
    loo: dict | None = None,
    rows: str = "emulator/data/calibration.yaml",
    out: str | None = None,
) -> None:
    """Write ``fitted.yaml``: the parameters with their meaning and bounds, how they were fitted, on which
    rows file (``rows``, as the user named it) and the command that writes it again (with ``--out`` when
    ``out``, a file other than the shipped one)."""
    shipped = rows == "emulator/data/calibration.yaml"
    again = "`perfonto calibrate" + ("" if shipped else f" --rows {rows}") + (f" --out {out}`" if out else "`")
    doc = {
        "about": f"Efficiency-model constants fitted by `perfonto calibrate` (emulator/calibration.py) on "
        f"{rows}; reproduce with {again}.",
        "source": header.get("source", ""),
        "method": "least squares on ln(predicted/measured), trust-region reflective within the bounds below "
        "(scipy.optimize.least_squares), 3 starts; in two stages (calibration.fit): the constants every model's "
        f"kernels share on the dense rows, then {', '.join(MOE_ONLY)} on the MoE rows with those fixed",
        "parameters": {k: float(v) for k, v in fitted["parameters"].items()},
        **(
            {"not_fitted": {k: "no row depends on it: its design value" for k in fitted["unconstrained"]}}
            if fitted.get("unconstrained")
            else {}
        ),
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
