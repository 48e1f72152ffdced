"""``perf stat``'s run times as the collector format's multiplex side columns (``capture.multiplex``).

perf's CSV prints, after the event, "run time of counter" (ns) and "percentage of measurement time the
counter was running" (``perf-stat(1)``, "CSV FORMAT"; ``tools/perf/util/stat-display.c``,
``print_running_csv``: ``run`` and ``100 * run / ena``); the JSON the same as ``event-runtime`` and
``pcnt-running``. So per line: running = run time, enabled = run time × 100 / percentage. The count perf
prints is already scaled (``perf_counts_values__scale``: ``val * ena / run``); the side columns record
the times so that a metric can tell which of its inputs ran together.

Groups: perf schedules a group's events together, so they share one run time; the lines of one interval
and CPU that ran less than 100 % are numbered by their distinct run times in order of first appearance
(group 0, 1, …). A line that ran 100 % ran the whole interval: no group is needed (-1). Counters that ran
part of the time with equal run times but in different groups are taken as one group — perf's CSV does
not tell them apart.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def perf_side_columns(lines, ti: dict, wheres: list[str], mapping: dict, S: int) -> dict[str, np.ndarray]:
    """``{signal: (enabled, running, group)}``, each (S, C) over the samples (``ti``: a line's sample
    index from its time) and ``wheres`` (the CPUs or the aggregate), enabled and running as running
    totals in ns from 0 at sample 0; empty when every counted line ran 100 % (nothing multiplexed).
    ``lines``: the mapped ``PerfLine``s, each with ``time_key`` its sample's time."""
    if not any(x.value is not None and x.enabled < 100.0 and x.run_ns is not None for x, _ in lines):
        return {}
    C = len(wheres)
    out: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    groups: dict[tuple[int, int], dict[float, int]] = {}
    for x, key in lines:
        sig = mapping[x.event][0]
        e, r, g = out.setdefault(sig, (np.zeros((S, C)), np.zeros((S, C)), np.full((S, C), -1, np.int64)))
        k, c = ti[key], wheres.index(x.where)
        if x.value is None:
            continue  # a marker: the register is null there; no time to record
        _check_run(x)
        if x.run_ns is None:
            continue  # no run time printed: the count ran the whole interval (percentage 100)
        r[k, c] = x.run_ns
        # perf prints %.2f of 100 x run / enabled: 0.00 is under 0.005 %, enabled at least run x 20,000
        e[k, c] = x.run_ns * 100.0 / max(x.enabled, 0.005)
        if x.enabled < 100.0:
            ids = groups.setdefault((k, c), {})
            g[k, c] = ids.setdefault(x.run_ns, len(ids))
    return {s: (np.cumsum(e, axis=0), np.cumsum(r, axis=0), g) for s, (e, r, g) in out.items()}


def _check_run(x) -> None:
    """Refuse a counted line whose run time perf never prints (``DumpError`` naming the line and event): a
    run time below 0 or past int64 ns, a count that never ran (perf prints ``<not counted>``), or a run
    percentage below 100 without the run time."""
    from .dump_io import DumpError

    where = f"perf stat output, line {x.line}: `{x.event}`"
    if x.run_ns is None:
        if x.enabled < 100.0:
            raise DumpError(
                f"{where} ran {x.enabled:.2f} % of the interval but has no run time; perf prints both (-x, CSV: "
                "the run time before the percentage): give perf's own output"
            )
        return
    if not 0.0 <= x.run_ns < 9.2e18:
        raise DumpError(f"{where}: run time {x.run_ns:g} ns is negative or past 2^63 ns; give perf's own output")
    if x.run_ns == 0.0:
        raise DumpError(
            f"{where}: a count with a run time of 0 (it never ran): perf prints `<not counted>` for such a line; "
            "give perf's own output"
        )


def add_side_columns(cols: dict, side: dict[str, tuple], one_chip: bool) -> None:
    """Add each signal's ``@enabled_ns``, ``@running_ns`` and ``@group`` columns to ``cols`` (the collector
    table's): per chip row (``one_chip`` False: rows are samples × CPUs) or, for a capture whose CPUs are a
    signal's instances (``one_chip``), one ``name[i]@…`` column per CPU."""
    for s, (e, r, g) in side.items():
        arrays = {"enabled_ns": np.rint(e).astype(np.int64), "running_ns": np.rint(r).astype(np.int64), "group": g}
        for side_name, a in arrays.items():
            if one_chip:
                for i in range(a.shape[1]):
                    cols[f"{s}[{i}]@{side_name}"] = pa.array(a[:, i])
            else:
                cols[f"{s}@{side_name}"] = pa.array(a.reshape(-1))


__all__ = ["add_side_columns", "perf_side_columns"]
