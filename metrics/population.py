"""Metrics over event records (one row per request; one per gap between consecutive output tokens).

Records are written beside the counters (``requests.parquet``): one row per request with the fields
of the generation's ``request`` record type; ``token_times`` is a list per request. A derived
population (``token_gap``) has one record per gap between consecutive instants of a ``times`` field:
a request with n output tokens at n distinct instants gives n − 1 gaps (tokens at one instant, one
speculative step's, are one emission: no gap of 0), and the time to the first token is never a gap.
A metric over record fields has one value per record of its population (``ttft`` per request,
``itl`` per gap); ``p50``/``p90``/``p99``/``mean``/``count`` reduce a population to one value over
that population only, ignoring nulls (a TPOT of a one-token reply is null, not 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .graph import MetricGraph
from .interpreter import _eval
from .windows import DumpError, Windows


@dataclass
class Records:
    """``fields[name]``: float64 (N,) per record field (``request.arrival_time``), nulls as NaN;
    derived populations included (``token_gap.duration``)."""

    fields: dict[str, np.ndarray]

    def size(self, record: str) -> int:
        for k, v in self.fields.items():
            if k.split(".", 1)[0] == record:
                return len(v)
        return 0


def records_from_columns(gen, columns: Mapping[str, object]) -> Records:
    """Records from plain columns ``{"request.arrival_time": [...], "request.token_times": [[...], ...]}``;
    derives every derived population."""
    fields: dict[str, np.ndarray] = {}
    lists: dict[str, list] = {}
    _check_lengths(gen, columns)
    for name, f in gen.record_fields.items():
        if gen.records[f.record]["derived_from"] is not None:
            continue
        if name not in columns:
            continue
        _read_column(name, f, columns[name], fields, lists)
    _consistent(gen, fields, lists)
    for rname, info in gen.records.items():
        src = info["derived_from"]
        if src is None or src not in lists:
            continue
        gaps, tokens = emission_gaps(lists[src])
        for name, f in gen.record_fields.items():
            if f.record == rname:
                fields[name] = tokens if f.measure == "tokens" else gaps
    return Records(fields)


def _check_lengths(gen, columns: Mapping[str, object]) -> None:
    """Every given column of a written record type is a list, and all of one record type's have one length."""
    lengths: dict[str, dict[str, int]] = {}
    for name, f in gen.record_fields.items():
        if name in columns and gen.records[f.record]["derived_from"] is None:
            col = columns[name]
            if not isinstance(col, (list, tuple)):
                raise ValueError(f"`{name}` must list one value per record")
            lengths.setdefault(f.record, {})[name] = len(col)
    for record, by_field in lengths.items():
        if len(set(by_field.values())) > 1:
            raise ValueError(
                f"`{record}` fields have different numbers of records: "
                + ", ".join(f"{k}: {n}" for k, n in sorted(by_field.items()))
            )


def _read_column(name: str, f, col, fields: dict, lists: dict) -> None:
    """One column as float64: a `times` field as one array of instants per record (into `lists`), any
    other as one value per record, null as NaN (into `fields`)."""
    try:
        if f.times:
            if any(x is not None and not isinstance(x, (list, tuple)) for x in col):
                raise ValueError(f"`{name}` takes a list of instants per record")
            lists[name] = [np.asarray([] if x is None else x, dtype=np.float64) for x in col]
        else:
            fields[name] = np.array([np.nan if x is None else x for x in col], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}`: {exc}") from None


def emission_gaps(times: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The gaps between consecutive *emissions* of every record, and the instants of each gap's
    closing emission: ``(durations, tokens)``, both (G,) float64.

    An emission is a distinct instant; several instants equal to it (tokens of one speculative or
    multi-token step, one streamed chunk) belong to it. A record with instants ``[0.1, 0.2, 0.2,
    0.2, 0.5]`` gives gaps ``[0.1, 0.3]`` with ``[3, 1]`` tokens: the two zero gaps inside the 3-token
    emission are not gaps, and the first emission opens no gap (that time is the TTFT's). The same
    as vLLM benchmark_serving's ITL, one sample per streamed chunk after the first (AIPerf: inter-chunk
    latency).
    """
    durs, toks = [], []
    for t in times:
        if t.size < 2:
            continue
        starts = _emissions(t)
        if starts.size < 2:
            continue
        counts = np.diff(np.r_[starts, t.size])
        durs.append(np.diff(t[starts]))
        toks.append(counts[1:].astype(np.float64))
    if not durs:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(durs), np.concatenate(toks)


def _emissions(t: np.ndarray) -> np.ndarray:
    """The index of the first instant of each emission of one record's instants ``t`` (``emission_gaps``)."""
    return np.flatnonzero(np.r_[True, np.diff(t) != 0])


def gap_instants(times: list[np.ndarray]) -> np.ndarray:
    """The instant each gap of ``emission_gaps(times)`` closes — its closing emission's — in the same order,
    (G,) float64: when a token gap's value is known (``analysis.compare_records`` places it in time)."""
    ends = [t[_emissions(t)][1:] for t in times if t.size >= 2]
    return np.concatenate(ends) if ends else np.zeros(0)


def _consistent(gen, fields: dict, lists: dict) -> None:
    """Refuse records whose instants disagree with their other fields: a ``times`` field must be
    non-decreasing, hold as many instants as the record's ``output_tokens`` (when the record type has
    that field), start at ``first_token_time`` and end at ``completion_time`` (when given).

    Raises:
        ValueError: naming the record (0-based) and the disagreement.
    """
    for name, times in lists.items():
        rec = gen.record_fields[name].record
        count = fields.get(f"{rec}.output_tokens")
        first, last = fields.get(f"{rec}.first_token_time"), fields.get(f"{rec}.completion_time")
        for i, t in enumerate(times):
            if t.size and not np.all(np.isfinite(t)):
                raise ValueError(f"`{name}` of record {i} holds a null or non-finite instant")
            if t.size > 1 and np.any(np.diff(t) < 0):
                raise ValueError(f"`{name}` of record {i} goes back in time (instants must not decrease)")
            if count is not None and i < len(count) and np.isfinite(count[i]) and int(count[i]) != t.size:
                raise ValueError(f"record {i} has {int(count[i])} output tokens but {t.size} instants in `{name}`")
            if t.size and first is not None and i < len(first) and np.isfinite(first[i]) and first[i] != t[0]:
                raise ValueError(
                    f"record {i}: first_token_time {first[i]:g} is not the first instant of `{name}` ({t[0]:g})"
                )
            if t.size and last is not None and i < len(last) and np.isfinite(last[i]) and last[i] != t[-1]:
                raise ValueError(
                    f"record {i}: completion_time {last[i]:g} is not the last instant of `{name}` ({t[-1]:g})"
                )


def read_records(path: str | Path, gen) -> Records:
    """Read ``requests.parquet``: one column per field of the ``request`` record type (without the
    ``request.`` prefix), ``token_times`` a list column.

    Raises:
        DumpError: unreadable file or missing columns.
    """
    p = str(path)
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(f"{p}: not a readable request-records file ({exc})") from None
    cols = {}
    for name, f in gen.record_fields.items():
        if gen.records[f.record]["derived_from"] is not None:
            continue
        col = f.field
        if col not in table.column_names:
            raise DumpError(f"{p}: missing column `{col}` of record field `{name}`")
        cols[name] = table.column(col).to_pylist()
    return records_from_columns(gen, cols)


def evaluate_records(graph: MetricGraph, records: Records) -> dict[str, np.ndarray | float]:
    """Every record metric: per-record metrics as (N,) arrays, reductions as floats (NaN = null)."""
    done: dict[str, np.ndarray] = {}
    order = [n for n in nx.lexicographical_topological_sort(graph.graph) if n in graph.record_metrics]
    values = {name: v.reshape(1, 1, -1) for name, v in records.fields.items()}
    w = Windows(np.ones((1, 1)), values, 1.0, "records")
    out: dict[str, np.ndarray | float] = {}
    for name in order:
        m = graph.record_metrics[name]
        with np.errstate(all="ignore"):
            v = np.asarray(_eval(m.ir, w, done), dtype=np.float64)
        v = np.where(np.isinf(v), np.nan, v)
        if m.population is None:
            v = np.asarray(v.reshape(-1)[0] if v.size else np.nan)  # one value (0-d)
        done[name] = np.asarray(v) if m.population else np.asarray(v).reshape(1, 1)
        out[name] = v.reshape(-1) if m.population else float(v)
    return out
