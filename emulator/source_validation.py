"""The emulator against the other cited sources, and its errors per engine profile.

``figures`` predicts what a row states — offline throughput timed from its prepared schedule,
closed-loop rows replayed (``replay``: ``project`` with the row's concurrency; TTFT and ITL by AIPerf's
definitions, mean TTFT and ITL = mean TPOT). ``leave_source_out`` refits the constants on every cited
source but one (``calibration.fit`` with a prior toward the design values) and predicts the held-out
source's figures. ``by_profile`` gathers, per engine profile (``engine_profiles.yaml``) and per figure
kind — dense and MoE throughput, TTFT, ITL — the in-sample, other-source, leave-one-source-out and
leave-one-family-out geomean errors that ``perfonto validate-emulator`` prints against ``TARGETS``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from .calibration import Prepared, design_params, fit, model_kind, prepare, summary
from .calibration_rows import PERF_OVERVIEW, Row

__all__ = [
    "METRICS",
    "REFIT_PRIOR",
    "SHIPPED_CALIBRATION",
    "TARGETS",
    "by_metric",
    "by_profile",
    "figures",
    "fitted_sources",
    "leave_source_out",
    "replay",
]

#: Issue 30's targets on the out-of-sample geomean error, by model kind (and for latency rows).
TARGETS = {"dense": 0.15, "moe": 0.30, "ttft_itl": 0.25}


def by_profile(
    res: dict,
    loo_family: dict | None,
    rows_are_profiles: bool = True,
    loso: dict | None = None,
    others: list[dict] | None = None,
    source_profile: dict | None = None,
) -> dict:
    """Per engine profile (``engine_profiles.yaml``) and figure kind — ``dense`` and ``moe`` throughput,
    ``ttft``, ``itl`` — the geomean errors: ``in_sample`` (the profile's calibration rows, ``res``:
    ``validate``'s result, under the shipped fit; None for TTFT/ITL: no latency row is fitted),
    ``shipped_fit_other_sources`` (``others``: the figures of the other cited sources under the shipped
    fit), ``leave_one_source_out`` (from ``loso``, ``leave_source_out``'s result: every held-out source's
    figures predicted by a fit on the other sources; None when not run, with ``loso_note`` saying why) and
    ``leave_one_family_out`` (throughput only, from ``loo_family``; None when not run).

    A profile's sources: its calibration rows (when its ``calibration.file`` is the shipped calibration
    file and ``rows_are_profiles``; False when the caller validated another file) and the other sources
    that ``source_profile`` (``{source id: profile}``) gives it. A profile with none gets ``{"rows": 0,
    "note"}``. A profile whose calibration file is not the shipped one (``vllm``: checked, never fitted,
    ``fitted_sources``) has ``"fitted": False``, no in-sample or leave-one-family-out figures (None), and
    its cited sources' figures under the shipped fit and with their source left out."""
    from .engine_profiles import load_profiles

    fam_kind = {r["family"]: model_kind(r["model"]) for r in res["rows"]}
    out = {}
    for name, prof in load_profiles().items():
        own = rows_are_profiles and prof.calibration_file == SHIPPED_CALIBRATION
        mine = {s for s, pr in (source_profile or {}).items() if pr == name} | ({PERF_OVERVIEW} if own else set())
        if not mine:
            out[name] = {"rows": 0, "note": "no cited public rows: its constants are stated assumptions"}
            continue
        cal_rows = res["rows"] if own else []  # a profile checked on other sources has no fitted rows
        other = by_metric([f for f in others or () if f["source"] in mine])
        held = by_metric([f for s, v in (loso or {}).items() if s in mine for f in v["figures"]])
        lofo = _family_kinds(loo_family, fam_kind) if own else {}
        kinds = {}
        for kind in ("dense", "moe", "ttft", "itl"):
            rows = [r for r in cal_rows if model_kind(r["model"]) == kind]
            kinds[kind] = {
                "in_sample": summary(rows) if rows else None,
                "shipped_fit_other_sources": other[kind],
                "leave_one_source_out": held[kind] if loso is not None else None,
                "leave_one_family_out": lofo.get(kind),
                "target": TARGETS.get(kind, TARGETS["ttft_itl"]),
            }
        out[name] = {
            "rows": len(cal_rows),
            "fitted": own,
            "sources": sorted(mine),
            "kinds": kinds,
            "loso_note": _loso_note(loso, mine, len(prof.sources), own),
        }
    return out


#: The calibration file of the fitted engine profile (``trtllm``): the rows ``perfonto calibrate`` fits.
SHIPPED_CALIBRATION = "emulator/data/calibration.yaml"


def fitted_sources(source_profile: dict) -> set:
    """The sources whose offline rows a fit may use: the perf-overview page (``PERF_OVERVIEW``) and the
    other cited sources (``source_profile``: ``{source id: engine profile}``) of every profile whose
    calibration file is the shipped one (``trtllm``). The sources of another profile (``vllm``) are
    checked against those constants, never fitted on: the fit has no per-profile constants, and their
    rows would bend the constants of every other engine.

    Raises:
        ValueError: a source names no engine profile of ``engine_profiles.yaml``.
    """
    from .engine_profiles import load_profiles

    profs = load_profiles()
    bad = sorted(f"{s} ({pr!r})" for s, pr in source_profile.items() if pr not in profs)
    if bad:
        raise ValueError(f"sources name no engine profile: {', '.join(bad)}; profiles: {', '.join(profs)}")
    return {PERF_OVERVIEW} | {
        s for s, pr in source_profile.items() if profs[pr].calibration_file == SHIPPED_CALIBRATION
    }


def _family_kinds(loo_family: dict | None, fam_kind: dict) -> dict:
    """``summary`` of the leave-one-family-out rows by model kind (empty when not run)."""
    if loo_family is None:
        return {}
    return {
        kind: summary([x for f, v in loo_family.items() if fam_kind.get(f) == kind for x in v["rows"]])
        for kind in ("dense", "moe")
    }


def _loso_note(loso: dict | None, mine: set, cited: int, fitted: bool = True) -> str:
    n = max(len(mine), cited)
    if not fitted:
        how = "checked, never fitted: its rows predicted by the constants fitted on the fitted profile's sources"
        return f"{len(mine)} cited source(s), {how}: {', '.join(sorted(mine))}"
    if loso is None:
        return f"{n} cited source(s): leave-one-source-out needs two" if n < 2 else "leave-one-source-out not run"
    return f"{len(mine)} cited sources, each held out in turn: {', '.join(sorted(mine))}"


#: The figures a row may state, and their names in the results.
METRICS = {"value": "throughput", "ttft_ms": "ttft", "itl_ms": "itl"}


@lru_cache(maxsize=64)
def _replay(row: Row, params: tuple) -> dict:
    pr = row.project(concurrency=row.concurrency, overrides=dict(params))
    lat = pr.figures.latency
    return {
        "value": pr.figures.output_tokens_per_second,
        "ttft_ms": 1e3 * (lat["ttft_s"]["mean"] or 0.0),
        "itl_ms": 1e3 * (lat["tpot_s"]["mean"] or 0.0),
    }


def replay(row: Row, params: dict) -> dict:
    """A closed-loop row's benchmark (``row.concurrency`` requests in flight, ``concurrency_requests``
    requests) under the preset with ``params``: ``{"value": output tokens/s of the group, "ttft_ms":
    mean TTFT, "itl_ms": mean TPOT}`` — TPOT is AIPerf's inter-token latency, ``(request latency −
    TTFT) / (output tokens − 1)`` per request, averaged. Cached per process."""
    return _replay(row, tuple(sorted(params.items())))


def figures(row: Row, params: dict, prep: Prepared | None = None) -> list[dict]:
    """Predicted vs measured for each figure ``row`` states (throughput; TTFT and ITL where stated):
    an offline row is timed from ``prep`` (its prepared schedule), a closed-loop row replayed."""
    if row.concurrency == 0:
        if prep is None:
            prep = prepare(row)
        pred = {"value": prep.predict(prep.cfg.a.replace(**params))}
    else:
        pred = replay(row, params)
    out = []
    for key, metric in METRICS.items():
        meas = float(getattr(row, key))
        if meas > 0 and key in pred:
            p = float(pred[key])
            out.append(
                {
                    "source": row.source,
                    "row": row.label,
                    "model": row.model,
                    "kind": model_kind(row.model),
                    "metric": metric,
                    "measured": meas,
                    "predicted": p,
                    "error": p / meas - 1.0,
                }
            )
    return out


def by_metric(figs: list[dict]) -> dict:
    """``summary`` of ``figures`` by what they measure: ``dense`` and ``moe`` throughput, ``ttft``,
    ``itl`` (None where there are none)."""
    groups = {
        "dense": [f for f in figs if f["metric"] == "throughput" and f["kind"] == "dense"],
        "moe": [f for f in figs if f["metric"] == "throughput" and f["kind"] == "moe"],
        "ttft": [f for f in figs if f["metric"] == "ttft"],
        "itl": [f for f in figs if f["metric"] == "itl"],
    }
    return {k: (summary(v) if v else None) for k, v in groups.items()}


#: ``fit``'s prior in the leave-one-source-out refits: moving a constant across its whole range costs
#: as much as one row off by a factor e. Without it a refit on the 405B blog's 3 rows alone (8
#: constants) is underdetermined and lands anywhere (KV reads at 26 % of the HBM peak).
REFIT_PRIOR = 1.0


def leave_source_out(
    preps: list[Prepared],
    online: list[Row],
    progress: Callable[[int, int], None] | None = None,
    prior: float = REFIT_PRIOR,
    fit_only: set | None = None,
) -> dict:
    """Leave one source out: for each cited source, refit the constants on the offline rows of the
    other sources (only those in ``fit_only`` when given — ``fitted_sources``: a source of an engine
    profile the fit does not calibrate is predicted, never fitted on; one start, from the design values,
    as ``leave_family_out``, with ``fit``'s ``prior`` toward them: a constant the other sources cannot
    pin down stays at or near its design value; the design values themselves when no other source has
    offline rows) and predict every figure of the held-out source — offline rows timed, closed-loop
    rows (``online``) replayed. ``preps``: the prepared offline rows of every source.

    Returns:
        ``{source: {"fit_rows", "fit_sources", "parameters", "figures": [...], **by_metric}}``.
    """
    srcs = sorted({p.row.source for p in preps} | {r.source for r in online})
    out = {}
    for i, s in enumerate(srcs):
        train = [p for p in preps if p.row.source != s and (fit_only is None or p.row.source in fit_only)]
        params = fit(train, starts=1, prior=prior)["parameters"] if train else design_params()
        figs = [f for p in preps if p.row.source == s for f in figures(p.row, params, p)]
        figs += [f for r in online if r.source == s for f in figures(r, params)]
        out[s] = {
            "fit_rows": len(train),
            "fit_sources": sorted({p.row.source for p in train}),
            "prior": prior,
            "parameters": params,
            "figures": figs,
            **by_metric(figs),
        }
        if progress:
            progress(i + 1, len(srcs))
    return out
