"""The whole dump's sampling grid, scanned from every host's key columns (``host``, ``chip``, the
timestamp, ``sample``) for ``capture.dump_scan.plan_dump``: its length, the first sample number and the
checks ``capture.dump.read_counters`` makes over all chips (two samples a chip, timestamps near the
grid, chips aligned); each host's placement is kept in the plan (``DumpPlan.grids``), so that the key
columns are read once, and timestamps that go backwards or drift are noted.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .dump import _keys, _long_keys
from .dump_grid import Stamps, _grid, drift_note, time_reversals
from .dump_host_grid import _increasing, _on_dump_grid, _regular_grid
from .dump_io import DumpError
from .dump_plan import DumpPlan, _read


def _key_columns(plan: DumpPlan) -> list[str]:
    return ["host", "chip", plan.stamp] + (["sample"] if not plan.long else [])


def _group_keys(plan: DumpPlan, host: str | None, reversals: bool = False):
    """(chip, host, ts, sample) of every sample row of a host, in part order, and each part's rows;
    ``reversals``: note in ``plan.notes`` where a part's timestamps go backwards (``time_reversals``)."""
    chips, hosts, stamps, samples, per_part = [], [], [], [], []
    for part in plan.groups[host]:
        cols = _key_columns(plan) + (["signal", "instance"] if reversals and plan.long else [])
        if part.host is not None and part.rows is None:  # a file of one host: its `host` column is not read again
            t = _read(part, plan.gen, [c for c in cols if c != "host"])
            t = t.append_column("host", pa.array([part.host] * t.num_rows, pa.string()))
        else:
            t = _read(part, plan.gen, cols)
        rows = None
        if part.host is not None and part.rows is not None:  # a file of several hosts: this host's rows
            rows = np.flatnonzero(
                pc.equal(pc.cast(t.column("host"), pa.string()), part.host).to_numpy(zero_copy_only=False)
            )
            if part.rows is not None:
                part.rows = rows
            t = t.take(rows)
        chip, hs, ts = _keys(t, str(part.path), plan.unit)
        if reversals and not _increasing(chip, ts):  # rows in time order per chip cannot go back: nothing to look for
            extra = _long_keys(t) if plan.long and "signal" in t.column_names else ()
            for note in time_reversals(chip, hs, ts, [(str(part.path), len(chip))], extra, file_rows=rows):
                if note not in plan.notes:
                    plan.notes.append(note)
        sample = None
        if "sample" in t.column_names:
            if not pa.types.is_integer(t.column("sample").type):
                raise DumpError(
                    f"{part.path}: column `sample` has type {t.column('sample').type}; it must hold sample numbers"
                )
            sample = t.column("sample").to_numpy(zero_copy_only=False).astype(np.int64)
        chips.append(chip), hosts.append(hs), stamps.append(ts), samples.append(sample), per_part.append(len(chip))
    chip, ts = np.concatenate(chips), np.concatenate(stamps)
    hs = None if hosts[0] is None else np.concatenate(hosts)
    sample = None if any(s is None for s in samples) else np.concatenate(samples)
    if plan.long:  # one row per signal and instance: the samples are the distinct (chip, timestamp)
        key = np.stack([chip, ts], axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        first = np.sort(first)
        return chip[first], None if hs is None else hs[first], ts[first], None, per_part
    return chip, hs, ts, sample, per_part


def _row_name(plan: DumpPlan, host, per_part: list[int]):
    """``r`` → "FILE: row N" for row ``r`` of a host's key columns (its parts' rows one after the other;
    N counted from 1 in that file), or "" where a row is no file row (a long-layout dump's samples)."""
    if plan.long:
        return lambda r: ""
    ends = np.cumsum(per_part)
    parts = plan.groups[host]
    single = sum(len(v) for v in plan.groups.values()) == 1  # the message names the file already

    def name(r: int) -> str:
        i = int(np.searchsorted(ends, r, side="right"))
        k = r - (int(ends[i - 1]) if i else 0)
        rows, path = parts[i].rows, parts[i].path
        row = f"row {(int(rows[k]) if rows is not None else k) + 1}"
        return row if single else f"{path.parent.name}/{path.name}: {row}"

    return name


def _scan_grid(plan: DumpPlan) -> None:
    """The whole dump's grid from every host's key columns: its length, the first sample number, and
    the checks ``read_counters`` makes over all chips; each host's placement is kept in ``plan.grids``
    (compactly for a regular host), so that the key columns are read once."""
    end, count_max, base, counts = 0, 0, None, set()
    local = {}
    if not plan.groups:  # an empty file (no rows at all: no host or chip to group them by)
        raise DumpError(
            f"{plan.label}: no sample rows; a window needs two samples of each chip: give a dump with at least "
            "two samples per chip"
        )
    for host in plan.groups:
        chip, hs, ts, sample, per_part = _group_keys(plan, host, reversals=True)
        if len(ts) < 2:
            what = "no sample rows" if len(ts) == 0 else "one sample row"
            where = "" if host is None or len(plan.groups) == 1 else f" for host {host!r}"
            raise DumpError(
                f"{plan.label}: {what}{where}; a window needs two samples of each chip: give a dump with at "
                "least two samples per chip"
            )
        g = _regular_grid(plan, chip, hs, ts, sample)
        if g is None:
            g = _grid(
                plan.label,
                chip,
                hs,
                ts,
                plan.period,
                sample,
                check_span=False,
                row_name=_row_name(plan, host, per_part),
            )
        plan.chips[host] = len(g.keys)
        plan.chip_numbers[host] = g.keys[:, 1].astype(np.int64)
        note = drift_note(plan.label, g.stamps, g.present, plan.period) if sample is None else None
        if note and note not in plan.notes:
            plan.notes.append(note)
        first = 0 if sample is None else int(sample.min())
        end = max(end, first + (int(g.grid.max()) if g.grid is not None else len(g.stamps) - 1) + 1)
        if g.order is None:  # regular: every host's timestamps are kept, compactly (``dump_grid.Stamps``)
            g = replace(g, stamps=Stamps.compact(g.stamps, plan.period))
        count_max = max(count_max, int(g.counts.max()))
        counts |= set(g.counts.tolist())
        if sample is not None:
            base = first if base is None else min(base, first)
        local[host] = (g, first, per_part)
    n_grid = end - (base or 0)
    if plan.period <= 0 and base is None and len(counts) > 1:
        raise DumpError(
            f"{plan.label}: chips have different numbers of samples ({', '.join(map(str, sorted(counts)))}) and "
            "no sample period is given to align them; give --sample-period (or metadata sample_period_ns)"
        )
    if n_grid > 2 * count_max + 16:
        raise DumpError(
            f"{plan.label}: the samples span {n_grid} grid points for {count_max} rows: a timestamp is far off "
            "the sampling grid (corrupt?) or the sample period is wrong"
        )
    plan.n_grid, plan.sample_base = n_grid, base
    for host, (g, first, per_part) in local.items():
        own_files = all(part.rows is None for part in plan.groups[host])  # no file shared with other hosts
        plan.grids[host] = _on_dump_grid(g, first - (base or 0), n_grid, per_part, own_files and not plan.long)
