"""``perfonto compare GEN_A GEN_B``: two generations over a list of workloads, side by side, and which
assumption drives each difference.

Each workload is projected on A (under A's preset) and on B (under B's). The ratio ``R = y_B / y_A``
of each figure is then attributed by moving one assumption at a time from A's value to B's, the
rest staying A's (as ``emulator.claim`` does for presets):

- each spec constant the emulator reads that differs (``spec.hbm.peak_bandwidth`` 7.2 → 16 TB/s);
  a constant only one of them declares is listed, not moved (A cannot take it);
- each setting of the presets that differs: an ``Assumptions`` field, a hardware override, the
  mapping rule, the engine.

``factor = y(A with that one change) / y(A)`` for y the whole benchmark's tokens/s (``RANK_BY``); the change with the
largest ``|ln factor|`` drives the difference. One-at-a-time factors need not multiply to ``R``: ``interaction = R / Π
factors`` says how much the changes reinforce (> 1) or offset (< 1) each other.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from perfonto.ontology.records import attributes

from .knobs import KnobError, Point, emulated_spec
from .points import Cache, Target, base_generation, workload
from .sweep import run_points

FIGURES = ("benchmark_tokens_per_second", "tokens_per_second", "itl_p50_s", "ttft_p50_s", "mfu")
#: The figure a difference is attributed by: tokens/s over the whole benchmark (both sides of a change
#: share its schedule; the steady window may hold one prompt burst more on one side).
RANK_BY = "benchmark_tokens_per_second"


@dataclass(frozen=True)
class Change:
    """One assumption moved from A's value to B's: ``what`` in words, ``kind`` (``spec``,
    ``assumption``, ``hardware``, ``mapping``, ``engine``) and the workload entries that apply it."""

    what: str
    kind: str
    spec: tuple = ()
    workload: tuple = ()


def spec_changes(ga, gb) -> tuple[list[Change], list[str]]:
    """Changes of the spec constants the emulator reads that differ between ``ga`` and ``gb`` (values
    of B converted to A's units), and the constants only one declares."""
    from perfonto.ontology.units import UnitError, conversion_factor, parse_unit

    out, only = [], []
    ea, eb = set(emulated_spec(ga)), set(emulated_spec(gb))
    for n in sorted(ea | eb):
        if n not in ea or n not in eb:
            only.append(f"{n} only on {ga.name if n in ea else gb.name}")
            continue
        a, b = ga.spec[n], gb.spec[n]
        try:  # a clock is in <domain>_cycle/s on both
            vb = (
                b.value
                if n.startswith("spec.clock.")
                else b.value * conversion_factor(ga.registry, parse_unit(ga.registry, b.unit_text), a.unit)
            )
        except UnitError:
            only.append(f"{n}: {b.unit_text} does not convert to {a.unit_text}")
            continue
        if not math.isclose(vb, a.value, rel_tol=1e-9):
            out.append(Change(f"{n}: {a.value:g} → {vb:g} {a.unit_text}", "spec", ((n, vb),)))
    return out, only


def preset_changes(ga, preset_a, gb, preset_b) -> list[Change]:
    """Changes of the preset settings that differ between A's and B's presets."""
    from perfonto.emulator.presets import resolve

    pa, pb = resolve(ga, preset_a), resolve(gb, preset_b)
    out = []
    for f in dataclasses.fields(pa.assumptions):
        va, vb = getattr(pa.assumptions, f.name), getattr(pb.assumptions, f.name)
        if va != vb:
            out.append(
                Change(
                    f"assumption {f.name}: {va!r} → {vb!r} (preset {pa.name} → {pb.name})",
                    "assumption",
                    workload=(("assume", ((f.name, vb),)),),
                )
            )
    for k in sorted(set(pa.hardware) | set(pb.hardware)):
        if pa.hardware.get(k) != pb.hardware.get(k) and k in pb.hardware:
            out.append(
                Change(
                    f"preset hardware {k}: → {pb.hardware[k]} (preset {pb.name})",
                    "hardware",
                    workload=(("hardware", ((k, float(pb.hardware[k])),)),),
                )
            )
    if pa.mapping != pb.mapping:
        out.append(
            Change(f"mapping rule: {pa.mapping} → {pb.mapping}", "mapping", workload=(("mapping_rule", pb.mapping),))
        )
    if pa.engine != pb.engine and isinstance(pb.engine, dict):
        out.append(
            Change(
                f"engine: {pa.engine} → {pb.engine}", "engine", workload=(("engine", tuple(sorted(pb.engine.items()))),)
            )
        )
    return out


def _apply(point: Point, ch: Change) -> Point:
    wl = dict(point.workload)
    extra = dict(ch.workload)
    if "mapping_rule" in extra:
        if extra.pop("mapping_rule") == "dp":
            wl["mapping"] = f"dp{workload(point)['chips']}"
    for k, v in extra.items():
        if k in ("assume", "hardware") and k in wl:
            v = tuple(sorted({**dict(wl[k]), **dict(v)}.items()))
        wl[k] = v
    return Point(tuple(sorted({**dict(point.spec), **dict(ch.spec)}.items())), tuple(sorted(wl.items())))


@dataclass
class Comparison:
    """One entry per workload: ``{"workload", "a", "b" (rows), "ratio": {figure: B/A}, "changes":
    [{what, kind, factor: {figure}}] sorted by |ln factor| of tokens/s, "drives", "interaction"}``."""

    a: str
    b: str
    entries: list[dict]
    only: list[str]

    def to_json(self) -> dict:
        return {
            **attributes(self, "a", "b"),
            "workloads": self.entries,
            "not_moved": self.only,
            "method": "each change moves one assumption from A's value to B's, the rest A's; factor = "
            "figure with the change / figure of A; interaction = ratio / product of the factors",
        }


def _ratio(b, a):
    return b / a if a and b is not None and a > 0 else None


def compare(
    a: Target,
    b: Target,
    workloads: list[Point],
    *,
    preset_a: str | None = None,
    preset_b: str | None = None,
    jobs: int | None = None,
    cache: Cache | None = None,
    progress=None,
) -> Comparison:
    """Project ``workloads`` on ``a`` and ``b`` and attribute each ratio (module docstring).

    Raises:
        KnobError: no workload, a generation that does not load, an unknown preset.
    """
    from perfonto.emulator.presets import PresetError

    if not workloads:
        raise KnobError("no workload to compare")
    ga, gb = base_generation(a), base_generation(b)
    try:
        changes, only = spec_changes(ga, gb)
        changes += preset_changes(ga, preset_a, gb, preset_b)
    except PresetError as exc:
        raise KnobError(str(exc)) from None

    def with_preset(p: Point, preset):
        return p.with_values(preset=preset) if preset else p

    pa = [with_preset(w, preset_a) for w in workloads]
    pb = [with_preset(w, preset_b) for w in workloads]
    moved = [_apply(p, ch) for p in pa for ch in changes]
    rows_a = run_points(a, pa + moved, jobs=jobs, cache=cache, progress=progress)
    rows_b = run_points(b, pb, jobs=jobs, cache=cache)
    entries = []
    for i, w in enumerate(workloads):
        ra, rb = rows_a[i], rows_b[i]
        ratio = {f: _ratio(rb.get(f), ra.get(f)) for f in FIGURES}
        chs = []
        for j, ch in enumerate(changes):
            r = rows_a[len(workloads) + i * len(changes) + j]
            chs.append(
                {
                    "what": ch.what,
                    "kind": ch.kind,
                    "factor": {f: _ratio(r.get(f), ra.get(f)) for f in FIGURES},
                    "bottleneck": r.get("bottleneck"),
                    "error": r.get("error"),
                }
            )
        chs.sort(key=lambda c: -abs(math.log(c["factor"][RANK_BY] or 1.0)))
        prod = math.prod(c["factor"][RANK_BY] or 1.0 for c in chs)
        t = ratio[RANK_BY]
        entries.append(
            {
                "workload": dict(w.workload),
                "a": ra,
                "b": rb,
                "ratio": ratio,
                "changes": chs,
                "drives": chs[0]["what"] if chs and t is not None else None,
                "interaction": t / prod if t is not None and prod > 0 else None,
            }
        )
    return Comparison(ga.name, gb.name, entries, only)


__all__ = ["RANK_BY", "Change", "Comparison", "compare", "preset_changes", "spec_changes"]
