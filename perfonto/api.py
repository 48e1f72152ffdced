"""The public Python API: load a catalog, evaluate it over any capture, emulate a workload.

    >>> import perfonto
    >>> cat = perfonto.load_catalog()                       # the shipped Sohu catalog
    >>> emu = perfonto.emulate(model="llama-3.1-8b", chips=1, duration=0.05)
    >>> res = perfonto.evaluate(cat, emu.path)              # a run folder, a dump, a table or a frame
    >>> res.value("hbm.bandwidth"), res.unit("hbm.bandwidth")
    >>> res.window.to_pandas()                              # one row per window and chip

Everything here is a thin layer over the layers' public functions (``metrics.catalog``,
``analysis.capture``, ``emulator.run``); the CLI uses the same calls.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

import perfonto
from perfonto.analysis.capture import Report, analyse_capture, capture_of
from perfonto.metrics import catalog as _catalog
from perfonto.metrics.catalog import UnknownMetric as UnknownMetric  # re-exported (perfonto.UnknownMetric)
from perfonto.metrics.windows import DumpError as DumpError  # re-exported (perfonto.DumpError)
from perfonto.ontology.diagnostics import CatalogError, Diagnostic
from perfonto.ontology.errors import PerfontoError

Error = PerfontoError  # perfonto.Error: the base of every error perfonto raises for bad input

# the package's public names (it lists them, so that ``import perfonto`` need not import this module)
__all__ = [name for name in perfonto.__all__ if name != "__version__"]


class Catalog:
    """A compiled catalog: one generation's signals and the metrics derived from them.

    ``diagnostics`` holds every error and warning (file:line:col, hint); ``ok`` is True when there
    is no error. ``metrics``: name → compiled metric (``unit_text``, ``formula``, ``description``,
    ``axes``, ``bounds``, ``source`` …), window and record metrics; ``signals``: name → resolved
    signal (``kind``, ``unit_text``, ``width``, ``axes`` …); ``unavailable``: metric → why it has
    no value on this generation."""

    def __init__(self, inner: _catalog.Catalog, path: str | Path | None, library: bool = True):
        self._inner = inner
        self.path = None if path is None else Path(path)
        self._library = library
        self._evaluator = None

    def sized_for(self, capture) -> "Catalog":
        """This catalog compiled for the instances ``capture`` holds, when its generation has instance
        axes sized by the data (``instances: {cpu: from_data}``); else itself.

        Raises:
            DumpError: the capture holds no instance of such an axis (naming the file).
        """
        from perfonto.analysis.capture import capture_instances
        from perfonto.ontology.derive import from_data_axes

        gen = self.generation
        if gen is None or not from_data_axes(gen):
            return self
        sized = capture_instances(gen, capture)
        inner = _catalog.load_catalog(self.path, gen.name, library=self._library, instances=sized)
        return Catalog(inner, self.path, self._library)

    @property
    def generation(self):
        return self._inner.generation

    @property
    def graph(self):
        """The compiled ``MetricGraph`` (None when the ontology itself failed to load)."""
        return self._inner.graph

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return list(self._inner.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return self._inner.errors

    @property
    def notes(self) -> list[str]:
        return list(self._inner.notes)

    @property
    def ok(self) -> bool:
        return not self.errors and self.graph is not None

    @property
    def metrics(self) -> dict:
        return dict(self.graph.all_metrics) if self.graph is not None else {}

    @property
    def signals(self) -> dict:
        return dict(self.generation.signals) if self.generation is not None else {}

    @property
    def unavailable(self) -> dict[str, str]:
        return dict(self.graph.unavailable) if self.graph is not None else {}

    @property
    def content_hash(self) -> str:
        return self.graph.content_hash if self.graph is not None else ""

    def raise_for_errors(self) -> "Catalog":
        """``self``; raises ``CatalogError`` (carrying every diagnostic) when the catalog has errors."""
        if not self.ok:
            raise CatalogError(self.diagnostics)
        return self

    def explain(self, name: str) -> str:
        """What ``name`` is — a metric (formula, unit step by step, dependency tree, availability,
        source), a signal, a packed field, a record field or a spec constant — as text.

        Raises:
            UnknownMetric: ``name`` is none of these (the message has a did-you-mean); a ``KeyError`` too.
        """
        from perfonto.metrics.explain import explain, explain_input
        from perfonto.ontology.diagnostics import did_you_mean

        self.raise_for_errors()
        if name in self.graph.declarations:
            return explain(self.graph, name, self.path)
        text = explain_input(self.generation, name)
        if text is None:
            known = list(self.graph.declarations) + list(self.generation.signals) + list(self.generation.spec)
            raise UnknownMetric(
                f"no metric, signal or spec constant named `{name}`; "
                f"{did_you_mean(name, known) or 'see perfonto check'}"
            )
        return text

    def evaluator(self):
        """The generated evaluator module of the whole catalog, from perfonto's cache as the CLI has it
        (``codegen.evaluator_cache``: its numba kernel compiled once per catalog and machine, tens of
        seconds, then loaded by every later process; compiled in each process with ``PERFONTO_NO_CACHE=1``,
        and NumPy alone without numba). Loaded once per ``Catalog``."""
        from perfonto.codegen.evaluator_cache import evaluator

        if self._evaluator is None:
            self._evaluator = evaluator(self.raise_for_errors().graph)[0]
        return self._evaluator

    def __repr__(self) -> str:
        g = self.generation.name if self.generation else "?"
        window, request = (len(self.graph.metrics), len(self.graph.record_metrics)) if self.graph else (0, 0)
        return (
            f"<perfonto.Catalog {g}: {len(self.metrics)} metrics ({window} window, {request} request-level), "
            f"{len(self.signals)} signals, {len(self.errors)} error(s)>"
        )


def load_catalog(
    path: str | Path | None = None, generation: str | None = None, *, library: bool = True, raise_on_error: bool = False
) -> Catalog:
    """Load and compile a catalog: the shipped one (``path=None``), or a folder of ontology ``*.yaml``
    and metric ``*.metrics`` files. ``generation``: default sohu, or the folder's generation.
    ``library``: a folder whose generation extends a shipped one, or that has no YAML (the shipped
    generation), also gets the shipped metric library.

    Raises:
        CatalogError: with ``raise_on_error``, when there is any error (all diagnostics attached).
    """
    cat = Catalog(_catalog.load_catalog(path, generation, library=library), path, library)
    return cat.raise_for_errors() if raise_on_error else cat


def _as_source(counters):
    """A path, folder or glob as text; a pandas or Polars frame as an Arrow table."""
    if isinstance(counters, (str, Path, pa.Table)):
        return counters
    if hasattr(counters, "to_arrow"):  # polars.DataFrame
        return counters.to_arrow()
    if type(counters).__module__.split(".")[0] == "pandas":
        return pa.Table.from_pandas(counters, preserve_index=False)
    raise TypeError(
        "counters must be a path, a folder, a glob, a pyarrow Table or a pandas/Polars frame, not "
        f"{type(counters).__name__}"
    )


def evaluate(
    catalog: Catalog,
    counters,
    *,
    requests=None,
    trace=None,
    sync=None,
    metrics: list[str] | None = None,
    timestamp_unit: str | None = None,
    sample_period: float | None = None,
) -> "Result":
    """Evaluate ``catalog`` over a capture.

    ``counters``: a counter dump in the collector format — a file, a folder or a glob (Parquet,
    Arrow IPC, CSV; wide or long layout), a ``pyarrow.Table``, or a pandas/Polars frame — or a run
    folder (``counters.parquet`` inside; its ``requests``, ``trace`` and ``sync`` files are used
    unless given). ``metrics``: only these and what they need. ``timestamp_unit`` for a bare
    ``timestamp`` column; ``sample_period`` in seconds, or text with a unit (``"100us"``).

    Raises:
        CatalogError: the catalog has errors.
        DumpError: a part of the capture cannot be read (the message names file and column).
        UnknownMetric: a name in ``metrics`` that is not a metric of the catalog (with a did-you-mean); a
            ``KeyError`` too.
        ValueError: a ``sample_period`` that is not a positive duration (``perfonto.values``).
    """
    from perfonto.values import duration_s

    period = None if sample_period is None else int(round(duration_s(sample_period, "sample_period") * 1e9))
    capture = capture_of(
        _as_source(counters), requests, trace, sync, timestamp_unit=timestamp_unit, sample_period_ns=period
    )
    catalog = catalog.raise_for_errors().sized_for(capture)  # instance axes sized by the data: this capture's
    graph = catalog.raise_for_errors().graph
    if metrics is not None:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)  # an iterator is read once, here
        _catalog.select_metrics(graph, metrics)  # an unknown or unavailable name fails here, before any work
    report = analyse_capture(graph, capture, metrics=metrics, evaluator=catalog.evaluator())
    return Result(report, frozenset(graph.all_metrics) - set(report.evaluated.all_metrics))


class Result:
    """What a capture says. ``window``, ``per_chip`` and ``server`` are Arrow tables (one row per
    window and chip; per chip over the run; one row for the server), a column per metric (null where
    a value cannot be computed; per-instance metrics as fixed-size lists); ``to_pandas(level)`` and
    ``to_polars(level)`` convert them. ``null_reasons``: metric → {reason: windows}; ``bounds``: a
    table of every window value outside its metric's declared bounds; ``unavailable``: metric →
    why it has no value; ``report``: the full ``analysis.capture.Report`` (``to_json()``)."""

    def __init__(self, report: Report, left_out: frozenset[str] = frozenset()):
        self.report = report
        self.left_out = left_out  # the catalog's metrics that ``evaluate(metrics=[...])`` did not ask for

    @property
    def metrics(self) -> dict:
        return dict(self.report.evaluated.metrics)

    @property
    def unavailable(self) -> dict[str, str]:
        return dict(self.report.unavailable)

    @property
    def null_reasons(self) -> dict[str, dict[str, int]]:
        return dict(self.report.evaluation.nulls)

    @property
    def records(self) -> dict:
        return dict(self.report.records or {})

    def unit(self, name: str) -> str:
        """The unit of metric ``name`` as text; raises ``UnknownMetric`` (a ``KeyError``, with a
        did-you-mean) for another name."""
        m = self.report.evaluated.all_metrics.get(name)
        if m is None:
            from perfonto.ontology.diagnostics import did_you_mean

            known = list(self.report.evaluated.all_metrics)
            raise UnknownMetric(
                f"no metric `{name}` in this result; {did_you_mean(name, known) or 'see Result.metrics'}"
            )
        return m.unit_text

    def value(self, name: str):
        """The server-level value of a window metric (a float, a list for per-instance metrics, None
        for null) or a run-level record metric; raises ``UnknownMetric`` (a ``KeyError``) for a metric it
        does not hold."""
        ev = self.report.evaluation
        if name in ev.server:
            v = np.asarray(ev.server[name], dtype=np.float64)
            return _num(v) if v.ndim == 0 else [_num(x) for x in v.ravel()]
        if not isinstance(name, str):
            raise TypeError(f"a metric name is a string, not {type(name).__name__}")
        rec = (self.report.records or {}).get(name)
        if rec is not None and np.ndim(rec) == 0:
            return _num(rec)
        if rec is not None:
            raise UnknownMetric(
                f"`{name}` has a value per record ({np.size(rec)} of them), not one for the run: read "
                f"Result.records[{name!r}], or a reduction of it such as `{name}_p50` where the catalog has one"
            )
        why = self.report.unavailable.get(name)
        if why:
            raise UnknownMetric(f"`{name}` is unavailable: {why}")
        if name in self.left_out:
            raise UnknownMetric(
                f"`{name}` was not asked for: evaluate(..., metrics=[...]) left it out; add it to that list"
            )
        from perfonto.ontology.diagnostics import did_you_mean

        known = list(self.report.evaluated.all_metrics) + list(self.report.unavailable)
        raise UnknownMetric(f"no metric `{name}` in this result; {did_you_mean(name, known) or 'see Result.metrics'}")

    @cached_property
    def window(self) -> pa.Table:
        from perfonto.analysis.evaluate import metrics_table

        return metrics_table(self.report.evaluation, self.report.evaluated)

    @cached_property
    def per_chip(self) -> pa.Table:
        return self._level(self.report.evaluation.per_chip, per_chip=True)

    @cached_property
    def server(self) -> pa.Table:
        return self._level({k: np.asarray(v)[None] for k, v in self.report.evaluation.server.items()}, per_chip=False)

    def _level(self, values: dict, per_chip: bool) -> pa.Table:
        ev = self.report.evaluation
        cols = {}
        if per_chip:
            if ev.hosts is not None:
                cols["host"] = pa.array(list(ev.hosts), pa.string())
            cols["chip"] = pa.array(ev.chips.astype(np.int64))
        for name, m in self.report.evaluated.metrics.items():
            v = np.asarray(values[name], dtype=np.float64)
            flat = v.reshape(v.shape[0], -1)
            arr = pa.array(flat.reshape(-1), mask=np.isnan(flat.reshape(-1)))
            cols[name] = pa.FixedSizeListArray.from_arrays(arr, flat.shape[1]) if m.axes else arr
        return pa.table(cols)

    @cached_property
    def bounds(self) -> pa.Table:
        """Every window value outside its metric's bounds: metric, chip, window, value, low, high."""
        ev = self.report.evaluation
        rows: dict[str, list] = {"metric": [], "chip": [], "window": [], "value": [], "low": [], "high": []}
        for name, m in self.report.evaluated.metrics.items():
            if not m.bounds:
                continue
            lo, hi = m.bounds
            v = ev.window[name].reshape(ev.window[name].shape[0], ev.window[name].shape[1], -1)
            tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
            with np.errstate(invalid="ignore"):
                bad = ((v < lo - tol) | (v > hi + tol)).any(axis=2)
            for wi, ci in zip(*np.nonzero(bad)):
                rows["metric"].append(name)
                rows["chip"].append(int(ev.chips[ci]))
                rows["window"].append(int(wi))
                rows["value"].append(float(np.nanmax(v[wi, ci])))
                rows["low"].append(lo)
                rows["high"].append(hi)
        return pa.table(
            rows,
            schema=pa.schema(
                [
                    ("metric", pa.string()),
                    ("chip", pa.int64()),
                    ("window", pa.int64()),
                    ("value", pa.float64()),
                    ("low", pa.float64()),
                    ("high", pa.float64()),
                ]
            ),
        )

    def table(self, level: str = "window") -> pa.Table:
        """``window``, ``per_chip``, ``server`` or ``bounds`` as an Arrow table; raises ``ValueError`` otherwise."""
        if level not in ("window", "per_chip", "server", "bounds"):
            raise ValueError(f"level must be window, per_chip, server or bounds, not {level!r}")
        return getattr(self, level)

    def to_pandas(self, level: str = "window"):
        """The level as a pandas DataFrame (needs pandas)."""
        return self.table(level).to_pandas()

    def to_polars(self, level: str = "window"):
        """The level as a Polars DataFrame (needs polars)."""
        import polars as pl

        return pl.from_arrow(self.table(level))

    def to_json(self) -> dict:
        return self.report.to_json()

    def __repr__(self) -> str:
        W, C = self.report.evaluation.windows.interval.shape
        return f"<perfonto.Result {len(self.report.evaluated.metrics)} metrics over {W} windows x {C} chips>"


@dataclass
class Emulation:
    """An emulated capture: ``path`` (the run folder), the files in it, and the ground truth."""

    path: Path
    counters: Path
    requests: Path
    trace: Path
    sync: Path
    ground_truth: dict


def emulate(
    generation: str = "sohu",
    *,
    model: str = "llama3-70b",
    chips: int = 8,
    duration: float = 1.0,
    sample_period: float = 1e-3,
    isl: int = 2048,
    osl: int = 128,
    seed: int = 0,
    warmup_steps: int = 400,
    out: str | Path | None = None,
    catalog: str | Path | None = None,
    **knobs,
) -> Emulation:
    """Emulate ``model`` served on ``chips`` chips of ``generation`` for ``duration`` seconds and
    write the capture (counters, request records, trace, sync reads, ground truth) into ``out`` (a new
    temporary folder when None; it is left for the caller). ``catalog``: a folder whose generation
    (with its emulator bindings) is emulated instead. ``knobs``: ``emulator.run``'s other arguments
    (``slow_chip``, ``throttled_link``, ``router_skew``, ``rate``, ``preset`` …).

    Raises:
        CatalogError: the generation does not load.
        ValueError: a workload the emulator cannot run (its message says why).
    """
    from perfonto import emulator

    cat = _catalog.load_catalog(catalog, generation)
    if cat.generation is None:
        raise CatalogError(cat.diagnostics)
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="perfonto-emulate-"))
    # the folders this call makes (``out`` and any missing parents) are removed again if the run is refused
    made = [folder] if out is None else [d for d in (folder, *folder.parents) if not d.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        res = emulator.run(
            cat.generation,
            model=model,
            chips=chips,
            duration_s=duration,
            sample_period_s=sample_period,
            isl=isl,
            osl=osl,
            seed=seed,
            warmup_steps=warmup_steps,
            out_dir=folder,
            **knobs,
        )
    except BaseException:
        for d in made:  # innermost first; only empty folders of its own, never the caller's files
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        raise
    # emulator.run writes every side output (the fields are optional for results made elsewhere)
    assert res.requests_path is not None and res.trace_path is not None and res.sync_path is not None
    return Emulation(
        folder,
        Path(res.counters_path),
        Path(res.requests_path),
        Path(res.trace_path),
        Path(res.sync_path),
        res.ground_truth,
    )


def _num(v) -> float | None:
    f = float(v)
    return f if np.isfinite(f) else None
