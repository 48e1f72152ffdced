"""Execution presets (``emulator/data/presets.yaml``): named sets of assumptions per hardware family.

``resolve(gen, name)`` gives a ``Preset``: the ``Assumptions`` (fitted or not, plus the preset's
own), hardware overrides, how ``--chips N`` maps when no mapping is given, the engine settings, and
the assumptions in words. A generation belongs to the family of the first name of its lineage
(itself first) that a family lists, so a generation that extends ``sohu`` gets Sohu's presets.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml
from perfonto.ontology import Generation, load_generation

from .assumptions import Assumptions, fitted_assumptions
from .hardware import Hardware
from .models import ModelShape
from .parallel import Mapping
from perfonto.ontology.errors import PerfontoError

DATA = Path(__file__).parent / "data"


class PresetError(PerfontoError, ValueError):
    """Unknown preset or family, or a malformed preset file."""


@dataclass(frozen=True)
class Preset:
    """One preset of a family (see ``emulator/data/presets.yaml``)."""

    family: str
    name: str
    description: str
    assumptions: Assumptions
    hardware: dict
    mapping: str
    engine: object  # "trtllm" or a dict
    model_named: tuple[str, ...]
    engine_named: tuple[tuple[str, frozenset], ...] = ()  # (text, the fields a profile replaces it by; empty: any)

    @property
    def named(self) -> tuple[str, ...]:
        """Every assumption of the preset in words: the execution model's, then the engine's; the
        layout (``{layout}``) as the preset's mapping rule, for any chip count (``stated`` with a mapping
        says the run's own)."""
        return self.stated()

    def stated(self, profile=None, mapping: Mapping | None = None) -> tuple[str, ...]:
        """The preset's assumptions in words, with the engine's (kernel constants, scheduler) replaced by
        ``profile``'s (an ``engine_profiles.EngineProfile``: its ``named``) when one is given, so that a run
        with ``--engine-profile`` never states the preset's engine beside the profile's; a statement kept
        unless named fields are set stays where the profile sets none of them (its constant still applies).
        ``{layout}`` in a statement is ``mapping`` in words (``layout_words``: one chip, TP, EP, PP, DP as
        run), or the preset's mapping rule when no mapping is given."""
        model = tuple(t.replace("{layout}", self._layout(mapping)) for t in self.model_named)
        if profile is None:
            return model + tuple(t for t, _ in self.engine_named)
        sets = set(profile.kernels)
        kept = tuple(t for t, unless in self.engine_named if unless and not unless & sets)
        return model + kept + tuple(profile.named)

    def _layout(self, mapping: Mapping | None) -> str:
        overlapped = bool(self.assumptions.overlap_collectives)
        if mapping is not None:
            return layout_words(mapping, overlapped)
        if self.mapping == "dp":
            return "each chip a data-parallel replica serving its own requests: no chip-to-chip traffic"
        return (
            "tensor parallel over the chips (MoE models: data-parallel attention, routed experts expert-parallel): "
            f"collectives {_overlap(overlapped)}"
        )

    def apply(self, hw: Hardware) -> Hardware:
        """``hw`` with the preset's hardware overrides."""
        if not self.hardware:
            return hw
        bad = sorted(set(self.hardware) - {f.name for f in dataclasses.fields(hw)})
        if bad:
            raise PresetError(f"preset {self.family}/{self.name}: unknown hardware field(s) {', '.join(bad)}")
        values = {}
        for k, v in self.hardware.items():
            try:
                values[k] = float(v)  # float("1e15") too
            except (TypeError, ValueError):
                values[k] = math.nan
            if not (math.isfinite(values[k]) and values[k] > 0):
                raise PresetError(
                    f"preset {self.family}/{self.name}: hardware {k} = {v!r}; it must be a finite number > 0"
                )
        return dataclasses.replace(hw, **values)

    def mapping_for(self, m: ModelShape, chips: int) -> Mapping:
        """Mapping of ``chips`` chips when the caller gives none."""
        if self.mapping == "dp":
            return Mapping(tp=1, dp=chips)
        return Mapping.default(m, chips)


def _overlap(overlapped: bool) -> str:
    return "overlapped with compute" if overlapped else "not overlapped with compute"


def layout_words(mp: Mapping, overlapped: bool = False) -> str:
    """``mp`` in words, with its chip-to-chip traffic (``overlapped``: whether collectives overlap
    compute): "the whole model on one chip (TP1): no chip-to-chip traffic", "tensor parallel over the 8
    chips (TP8): ring all-reduces not overlapped with compute", "8 data-parallel replicas, each chip
    serving its own requests: no chip-to-chip traffic", and their combinations."""
    if mp.chips == 1:
        return "the whole model on one chip (TP1): no chip-to-chip traffic"
    parts = []
    the = "the " if mp.tp == mp.chips else ""
    if mp.tp > 1 and mp.attn_dp:
        parts.append(
            f"data-parallel attention on {the}{mp.tp} chips, the routed experts expert-parallel over them "
            f"(EP{mp.ep}): all-to-all dispatch and combine {_overlap(overlapped)}"
        )
    elif mp.tp > 1:
        ep = f", experts EP{mp.ep}" if mp.ep > 1 else ""
        parts.append(
            f"tensor parallel over {the}{mp.tp} chips (TP{mp.tp}{ep}): ring all-reduces {_overlap(overlapped)}"
        )
    if mp.pp > 1:
        parts.append(f"{mp.pp} pipeline stages (PP{mp.pp}): activations sent from stage to stage")
    if mp.dp > 1:
        alone = mp.tp * mp.pp == 1
        parts.append(
            f"{mp.dp} data-parallel replicas"
            + (
                ", each chip serving its own requests: no chip-to-chip traffic"
                if alone
                else " serving their own requests"
            )
        )
    return "; ".join(parts)


@lru_cache(maxsize=None)
def _doc(path: str | None = None) -> dict:
    p = Path(path) if path else DATA / "presets.yaml"
    return yaml.safe_load(p.read_text(encoding="utf-8"))


@lru_cache(maxsize=16)
def generation(name: str) -> Generation:
    """A generation by name (shipped catalog) or path, loaded once per process.

    Raises:
        ValueError: it does not load (the loader's messages).
    """
    loaded, diags = load_generation(name)
    if loaded is None:
        raise ValueError("; ".join(str(d.message) for d in diags))
    return loaded


def family_of(gen: Generation | str) -> str:
    """Family of ``gen`` (a generation or a generation name): the first name of its lineage, itself
    first, that a family lists; ``gpu`` when none does."""
    fams = _doc()["families"]
    if isinstance(gen, str):
        try:
            gen = generation(gen)
        except ValueError:
            return "gpu"
    names = [gen.name, *reversed(tuple(gen.lineage))]
    for n in names:
        for fam, d in fams.items():
            if n in d["generations"]:
                return fam
    return "gpu"


def _name(gen: Generation | str) -> str:
    return gen if isinstance(gen, str) else gen.name


def family_claim(gen: Generation | str) -> dict | None:
    """The public performance claim recorded for ``gen``'s family (``claim:`` in presets.yaml), when
    ``gen`` is one the family lists by name; None otherwise."""
    d = _doc()["families"][family_of(gen)]
    return d.get("claim") if _name(gen) in d["generations"] else None


def preset_names(gen: Generation | str) -> list[str]:
    """Presets that apply to ``gen`` (its family's, less those ``only`` for other generations), default first."""
    d = _doc()["families"][family_of(gen)]
    names = [n for n, p in d["presets"].items() if _name(gen) in p.get("only", [_name(gen)])]
    names.remove(d["default"])
    return [d["default"], *names]


def resolve(gen: Generation | str, name: str | None = None) -> Preset:
    """The preset ``name`` (None: the family's default) of ``gen``'s family.

    Raises:
        PresetError: unknown preset (the message lists the family's presets).
    """
    fam = family_of(gen)
    d = _doc()["families"][fam]
    name = name or d["default"]
    if name not in preset_names(gen):
        raise PresetError(
            f"no preset {name!r} for {_name(gen)} ({fam} family); presets: {', '.join(preset_names(gen))}"
        )
    p = d["presets"][name]
    base = fitted_assumptions() if p.get("fitted") else Assumptions()
    try:
        a = base.replace(**p.get("assumptions", {}))
    except ValueError as exc:
        raise PresetError(f"preset {fam}/{name}: {exc}") from None
    preset = Preset(
        fam,
        name,
        str(p.get("description", "")),
        a,
        dict(p.get("hardware", {}) or {}),
        str(p.get("mapping", "default")),
        p.get("engine", "trtllm"),
        tuple(p.get("named", ())),
        tuple(_engine_statement(fam, name, e) for e in p.get("engine_named", ())),
    )
    if any("{" in t for t in preset.model_named):
        preset = dataclasses.replace(preset, model_named=_with_figures(preset, gen))
    return preset


def _with_figures(preset: Preset, gen: Generation | str) -> tuple[str, ...]:
    """The preset's statements with ``{peak_fp8}`` (PFLOP/s), ``{hbm_bw}`` and ``{c2c_bw}`` (TB/s),
    ``{hbm_capacity}`` (GB) and ``{provenance}`` (how the catalog holds them: "assumed, except the 144 GB
    HBM claimed") filled in from ``gen``'s catalog with the preset's hardware overrides: a preset shared
    by a family's generations states each one's own figures (caelius's, not sohu's)."""
    from .hardware import hardware_from_generation

    g = gen if isinstance(gen, Generation) else generation(gen)
    hw = preset.apply(hardware_from_generation(g))
    figures = {
        "peak_fp8": f"{hw.peak_fp8 / 1e15:g}",
        "hbm_bw": f"{hw.hbm_bw / 1e12:g}",
        "c2c_bw": f"{hw.c2c_bw / 1e12:g}",
        "hbm_capacity": f"{hw.hbm_capacity / 1e9:g}",
        "layout": "{layout}",  # the run's mapping: filled by Preset.stated
    }
    labels = {
        "spec.mxu.peak_flops_fp8": "the FP8 peak",
        "spec.hbm.peak_bandwidth": "the HBM bandwidth",
        "spec.hbm.capacity": f"the {figures['hbm_capacity']} GB HBM",
        "spec.c2c.peak_bandwidth": "the chip-to-chip bandwidth",
    }
    said = {k: str(getattr(g.spec[k], "provenance", "")) for k in labels if k in g.spec and k not in preset.hardware}
    most = max(set(said.values()), key=list(said.values()).count) if said else "stated"
    others = [f"{labels[k]} {v}" for k, v in said.items() if v != most]
    figures["provenance"] = most + (f", except {' and '.join(others)}" if others else "")
    try:
        return tuple(t.format(**figures) for t in preset.model_named)
    except (KeyError, IndexError, ValueError) as exc:
        raise PresetError(
            f"preset {preset.family}/{preset.name}: a statement names an unknown figure ({exc}); "
            f"the figures are {', '.join('{' + k + '}' for k in figures)}"
        ) from None


def _engine_statement(fam: str, name: str, e) -> tuple[str, frozenset]:
    """An ``engine_named`` entry as (text, fields): a plain text (any profile replaces it) or
    ``{text, kept_unless: [Assumptions fields]}``.

    Raises:
        PresetError: another shape, or a field ``Assumptions`` does not have."""
    if isinstance(e, str):
        return e, frozenset()
    fields = {f.name for f in dataclasses.fields(Assumptions)}
    if isinstance(e, dict) and isinstance(e.get("text"), str) and set(e) <= {"text", "kept_unless"}:
        unless = frozenset(str(k) for k in (e.get("kept_unless") or ()))
        if unless <= fields:
            return e["text"], unless
    raise PresetError(
        f"preset {fam}/{name}: an engine_named entry is a text or {{text, kept_unless: [Assumptions fields]}} "
        f"(got {e!r})"
    )
