"""Re-projection of a finding: the emulated run repeated with the finding's cause removed, and the gain
measured, beside the estimate that the share of time gave (``analysis.findings``).

A finding's rule names the emulator knobs that re-create the run without its cause (``remove``:
``slow_chip``, ``throttled_link``, ``router_skew``). A run folder written by ``perfonto run`` holds the
run's settings (``ground_truth.json``: model, chips, duration, sample period, prompt and output
lengths, seed, warm-up, preset, dtypes, mapping, scheduler, serving mode and the knobs) and its device
trace (``trace.parquet``). The run is emulated again with the same settings and those knobs cleared;
the new run's settings are compared with the old ones, key by key, so that a setting this module did
not carry over is refused rather than measured as a gain.

The gain is measured on the step period (the host's ``launch_step`` calls in the trace: a step's
start to the next one's), over the steps both runs completed: the throughput of a lock-step server is
its tokens per step over its step period, and the same settings give the same steps. The tokens
counted at step ends would quantise a short run's throughput to whole steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from perfonto.ontology.errors import PerfontoError

#: ground-truth keys that are the run's settings (compared between the run and its re-projection)
SETTINGS = (
    "generation",
    "model",
    "chips",
    "seed",
    "isl",
    "osl",
    "sample_period_s",
    "requested_duration_s",
    "token_budget",
    "max_batch",
    "chunked_prefill",
    "num_requests",
    "rate",
    "concurrency",
    "warmup_steps",
    "dtype",
    "kv_dtype",
    "mapping",
    "preset",
    "hardware_overrides",
)


class ReprojectError(PerfontoError, ValueError):
    """A run that cannot be re-projected (not emulated, files missing, settings not reproduced)."""


def _read_json(path: Path, what: str) -> dict:
    from perfonto.ontology.files import FileReadError, exists, read_text

    if not exists(path):
        raise ReprojectError(
            f"{path}: no {what}; re-projection needs a run folder written by `perfonto run` (the emulator's "
            "settings are in its ground_truth.json)"
        )
    try:  # a regular file only: a pipe named ground_truth.json is refused, never waited on
        data = json.loads(read_text(path, what))
    except FileReadError as exc:
        raise ReprojectError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ReprojectError(f"{path}:{exc.lineno}:{exc.colno}: the {what} is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ReprojectError(f"{path}: the {what} is not a JSON object")
    return data


def step_periods(trace: Path) -> np.ndarray:
    """The step periods (s, one per completed step, in step order) of a run's device trace: the
    difference of consecutive ``launch_step`` starts on the host clock.

    Raises:
        ReprojectError: no trace, or one with fewer than two steps."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(trace, columns=["kind", "name", "start_ns", "step"])
    except (OSError, ValueError) as exc:
        raise ReprojectError(f"{trace}: cannot read the device trace: {exc}") from None
    t = t.filter(pc.and_(pc.equal(t["kind"], "api"), pc.equal(t["name"], "launch_step")))
    order = np.argsort(t["step"].to_numpy(), kind="stable")
    starts = t["start_ns"].to_numpy()[order]
    if starts.size < 2:
        raise ReprojectError(
            f"{trace}: fewer than two steps in the trace; emulate longer so the step period can be measured"
        )
    return np.diff(starts).astype(np.float64) * 1e-9


#: what a rule may remove that is a modelling assumption of the run (``ground_truth.json``'s ``assumptions``),
#: not a workload knob: the run is emulated again with its assumptions and this one changed
ASSUMPTION_KNOBS = ("overlap_collectives",)


def _current(gt: dict, knob: str):
    """The run's value of ``knob``: its workload knob, or for ``ASSUMPTION_KNOBS`` its assumption."""
    where = gt.get("assumptions") if knob in ASSUMPTION_KNOBS else gt.get("knobs")
    if where is not None and not isinstance(where, dict):
        raise ReprojectError(
            f"ground_truth.json: `{'assumptions' if knob in ASSUMPTION_KNOBS else 'knobs'}` is not an object"
        )
    return (where or {}).get(knob)


def _run_kwargs(gt: dict, remove: dict) -> dict:
    """``emulator.run``'s keyword arguments for the run of ground truth ``gt`` with ``remove`` applied."""
    from perfonto.emulator.assumptions import Assumptions
    from perfonto.emulator.parallel import Mapping

    spec = gt.get("speculative") or {}
    knobs = dict(gt.get("knobs") or {})
    knobs.update({k: v for k, v in remove.items() if k not in ASSUMPTION_KNOBS})
    changed = {k: v for k, v in remove.items() if k in ASSUMPTION_KNOBS}
    assumptions = Assumptions(**{**gt["assumptions"], **changed}) if changed else None
    slow, link = knobs.get("slow_chip"), knobs.get("throttled_link")
    return dict(
        model=gt["model"],
        chips=int(gt["chips"]),
        duration_s=float(gt["requested_duration_s"]),
        sample_period_s=float(gt["sample_period_s"]),
        isl=int(gt["isl"]),
        osl=int(gt["osl"]),
        seed=int(gt["seed"]),
        token_budget=gt.get("token_budget"),
        max_batch=gt.get("max_batch"),
        num_requests=gt.get("num_requests"),
        warmup_steps=int(gt.get("warmup_steps") or 0),
        dtype=gt.get("dtype") or "fp8",
        kv_dtype=gt.get("kv_dtype"),
        mapping=Mapping(**gt["mapping"]) if gt.get("mapping") else None,
        preset=gt.get("preset"),
        assumptions=assumptions,
        engine_profile=gt.get("engine_profile"),
        chunked_prefill=gt.get("chunked_prefill"),
        rate=gt.get("rate"),
        concurrency=gt.get("concurrency"),
        draft_tokens=int(spec.get("draft_tokens") or 0),
        acceptance=float(spec.get("acceptance") or 0.0),
        slow_chip=tuple(slow) if slow else None,
        throttled_link=tuple(link) if link else None,
        router_skew=float(knobs.get("router_skew") or 0.0),
    )


def _differs(gt: dict, again: dict, changed: dict) -> list[str]:
    """The settings the re-projection did not reproduce; with an assumption changed, the preset is recorded as
    "custom": its assumptions are compared instead, all but the changed ones."""
    keys = [k for k in SETTINGS if not (k in ("preset", "hardware_overrides") and set(changed) & set(ASSUMPTION_KNOBS))]
    out = [k for k in keys if json.dumps(gt.get(k), sort_keys=True) != json.dumps(again.get(k), sort_keys=True)]
    if set(changed) & set(ASSUMPTION_KNOBS):
        a, b = dict(gt.get("assumptions") or {}), dict(again.get("assumptions") or {})
        out += [f"assumptions.{k}" for k in sorted(set(a) | set(b)) if k not in changed and a.get(k) != b.get(k)]
    return out


def reproject(run_dir: str | Path, remove: dict, out_dir: str | Path) -> dict:
    """Emulate the run of ``run_dir`` again with the knobs ``remove`` ({knob: value that removes the
    cause}) into ``out_dir``; returns ``{"knobs": the knobs changed, "steps": steps compared,
    "step_period_s": [run, re-projected], "gain": run period / re-projected period − 1}``, or
    ``{"skipped": why}`` when the run has none of those knobs set (nothing to remove).

    Raises:
        ReprojectError: not an emulated run, its files missing, a generation that is not shipped, or a
            re-projection whose settings differ from the run's (named)."""
    from perfonto import emulator
    from perfonto.ontology.loader import load_generation

    run_dir = Path(run_dir)
    gt = _read_json(run_dir / "ground_truth.json", "ground truth")
    knobs = gt.get("knobs") or {}
    if not isinstance(knobs, dict):
        raise ReprojectError(f"{run_dir / 'ground_truth.json'}: `knobs` is not an object")
    changed = {
        k: v
        for k, v in remove.items()
        if _current(gt, k) != v and (k in ASSUMPTION_KNOBS or _current(gt, k) not in (None, 0, 0.0))
    }
    if not changed:
        return {"skipped": "the run has none of the knobs this finding removes set: " + ", ".join(remove)}
    gen, _ = load_generation(str(gt.get("generation")))
    if gen is None or gt.get("hardware_overrides"):
        raise ReprojectError(
            f"{run_dir}: the run's generation `{gt.get('generation')}` is not a shipped one (or has hardware "
            "overrides): emulate the re-projection with `perfonto run` and the catalog it came from"
        )
    base = step_periods(run_dir / "trace.parquet")
    try:
        kwargs = _run_kwargs(gt, changed)
    except KeyError as exc:
        raise ReprojectError(f"{run_dir / 'ground_truth.json'}: the run's setting {exc} is missing") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ReprojectError(f"{run_dir / 'ground_truth.json'}: a run setting has the wrong type ({exc})") from None
    try:
        res = emulator.run(gen, out_dir=out_dir, **kwargs)
    except ValueError as exc:  # the emulator's own refusal of a setting (a negative duration, an unknown model)
        raise ReprojectError(
            f"{run_dir / 'ground_truth.json'}: the emulator refuses the run's settings: {exc}"
        ) from None
    again = res.ground_truth
    bad = _differs(gt, again, changed)
    if bad:
        raise ReprojectError(f"{run_dir}: the re-projection did not reproduce the run's settings {', '.join(bad)}")
    new = step_periods(Path(res.trace_path))
    n = min(base.size, new.size)
    a, b = float(base[:n].mean()), float(new[:n].mean())
    return {"knobs": changed, "steps": n, "step_period_s": [a, b], "gain": a / b - 1.0}


__all__ = ["ReprojectError", "reproject", "step_periods"]
