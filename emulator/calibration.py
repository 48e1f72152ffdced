"""Calibration of the efficiency model against public measurements, and its validation.

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

Other cited sources (``emulator/data/calibration_sources.yaml``: an NVIDIA blog's Llama 3.1 405B
offline rows, NIM's closed-loop Llama-3.3-70B rows with TTFT and ITL, the TensorRT-LLM DeepSeek-R1 blog's
max-throughput runs with their stated engine sizing) are never in the shipped fit;
``leave_source_out`` refits on the offline rows of every source but one and predicts the held-out
source's figures — offline rows timed, closed-loop rows replayed (``replay``: ``project`` with the
row's concurrency), TTFT and ITL by AIPerf's definitions (mean TTFT; ITL = mean TPOT).

Error measures: a row's error is ``predicted/measured − 1``; its size ``max(p/m, m/p) − 1``;
``geomean_error = exp(mean |ln(p/m)|) − 1``; ``worst_error`` = the largest size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import yaml

from .assumptions import DATA, FITTED_BOUNDS, Assumptions, load_fitted
from .ops import EmuConfig, stack_work, step_seconds
from .parallel import Mapping
from .project import geomean_error, project
from .run import MAX_CHIPS, MAX_CONCURRENCY, MAX_REQUESTS
from .scheduler import StepBatch

FIT_STEPS = 600  # steps timed per row during the fit
PERF_OVERVIEW = "trtllm-perf-overview"  # the source of calibration.yaml's rows


@dataclass(frozen=True)
class Row:
    """One measurement: ``value`` output tokens/s of ``model`` on ``tp`` × ``gpu`` at ``dtype``."""

    model: str
    gpu: str
    tp: int
    dtype: str
    isl: int
    osl: int
    value: float
    pp: int = 1
    set: str = "shipped"  # shipped (the 16 public rows of ../shared) or perf-overview (further rows of the page)
    cite: str = ""
    source: str = PERF_OVERVIEW  # the cited document (calibration_sources.yaml names the others)
    concurrency: int = 0  # 0: offline (every request queued at once); N: closed loop with N in flight
    ttft_ms: float = 0.0  # mean TTFT the source states (0: none)
    itl_ms: float = 0.0  # mean inter-token latency the source states, AIPerf's definition (0: none)
    max_batch: int = 0  # the source's --max_batch_size per scheduler rank (0: trtllm-bench's sizing)
    token_budget: int = 0  # the source's --max_num_tokens per scheduler rank (0: trtllm-bench's sizing)
    num_requests: int = 0  # the source's request count (0: the perf-overview table's, ``default_requests``)
    kv_dtype: str = ""  # the KV-cache dtype the source states ("": the preset's)
    chunked_prefill: bool = False  # with max_batch: prompts chunked into the token budget (vLLM), else whole

    @property
    def family(self) -> str:
        """The model family (``models.yaml``), e.g. ``llama-3``, ``qwen3``."""
        from .models import get_model

        return get_model(self.model).family

    @property
    def label(self) -> str:
        par = f"TP{self.tp}" + (f"PP{self.pp}" if self.pp > 1 else "")
        load = f" concurrency {self.concurrency}" if self.concurrency else ""
        chunk = ", chunked" if self.chunked_prefill else ""
        eng = f" max batch {self.max_batch}, {self.token_budget} tokens{chunk}" if self.max_batch else ""
        kv = f" KV {self.kv_dtype}" if self.kv_dtype else ""
        return f"{self.model} {self.gpu} {par} {self.dtype}{kv} {self.isl}/{self.osl}{load}{eng}"

    def scenario(self) -> dict:
        """``project``'s keyword arguments for what the source states beyond the model, GPU, mapping and
        lengths: its engine sizing (``engine``: whole prompts per step, as trtllm-bench, or prompts chunked
        into the token budget where the row says ``chunked_prefill``, as vLLM), request count and KV-cache
        dtype (none where the row leaves them to the defaults)."""
        from .serving import Engine

        out: dict = {}
        if self.max_batch:
            out["engine"] = Engine(
                max_batch=self.max_batch, token_budget=self.token_budget, chunked_prefill=self.chunked_prefill
            )
        if self.num_requests:
            out["num_requests"] = self.num_requests
        if self.kv_dtype:
            out["kv_dtype"] = self.kv_dtype
        return out

    def project(self, **kw):
        """``project`` of the row's scenario: its model, GPU, TP × PP mapping (the model's default split),
        lengths, dtype and ``scenario()``, plus ``kw`` (``concurrency``, ``overrides``). The one place a
        row becomes a projection, for ``fit``'s step replay and ``validate``'s figures alike."""
        from .models import get_model

        mp = dataclasses.replace(Mapping.default(get_model(self.model), self.tp), pp=self.pp)
        return project(
            self.gpu,
            model=self.model,
            chips=mp.chips,
            isl=self.isl,
            osl=self.osl,
            dtype=self.dtype,
            mapping=mp,
            **kw,
            **self.scenario(),
        )


def load_rows(path: str | Path | None = None) -> tuple[dict, list[Row]]:
    """The calibration file (``emulator/data/calibration.yaml`` by default): header fields and rows.

    Raises:
        ValueError: the file is not YAML, or a row is malformed (``file:line`` named, ``_rows_of``)."""
    from .project import default_requests, requests_table

    p = Path(path) if path else DATA / "calibration.yaml"
    doc, rows = _rows_of(p, PERF_OVERVIEW, need_rows=True)
    # the file's own request counts per length (a --rows copy's were ignored for the shipped file's)
    table = requests_table(doc.get("num_requests"), str(p))
    rows = [
        dataclasses.replace(r, num_requests=table[(r.isl, r.osl)])
        if not r.num_requests and table.get((r.isl, r.osl), 0) not in (0, default_requests(r.isl, r.osl))
        else r
        for r in rows
    ]
    return {k: v for k, v in doc.items() if k != "rows"}, rows


#: The fields a row may hold (``Row``'s, its ``source`` and the words on what its replay assumes).
ROW_FIELDS = frozenset(f.name for f in dataclasses.fields(Row)) | {"assumed"}
_INT_FIELDS = {"tp": 1, "pp": 1, "isl": 1, "osl": 1, "concurrency": 0, "max_batch": 0, "token_budget": 0}
_INT_FIELDS |= {"num_requests": 0}
#: The fields every row states (a row without its dtype was replayed as FP8, without its TP as TP1).
_REQUIRED = ("model", "gpu", "tp", "dtype", "isl", "osl", "value")
_INT_MOST = {"num_requests": MAX_REQUESTS, "concurrency": MAX_CONCURRENCY, "tp": MAX_CHIPS, "pp": MAX_CHIPS}
#: What a measured figure can be (least, most, what it is): output tokens/s of a group of chips, a mean
#: TTFT (ms, at most a day of queueing), a mean ITL (ms, at most an hour).
_PLAUSIBLE = {
    "value": (1e-3, 1e9, "group's output tokens/s"),
    "ttft_ms": (1e-3, 8.64e7, "mean TTFT in ms"),
    "itl_ms": (1e-3, 3.6e6, "mean ITL in ms"),
}


def _rows_of(
    p: Path, source: str, need_rows: bool = False, check: Callable[[dict, Row], None] | None = None
) -> tuple[dict, list[Row]]:
    """The YAML mapping of ``p`` and its ``rows`` as ``Row``s (``source``: the one a row that names none
    cites), each row's fields known and typed, its model, GPU and dtypes known to the emulator.

    Raises:
        ValueError: ``p:line:col`` and what is wrong where the file does not read as one YAML mapping (not
        UTF-8, a syntax error, a duplicate key: ``ontology.yaml_source.read_yaml``); ``p:line: row N`` and
        what is wrong with the row (an unknown or missing field, a count that is not a whole number ≥ its
        least, a figure that is not a finite number > 0, an unknown model, GPU or dtype, a bad engine
        sizing, or what ``check(doc, row)`` refuses) — checked here, before minutes of replays, not in the
        replay that meets it; no rows where ``need_rows``."""
    from perfonto.ontology.yaml_source import read_yaml

    src = read_yaml(p)
    errors = [d for d in src.diagnostics if d.severity == "error"]
    if errors:
        d = errors[0]
        raise ValueError(f"{d.span}: {d.message}" + (f"; {d.hint}" if d.hint else "; fix the file"))
    doc = src.data
    if not isinstance(doc, dict) or not isinstance(doc.get("rows", []), list):
        raise ValueError(f"{p}: expected a mapping with a list of `rows`")
    if need_rows and not doc.get("rows"):
        raise ValueError(f"{p}: no `rows`: a calibration file lists the measured rows to fit and check")
    out = []
    seen: dict[tuple, str] = {}  # a row's measured configuration → where it was first given
    for i, r in enumerate(doc.get("rows") or ()):
        where = f"{p}:{src.span(('rows', i)).line or '?'}: row {i + 1}"
        try:
            out.append(_checked_row(r, source))
            if check is not None:
                check(doc, out[-1])
        except KeyError as exc:
            why = exc.args[0] if exc.args and " " in str(exc.args[0]) else f"no field {exc}"
            raise ValueError(f"{where}: {why}") from None
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        key = _configuration(out[-1])
        if key in seen:  # counted twice in a fit and in the geomeans, or two values for one measurement
            raise ValueError(
                f"{where}: the same measurement as {seen[key]} (source, model, GPU, mapping, dtypes, lengths and "
                "scenario alike): give it once"
            )
        seen[key] = f"line {src.span(('rows', i)).line or '?'} (row {i + 1})"
    return doc, out


def _configuration(row: Row) -> tuple:
    """What a row measured (every field but its figures and the words on it): two rows alike are one
    measurement given twice."""
    from .models import get_model

    skip = {"value", "ttft_ms", "itl_ms", "cite", "set"}
    key = {f.name: getattr(row, f.name) for f in dataclasses.fields(Row) if f.name not in skip}
    key["model"] = get_model(row.model).name  # an alias is the same model (llama3-70b, llama-3.3-70b)
    return tuple(key.values())


def _checked_row(r, source: str) -> Row:
    """``_row`` of one row after its fields are checked (``_rows_of``)."""

    from .models import get_model
    from .parallel import dtype_bytes
    from .presets import generation

    _check_fields(r)
    for k, least in _INT_FIELDS.items():
        v = r.get(k)
        most = _INT_MOST.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least or (most and v > most)):
            span = f"between {least} and {most:,}" if most else f"≥ {least}"
            raise ValueError(f"`{k}` is a whole number {span} (got {v!r})")
    _check_figures(r)
    row = _row(r, source=source)
    get_model(row.model)
    generation(row.gpu)
    dtype_bytes(row.dtype)
    if row.kv_dtype:
        dtype_bytes(row.kv_dtype)
    if row.tp * row.pp > MAX_CHIPS:
        raise ValueError(f"TP{row.tp} × PP{row.pp} is more than {MAX_CHIPS} chips")
    # the row's projection set up without serving: a mapping that does not split the model, a prompt
    # that never fits the KV cache or the step, refused here rather than in its replay
    row.project(concurrency=row.concurrency or None, check_only=True)
    return row


def _check_figures(r) -> None:
    """A row's figures are finite numbers within what they can be (``_PLAUSIBLE``: value > 0, a latency
    ≥ 0, 0 meaning not stated) and its words are text.

    Raises:
        ValueError: what is wrong, for ``_rows_of`` to prefix with the row's line."""
    import math

    for k, must in (("value", True), ("ttft_ms", False), ("itl_ms", False)):
        v = r.get(k)
        if v is None and not must:
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or v < 0 or (must and v == 0):
            least = "> 0" if must else "≥ 0"
            raise ValueError(f"`{k}` is a finite number {least} (got {v!r}){_yaml_number_hint(v)}")
        lo, hi, what = _PLAUSIBLE[k]
        if v and not lo <= v <= hi:  # 1e300 tok/s pinned every constant at a bound and printed a 300-digit error
            raise ValueError(f"`{k}` is {v:g}: a {what} is between {lo:g} and {hi:g}; check the figure and its unit")
    for k in ("set", "cite", "assumed", "source"):
        if r.get(k) is not None and not isinstance(r[k], str):
            raise ValueError(f"`{k}` is text (got {type(r[k]).__name__} {str(r[k])[:40]})")


def _check_fields(r) -> None:
    """A row is a mapping of known fields (a misspelt one named with a did-you-mean) holding every one of
    ``_REQUIRED``.

    Raises:
        ValueError: what is wrong, for ``_rows_of`` to prefix with the row's line."""
    import difflib

    if not isinstance(r, dict):
        raise ValueError(f"expected a mapping, got {r!r}")
    for k in r:
        if k not in ROW_FIELDS:
            near = difflib.get_close_matches(str(k), sorted(ROW_FIELDS), n=1)
            hint = f" (did you mean `{near[0]}`?)" if near else f"; fields: {', '.join(sorted(ROW_FIELDS))}"
            raise ValueError(f"unknown field `{k}`{hint}")
    missing = [k for k in _REQUIRED if r.get(k) is None]
    if missing:
        raise ValueError(f"no {', '.join(f'`{k}`' for k in missing)}: a row states {', '.join(_REQUIRED)}")


def _yaml_number_hint(v) -> str:
    """A hint for a number YAML read as text: ``1e300`` without a dot or exponent sign is a string to YAML 1.1."""
    if isinstance(v, str):
        try:
            float(v)
        except ValueError:
            return ""
        return "; YAML reads it as text: write the number with a dot and a signed exponent, e.g. 1.0e+3"
    return ""


def _row(r: dict, source: str = PERF_OVERVIEW) -> Row:
    return Row(
        str(r["model"]),
        str(r["gpu"]),
        int(r.get("tp", 1)),
        str(r.get("dtype", "fp8")),
        int(r["isl"]),
        int(r["osl"]),
        float(r["value"]),
        int(r.get("pp", 1)),
        str(r.get("set", "shipped" if source == PERF_OVERVIEW else "other")),
        str(r.get("cite", "")),
        str(r.get("source", source)),
        int(r.get("concurrency", 0)),
        float(r.get("ttft_ms", 0.0)),
        float(r.get("itl_ms", 0.0)),
        *_engine_fields(r),
    )


def _engine_fields(r: dict) -> tuple[int, int, int, str, bool]:
    """A row's ``max_batch``, ``token_budget``, ``num_requests``, ``kv_dtype`` and ``chunked_prefill``
    (0 / "" / False when absent).

    Raises:
        ValueError: one of ``max_batch`` and ``token_budget`` without the other, or a value below 1 (a
        source states the engine's sizing whole, or the row leaves it to trtllm-bench's);
        ``chunked_prefill`` not a boolean, or without the sizing it chunks into."""
    mb, tb, n = (int(r.get(k, 0) or 0) for k in ("max_batch", "token_budget", "num_requests"))
    where = f"{r.get('model')} {r.get('isl')}/{r.get('osl')}"
    if bool(mb) != bool(tb) or min(mb, tb, n) < 0:
        raise ValueError(
            f"{where}: max_batch and token_budget come together, "
            f"each ≥ 1 (got max_batch={mb}, token_budget={tb}, num_requests={n})"
        )
    chunked = r.get("chunked_prefill", False)
    if not isinstance(chunked, bool):
        raise ValueError(f"{where}: chunked_prefill is true or false (got {chunked!r})")
    if chunked and not mb:
        raise ValueError(f"{where}: chunked_prefill needs the max_batch and token_budget its prompts are chunked into")
    return mb, tb, n, str(r.get("kv_dtype", "") or ""), chunked


def _check_sources_key(p: Path) -> None:
    """A sources file's ``sources`` is a mapping, named at its own line (not at the first row's); a file
    without one (a rows file given as --sources) says so. A file that does not read is left to ``_rows_of``.

    Raises:
        ValueError: naming the file (and the key's line) and what to give."""
    from perfonto.ontology.yaml_source import read_yaml

    src = read_yaml(p)
    doc = src.data
    if any(d.severity == "error" for d in src.diagnostics) or not isinstance(doc, dict):
        return
    if "sources" not in doc:
        raise ValueError(
            f"{p}: no `sources`: a sources file lists its cited documents (id: url, title, profile, quote …) "
            "beside its rows; is this a rows file (give it as --rows)?"
        )
    if not isinstance(doc["sources"], dict):
        line = src.span(("sources",)).line or "?"
        raise ValueError(
            f"{p}:{line}: `sources` is a mapping of source id to its citation (url, title, profile, quote …), "
            f"not a {type(doc['sources']).__name__}"
        )


def load_sources(path: str | Path | None = None) -> tuple[dict, list[Row]]:
    """The other cited sources (``emulator/data/calibration_sources.yaml`` by default): ``{id: {title,
    url, engine, quote, ...}}`` and their rows (each naming its source, which must be listed).

    Raises:
        ValueError: a row names a source the file does not list; the file or a row is malformed
        (``_rows_of``).
    """
    from .engine_profiles import load_profiles

    profiles = load_profiles()

    def cited(doc: dict, row: Row) -> None:
        sources = doc.get("sources")
        if not isinstance(sources, dict):
            raise ValueError("the file's `sources` is a mapping of source id to its citation")
        if not row.source:
            raise ValueError("no `source`: name the cited source (a key of `sources`) the row comes from")
        if row.source not in sources:
            raise ValueError(f"source `{row.source}` is not listed under `sources`; listed: {', '.join(sources)}")
        if not isinstance(sources[row.source], dict):
            return  # named with its line below
        prof = sources[row.source].get("profile")
        if prof not in profiles:
            said = f"names engine profile {prof!r}" if prof is not None else "names no engine profile (`profile:`)"
            raise ValueError(
                f"source `{row.source}` {said}; profiles: {', '.join(profiles)} (emulator/data/engine_profiles.yaml)"
            )

    p = Path(path) if path else DATA / "calibration_sources.yaml"
    _check_sources_key(p)
    doc, rows = _rows_of(p, "", check=cited)
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise ValueError(f"{p}: `sources` is a mapping of source id to its citation")
    for sid, entry in sources.items():
        why = None
        if not isinstance(entry, dict):
            why = f"source `{sid}` is a mapping (url, title, profile, quote …), not {entry!r}"
        elif entry.get("profile") not in profiles:
            prof = entry.get("profile")
            said = f"names engine profile {prof!r}" if prof is not None else "names no engine profile (`profile:`)"
            why = f"source `{sid}` {said}; profiles: {', '.join(profiles)} (emulator/data/engine_profiles.yaml)"
        if why:
            from perfonto.ontology.yaml_source import read_yaml

            line = read_yaml(p).span(("sources", sid)).line or "?"
            raise ValueError(f"{p}:{line}: {why}")
    return sources, rows


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
    dense = [p for p in preps if _kind(p.row.model) == "dense"]
    moe = [p for p in preps if _kind(p.row.model) == "moe"]
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


#: Issue 30's targets on the out-of-sample geomean error, by model kind (and for latency rows).
TARGETS = {"dense": 0.15, "moe": 0.30, "ttft_itl": 0.25}


def _kind(model: str) -> str:
    from .models import get_model

    return "moe" if get_model(model).is_moe else "dense"


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

    fam_kind = {r["family"]: _kind(r["model"]) for r in res["rows"]}
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
            rows = [r for r in cal_rows if _kind(r["model"]) == kind]
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


def design_params() -> dict:
    """The fitted constants at their design values (``Assumptions()``): what a refit starts from, and
    what a source is predicted with when no other source has offline rows to fit on."""
    d = Assumptions()
    return {k: float(getattr(d, k)) for k in FITTED_BOUNDS}


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
                    "kind": _kind(row.model),
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
