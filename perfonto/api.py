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

from perfonto.api_emulate import Emulation as Emulation, emulate as emulate  # re-exported (perfonto.emulate)
from perfonto.api_words import in_api_words, reworded

# perfonto.Error: the base of every error perfonto raises for bad input — the same class as PerfontoError, the
# name help() and tracebacks show (the package docstring says so)
Error = PerfontoError

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
        """The resolved generation (``name``, ``signals``, ``spec`` constants, ``records`` …); None when
        the ontology failed to load."""
        return self._inner.generation

    @property
    def graph(self):
        """The compiled ``MetricGraph`` (None when the ontology itself failed to load)."""
        return self._inner.graph

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Every error and warning, in file order: ``Diagnostic`` (``severity``, ``code``, ``message``,
        ``span`` file:line:col, ``hint``; ``render()`` as text)."""
        return list(self._inner.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        """The diagnostics of severity ``error`` (empty for a catalog that compiled)."""
        return self._inner.errors

    @property
    def notes(self) -> list[str]:
        """What loading said that is neither error nor warning (which metric files were compiled …)."""
        return list(self._inner.notes)

    @property
    def ok(self) -> bool:
        """True when the catalog compiled without an error."""
        return not self.errors and self.graph is not None

    @property
    def metrics(self) -> dict:
        """Metric name → compiled metric (``unit_text``, ``formula``, ``description``, ``axes``, ``bounds``,
        ``source``), window and request-level metrics together; empty when the catalog did not compile."""
        return dict(self.graph.all_metrics) if self.graph is not None else {}

    @property
    def signals(self) -> dict:
        """Signal name → resolved signal of the generation (``kind``, ``unit_text``, ``width`` in bits,
        ``axes``)."""
        return dict(self.generation.signals) if self.generation is not None else {}

    @property
    def unavailable(self) -> dict[str, str]:
        """Metric name → why it has no value on this generation (a signal it lacks …)."""
        return dict(self.graph.unavailable) if self.graph is not None else {}

    @property
    def content_hash(self) -> str:
        """A short hex hash of everything compiled (the same files give the same hash); "" without a graph."""
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
            TypeError: ``name`` is not a string.
        """
        from perfonto.metrics.explain import explain, explain_input
        from perfonto.ontology.diagnostics import did_you_mean

        if not isinstance(name, str):
            raise TypeError(
                f"Catalog.explain takes a name as a string (a metric, signal, field or spec constant, e.g. "
                f"'hbm.bandwidth'), not {type(name).__name__}"
            )
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
    and metric ``*.metrics`` files (a ``str`` or ``Path``). ``generation``: default sohu, or the
    folder's generation; a shipped generation is loaded by name with ``load_catalog(generation="h100")``
    (a generation's name given as ``path`` is an error whose hint says so). ``library``: a folder whose
    generation extends a shipped one, or that has no YAML (the shipped generation), also gets the
    shipped metric library; the shipped library's own folder given as ``path`` is compiled once.

    Raises:
        CatalogError: with ``raise_on_error``, when there is any error (all diagnostics attached).
    """
    library = library and not _is_shipped_library(path)  # its files would be compiled twice ("defined twice")
    inner = _generation_as_path(path) or _catalog.load_catalog(path, generation, library=library)
    cat = Catalog(inner, path, library)
    return cat.raise_for_errors() if raise_on_error else cat


def _is_shipped_library(path) -> bool:
    """``path`` is the folder of the shipped metric library (``metrics/library``)."""
    from perfonto.metrics.compiler import library_files

    if path is None or not isinstance(path, (str, Path)):
        return False
    shipped = {f.parent.resolve() for f in library_files()}
    try:
        return Path(path).resolve() in shipped
    except OSError:
        return False


def _generation_as_path(path) -> _catalog.Catalog | None:
    """A catalog holding one error when ``path`` is not a file or folder but a shipped generation's name
    (``load_catalog("h100")``): its hint is ``load_catalog(generation="h100")``; else None."""
    from perfonto.ontology.diagnostics import Span
    from perfonto.ontology.loader import shipped_generations

    if not isinstance(path, str) or path not in shipped_generations() or Path(path).exists():
        return None
    return _catalog.Catalog(
        None,
        None,
        [
            Diagnostic(
                "error",
                "io",
                f"not a folder: `{path}` is the name of a shipped generation, and load_catalog's first "
                "argument is a catalog folder",
                Span(path),
                hint=f'load the shipped generation by name: load_catalog(generation="{path}")',
            )
        ],
    )


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


def _check_catalog(catalog, counters) -> None:
    """Refuse a ``catalog`` that is not a ``Catalog``, saying how to make one.

    Raises:
        TypeError: naming what was given and what to call.
    """
    if isinstance(catalog, Catalog):
        return
    if isinstance(counters, Catalog):
        raise TypeError("evaluate takes the catalog first and the capture second: evaluate(catalog, counters)")
    if isinstance(catalog, (str, Path)):
        raise TypeError(
            f"evaluate's catalog is a perfonto.Catalog, not the path {str(catalog)!r}: load it first, "
            f"cat = perfonto.load_catalog({str(catalog)!r}) (perfonto.load_catalog() for the shipped one), "
            "then perfonto.evaluate(cat, counters)"
        )
    raise TypeError(
        f"evaluate's catalog is a perfonto.Catalog (cat = perfonto.load_catalog(...)), not {type(catalog).__name__}"
    )


def _check_timestamp_unit(unit) -> None:
    """Refuse a ``timestamp_unit`` that is not a time unit a dump's time stamps are written in.

    Raises:
        ValueRuleError: naming the value and the units taken.
    """
    from perfonto.capture.dump import TIME_UNITS
    from perfonto.values import ValueRuleError

    if unit is not None and (not isinstance(unit, str) or unit not in TIME_UNITS):
        raise ValueRuleError(
            f"timestamp_unit: {unit!r} is not a unit of time stamps; give one of {', '.join(TIME_UNITS)} "
            "(the unit of a bare `timestamp` column: timestamp_unit='ns' for nanoseconds)"
        )


#: what ``evaluate``'s side files are: parameter → (what it holds, its file name in a run folder)
SIDE_FILES = {
    "requests": ("request records", "requests.parquet"),
    "trace": ("trace", "trace.parquet"),
    "sync": ("sync reads", "sync.parquet"),
}


def _check_side_sources(**given) -> None:
    """Refuse a side file given as something other than a path (a table or a frame).

    Raises:
        TypeError: naming the parameter, the type given and what it takes.
    """
    for name, value in given.items():
        if value is None or isinstance(value, (str, Path)):
            continue
        what, file = SIDE_FILES[name]
        kind = f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"
        raise TypeError(
            f"{name}= takes the path of a Parquet file of the {what} (a run folder's {file}), not a {kind}; "
            f"write the table to a file first (pyarrow.parquet.write_table(table, {file!r}), or a pandas frame's "
            f"to_parquet({file!r})) and give its path, or give a run folder as counters"
        )


def _check_side_files(capture) -> None:
    """The capture's request records, trace and sync reads, where they are files: each a Parquet file
    with the columns its table has (``analysis.side_files``, the check ``perfonto analyze`` makes).

    Raises:
        DumpError: naming the file, the parameter and the table it should be.
    """
    from perfonto.analysis.side_files import SYNC_COLUMNS, check_parquet
    from perfonto.analysis.spans import REQUIRED

    for name, source, columns in (
        ("requests", capture.requests, ()),
        ("trace", capture.trace, REQUIRED),
        ("sync", capture.sync, SYNC_COLUMNS),
    ):
        if isinstance(source, (str, Path)):
            check_parquet(source, f"{name}=", SIDE_FILES[name][0], columns)


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

    ``catalog``: a ``Catalog`` (``load_catalog(...)``). ``counters``: a counter dump in the collector
    format — a file, a folder or a glob (Parquet, Arrow IPC, CSV; wide or long layout), a
    ``pyarrow.Table``, or a pandas/Polars frame — or a run folder (``counters.parquet`` inside; its
    ``requests``, ``trace`` and ``sync`` files are used unless given). ``requests``, ``trace``, ``sync``:
    paths of Parquet files (request records; the device trace: ``kind``, ``name``, ``clock``, ``chip``,
    ``start_ns``, ``end_ns``; sync reads), checked before anything is evaluated. ``metrics``: only these
    and what they need. ``timestamp_unit`` (``ns``, ``us``, ``ms`` or ``s``) for a bare ``timestamp``
    column; ``sample_period`` in seconds, or text with a unit (``"100us"``).

    Raises:
        TypeError: ``catalog`` is not a ``Catalog`` (a path: load it with ``load_catalog`` first), or
            ``counters``, ``requests``, ``trace`` or ``sync`` is not of a type they take.
        CatalogError: the catalog has errors.
        DumpError: a part of the capture cannot be read (the message names file and column), or a side
            file is missing or not the table it should be (the message names the file and the table).
        UnknownMetric: a name in ``metrics`` that is not a metric of the catalog (with a did-you-mean); a
            ``KeyError`` too.
        ValueError: a ``sample_period`` that is not a positive duration, a ``timestamp_unit`` that is not
            one of ns, us, ms, s (``perfonto.values.ValueRuleError``, a ``perfonto.Error``).
    """
    from perfonto.values import duration_s

    _check_catalog(catalog, counters)
    period = None if sample_period is None else int(round(duration_s(sample_period, "sample_period") * 1e9))
    _check_timestamp_unit(timestamp_unit)
    _check_side_sources(requests=requests, trace=trace, sync=sync)
    try:  # the readers say what to do in the CLI's options: the message a caller gets names the keywords
        capture = capture_of(
            _as_source(counters), requests, trace, sync, timestamp_unit=timestamp_unit, sample_period_ns=period
        )
        _check_side_files(capture)  # the wrong table as the trace: said now, naming the file (as perfonto analyze)
        catalog = catalog.raise_for_errors().sized_for(capture)  # instance axes sized by the data: this capture's
        graph = catalog.raise_for_errors().graph
        if metrics is not None:
            metrics = [metrics] if isinstance(metrics, str) else list(metrics)  # an iterator is read once, here
            _catalog.select_metrics(graph, metrics)  # an unknown or unavailable name fails here, before any work
        report = analyse_capture(graph, capture, metrics=metrics, evaluator=catalog.evaluator())
    except PerfontoError as exc:
        raise reworded(exc) from exc.__cause__
    report.notes = [in_api_words(n) for n in report.notes]  # the notes in the API's words too
    return Result(report, frozenset(graph.all_metrics) - set(report.evaluated.all_metrics))


#: why a request-level metric has no value when ``evaluate`` was given no request records
NO_RECORDS = (
    "it is computed from the request records, and this evaluation had none: give them with "
    "evaluate(..., requests='requests.parquet'), or evaluate a run folder that holds requests.parquet"
)


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
        """Window metric name → compiled metric (``unit_text``, ``formula``, ``axes`` …): the columns of
        ``window``, ``per_chip`` and ``server``, in order (request-level metrics are in ``records``)."""
        return dict(self.report.evaluated.metrics)

    @property
    def unavailable(self) -> dict[str, str]:
        """Metric name → why it has no value in this result: a signal the capture lacks, or — when no
        request records were given — each request-level metric (ttft, tpot, itl …), which needs them."""
        out = dict(self.report.unavailable)
        if self.report.records is None:  # no request records: no request-level metric has a value
            for name in self.report.evaluated.record_metrics:
                out.setdefault(name, NO_RECORDS)
        return out

    @property
    def null_reasons(self) -> dict[str, dict[str, int]]:
        """Window metric name → {reason: number of (window, chip) values null for it}, for the metrics
        that have null values."""
        return dict(self.report.evaluation.nulls)

    @property
    def records(self) -> dict:
        """Request-level metric name → its value: a float for a run-level reduction (``ttft_p50``, in
        the metric's unit, NaN for null), a 1-D array with one value per request record for a
        per-record metric (``ttft``); empty without request records."""
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
        why = self.unavailable.get(name)
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
        """One row per window and chip: ``window`` (its index), ``host`` (a fleet only), ``chip``,
        ``start_ns`` (the window's start on the chip's clock, ns), ``interval_s`` (the window's length in s),
        then a column per metric in its unit (``unit``) — null where a value cannot be computed, a
        fixed-size list for a per-instance metric — and ``out_of_bounds`` (per row, the metrics outside
        their declared bounds; ``mismeasured`` too for a multiplexed capture: the metrics whose inputs
        ran in different counter groups)."""
        from perfonto.analysis.evaluate import metrics_table

        return metrics_table(self.report.evaluation, self.report.evaluated)

    @cached_property
    def per_chip(self) -> pa.Table:
        """One row per chip over the whole run: ``chip`` (``host`` too for a fleet), then a column per
        metric as in ``window``."""
        return self._level(self.report.evaluation.per_chip, per_chip=True)

    @cached_property
    def server(self) -> pa.Table:
        """One row for the server (every chip over the whole run), a column per metric as in ``window``;
        ``value(name)`` reads one."""
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
        """The whole report as a JSON-ready dict: the document ``perfonto analyze --json`` prints."""
        return self.report.to_json()

    def __repr__(self) -> str:
        W, C = self.report.evaluation.windows.interval.shape
        return f"<perfonto.Result {len(self.report.evaluated.metrics)} metrics over {W} windows x {C} chips>"


def _num(v) -> float | None:
    f = float(v)
    return f if np.isfinite(f) else None
