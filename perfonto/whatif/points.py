"""One point of a what-if study: a derived generation and a workload, projected (``perfonto project``'s
model, no counters), with the time split of ``emulator.breakdown``; and the cache of such results.

``Target`` names the base generation (a shipped name, or a catalog folder and its generation);
``project_point(target, point)`` builds the generation with the point's spec constants (a derived
``Generation``, provenance ``assumed``: ``ontology.derive.with_spec``), projects the workload and
returns one flat row (``ROW_FIGURES``). A workload the emulator cannot run (a model that does not
fit, a mapping that does not divide) gives a row with ``error`` set and no figures, so one bad
corner does not stop a sweep.

``Cache``: rows by input hash (``point_key``: the perfonto version, a hash of the emulator's and
this package's code and data, the derived generation's fingerprint and the point), one JSON file
per row. A changed generation or catalog changes the fingerprint; a changed perfonto the code hash.
"""

from __future__ import annotations

import dataclasses

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .knobs import KnobError, Point, parse_mapping

#: Figures of a row, beside the point's inputs: steady tokens/s (input + output, the server at full
#: load), the benchmark's and the requests it served (``--requests``, else TensorRT-LLM's count for the
#: point's lengths: 30,000 up to 256 tokens, 3,000 up to 2,500, … — so a sweep over isl or osl can change
#: it, and with it an offline benchmark's TTFT, which is mostly queueing), output tokens/s, latencies (s),
#: MFU and the level-1 shares (fractions), and the share of the time that is the ops' fixed cost (launch,
#: ramp-up, drain: ``emulator.breakdown.time_split``), inside those classes, and the share in collectives whose
#: time the links set (the rest of ``share_interconnect`` is set by their HBM traffic or arithmetic); the share of
#: the run's time in the steady window (``emulator.project.steady_share``: small, the window is no steady state);
#: the requests asked for, and the emulator's step cap (``emulator.project.MAX_STEPS``) where the run was cut
#: there (None otherwise: then every request asked for completed).
ROW_FIGURES = (
    "tokens_per_second",
    "benchmark_tokens_per_second",
    "requests",
    "output_tokens_per_second",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "itl_p50_s",
    "itl_p99_s",
    "mfu",
    "share_compute",
    "share_memory",
    "share_interconnect",
    "share_host",
    "share_idle",
    "bottleneck",
    "fixed_op_share",
    "link_share",
    "steady_share",
    "requests_requested",
    "cut_at_steps",
)
#: The unit of each of ``ROW_FIGURES`` as the what-if JSON gives it (``units`` beside its rows): MFU and the
#: shares are fractions of 1 here, where ``report.json`` and the tables print percent (a new user read 0.09
#: as 0.09 %).
ROW_UNITS = {
    "tokens_per_second": "token/s",
    "benchmark_tokens_per_second": "token/s",
    "requests": "request",
    "output_tokens_per_second": "token/s",
    **{k: "s" for k in ROW_FIGURES if k.endswith("_s")},
    "mfu": "fraction",
    **{k: "fraction" for k in ROW_FIGURES if k.startswith("share_")},
    "fixed_op_share": "fraction",
    "link_share": "fraction",
    "steady_share": "fraction",
    "requests_requested": "request",
    "cut_at_steps": "step",
}
DEFAULTS = {"model": "llama3-70b", "chips": 8, "isl": 2048, "osl": 128, "dtype": "fp8"}


@dataclass(frozen=True)
class Target:
    """The base generation of a study: ``generation`` (a shipped name, or the generation of the
    folder ``catalog``; None there: the folder's own)."""

    generation: str | None = "sohu"
    catalog: str | None = None


@lru_cache(maxsize=16)
def base_generation(target: Target):
    """The resolved base generation of ``target`` (loaded once per process).

    Raises:
        KnobError: it does not load (the loader's first messages).
    """
    from perfonto.ontology.loader import folder_generations, folder_yamls, load_generation, load_generation_files

    shown = target.generation or "sohu"
    if target.catalog is None:
        gen, diags = load_generation(target.generation or "sohu")
    else:
        d = Path(target.catalog)
        yamls = folder_yamls(d)
        if not d.is_dir() or not yamls:
            raise KnobError(f"{d}: not a catalog folder with ontology *.yaml files")
        gen, diags = load_generation_files(yamls, target.generation)  # None: the folder's own
        leaves = [n for n, _ in folder_generations(yamls)]
        shown = target.generation or (leaves[0] if len(leaves) == 1 else None)
    if gen is None:
        msgs = "; ".join(_located(d) for d in diags if d.severity == "error")[:600]
        what = f"generation `{shown}`" if shown else f"the catalog folder {target.catalog}"
        raise KnobError(f"{what} does not load: {msgs}")
    return gen


def _located(d) -> str:
    """A diagnostic as ``file:line:col: message (hint)`` (the loader's place; it said the message alone)."""
    s = d.span
    at = f"{s.file}:{s.line}:{s.col}: " if s.file and s.line else ""  # a place with a line, never a bare name
    return at + d.message + (f" ({d.hint})" if d.hint else "")


def derived_generation(target: Target, point: Point):
    """The base generation with ``point``'s spec constants (``ontology.derive.with_spec``)."""
    from perfonto.ontology.derive import with_spec

    return with_spec(base_generation(target), dict(point.spec))


def fingerprint(gen) -> str:
    """A hash of what the emulator reads from a generation: name, lineage, spec values and units,
    blocks and their instance axes, and the source's content hash."""
    doc = [
        gen.name,
        list(gen.lineage),
        gen.content_hash,
        sorted((k, c.value, c.unit_text) for k, c in gen.spec.items()),
        sorted((k, list(b["axes"]), b["clock"]) for k, b in gen.blocks.items()),
    ]
    return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()[:20]


@lru_cache(maxsize=1)
def code_hash() -> str:
    """A hash of the emulator's code and data and of this package (a changed model invalidates)."""
    import perfonto
    import perfonto.emulator as emu

    h = hashlib.sha256(perfonto.__version__.encode())
    for root in (Path(emu.__file__).parent, Path(__file__).parent):
        for p in sorted([*root.glob("*.py"), *root.glob("data/*.yaml")]):
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:20]


def _a_row(row) -> bool:
    """A projected point's row as ``project_point`` writes it: its workload and every figure, or an error."""
    if not isinstance(row, dict):
        return False
    if isinstance(row.get("error"), str):
        return True
    return all(k in row for k in (*DEFAULTS, *ROW_FIGURES)) and isinstance(row.get("tokens_per_second"), (int, float))


def point_key(target: Target, point: Point, kind: str = "project") -> str:
    """The cache key of a point: sha256 over the code hash, the derived generation's fingerprint, the
    workload and ``kind``."""
    doc = [kind, code_hash(), fingerprint(derived_generation(target, point)), [list(x) for x in point.workload]]
    return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()


class Cache:
    """Rows by key under ``folder`` (``<key[:2]>/<key>.json``); ``folder=None``: no cache."""

    def __init__(self, folder: str | Path | None):
        self.folder = None if folder is None else Path(folder)
        self.hits = 0

    def get(self, key: str) -> dict | None:
        """The row kept under ``key``, or None: none kept, or one that is not a projected point's row (a
        file cut short, edited, or of another shape: it is projected again and written over)."""
        if self.folder is None:
            return None
        p = self.folder / key[:2] / f"{key}.json"
        try:
            row = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not _a_row(row):
            return None
        self.hits += 1
        return row

    def writable(self) -> bool:
        """Whether rows can be kept in the folder (False on a read-only file system, or where the folder's
        path is a file)."""
        if self.folder is None:
            return False
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        return os.access(self.folder, os.W_OK)

    def put(self, key: str, row: dict) -> None:
        if self.folder is None:
            return
        p = self.folder / key[:2] / f"{key}.json"
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_suffix(f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps(row), encoding="utf-8")
            tmp.replace(p)  # atomic: a reader sees the whole row or none
        except OSError:
            pass  # a cache that cannot be written is only slower


def default_cache_dir() -> Path:
    """``whatif`` in perfonto's cache folder (``ontology.cache.root``: ``$PERFONTO_CACHE_DIR``, else the
    user's cache folder, ``~/.cache/perfonto`` on Linux), beside the compiled catalogs."""
    from perfonto.ontology.cache import root

    return root() / "whatif"


def workload(point: Point) -> dict:
    """The point's workload with ``DEFAULTS`` filled in and the chips of its mapping."""
    wl = {**DEFAULTS, **dict(point.workload)}
    if wl.get("mapping") and "chips" not in dict(point.workload):
        m = parse_mapping(str(wl["mapping"]))
        wl["chips"] = m.get("tp", 1) * m.get("pp", 1) * m.get("dp", 1)
    return wl


def _mapping(wl: dict):
    from perfonto.emulator.models import get_model
    from perfonto.emulator.parallel import Mapping

    if not wl.get("mapping"):
        return None
    m = parse_mapping(str(wl["mapping"]))
    shape = get_model(wl["model"])
    tp = m.get("tp", 1)
    attn = bool(m.get("attn_dp", False))
    ep = m.get("ep", tp if shape.is_moe and attn else 1)
    return Mapping(tp=tp, pp=m.get("pp", 1), dp=m.get("dp", 1), ep=ep, attn_dp=attn)


def _engine_assumptions(gen, scenario: dict, wl: dict, draft: int, acc: float):
    """The engine and assumptions of a workload that sets the batch, the engine, varied assumptions
    (``assume``) or an engine profile: the profile's kernels on the preset's assumptions and the varied
    ones on top (None: the preset's); the profile's scheduler, or the preset's sizing, with the batch
    and engine settings given on top."""
    from perfonto.emulator.engine_profiles import profile
    from perfonto.emulator.run import setup
    from perfonto.emulator.serving import engine_for

    prof = profile(wl["engine_profile"]) if wl.get("engine_profile") else None
    assumptions = None
    _, cfg, p = setup(gen, **scenario)
    if wl.get("assume") or prof:
        base = prof.assumptions(p.assumptions) if prof else p.assumptions
        assumptions = base.replace(**dict(wl.get("assume") or {}))
        _, cfg, _ = setup(gen, **scenario, assumptions=assumptions)
    e = dict(wl.get("engine") or ())
    given = {
        "max_batch": wl.get("batch") or e.get("max_batch"),
        "token_budget": e.get("token_budget"),
        "chunked_prefill": e.get("chunked_prefill"),
    }
    isl, osl = int(wl["isl"]), int(wl["osl"])
    if prof is None:
        return engine_for(cfg, p, isl, osl, **given, draft_tokens=draft, acceptance=acc), assumptions
    eng = prof.engine(cfg, isl, osl, draft_tokens=draft, acceptance=acc)
    return dataclasses.replace(eng, **{k: v for k, v in given.items() if v is not None}), assumptions


def project_point(target: Target, point: Point):
    """Project ``point``: ``(row, projection)``; the projection is None when the workload fails (the
    row's ``error`` says why). Row: the point's spec overrides and workload, ``generation``,
    ``preset``, ``mapping`` and ``engine`` as run, and ``ROW_FIGURES``."""
    from perfonto.emulator.breakdown import time_split
    from perfonto.emulator.project import project, steady_share

    gen = derived_generation(target, point)
    wl = workload(point)
    row = {**dict(point.spec), **{k: v for k, v in wl.items()}, "generation": gen.name, "error": None}
    try:
        mapping = _mapping(wl)
        draft, acc = (
            int(wl.get("draft_tokens", 0) or 0),
            float(wl.get("acceptance", 0.7) if wl.get("draft_tokens") else 0.0),
        )
        engine, assumptions = None, None
        hardware = dict(wl["hardware"]) if wl.get("hardware") else None
        # what setup and project both take: the model on its chips, as mapped, with its preset
        scenario = dict(
            model=wl["model"],
            chips=int(wl["chips"]),
            dtype=wl["dtype"],
            kv_dtype=wl.get("kv_dtype"),
            mapping=mapping,
            preset=wl.get("preset"),
            hardware=hardware,
        )
        if wl.get("batch") or wl.get("engine") or wl.get("assume") or wl.get("engine_profile"):
            engine, assumptions = _engine_assumptions(gen, scenario, wl, draft, acc)
        pr = project(
            gen,
            **scenario,
            isl=int(wl["isl"]),
            osl=int(wl["osl"]),
            engine=engine,
            assumptions=assumptions,
            num_requests=wl.get("requests"),
            rate=wl.get("rate"),
            concurrency=wl.get("concurrency"),
            draft_tokens=draft,
            acceptance=acc,
        )
    except (ValueError, KeyError, KnobError) as exc:
        row["error"] = str(exc.args[0]) if exc.args else type(exc).__name__
        return row | {k: None for k in ROW_FIGURES}, None
    f = pr.figures
    lat = f.to_json()
    split = time_split(pr)
    row |= {
        "preset": pr.preset,
        "mapping": pr.mapping.describe(),
        "engine": pr.engine.describe(),
        "tokens_per_second": f.steady_tokens_per_second,
        "benchmark_tokens_per_second": f.tokens_per_second,
        "requests": f.requests,
        "output_tokens_per_second": f.steady_output_tokens_per_second,
        **{k: lat[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "itl_p50_s", "itl_p99_s")},
        "mfu": split["mfu"],
        **{f"share_{k}": v for k, v in split["shares"].items()},
        "bottleneck": split["bottleneck"],
        "fixed_op_share": split["fixed_op_share"],
        "link_share": split["level2"].get("interconnect.link"),
        "steady_share": steady_share(pr),
        "requests_requested": pr.step_cap["requests_requested"] if pr.step_cap else f.requests,
        "cut_at_steps": pr.step_cap["max_steps"] if pr.step_cap else None,
    }
    return row, pr


def evaluate_point(target: Target, point: Point, cache: Cache | None = None) -> dict:
    """``project_point``'s row, from ``cache`` when it holds it (and stored there otherwise)."""
    key = point_key(target, point) if cache is not None and cache.folder is not None else None
    if key is not None and (row := cache.get(key)) is not None:
        return row
    row, _ = project_point(target, point)
    if key is not None:
        cache.put(key, row)
    return row


def check_preset(target: Target, points: list[Point]) -> None:
    """Refuse spec constants that a point's preset overrides (the override would hide the change).

    Raises:
        KnobError: naming the constant, the preset and what to do.
    """
    from perfonto.emulator.hardware import SPEC_FIELDS
    from perfonto.emulator.presets import PresetError, resolve

    gen = base_generation(target)
    seen = set()
    for pt in points:
        preset = workload(pt).get("preset")
        if preset in seen:
            continue
        seen.add(preset)
        try:
            p = resolve(gen, preset)
        except PresetError as exc:
            raise KnobError(str(exc)) from None
        for name, _ in pt.spec:
            if SPEC_FIELDS.get(name) in p.hardware:
                raise KnobError(
                    f"preset `{p.name}` sets {SPEC_FIELDS[name]} itself (presets.yaml), so varying `{name}` "
                    f"would change nothing; use another preset (e.g. --preset conservative)"
                )


__all__ = [
    "Cache",
    "DEFAULTS",
    "ROW_FIGURES",
    "Target",
    "base_generation",
    "check_preset",
    "code_hash",
    "default_cache_dir",
    "derived_generation",
    "evaluate_point",
    "fingerprint",
    "point_key",
    "project_point",
    "workload",
]
