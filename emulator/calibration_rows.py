"""The calibration rows: public throughput and latency figures, each with its citation.

``load_rows`` reads the calibration file (``emulator/data/calibration.yaml``: TensorRT-LLM's perf-overview
rows, the ones ``perfonto calibrate`` fits); ``load_sources`` the other cited sources
(``emulator/data/calibration_sources.yaml``: each source's citation, engine profile and rows, checked and
never in the shipped fit). Every row is checked as it is read — its fields, their types and plausible
ranges, duplicates of one configuration — and a bad one is named with its file and line. A ``Row`` becomes
a projection through ``Row.project``: the row's model, GPU, mapping, lengths and engine sizing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .assumptions import DATA
from .parallel import Mapping
from .project import project
from .run import MAX_CHIPS, MAX_CONCURRENCY, MAX_REQUESTS

__all__ = ["PERF_OVERVIEW", "ROW_FIELDS", "Row", "load_rows", "load_sources"]

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
