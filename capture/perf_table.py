"""``perf stat``'s counter lines (``perf_stat.read_perf_stat``) as a table in the collector format:
the lines checked (modifiers, unmapped and unsupported events, repeated lines, mixed aggregation,
units), summed per sample and CPU into running totals in raw counts. ``perf_stat`` re-exports
``collector_table``; its module docstring says how each line is read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from .dump_io import DumpError

if TYPE_CHECKING:
    from .perf_stat import PerfLine, PerfStat

UNITS = {"msec": 1e-3, "usec": 1e-6, "nsec": 1e-9, "sec": 1.0, "": 1.0}  # perf's units, in seconds or 1


def _base(event: str) -> str:
    """An event without perf's modifier suffix (``task-clock:u`` → ``task-clock``)."""
    return re.sub(r":[ukhHGIpPSDWe]+$", "", event)


def _chip_of(where: str) -> int:
    m = re.fullmatch(r"CPU(\d{1,9})", where)  # a CPU number, not a 5000-digit string
    return int(m.group(1)) if m else -1


def _read_modifiers(ps: PerfStat, mapping: dict, notes: list[str]) -> None:
    """Rename, in place, each event perf printed with its modifier (``task-clock:u``, when not root) and
    no signal maps as it is to its base event when that one is mapped; a note lists them."""
    modified = sorted({x.event for x in ps.lines if x.event not in mapping and _base(x.event) in mapping})
    if modified:
        for x in ps.lines:
            if x.event in modified:
                x.event = _base(x.event)
        notes.append(f"{ps.path}: events read without their modifier: {', '.join(modified[:8])}")


def _note_unmapped(ps: PerfStat, mapping: dict, notes: list[str]) -> None:
    """Notes listing (the first 8 of) the events no signal reads: apart, those perf printed
    ``<not supported>`` in every interval (the machine cannot count them: a VM without PMU access has no
    cycles or instructions, whatever the catalog reads)."""
    unmapped = {x.event for x in ps.lines if x.event not in mapping}
    never = sorted(unmapped - {x.event for x in ps.lines if x.state != "not supported"})
    read = sorted(unmapped - set(never))
    if never:
        notes.append(
            f"{ps.path}: perf events `<not supported>` in every interval (the machine cannot count them, e.g. a "
            f"VM without PMU access): {', '.join(never[:8])}" + (" …" if len(never) > 8 else "")
        )
    if read:
        notes.append(
            f"{ps.path}: perf events no signal reads (`sources: {{perf: …}}`): {', '.join(read[:8])}"
            + (" …" if len(read) > 8 else "")
        )


def _unsupported(ps: PerfStat, mapping: dict, notes: list[str]) -> list[str]:
    """The mapped events ``<not supported>`` on every line (left out of the capture), with a note."""
    never = sorted(
        {x.event for x in ps.lines if x.event in mapping}
        - {x.event for x in ps.lines if x.event in mapping and x.state != "not supported"}
    )
    if never:
        notes.append(
            f"{ps.path}: `<not supported>` in every interval on the machine that ran perf: {', '.join(never)} "
            "(the metrics that read them are unavailable)"
        )
    return never


def _check_once(ps: PerfStat, lines: list[PerfLine]) -> None:
    """Refuse an event printed twice for one time and CPU (two runs' output in one file)."""
    seen_at: dict[tuple, int] = {}
    for x in lines:
        key = (x.time, x.where, x.event)
        if key in seen_at:
            raise DumpError(
                f"{ps.path}:{x.line}: `{x.event}`{' for ' + x.where if x.where else ''} again"
                f"{f' at {x.time:.9f} s' if x.time is not None else ''} (first on line {seen_at[key]}): two runs' "
                "output in one file? Give one perf stat run's output"
            )
        seen_at[key] = x.line


def _check_one_aggregation(ps: PerfStat, lines: list[PerfLine]) -> None:
    """Refuse aggregated lines mixed with per-CPU (or per-socket) ones: they would be counted twice."""
    if lines and any(x.where == "" for x in lines) and any(x.where != "" for x in lines):
        bad = next(x for x in lines if (x.where == "") != (lines[0].where == ""))
        raise DumpError(
            f"{ps.path}:{bad.line}: aggregated lines and per-CPU (or per-socket) lines in one file would be "
            "counted twice; give the output of one `perf stat` run (with or without -A)"
        )


def _chips(wheres: list[str]) -> dict[str, int]:
    """Each identifier's chip number: the CPU's number for ``CPUn`` (when those are distinct), else its
    position in order of first appearance."""
    chips = {w: (c if (c := _chip_of(w)) >= 0 else k) for k, w in enumerate(wheres)}
    if len(set(chips.values())) != len(chips):
        chips = {w: k for k, w in enumerate(wheres)}
    return chips


def _sample_times(ps: PerfStat, lines: list[PerfLine]) -> list:
    """The samples' end times in seconds since the start (the interval ends with ``-I``, else the elapsed
    time), checked to be known and a run's length."""
    times = sorted({x.time for x in lines}) if ps.interval else [ps.elapsed_s]
    if any(t is None for t in times):
        raise DumpError(
            f"{ps.path}: the run's elapsed time is unknown (perf's CSV and JSON without -I do not print it); record "
            "with -I, or give perf stat's human-readable report, which prints 'seconds time elapsed'"
        )
    if times and not 0.0 < max(times) < 1e9:  # perf's time stamps count seconds since the start of the run
        raise DumpError(
            f"{ps.path}: a time stamp of {max(times):g} s since the start is not a run's length; "
            "is the file perf stat's output?"
        )
    return times


def _check_unit(ps: PerfStat, x: PerfLine, sig: str, kind: str, is_time: bool) -> None:
    """Refuse a counted line whose unit its signal does not read (a time for a count, or the reverse)."""
    if x.state == "counted" and x.unit not in UNITS:
        raise DumpError(
            f"{ps.path}:{x.line}: `{x.event}` is in `{x.unit}`, which its signal `{sig}` does not read (a count "
            "has no unit, a time msec, usec, nsec or sec); map the event to a signal in that unit"
        )
    if x.state == "counted" and is_time != (kind == "time"):
        raise DumpError(
            f"{ps.path}:{x.line}: `{x.event}` is in `{x.unit or 'counts'}`, but its signal `{sig}` is "
            f"{'a time' if kind == 'time' else 'a count'}; map the event to a signal of that kind"
        )


def _increments(ps, mapping, lines, times, wheres, signals):
    """Per signal, the (samples × chips) arrays of increments in raw counts, of nulls (a marker) and of
    the cells a line filled (sample 0, the start, counts as filled); each line's unit checked."""
    ti = {t: k + 1 for k, t in enumerate(times)}
    S, C = len(times) + 1, len(wheres)
    inc = {s: np.zeros((S, C)) for s in signals}
    null = {s: np.zeros((S, C), bool) for s in signals}
    seen = {s: np.zeros((S, C), bool) for s in signals}
    for s in signals:
        seen[s][0] = True  # the start: every total 0
    for x in lines:
        sig, kind, per = mapping[x.event]
        is_time = x.unit in UNITS and x.unit != ""
        _check_unit(ps, x, sig, kind, is_time)
        k, c = ti[x.time if ps.interval else ps.elapsed_s], wheres.index(x.where)
        seen[sig][k, c] = True
        if x.value is None:
            null[sig][k, c] = True
        else:
            inc[sig][k, c] += x.value * (UNITS[x.unit] if is_time else 1.0) * per
            if inc[sig][k, c] >= 2.0**63:
                raise DumpError(
                    f"{ps.path}:{x.line}: the count {x.value:g} of `{x.event}` does not fit a 64-bit counter "
                    f"at the signal's scale; is the file perf stat's output?"
                )
    return inc, null, seen


def _total_columns(ps, signals, inc, null, seen, cols, notes) -> None:
    """Add each signal's column of running totals (uint64, null at a marker or a missing line) to
    ``cols``; a note lists the signals with intervals that have no line."""
    gaps = []
    for s in signals:
        missing = ~seen[s]  # an interval without the event's line (a line cut off): null, never a zero increment
        if missing.any():
            gaps.append(f"{s} ({int(missing.sum())})")
        null[s] |= missing
        total = np.cumsum(np.rint(np.where(null[s], 0.0, inc[s])), axis=0)  # running totals in raw counts
        if total.size and total.max() >= 2.0**64:
            raise DumpError(
                f"{ps.path}: the running total of `{s}` passes 2^64 raw counts; is the file perf stat's output?"
            )
        cols[s] = pa.array(total.reshape(-1).astype(np.uint64), mask=null[s].reshape(-1))
    if gaps:
        notes.append(
            f"{ps.path}: intervals without a line for the event (null there, reason missing sample): {', '.join(gaps)}"
        )


def perf_label(where: str) -> str:
    """An instance's label: the CPU's number for ``CPUn`` (``-A``), the core, die or socket identifier as
    perf prints it (``S0-D0-C1``), ``all`` for aggregated lines."""
    m = re.fullmatch(r"CPU(\d{1,9})", where)
    return m.group(1) if m else (where or "all")


def perf_instances(ps: PerfStat, mapping: dict) -> tuple[str, ...]:
    """The labels (``perf_label``) of the CPUs, cores, dies or sockets that lines of mapped events name,
    in instance order (``capture.instances.ordered_labels``)."""
    from .instances import ordered_labels

    return ordered_labels(perf_label(x.where) for x in ps.lines if x.event in mapping or _base(x.event) in mapping)


def _as_instances(cols: dict, signals: list[str], S: int, C: int) -> None:
    """Each signal's (samples × instances) column of running totals as flat ``name[i]`` columns."""
    from .instances import flat_columns

    for s in signals:
        arr = cols.pop(s)
        total = np.asarray(arr.fill_null(0)).reshape(S, C)
        null = np.asarray(arr.is_null()).reshape(S, C)
        flat_columns(cols, s, total, null)


def collector_table(
    ps: PerfStat,
    mapping: dict[str, tuple[str, str, float]],
    *,
    notes: list[str] | None = None,
    instances: tuple[str, ...] | None = None,
) -> pa.Table:
    """The capture in the collector format (one row per aggregate or CPU and sample; ``sample`` (the
    interval's number), ``timestamp_ns``; one uint64 column per mapped signal, its running total in raw
    counts; null where perf printed a marker). ``mapping``: perf event → (signal, ``time`` when perf
    prints it in a time unit (msec, …) else ``""``, raw counts per second or per count: ``mapping_of``).
    The first sample is at time 0 with every total 0 (``perf_stat``'s module docstring).

    ``instances``: the labels (``perf_label``) of an instance axis sized by the data, in instance order:
    then the capture is one chip whose CPUs (cores, sockets; the aggregate, ``all``) are the instances of
    every signal, written as ``name[i]`` columns; an instance without a line is null.

    Raises:
        DumpError: a mapped event printed in a unit of the other kind (a time for a count, or the reverse).
    """
    notes = notes if notes is not None else []
    _read_modifiers(ps, mapping, notes)
    _note_unmapped(ps, mapping, notes)
    never = _unsupported(ps, mapping, notes)
    lines = [x for x in ps.lines if x.event in mapping and x.event not in never]
    _check_once(ps, lines)
    _check_one_aggregation(ps, lines)
    wheres = list(dict.fromkeys(x.where for x in lines))
    if instances is not None:  # one chip; its CPUs (or cores, sockets) in the order of the labels
        by_label = {perf_label(w): w for w in wheres}
        wheres = [by_label.get(label, f"\0{label}") for label in instances]  # a label without a line: null
    chips = _chips(wheres)
    times = _sample_times(ps, lines)
    S, C = len(times) + 1, len(wheres)
    signals = list(dict.fromkeys(mapping[x.event][0] for x in lines))
    inc, null, seen = _increments(ps, mapping, lines, times, wheres, signals)
    rows = C if instances is None else 1
    cols: dict[str, pa.Array] = {
        "chip": pa.array(np.tile(np.array([chips[w] for w in wheres][:rows], np.int64), S)),
        "sample": pa.array(np.repeat(np.arange(S, dtype=np.int64), rows)),  # perf's intervals: no grid to guess
        "timestamp_ns": pa.array(np.repeat(np.rint(np.array([0.0] + times) * 1e9).astype(np.int64), rows)),
    }
    _total_columns(ps, signals, inc, null, seen, cols, notes)
    from .multiplex_perf import add_side_columns, perf_side_columns

    keyed = [(x, x.time if ps.interval else ps.elapsed_s) for x in lines]
    side = perf_side_columns(keyed, {t: k + 1 for k, t in enumerate(times)}, wheres, mapping, S)
    if instances is not None:
        cols["chip"] = pa.array(np.zeros(S, np.int64))
        _as_instances(cols, signals, S, C)
    add_side_columns(cols, side, instances is not None)  # run times where perf multiplexed (capture.multiplex)
    return pa.table(cols)


__all__ = ["UNITS", "collector_table", "perf_instances", "perf_label"]
