"""Serving-engine profiles (``emulator/data/engine_profiles.yaml``): kernel efficiencies per op class,
the scheduler policy and launch overheads of one serving stack, as data.

``profile(name)`` gives an ``EngineProfile``; ``EngineProfile.assumptions(base)`` applies its kernel
constants on top of a preset's assumptions (the preset keeps the execution model: hardware overrides,
activations through HBM, overlap), ``EngineProfile.engine(cfg, isl, osl)`` sizes its scheduler. A
profile is calibrated on its own cited public rows (``calibration``) or states that it has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .assumptions import FITTED_BOUNDS, Assumptions, load_fitted
from perfonto.ontology.errors import PerfontoError

DATA = Path(__file__).parent / "data"

#: The Assumptions fields each op class of a profile's ``kernels`` may set.
OP_CLASSES: dict[str, tuple[str, ...]] = {
    "dense_gemm": ("mxu_eff_max", "mxu_half_rows"),
    "grouped_gemm": ("moe_half_rows",),
    "fp4_gemm": ("fp4_eff_ratio",),
    "attention_decode": ("kv_read_eff",),
    "all_reduce": ("link_eff",),
    "all_to_all": ("a2a_eff", "a2a_half_bytes", "expert_imbalance"),
    "launch": ("op_overhead_s", "host_step_s"),
}
SCHEDULER_KEYS = ("max_batch", "token_budget", "chunked_prefill")


class EngineProfileError(PerfontoError, ValueError):
    """Unknown engine profile, or a malformed profile file."""


@dataclass(frozen=True)
class EngineProfile:
    """One profile: ``name``, ``stack`` (in words), ``kernels`` (Assumptions fields it sets),
    ``fitted`` (start from ``fitted.yaml``), ``scheduler`` (``"trtllm-bench"`` or a dict of
    ``SCHEDULER_KEYS``), ``sources`` (cited documents of its calibration rows; empty: none),
    ``calibration_file`` (or None) and ``named`` (its assumptions in words)."""

    name: str
    stack: str
    kernels: dict
    fitted: bool
    scheduler: object
    sources: tuple[str, ...]
    calibration_file: str | None
    named: tuple[str, ...]
    families: tuple[str, ...] = ()  # the preset families whose stack it describes (empty: any)

    def foreign_note(self, family: str) -> tuple[str, ...]:
        """A statement that the profile is applied to a chip of another ``family`` than the stack it
        describes (the sohu profile's design assumptions on an h100: a what-if, not that GPU's stack)."""
        if not self.families or family in self.families:
            return ()
        return (
            f"engine profile {self.name} describes {self.stack}; on a chip of the {family} family its constants "
            "are a what-if, not a description of that chip's own serving stack",
        )

    def assumptions(self, base: Assumptions) -> Assumptions:
        """``base`` with the profile's kernel constants (the fitted ones first when ``fitted``)."""
        params = load_fitted()["parameters"].items() if self.fitted else ()
        fitted = {k: float(v) for k, v in params if k in FITTED_BOUNDS}
        return base.replace(**fitted, **self.kernels)

    def engine(self, cfg, isl: int, osl: int, *, draft_tokens: int = 0, acceptance: float = 0.0):
        """The scheduler settings (``serving.Engine``) for a scenario: trtllm-bench's sizing or the
        profile's explicit ones."""
        from .serving import Engine, trtllm_bench_engine

        if self.scheduler == "trtllm-bench":
            e = trtllm_bench_engine(cfg, isl, osl)
            size = {"max_batch": e.max_batch, "token_budget": e.token_budget, "chunked_prefill": e.chunked_prefill}
        else:
            size = {k: self.scheduler[k] for k in SCHEDULER_KEYS}
        return Engine(
            max_batch=int(size["max_batch"]),
            token_budget=int(size["token_budget"]),
            chunked_prefill=bool(size["chunked_prefill"]),
            draft_tokens=int(draft_tokens),
            acceptance=float(acceptance),
        )


def _kernels(name: str, spec: dict) -> dict:
    out = {}
    for cls, fields in (spec or {}).items():
        if cls not in OP_CLASSES:
            raise EngineProfileError(f"engine profile {name}: unknown op class {cls!r}; known: {', '.join(OP_CLASSES)}")
        bad = sorted(set(fields or {}) - set(OP_CLASSES[cls]))
        if bad:
            raise EngineProfileError(
                f"engine profile {name}: {cls} sets {', '.join(bad)}; it may set {', '.join(OP_CLASSES[cls])}"
            )
        out.update({k: float(v) for k, v in fields.items()})
    return out


def _scheduler(name: str, s) -> object:
    if s == "trtllm-bench":
        return s
    if not isinstance(s, dict) or set(s) != set(SCHEDULER_KEYS):
        raise EngineProfileError(
            f"engine profile {name}: scheduler must be 'trtllm-bench' or {{{', '.join(SCHEDULER_KEYS)}}} (got {s!r})"
        )
    if int(s["max_batch"]) < 1 or int(s["token_budget"]) < 1:
        raise EngineProfileError(f"engine profile {name}: max_batch and token_budget must be ≥ 1 (got {s})")
    return dict(s)


@lru_cache(maxsize=None)
def load_profiles(path: str | None = None) -> dict[str, EngineProfile]:
    """Every profile of the profile file (default ``emulator/data/engine_profiles.yaml``).

    Raises:
        EngineProfileError: the file is malformed (an unknown op class or field, a bad scheduler).
    """
    p = Path(path) if path else DATA / "engine_profiles.yaml"
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    out = {}
    for name, d in (doc.get("profiles") or {}).items():
        fitted = d.get("kernels") == "fitted"
        kernels = _kernels(name, {} if fitted else d.get("kernels"))
        kernels.update(_kernels(name, d.get("overrides")))
        cal = d.get("calibration") or {}
        out[name] = EngineProfile(
            name,
            str(d.get("stack", "")),
            kernels,
            fitted,
            _scheduler(name, d.get("scheduler")),
            tuple(cal.get("sources", ())),
            cal.get("file"),
            tuple(d.get("named", ())),
            tuple(d.get("families", ())),
        )
    return out


def profile(name: str) -> EngineProfile:
    """The profile ``name``.

    Raises:
        EngineProfileError: no such profile (the message lists them).
    """
    profiles = load_profiles()
    if name not in profiles:
        raise EngineProfileError(f"no engine profile {name!r}; profiles: {', '.join(profiles)}")
    return profiles[name]


__all__ = ["EngineProfile", "EngineProfileError", "OP_CLASSES", "load_profiles", "profile"]
