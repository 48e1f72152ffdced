"""The SQL target fitted to a given dump (``perfonto codegen --target sql --counters DUMP``): the query reads
the columns the dump has. The collector format allows any subset of the signals, and a signal with
instances either as one list column (``name``) or as one column per instance (``name[i]``, the flat
layout); a query that named every signal as a list column failed in DuckDB with a binder error on such a
dump, though ``perfonto analyze`` read it. Here the dump's schema (its first Parquet file) says which
signals are there and how; the metrics whose inputs are absent are left out of the query, named in its
header, as ``perfonto analyze`` lists them as unavailable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfonto.capture.dump import flat_indices
from perfonto.metrics.graph import MetricGraph

#: The columns of the collector format that are not signals.
KEYS = frozenset({"host", "chip", "timestamp_ns", "timestamp_us", "timestamp_ms", "timestamp_s", "timestamp"})


@dataclass
class Fit:
    """What the query reads of a dump: ``graph`` (the metrics the dump can feed), ``flat`` (the signals it
    holds as ``name[i]`` columns), ``notes`` (header lines naming what is left out) and ``absent`` (the
    signals it lacks: a reset indicator the window rules read is NULL, as the dump reader reads it)."""

    graph: MetricGraph
    flat: frozenset[str]
    notes: tuple[str, ...]
    absent: frozenset[str] = frozenset()


def dump_columns(path: str) -> list[str] | None:
    """The column names of the dump at ``path`` (a Parquet file, or a folder or glob of them: its first file),
    or None when there is no such file to read (the query is written for a dump that is not there yet)."""
    import pyarrow.parquet as pq

    import glob

    p = Path(path)
    if p.is_dir():
        first = next(iter(sorted(p.rglob("*.parquet"))), None)
    elif p.is_file():
        first = p
    else:  # a glob (or nothing there yet)
        first = next(iter(sorted(Path(f) for f in glob.glob(path, recursive=True) if Path(f).is_file())), None)
    if first is None:
        return None
    try:
        return list(pq.read_schema(first).names)
    except (OSError, ValueError):  # not Parquet: ``dump_source`` says so, naming the file
        return None


def fit(graph: MetricGraph, names: list[str], where: str) -> Fit:
    """``graph`` fitted to a dump whose columns are ``names`` (``where``: the dump, for the notes).

    A signal is present as its own column, or as ``name[i]`` columns for every one of its instances (the
    flat layout: ``flat``); a signal with some of its ``name[i]`` columns is absent, named with the
    instances missing. The metrics that read an absent signal (directly or through a metric; a
    ``default(x, d)`` of an absent ``x`` reads ``d``) are left out of ``graph``.

    Raises:
        ValueError: the dump feeds none of the metrics (naming the signals it lacks).
    """
    from perfonto.analysis.capture import dump_unavailable
    from perfonto.metrics.catalog import select_metrics
    from perfonto.metrics.optional import fill_defaults

    gen = graph.generation
    flat, absent, partial = _layout(gen, set(names) - KEYS)
    read = _read_inputs(graph)
    if not (absent & read) and not flat:
        return Fit(graph, frozenset(), (), frozenset(absent & set(gen.signals)))
    filled = fill_defaults(graph, absent)
    gone = dump_unavailable(filled, absent)
    keep = [m for m in filled.all_metrics if m not in gone and m in filled.metrics]
    if not (_read_inputs(select_metrics(filled, keep)) if keep else set()):  # constants alone: no dump of it
        lacking = sorted(s for s in absent if s in gen.signals)
        raise ValueError(
            f"{where}: the dump feeds none of the metrics (it has no column for {', '.join(lacking[:8])}"
            f"{' …' if len(lacking) > 8 else ''}); is it a counter dump of generation `{gen.name}`?"
        )
    fitted = filled if len(keep) == len(filled.all_metrics) else select_metrics(filled, keep)
    notes = _notes(graph, filled, gone, absent, where)
    if partial:
        notes.append(f"Read as absent, some instance columns missing: {', '.join(partial[:6])}.")
    if flat:
        notes.append(f"Read from one column per instance (name[i]): {', '.join(sorted(flat)[:12])}.")
    return Fit(fitted, frozenset(flat), tuple(notes), frozenset(absent & set(gen.signals)))


def _layout(gen, have: set[str]) -> tuple[set[str], set[str], list[str]]:
    """(the signals held as ``name[i]`` columns, the signals and fields absent, the signals with some of
    their instance columns only) of a dump whose signal columns are ``have``."""
    flat: set[str] = set()
    absent: set[str] = set()
    partial: list[str] = []
    for name, sig in gen.signals.items():
        if name in have:
            continue
        per = [f"{name}[{k}]" for k in flat_indices(sig)] if sig.axes else []  # as the dump reader numbers them
        got = [c for c in per if c in have]
        if per and len(got) == len(per):
            flat.add(name)
            continue
        absent.add(name)
        if got:
            partial.append(f"{name} ({len(got)} of its {len(per)} instance columns)")
    absent |= {f for f, fd in gen.fields.items() if fd.register in absent}
    return flat, absent, partial


def _notes(graph: MetricGraph, filled: MetricGraph, gone: dict, absent: set[str], where: str) -> list[str]:
    """The header line naming the metrics left out and the columns they lack (none when none is)."""
    notes = []
    left = sorted(m for m in gone if m in graph.metrics)
    if left:
        import networkx as nx

        lacking = sorted({n for m in left for n in nx.ancestors(filled.graph, m) if n in absent})
        notes.append(
            f"Not here: {len(left)} metric(s) the dump {where} cannot feed ({', '.join(left[:12])}"
            f"{' …' if len(left) > 12 else ''}): it has no column for {', '.join(lacking[:12])}"
            f"{' …' if len(lacking) > 12 else ''}."
        )
    return notes


def _read_inputs(graph: MetricGraph) -> set[str]:
    """The signals and fields the window metrics of ``graph`` read, directly or through other metrics."""
    import networkx as nx

    gen = graph.generation
    inputs = set(gen.signals) | set(gen.fields)
    return {n for m in graph.metrics for n in nx.ancestors(graph.graph, m) if n in inputs}


__all__ = ["Fit", "dump_columns", "fit"]
