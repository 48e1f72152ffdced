"""What a run assumed, and how its result compares with a public claim (issue 16, point 5).

``modelling_assumptions(gt)`` lists, for a run's ground truth, the modelling choices that shape its
numbers, in words and with the figures the run measured: where activations live (and their share of
the HBM bytes), whether collectives and ops overlap, the mapping, the engine sizing, the efficiency
constants (fitted or assumed), and the preset's own list (``presets.yaml`` ``named``).

``claim_comparison(...)`` projects the claim's own scenario (``presets.yaml`` ``claim``: Sohu's
>500k tokens/s on Llama-3-70B, 8 chips, FP8, 2048/128) under the run's preset, compares the steady
throughput with the claim, and moves one assumption at a time to the claim preset's setting (the
set of assumptions under which the claim is reached): the change that moves the projection most is
the assumption the comparison depends on most. Every Sohu figure but its 144 GB of HBM is an
assumption (``ontology/catalog/sohu.yaml``), and the comparison says so.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from .engine_profiles import profile
from .parallel import Mapping
from .presets import family_claim, preset_names, resolve
from .serving import Engine

#: One change at a time from the run's preset toward the claim preset: (what, how to apply it).
#: ``kind``: ``assumptions`` (Assumptions fields), ``hardware`` (Hardware fields), ``mapping``, ``engine``.
STEPS = [
    (
        "activations stay in on-chip SRAM between ops (a fused pipeline), not through HBM",
        "assumptions",
        {"activations_in_hbm": False},
    ),
    ("collectives overlap compute (only their latency is exposed)", "assumptions", {"overlap_collectives": True}),
    (
        "the units overlap within a layer (a layer takes as long as its busiest unit)",
        "assumptions",
        {"overlap_ops": True},
    ),
    (
        "no per-op launch overhead and 5 µs of host scheduling per step",
        "assumptions",
        {"op_overhead_s": 0.0, "host_step_s": 5e-6},
    ),
    (
        "GEMMs sustain 95 % of peak, half of it at 16 rows (Etched: 'over 90 % FLOPS utilization')",
        "assumptions",
        {"mxu_eff_max": 0.95, "mxu_half_rows": 16.0},
    ),
    ("8 data-parallel replicas (each chip holds the whole FP8 model) instead of tensor parallelism", "mapping", "dp"),
    ("the claim preset's engine: 2048-token chunked-prefill steps, 256 requests per chip", "engine", "claim"),
    ("a 10 PFLOP/s FP8 peak per chip instead of the catalog's 9 (both assumed)", "hardware", "claim"),
]


def modelling_assumptions(gt: dict, named: tuple[str, ...] = ()) -> list[str]:
    """The modelling choices of a run, in words, from its ground truth (``groundtruth``; the ``extra``
    fields of ``run``) and the preset's ``named`` list. Shapes: a list of sentences."""
    a = gt.get("assumptions", {})
    mp = gt.get("mapping", {})
    tags = gt.get("hbm_bytes_by_tag", {})
    hbm = sum(tags.values()) or 0.0
    out = []
    if a.get("activations_in_hbm"):
        share = f" ({tags.get('activations', 0.0) / hbm * 100:.0f} % of this run's HBM bytes)" if hbm else ""
        out.append(f"activations go through HBM between ops, one op at a time{share}")
    else:
        out.append("activations stay in on-chip SRAM between ops (a fused dataflow pipeline)")
    out.append(
        "collectives overlap compute (only their latency is exposed)"
        if a.get("overlap_collectives")
        else "collectives are not overlapped with compute"
    )
    if a.get("overlap_ops"):
        out.append("the units overlap within a layer: a layer takes as long as its busiest unit")
    par = [f"TP{mp.get('tp', 1)}" + (" with data-parallel attention" if mp.get("attn_dp") else "")]
    if mp.get("ep", 1) > 1:
        par.append(f"EP{mp['ep']}")
    if mp.get("pp", 1) > 1:
        par.append(f"PP{mp['pp']}")
    if mp.get("dp", 1) > 1:
        par.append(f"DP{mp['dp']}")
    chips = gt.get("chips", "?")
    out.append(f"mapping {' × '.join(par)} over {chips} chip{'' if chips == 1 else 's'}")
    out.append(
        f"engine: up to {gt.get('max_batch')} requests and {gt.get('token_budget')} tokens per step, "
        f"{'chunked' if gt.get('chunked_prefill') else 'whole'} prompts (preset `{gt.get('preset')}`)"
    )
    if a:
        out.append(
            f"matrix engine: {a.get('mxu_eff_max', 0) * 100:.0f} % of peak on large GEMMs, half of that at "
            f"{a.get('mxu_half_rows', 0):g} rows; {a.get('op_overhead_s', 0) * 1e6:.1f} µs per op"
        )
    spec = gt.get("speculative") or {}
    if spec.get("draft_tokens"):
        out.append(
            f"speculative decoding: {spec['draft_tokens']} drafts per step at {spec['acceptance']:.0%} acceptance"
        )
    return out + [n for n in named if n not in out]


def _project(gen: str, claim: dict, preset: str, **kw) -> float:
    from .project import project

    pr = project(
        gen,
        model=claim["model"],
        chips=int(claim["chips"]),
        isl=int(claim["isl"]),
        osl=int(claim["osl"]),
        dtype=str(claim["dtype"]),
        preset=preset,
        **kw,
    )
    return float(pr.figures.steady_tokens_per_second)


def claim_comparison(gen: str, preset: str | None = None) -> dict | None:
    """The claim of ``gen``'s family (None without one), the claim scenario projected under ``preset``
    (default: the family's), and each single change toward the claim preset with its effect.

    Returns ``{"claim", "preset", "tokens_per_second", "ratio", "reaches", "changes": [{what,
    tokens_per_second, factor}], "moves_most", "note"}``, ``changes`` sorted by effect, largest first
    (``factor``: projected tokens/s with the change ÷ without). A fresh copy each call: the nine projections
    (~1 s) depend on ``gen``, ``preset``, the emulator's and the ontology's code and the shipped catalog and
    emulator data only, so they are made once per process and kept in perfonto's cache (``ontology.cache``,
    ``claims/``) keyed by all of those; ``PERFONTO_NO_CACHE`` makes them every time.
    """
    return copy.deepcopy(_claim_comparison(gen, preset))


@functools.lru_cache(maxsize=16)
def _claim_comparison(gen: str, preset: str | None) -> dict | None:
    from perfonto.ontology import cache

    if not cache.enabled():
        return _compare(gen, preset)
    path = cache.entry("claims", _key(gen, preset), ".json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # not made yet, or unreadable: made again
        pass
    out = _compare(gen, preset)
    cache.write_atomic(path, json.dumps(out).encode("utf-8"))
    return out


def _key(gen: str, preset: str | None) -> str:
    """The cache key of a comparison: what it is computed from (the emulator's and the ontology's code and
    perfonto's version, the emulator's data files, the shipped generations' YAML), ``gen`` and ``preset``."""
    from perfonto import ontology
    from perfonto.ontology import cache

    files = sorted((Path(__file__).parent / "data").glob("*.yaml"))
    files += sorted((Path(ontology.__file__).parent / "catalog").glob("*.yaml"))
    return cache.digest([cache.code_digest("emulator", "ontology"), *cache.file_parts(files), gen, str(preset)])


def _compare(gen: str, preset: str | None) -> dict | None:
    claim = family_claim(gen)
    if claim is None:
        return None
    base_preset = resolve(gen, preset)
    target = resolve(gen, "claim") if "claim" in preset_names(gen) else None
    base = _project(gen, claim, base_preset.name)
    changes = []
    for what, kind, how in STEPS:
        kw = {}
        if kind == "assumptions":
            kw["assumptions"] = base_preset.assumptions.replace(**how)
        elif kind == "mapping":
            kw["mapping"] = Mapping(tp=1, dp=int(claim["chips"]))
        elif kind == "engine" and target is not None and isinstance(target.engine, dict):
            e = target.engine
            kw["engine"] = Engine(
                max_batch=int(e["max_batch"]),
                token_budget=int(e["token_budget"]),
                chunked_prefill=bool(e["chunked_prefill"]),
            )
        elif kind == "hardware" and target is not None and target.hardware:
            kw["hardware"] = {k: float(v) for k, v in target.hardware.items()}
        else:
            continue
        if base_preset.name == "claim":
            continue
        try:
            v = _project(gen, claim, base_preset.name, **kw)
        except ValueError:  # a change that does not fit this scenario (e.g. a replica per chip too big)
            continue
        changes.append({"what": what, "tokens_per_second": v, "factor": v / base if base else None})
    changes.sort(key=lambda c: -(c["factor"] or 0.0))
    need = float(claim["tokens_per_second"])
    return {
        "claim": dict(claim),
        "preset": base_preset.name,
        "tokens_per_second": base,
        "ratio": base / need,
        "reaches": base > need,
        "changes": changes,
        "moves_most": changes[0]["what"] if changes else None,
        "note": "every Sohu figure except its 144 GB of HBM is an assumption (ontology/catalog/sohu.yaml); the "
        "projection is of the claim's own scenario at full load (steady state)",
    }


def _mapping(gt: dict):
    """The run's mapping (``ground_truth.json``'s ``mapping``), or None where it is missing or malformed
    (a file from another version): the preset's statements then give its mapping rule."""
    from .parallel import Mapping

    try:
        return Mapping(**gt["mapping"])
    except (KeyError, TypeError, ValueError):
        return None


def run_context(gen, gt: dict, source: str = "ground_truth.json") -> dict:
    """``{"assumptions": [...], "preset_says": [...], "claim": {...} | None}`` for a run's report: its
    modelling assumptions (``modelling_assumptions`` with its preset's list; ``preset_says``: that list
    alone, the preset's words with their reasons) and, when ``gen``'s family has a public claim,
    ``claim_comparison`` under the run's preset with the run's own figures beside it
    (``run_tokens_per_second``, and ``run_ratio`` when the run is the claim's scenario:
    ``scenario_matches``). When the ground truth (read from ``source``) names no model, or one this
    emulator does not know (a file from another version, or written by hand), the comparison is
    skipped and ``notes`` says why: the run's own figures cannot be set beside the claim's scenario."""
    name = gen if isinstance(gen, str) else gen.name
    preset = gt.get("preset")
    try:
        prof = profile(gt["engine_profile"]) if gt.get("engine_profile") else None
        if preset != "custom":
            chosen = resolve(gen, preset)
            named = chosen.stated(prof, _mapping(gt)) + (prof.foreign_note(chosen.family) if prof is not None else ())
        else:
            named = ()
    except ValueError:
        named = ()
    out = {
        "assumptions": modelling_assumptions(gt, named),
        "preset": preset,
        "preset_says": list(named),
        "claim": None,
    }
    if gt.get("offline_queued_s"):  # offline: every request queued before the run (its TTFT is mostly the wait)
        out["offline_queued_s"] = float(gt["offline_queued_s"])
    claim = family_claim(gen)
    if claim is None or preset == "custom":
        return out
    from .models import MODELS, get_model

    model = gt.get("model")
    if not isinstance(model, str) or model not in MODELS:
        said = f"names the model {model!r}, which this perfonto does not know" if model else "names no `model`"
        out["notes"] = [
            f"{source}: {said}, so the comparison with the public claim (the claim's own scenario under the "
            f"run's preset) is skipped; known models: {', '.join(sorted({m.name for m in MODELS.values()}))}"
        ]
        return out
    cmp = claim_comparison(name, preset)
    same = (
        get_model(model).name == get_model(str(claim["model"])).name
        and gt.get("chips") == claim["chips"]
        and (gt.get("isl"), gt.get("osl")) == (claim["isl"], claim["osl"])
        and gt.get("dtype") == claim["dtype"]
    )
    cmp["scenario_matches"] = bool(same)
    cmp["run_tokens_per_second"] = gt.get("tokens_per_second")
    cmp["run_steps"] = gt.get("steps")
    cmp["whole_steps"] = bool(gt.get("whole_steps"))
    cmp["run_ratio"] = gt["tokens_per_second"] / float(claim["tokens_per_second"]) if same else None
    out["claim"] = cmp
    return out


__all__ = ["STEPS", "claim_comparison", "modelling_assumptions", "run_context"]
