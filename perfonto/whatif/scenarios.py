"""Coverage scenarios: the emulator's knobs as named runs (``scenarios.yaml`` beside this file, and a
user's file in the same format), and the emulator arguments of each (``runs`` runs them).

``load_scenarios(path)`` reads the shipped file and, given ``path``, a user's on top (a scenario
with a shipped name, or a ``nominal:``, replaces the shipped one). Every problem is a located
``Diagnostic`` (code ``scenario``), all reported at once (``ScenarioError``).

``run_kwargs(nominal, scenario, gen, seed, folder)``: the ``emulator.run`` arguments of the nominal
workload changed by the scenario (``run`` knobs; ``assumptions`` over the preset's; its ``spec`` is
applied as a derived generation by ``runs.run_one``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from perfonto.ontology.diagnostics import Diagnostic, Span, did_you_mean
from perfonto.ontology.errors import PerfontoError

SHIPPED = Path(__file__).parent / "scenarios.yaml"
#: Keys of ``nominal:`` and of a scenario's ``run:`` → the type they take.
RUN_KEYS = {
    "model": str,
    "chips": int,
    "isl": int,
    "osl": int,
    "concurrency": int,
    "rate": float,
    "requests": int,
    "duration": "s",
    "sample_period": "s",
    "warmup_steps": int,
    "preset": str,
    "dtype": str,
    "mapping": str,
    "slow_chip": "chip:factor",
    "throttled_link": "chip:link:factor",
    "router_skew": float,
    "draft_tokens": int,
    "acceptance": float,
}
SCENARIO_KEYS = ("description", "expect", "run", "spec", "assumptions")


class ScenarioError(PerfontoError, ValueError):
    """Scenario files with problems; ``diagnostics`` holds every one."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__(diagnostics[0].message if diagnostics else "bad scenario file")


@dataclass(frozen=True)
class Scenario:
    """One scenario: ``run`` (the nominal's keys changed; None removes one), ``spec`` (full name →
    "value unit" text), ``assumptions`` (field → value), the expected headline, where it was defined."""

    name: str
    description: str = ""
    run: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    assumptions: dict = field(default_factory=dict)
    expect: str | None = None
    source: str = ""


def _parse_value(key: str, v, err):
    kind = RUN_KEYS[key]
    if v is None:
        return None
    if kind == "s":
        from perfonto.ontology.units import UnitError, parse_quantity, registry_for

        reg = registry_for(())
        try:
            s = parse_quantity(reg, v, reg.second)
        except UnitError:
            return err(f"`{key}`: {v!r} is not a duration (write e.g. 300ms, 1s)")
        return s if s > 0 else err(f"`{key}` must be positive")
    if isinstance(kind, str):  # chip:factor, chip:link:factor
        parts = str(v).split(":")
        want = kind.count(":") + 1
        try:
            nums = [int(p) for p in parts[:-1]] + [float(parts[-1])]
        except ValueError:
            nums = []
        if len(parts) != want or len(nums) != want:
            return err(f"`{key}`: write {kind.upper()}, e.g. " + ("1:1.5" if want == 2 else "0:0:4"))
        return tuple(nums)
    if kind is int and (
        isinstance(v, bool) or not isinstance(v, int) or v < (0 if key in ("warmup_steps", "draft_tokens") else 1)
    ):
        return err(f"`{key}` must be a whole number ≥ {0 if key in ('warmup_steps', 'draft_tokens') else 1}, got {v!r}")
    if key == "draft_tokens":
        from perfonto.emulator.scheduler import MAX_DRAFT_TOKENS

        if v > MAX_DRAFT_TOKENS:
            return err(f"`{key}` is at most {MAX_DRAFT_TOKENS} draft tokens a step, got {v!r}")
    if kind is float:
        try:
            f = float(v)
        except (TypeError, ValueError):
            return err(f"`{key}` must be a number, got {v!r}")
        return f if math.isfinite(f) and f >= 0 else err(f"`{key}` must be a finite number ≥ 0")
    if kind is str and not isinstance(v, str):
        return err(f"`{key}` must be text, got {v!r}")
    return v


def _unknown_key(diags, src, loc: tuple, k, known, message: str) -> None:
    """Report key ``k`` of the mapping at ``loc``, not one of ``known``: located on the key, with a
    did-you-mean, else the list of keys."""
    diags.append(
        Diagnostic(
            "error",
            "scenario",
            message,
            src.span(loc + (k, "<key>")),
            hint=did_you_mean(str(k), known) or "keys: " + ", ".join(known),
        )
    )


def _run_block(doc, loc, src, diags) -> dict:
    out = {}
    if not isinstance(doc, dict):
        diags.append(
            Diagnostic(
                "error", "scenario", "expected a mapping of run keys", src.span(loc), hint='e.g. {slow_chip: "1:1.5"}'
            )
        )
        return out
    for k, v in doc.items():

        def err(msg, k=k):
            diags.append(Diagnostic("error", "scenario", msg, src.span(loc + (k,)), hint=""))

        if k not in RUN_KEYS:
            _unknown_key(diags, src, loc, k, RUN_KEYS, f"unknown run key `{k}`")
            continue
        out[k] = _parse_value(k, v, err)
    return out


def _expect(sc: dict, loc, src, diags, headlines) -> str | None:
    """The scenario's ``expect:`` as a full metric name (``topdown.`` may be left out); a located
    error with a did-you-mean when ``headlines`` (the metrics that can be a headline) lacks it."""
    want = sc.get("expect")
    if want is None or headlines is None:
        return want
    heads = set(headlines)
    if not isinstance(want, str):
        diags.append(
            Diagnostic(
                "error",
                "scenario",
                f"`expect` must be a top-down metric name, got {want!r}",
                src.span(loc + ("expect",)),
            )
        )
        return None
    full = want if want in heads or want.startswith("topdown.") else f"topdown.{want}"
    if full not in heads:
        hint = did_you_mean(full, sorted(heads)) or "top-down metrics: " + ", ".join(sorted(heads))
        diags.append(
            Diagnostic(
                "error",
                "scenario",
                f"`expect`: no top-down metric `{want}` (a headline is a top-down node)",
                src.span(loc + ("expect",)),
                hint=hint,
            )
        )
        return want
    return full


def _read(path: Path, diags: list, headlines=None) -> tuple[dict | None, dict[str, Scenario]]:
    from perfonto.ontology.yaml_source import read_yaml

    src = read_yaml(path)
    if src.diagnostics:
        diags.extend(src.diagnostics)
        return None, {}
    doc = src.data
    if not isinstance(doc, dict):
        diags.append(
            Diagnostic(
                "error",
                "scenario",
                "a scenario file is a mapping with `scenarios:` (and `nominal:`)",
                Span(str(path), 1, 1),
            )
        )
        return None, {}
    for k in doc:
        if k not in ("nominal", "scenarios"):
            _unknown_key(diags, src, (), k, ("nominal", "scenarios"), f"unknown top-level key `{k}`")
    nominal = _run_block(doc["nominal"], ("nominal",), src, diags) if "nominal" in doc else None
    out = {}
    scs = doc.get("scenarios") or {}
    if not isinstance(scs, dict):
        diags.append(Diagnostic("error", "scenario", "`scenarios:` maps names to scenarios", src.span(("scenarios",))))
        scs = {}
    for name, sc in scs.items():
        loc = ("scenarios", name)
        if not isinstance(sc, dict):
            diags.append(Diagnostic("error", "scenario", f"scenario `{name}` is not a mapping", src.span(loc)))
            continue
        for k in sc:
            if k not in SCENARIO_KEYS:
                _unknown_key(diags, src, loc, k, SCENARIO_KEYS, f"scenario `{name}`: unknown key `{k}`")
        run = _run_block(sc.get("run") or {}, loc + ("run",), src, diags)
        spec = sc.get("spec") or {}
        assume = sc.get("assumptions") or {}
        for what, block in (("spec", spec), ("assumptions", assume)):
            if not isinstance(block, dict):
                diags.append(
                    Diagnostic(
                        "error", "scenario", f"scenario `{name}`: `{what}` is a mapping", src.span(loc + (what,))
                    )
                )
        spec = (
            {(k if str(k).startswith("spec.") else f"spec.{k}"): v for k, v in spec.items()}
            if isinstance(spec, dict)
            else {}
        )
        sp = src.span(loc)
        out[str(name)] = Scenario(
            str(name),
            str(sc.get("description", "")),
            run,
            spec,
            dict(assume) if isinstance(assume, dict) else {},
            _expect(sc, loc, src, diags, headlines),
            f"{sp.file}:{sp.line}",
        )
    return nominal, out


def load_scenarios(path: str | Path | None = None, base_gen=None, headlines=None) -> tuple[dict, list[Scenario]]:
    """The nominal run and the scenarios: the shipped file, then ``path`` on top. ``base_gen``: the
    generation whose spec constants and presets the scenarios are checked against; ``headlines``:
    the metrics a scenario's ``expect:`` may name (the catalog's top-down metrics; None: unchecked).

    Raises:
        ScenarioError: with every problem found (files, keys, values, spec constants, assumptions).
    """
    diags: list[Diagnostic] = []
    nominal, scs = _read(SHIPPED, diags, headlines)
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ScenarioError(
                [
                    Diagnostic(
                        "error",
                        "io",
                        "no such scenario file",
                        Span(str(p)),
                        hint="give a YAML file with `scenarios:` (see perfonto/whatif/scenarios.yaml)",
                    )
                ]
            )
        user_nominal, user = _read(p, diags, headlines)
        nominal = user_nominal or nominal
        scs = {**scs, **user}
    if base_gen is not None:
        _check(base_gen, nominal or {}, list(scs.values()), diags)
    if diags:
        raise ScenarioError(diags)
    return nominal or {}, list(scs.values())


def _check(gen, nominal: dict, scs: list[Scenario], diags: list) -> None:
    from perfonto.emulator.assumptions import Assumptions
    from perfonto.emulator.models import get_model
    from perfonto.ontology.derive import DeriveError, with_spec

    from .knobs import emulated_spec

    fields = {f for f in Assumptions.__dataclass_fields__}
    for sc in scs:
        where = Span(sc.source.rsplit(":", 1)[0], int(sc.source.rsplit(":", 1)[1] or 1)) if sc.source else Span("")
        for k in sc.spec:
            if k not in emulated_spec(gen):
                diags.append(
                    Diagnostic(
                        "error",
                        "scenario",
                        f"scenario `{sc.name}`: no spec constant `{k}` the emulator reads",
                        where,
                        hint=did_you_mean(k, emulated_spec(gen)) or ", ".join(emulated_spec(gen)),
                    )
                )
        try:
            with_spec(gen, {k: _quantity(v) for k, v in sc.spec.items() if k in emulated_spec(gen)})
        except (DeriveError, ValueError) as exc:
            diags.append(Diagnostic("error", "scenario", f"scenario `{sc.name}`: {exc}", where))
        for k in sc.assumptions:
            if k not in fields:
                diags.append(
                    Diagnostic(
                        "error",
                        "scenario",
                        f"scenario `{sc.name}`: unknown assumption `{k}`",
                        where,
                        hint=did_you_mean(k, fields) or "see emulator/assumptions.py",
                    )
                )
        model = {**nominal, **sc.run}.get("model")
        if model:
            try:
                get_model(model)
            except KeyError as exc:
                diags.append(Diagnostic("error", "scenario", f"scenario `{sc.name}`: {exc.args[0]}", where))


def _quantity(v) -> tuple[float, str]:
    """``"20 GB"`` → (20.0, "GB"); a bare number → (value, "") (the constant's own unit)."""
    from .knobs import _NUM

    m = _NUM.match(str(v))
    if not m or m.group(1):
        raise ValueError(f"{v!r} is not a value with a unit (write e.g. 20 GB, 1.8 TB/s)")
    return float(m.group(2)), m.group(3)


def run_kwargs(nominal: dict, sc: Scenario | None, gen, seed: int, out_dir) -> dict:
    """``emulator.run`` keyword arguments of the nominal run changed by ``sc`` (None: the nominal)."""
    from perfonto.emulator.presets import resolve

    from .knobs import parse_mapping
    from .points import _mapping

    r = {**nominal, **(sc.run if sc else {})}
    r = {k: v for k, v in r.items() if v is not None}
    kw = {
        "model": r.get("model", "llama3-70b"),
        "chips": int(r.get("chips", 1)),
        "isl": int(r.get("isl", 512)),
        "osl": int(r.get("osl", 128)),
        "duration_s": float(r.get("duration", 0.3)),
        "sample_period_s": float(r.get("sample_period", 1e-3)),
        "warmup_steps": int(r.get("warmup_steps", 50)),
        "seed": int(seed),
        "out_dir": out_dir,
    }
    for k, arg in (
        ("concurrency", "concurrency"),
        ("rate", "rate"),
        ("requests", "num_requests"),
        ("slow_chip", "slow_chip"),
        ("throttled_link", "throttled_link"),
        ("router_skew", "router_skew"),
        ("preset", "preset"),
        ("dtype", "dtype"),
        ("draft_tokens", "draft_tokens"),
        ("acceptance", "acceptance"),
    ):
        if k in r:
            kw[arg] = r[k]
    if "mapping" in r:
        m = parse_mapping(r["mapping"])
        kw["chips"] = m.get("tp", 1) * m.get("pp", 1) * m.get("dp", 1)
        kw["mapping"] = _mapping({"mapping": r["mapping"], "model": kw["model"]})
    if sc and sc.assumptions:
        kw["assumptions"] = resolve(gen, kw.get("preset")).assumptions.replace(**sc.assumptions)
    if kw.get("rate") is not None and "num_requests" not in kw:
        kw["num_requests"] = 100
    return kw


__all__ = ["RUN_KEYS", "SHIPPED", "Scenario", "ScenarioError", "load_scenarios", "run_kwargs"]
