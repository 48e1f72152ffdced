"""The knobs of a what-if study and the ``--vary`` syntax.

A knob is either a spec constant of the generation (``spec.hbm.peak_bandwidth``, any constant the
emulator reads: ``emulator.hardware.SPEC_FIELDS`` and the clocks ``spec.clock.<domain>``) or a
workload knob (``WORKLOAD``). ``--vary NAME=VALUES`` gives its values:

- a list ``a,b,c`` (``isl=128,2048``; ``model=llama-3.1-8b,llama3-70b``; ``mapping=tp8,tp4-dp2``);
- a range ``A..B:N``: N points evenly spaced from A to B, both included; ``A..B:N:log`` spaces
  them geometrically (``spec.hbm.peak_bandwidth=4..16TB/s:7``, ``concurrency=1..256:9:log``);
- spec values take a unit, after any number or once at the end (``4..16TB/s``, ``4TB/s,8TB/s``);
  without one, the unit the catalog declares the constant in (``ontology/catalog/<gen>.yaml``: TB/s, GB,
  TFLOP/s, …; a clock's GHz, ``clock_domains``); ``x0.5..x2:5`` are factors of the generation's value.

Mappings: ``tp<N>``, ``pp<N>``, ``dp<N>``, ``ep<N>`` and ``adp`` (data-parallel attention) joined by
``-`` (``tp4-dp2``, ``tp8-ep8-adp``); the chips are their product unless ``chips`` says otherwise.
Several ``--vary`` make a grid (every combination), in the order given.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

from perfonto.ontology.derive import DeriveError, spec_quantity
from perfonto.ontology.diagnostics import did_you_mean
from perfonto.ontology.errors import PerfontoError


class KnobError(PerfontoError, ValueError):
    """A ``--vary`` the study cannot take; the message says what to write instead."""


#: Workload knobs: name → (type, meaning).
WORKLOAD: dict[str, tuple[type, str]] = {
    "model": (str, "model name (perfonto project --model)"),
    "chips": (int, "chips in the group"),
    "isl": (int, "input tokens per request"),
    "osl": (int, "output tokens per request"),
    "batch": (int, "the engine's max batch (requests per step per scheduler rank)"),
    "concurrency": (int, "closed loop: requests in flight"),
    "rate": (float, "online: Poisson arrivals, requests/s"),
    "dtype": (str, "weight dtype: fp8, fp4, bf16"),
    "kv_dtype": (str, "KV-cache dtype: fp8, fp4, bf16"),
    "mapping": (str, "parallel mapping, e.g. tp8, tp4-dp2, tp8-ep8-adp"),
    "preset": (str, "assumption preset (emulator/data/presets.yaml)"),
    "draft_tokens": (int, "speculative decoding: draft tokens per step"),
    "acceptance": (float, "speculative decoding: acceptance probability"),
}
DTYPES = ("fp8", "fp4", "bf16")
_NUM = re.compile(r"^\s*([x×])?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_MAP = re.compile(r"^(tp|pp|dp|ep)(\d+)$|^adp$")


def emulated_spec(gen) -> list[str]:
    """Spec constants of ``gen`` the emulator reads (the ones a sweep can vary), sorted."""
    from perfonto.emulator.hardware import SPEC_FIELDS

    return sorted(n for n in gen.spec if n in SPEC_FIELDS or n.startswith("spec.clock."))


def knob_names(gen) -> list[str]:
    """Every knob a ``--vary`` may name on ``gen``: its emulated spec constants, then ``WORKLOAD``."""
    return emulated_spec(gen) + list(WORKLOAD)


@dataclass(frozen=True)
class Knob:
    """One ``--vary``: ``name`` and its ``values`` (spec values in the constant's own unit)."""

    name: str
    values: tuple
    unit: str = ""  # the unit the values are shown and written in (a spec constant's; GHz for a clock)
    scale: float = 1.0  # values / scale are in ``unit`` (a clock's values are in cycles/s, shown in GHz)

    def shown(self, v):
        """``v`` (a value of the knob) in ``unit``."""
        return v / self.scale if self.scale != 1.0 and isinstance(v, (int, float)) else v

    @property
    def is_spec(self) -> bool:
        return self.name.startswith("spec.")


def _number(text: str, what: str) -> tuple[bool, float, str]:
    m = _NUM.match(text)
    if not m:
        raise KnobError(f"{what}: {text!r} is not a number (write e.g. 4, 4TB/s, 2.5e15, x0.5)")
    return bool(m.group(1)), float(m.group(2)), m.group(3)


def _spec_value(gen, name: str, text: str, unit_default: str, what: str) -> float:
    factor, v, unit = _number(text, what)
    if factor:
        if unit:
            raise KnobError(f"{what}: a factor ({text!r}) takes no unit")
        v, unit, unit_default = v * gen.spec[name].value, "", ""  # a factor of the value, in its own unit
    try:
        return spec_quantity(gen, name, v, unit or unit_default or None)
    except DeriveError as exc:
        raise KnobError(f"{what}: {exc}") from None


def parse_mapping(text: str) -> dict:
    """``tp4-dp2`` → ``{"tp": 4, "dp": 2}`` (``adp`` → ``attn_dp: True``).

    Raises:
        KnobError: a part that is not ``tp<N>``, ``pp<N>``, ``dp<N>``, ``ep<N>`` or ``adp``.
    """
    out: dict = {}
    for part in text.lower().replace("×", "-").replace("x", "-").split("-"):
        m = _MAP.match(part.strip())
        if not m or (m.group(2) is not None and (len(m.group(2)) > 6 or int(m.group(2)) < 1)):  # 1 … 999,999-way
            raise KnobError(f"mapping {text!r}: {part!r} is not tp<N>, pp<N>, dp<N>, ep<N> or adp (e.g. tp4-dp2)")
        if part == "adp":
            out["attn_dp"] = True
        else:
            out[m.group(1)] = int(m.group(2))
    return out


def _range(text: str, what: str) -> tuple[str, str, int, bool]:
    body, _, tail = text.partition(":")
    lo, _, hi = body.partition("..")
    parts = tail.split(":") if tail else []
    if not tail or len(parts) > 2 or (len(parts) == 2 and parts[1].strip() != "log"):
        raise KnobError(f"{what}: a range is A..B:N or A..B:N:log (N points), got {text!r}")
    try:
        n = int(parts[0])
    except ValueError:
        raise KnobError(f"{what}: the number of points in {text!r} must be an integer") from None
    if n < 2:
        raise KnobError(f"{what}: a range needs at least 2 points, got {n}")
    if n > 10_000:
        raise KnobError(f"{what}: {n} points is too many for one knob (at most 10,000)")
    return lo, hi, n, len(parts) == 2


def _spaced(a: float, b: float, n: int, log: bool, what: str) -> list[float]:
    import math

    if not (math.isfinite(a) and math.isfinite(b)):
        raise KnobError(f"{what}: a range needs finite ends ({a:g} .. {b:g})")
    if not a < b:
        raise KnobError(f"{what}: a range goes from low to high ({a:g} .. {b:g})")
    if log:
        if a <= 0:
            raise KnobError(f"{what}: a log range needs A > 0")
        return [a * (b / a) ** (i / (n - 1)) for i in range(n)]
    return [a + (b - a) * i / (n - 1) for i in range(n)]


def _check_spec_name(name: str, gen, what: str) -> None:
    """Refuse a spec constant ``gen`` lacks (with a did-you-mean) or one the emulator does not read."""
    if name not in gen.spec:
        hint = did_you_mean(name, emulated_spec(gen))
        raise KnobError(
            f"{what}: `{gen.name}` has no spec constant `{name}`; "
            + (hint or "the constants a sweep can vary: " + ", ".join(emulated_spec(gen)))
        )
    if name not in emulated_spec(gen):
        raise KnobError(
            f"{what}: the emulator does not read `{name}`, so varying it changes nothing; "
            f"vary one of {', '.join(emulated_spec(gen))}"
        )


#: The unit the catalogs declare clock domains in (``clock_domains: core: frequency: {value: 1.5, unit: GHz}``):
#: a bare clock value is in it, as a bare value of another constant is in the unit the catalog gives it.
CLOCK_UNIT = ("GHz", 1e9)


def _declared(name: str, gen) -> tuple[str, float]:
    """The unit a bare value of constant ``name`` is in and its factor to the constant's own unit."""
    return CLOCK_UNIT if name.startswith("spec.clock.") else (gen.spec[name].unit_text, 1.0)


def _check_emulated(name: str, gen, vals: list, texts: list, what: str) -> None:
    """Refuse a value the emulator cannot model (below its floor: a 1.5 Hz clock), naming the ``--vary`` value
    (the emulator's message named the catalog's line, a file the user did not edit)."""
    import re

    from perfonto.emulator.hardware import HardwareSpecError, hardware_from_generation
    from perfonto.ontology.derive import with_spec

    for v, text in zip(vals, texts):
        try:
            hardware_from_generation(with_spec(gen, {name: v}))
        except HardwareSpecError as exc:
            msg = re.sub(r"^\S+:\d+: ", "", str(exc.args[0]))
            msg = re.sub(r"[;(]? ?\(?fix it under `spec:`\)?$", "", msg).rstrip("; ")
            unit = _declared(name, gen)[0]
            raise KnobError(
                f"{what}: the value {text.strip()!r} cannot be projected ({msg}); a value without a unit is in "
                f"{unit}: write e.g. {gen.spec[name].value / _declared(name, gen)[1]:g}{unit}"
            ) from None


def _vary_spec(name: str, values: str, gen, what: str) -> Knob:
    """A spec constant's knob: a range ``A..B:N[:log]`` or a list, each value in the constant's unit (a
    value without a unit takes the range's high end's, or the list's last item's; without any, the unit the
    catalog declares: a clock's GHz)."""
    _check_spec_name(name, gen, what)
    unit, scale = _declared(name, gen)
    bare = unit if scale != 1.0 else ""
    if ".." in values:
        lo, hi, n, log = _range(values, what)
        hi_unit = _number(hi, what)[2] or bare
        a = _spec_value(gen, name, lo, "" if _number(lo, what)[2] else hi_unit, what)
        b = _spec_value(gen, name, hi, hi_unit, what)
        vals = _spaced(a, b, n, log, what)
        texts = [f"{v / scale:g}{unit}" for v in vals]
    else:
        texts = [s for s in values.split(",")]
        if any(not s.strip() for s in texts):
            raise KnobError(f"{what}: an empty item in {values!r}")
        last_unit = _number(texts[-1], what)[2] or bare
        vals = [_spec_value(gen, name, s, "" if _number(s, what)[2] else last_unit, what) for s in texts]
    _check_emulated(name, gen, vals, texts, what)
    return Knob(name, tuple(vals), unit, scale)


def _workload_range(name: str, typ: type, values: str, what: str) -> list:
    """A numeric workload knob's range ``A..B:N[:log]`` (integers rounded, repeats dropped), each value
    checked by the rules every entry point shares (``perfonto.values``)."""
    lo, hi, n, log = _range(values, what)
    vals = _spaced(_number(lo, what)[1], _number(hi, what)[1], n, log, what)
    if typ is int:
        vals = list(dict.fromkeys(int(round(v)) for v in vals))
    from perfonto.values import ValueRuleError, check_workload

    # the rules every entry point shares (perfonto.values): --vary acceptance=0..2:3 is refused as --acceptance 2 is
    try:
        return [check_workload(name, v, what) for v in vals]
    except ValueRuleError as exc:
        raise KnobError(str(exc)) from None


def _workload_list(name: str, typ: type, values: str, what: str) -> list:
    """A workload knob's comma-separated values, numbers parsed (and checked by the shared rules where
    ``perfonto.values`` has some for the knob)."""
    vals = [s.strip() for s in values.split(",")]
    if any(not s for s in vals):
        raise KnobError(f"{what}: an empty item in {values!r}")
    if typ not in (int, float):
        return vals
    from perfonto.values import WORKLOAD as RULES, ValueRuleError, check_workload

    out = []
    for s in vals:
        try:
            out.append(check_workload(name, s, what) if name in RULES else typ(s))  # the text as typed, in the message
        except ValueRuleError as exc:
            raise KnobError(str(exc)) from None
        except ValueError:
            raise KnobError(f"{what}: {s!r} is not {'an integer' if typ is int else 'a number'}") from None
    return out


def _check_named(name: str, vals: list, what: str) -> None:
    """Refuse a dtype, a mapping or a model that is not one."""
    if name in ("dtype", "kv_dtype") and (bad := [v for v in vals if v not in DTYPES]):
        raise KnobError(f"{what}: {bad[0]!r} is not one of {', '.join(DTYPES)}")
    if name == "mapping":
        for v in vals:
            parse_mapping(v)
    if name == "model":
        from perfonto.emulator.models import get_model

        for v in vals:
            try:
                get_model(v)
            except KeyError as exc:
                raise KnobError(f"{what}: {exc.args[0]}") from None


def parse_vary(text: str, gen) -> Knob:
    """One ``--vary NAME=VALUES`` (module docstring) against generation ``gen``.

    Raises:
        KnobError: unknown knob (with a did-you-mean), a spec constant the emulator does not read,
            a bad number, unit or range, a value of the wrong type.
    """
    name, eq, values = text.partition("=")
    name, values = name.strip(), values.strip()
    if not eq or not name or not values:
        raise KnobError(f"--vary {text!r}: write NAME=VALUES, e.g. spec.hbm.peak_bandwidth=4..16TB/s:7 or isl=128,2048")
    what = f"--vary {name}"
    if name.startswith("spec."):
        return _vary_spec(name, values, gen, what)
    if name not in WORKLOAD:
        hint = did_you_mean(name, knob_names(gen))
        raise KnobError(f"{what}: no knob `{name}`; " + (hint or "knobs: spec.<constant> or " + ", ".join(WORKLOAD)))
    typ = WORKLOAD[name][0]
    if typ in (int, float) and ".." in values:
        vals = _workload_range(name, typ, values, what)
    else:
        vals = _workload_list(name, typ, values, what)
    _check_named(name, vals, what)
    return Knob(name, tuple(vals))


@dataclass(frozen=True)
class Point:
    """One configuration of a study: the spec overrides (name → value in the constant's unit) and
    the workload (``WORKLOAD`` names → values), both as sorted tuples so that points hash."""

    spec: tuple[tuple[str, float], ...] = ()
    workload: tuple[tuple[str, object], ...] = ()
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def get(self, name: str, default=None):
        return dict(self.spec).get(name, dict(self.workload).get(name, default))

    def with_values(self, **values) -> "Point":
        spec, wl = dict(self.spec), dict(self.workload)
        for k, v in values.items():
            (spec if k.startswith("spec.") else wl)[k] = v
        return Point(tuple(sorted(spec.items())), tuple(sorted(wl.items())))


def _check_speculative(base: Point, knobs: list[Knob]) -> None:
    """Refuse an acceptance without draft tokens (every point would be the same, speculative decoding off),
    as ``perfonto project --acceptance`` without ``--draft-tokens`` is refused."""
    given = {k.name: k.values for k in knobs} | {k: (v,) for k, v in base.workload}
    if "acceptance" in given and not any(given.get("draft_tokens", ())):
        raise KnobError(
            "--vary acceptance applies to speculative decoding only: vary the draft tokens too (--vary "
            "draft_tokens=K, K > 0), or leave the acceptance out"
        )


def grid(base: Point, knobs: list[Knob]) -> list[Point]:
    """Every combination of the knobs' values on top of ``base`` (first knob slowest).

    Raises:
        KnobError: no knob, a knob given twice, an acceptance without draft tokens, or more than 100,000
            points.
    """
    if not knobs:
        raise KnobError("nothing to sweep: give at least one --vary NAME=VALUES")
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise KnobError(f"--vary {dup} is given twice; give all its values in one --vary")
    _check_speculative(base, knobs)
    n = math.prod(len(k.values) for k in knobs)
    if n > 100_000:
        raise KnobError(f"the sweep has {n:,} points; at most 100,000")
    return [base.with_values(**dict(zip(names, combo))) for combo in itertools.product(*(k.values for k in knobs))]


__all__ = [
    "DTYPES",
    "Knob",
    "KnobError",
    "Point",
    "WORKLOAD",
    "emulated_spec",
    "grid",
    "knob_names",
    "parse_mapping",
    "parse_vary",
]
