"""A counter dump of any size, read in pieces: one chip group (a host) at a time, and within it one
time range at a time, each piece a ``CounterDump`` whose windows are exactly those of the whole dump.

``plan_dump`` looks at the files (schemas, Hive partitions, row groups, the key columns) without
reading the registers: which hosts there are (a ``host=…`` folder, or the files' ``host`` column),
the generation every part was written for (two generations in one dump is an error naming both
files), and the sampling grid of the whole dump (its length, the first sample number), so that every
piece is placed on the grid as ``metrics.dump.read_counters`` would place the whole dump.
``iter_chunks`` then yields pieces of about ``chunk_rows`` rows: per host, grid points a … b, where a
piece's first sample is the previous piece's last (carried over in memory, not read again), so a
counter's delta across a piece boundary is the same modular delta as in one piece. Only the row
groups of a Parquet part that hold rows of the range are read, and only the columns the metrics
need. A CSV or Arrow part, or a long-layout dump, is read whole per host (its rows have no row
groups to skip to).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perfonto.ontology.generation import Generation

from .dump import KEYS, TIME_UNITS, CounterDump, _keys, _long_columns, _long_keys, _period, _pivot, _wide_columns, check_instances_seen, csv_types
from .dump_grid import _grid, time_reversals
from .dump_io import PARQUET, DumpError, _meta, _partition_columns, parts_of, read_one

CHUNK_ROWS = 32_768


@dataclass
class Part:
    """One file's rows of one host: ``rows`` (file row numbers) when the file holds several hosts."""

    path: Path
    partition: dict[str, str]
    host: str | None
    rows: np.ndarray | None = None
    row_group_ends: np.ndarray | None = None  # Parquet: cumulative row counts of its row groups


@dataclass
class DumpPlan:
    """What ``plan_dump`` found: ``groups`` (host → parts, hosts in sorted order; one group keyed None
    for a dump without hosts), ``n_grid`` grid points, ``columns`` (signal → its column names, wide
    layout; the signal itself for a long one), ``chips`` per group, ``absent`` signals and ``notes``."""

    label: str
    gen: Generation
    meta: dict
    period: int
    stamp: str
    unit: str | None
    long: bool
    groups: dict[str | None, list[Part]]
    n_grid: int
    sample_base: int | None
    columns: dict[str, list[str]]
    absent: tuple[str, ...]
    chips: dict[str | None, int] = field(default_factory=dict)
    chip_numbers: dict[str | None, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Sample rows of the whole dump on the grid (chips × grid points)."""
        return sum(self.chips.values()) * self.n_grid


def _schema(path: Path, gen: Generation) -> tuple[pa.Schema, np.ndarray | None]:
    if path.name.lower().endswith(PARQUET):
        try:
            pf = pq.ParquetFile(str(path))
        except (OSError, pa.ArrowInvalid) as exc:
            raise DumpError(f"{path}: not a readable Parquet counter dump ({' '.join(str(exc).split())[:300]})") from None
        md = pf.metadata
        return pf.schema_arrow, np.cumsum([md.row_group(i).num_rows for i in range(md.num_row_groups)])
    return read_one(path, "counter dump", csv_types(gen)).schema, None


def _read(part: Part, gen: Generation, columns: list[str], row_groups: list[int] | None = None) -> pa.Table:
    """Columns of a part (all its row groups, or the ones given), with its Hive partition columns."""
    if part.row_group_ends is not None:
        pf = pq.ParquetFile(str(part.path))
        have = set(pf.schema_arrow.names)
        cols = [c for c in columns if c in have]
        t = pf.read_row_groups(row_groups if row_groups is not None else list(range(len(part.row_group_ends))), columns=cols,
                               use_threads=False)
    else:
        t = read_one(part.path, "counter dump", csv_types(gen))
        t = t.select([c for c in columns if c in t.column_names])
    for k, v in part.partition.items():
        if k in columns and k not in t.column_names:
            t = t.append_column(k, pa.array([v] * t.num_rows, pa.string()))
    return t


def plan_dump(source, gen: Generation, *, timestamp_unit: str | None = None, sample_period_ns: int | None = None) -> DumpPlan:
    """Plan the reading of ``source`` (a file, a folder tree — Hive-partitioned or not — or a glob) in
    pieces; see the module docstring.

    Raises:
        DumpError: as ``read_counters`` — and parts written for different generations, parts that
            name hosts beside parts that do not.
    """
    label, files = parts_of(source, "counter dump")
    root = Path(label) if Path(label).is_dir() else None
    meta: dict = {}
    gens: dict[str, str] = {}
    groups: dict[str | None, list[Part]] = {}
    names: list[str] = []
    with_host, without_host = None, None
    for f in files:
        schema, ends = _schema(f, gen)
        m = _meta(pa.table({}, schema=pa.schema([], metadata=schema.metadata)), str(f))
        meta = meta or m
        if m.get("generation") is not None:
            gens.setdefault(str(m["generation"]), str(f))
        part_cols = _partition_columns(f, root)
        cols = list(schema.names) + [k for k in part_cols if k not in schema.names]
        names += [c for c in cols if c not in names]
        if "host" in schema.names:
            hosts = pc.unique(_read(Part(f, {}, None, None, ends), gen, ["host"]).column("host")).to_pylist()
            if any(h is None for h in hosts):
                raise DumpError(f"{f}: `host` holds nulls; name every row's host, or drop the column")
            for h in sorted(str(x) for x in hosts):
                groups.setdefault(h, []).append(Part(f, part_cols, h, None if len(hosts) == 1 else np.array([]), ends))
            with_host = with_host or f
        elif "host" in part_cols:
            groups.setdefault(part_cols["host"], []).append(Part(f, part_cols, None, None, ends))
            with_host = with_host or f
        else:
            groups.setdefault(None, []).append(Part(f, part_cols, None, None, ends))
            without_host = without_host or f
    if len(gens) > 1:
        (g1, f1), (g2, f2) = list(gens.items())[:2]
        raise DumpError(f"{f2}: written for generation `{g2}`, but {f1} for `{g1}`; a dump holds one generation — "
                        "analyse the generations apart")
    if with_host and without_host:
        raise DumpError(f"{without_host}: names no host, but {with_host} does; in a fleet every part names its host "
                        "(a `host` column or a host=… folder)")
    if meta.get("generation") not in (None, gen.name):
        raise DumpError(f"{label}: the dump was written for generation `{meta['generation']}`, not `{gen.name}`; "
                        f"evaluate it with --generation {meta['generation']}")
    unit = timestamp_unit or meta.get("timestamp_unit")
    stamps = [n for n in names if n == "timestamp" or (n.startswith("timestamp_") and n[10:] in TIME_UNITS)]
    long = "signal" in names and "value" in names
    period = _period(meta, sample_period_ns, label)
    plan = DumpPlan(label, gen, meta, period, stamps[0] if len(stamps) == 1 else "timestamp_ns", unit, long,
                    dict(sorted(groups.items(), key=lambda kv: "" if kv[0] is None else kv[0])), 0, None, {}, ())
    plan.columns = _signal_columns(plan, names)
    if not plan.columns:
        raise DumpError(f"{label}: no column is a signal of generation `{gen.name}` (columns: {', '.join(names[:10])}"
                        f"{' …' if len(names) > 10 else ''}); was the dump written for another generation?")
    plan.absent = tuple(n for n in gen.signals if n not in plan.columns)
    _scan_grid(plan)
    return plan


def _signal_columns(plan: DumpPlan, names: list[str]) -> dict[str, list[str]]:
    gen = plan.gen
    if plan.long:  # the signals and, per signal, the instances the rows of the whole dump give
        seen: dict[str, set[int]] = {}
        typed = True  # an `instance` column of another type is refused when the part is read
        for parts in plan.groups.values():
            for part in parts:
                t = _read(part, gen, ["signal", "instance"])
                if "instance" in t.column_names and not pa.types.is_null(t.column("instance").type):
                    typed &= pa.types.is_integer(t.column("instance").type)
                else:
                    t = pa.table({"signal": t.column("signal"), "instance": pa.nulls(t.num_rows, pa.int64())})
                pairs = pc.unique(pc.binary_join_element_wise(pc.cast(t.column("signal"), pa.string()),
                                                              pc.cast(t.column("instance"), pa.string()).fill_null(""), "\x00"))
                for pair in pairs.to_pylist():
                    if pair is not None:
                        name, _, inst = pair.partition("\x00")
                        seen.setdefault(name, set()).update([int(inst)] if inst else [])
        for name in sorted(seen.keys() & gen.signals.keys()) if typed else ():
            check_instances_seen(plan.label, gen, name, seen[name])
        return {s: [s] for s in gen.signals if s in seen}
    out: dict[str, list[str]] = {}
    for col in names:
        base = col[:-1].rpartition("[")[0] if col.endswith("]") and "[" in col else col
        if base in gen.signals and col not in KEYS:
            out.setdefault(base, []).append(col)
    return {s: out[s] for s in gen.signals if s in out}


def _key_columns(plan: DumpPlan) -> list[str]:
    return ["host", "chip", plan.stamp] + (["sample"] if not plan.long else [])


def _group_keys(plan: DumpPlan, host: str | None, reversals: bool = False):
    """(chip, host, ts, sample) of every sample row of a host, in part order, and each part's rows;
    ``reversals``: note in ``plan.notes`` where a part's timestamps go backwards (``time_reversals``)."""
    chips, hosts, stamps, samples, per_part = [], [], [], [], []
    for part in plan.groups[host]:
        t = _read(part, plan.gen, _key_columns(plan) + (["signal", "instance"] if reversals and plan.long else []))
        rows = None
        if part.host is not None:  # a file of several hosts: this host's rows
            rows = np.flatnonzero(pc.equal(pc.cast(t.column("host"), pa.string()), part.host).to_numpy(zero_copy_only=False))
            if part.rows is not None:
                part.rows = rows
            t = t.take(rows)
        chip, hs, ts = _keys(t, str(part.path), plan.unit)
        if reversals:
            extra = _long_keys(t) if plan.long and "signal" in t.column_names else ()
            for note in time_reversals(chip, hs, ts, [(str(part.path), len(chip))], extra, file_rows=rows):
                if note not in plan.notes:
                    plan.notes.append(note)
        sample = None
        if "sample" in t.column_names:
            if not pa.types.is_integer(t.column("sample").type):
                raise DumpError(f"{part.path}: column `sample` has type {t.column('sample').type}; it must hold sample numbers")
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


def _scan_grid(plan: DumpPlan) -> None:
    """The whole dump's grid from every host's key columns: its length, the first sample number, and
    the checks ``read_counters`` makes over all chips."""
    end, count_max, base, counts = 0, 0, None, set()
    for host in plan.groups:
        chip, hs, ts, sample, _ = _group_keys(plan, host, reversals=True)
        g = _grid(plan.label, chip, hs, ts, plan.period, sample, check_span=False)
        plan.chips[host] = len(g.keys)
        plan.chip_numbers[host] = g.keys[:, 1].astype(np.int64)
        first = 0 if sample is None else int(sample.min())
        end = max(end, first + int(g.grid.max()) + 1)
        count_max = max(count_max, int(g.counts.max()))
        counts |= set(g.counts.tolist())
        if sample is not None:
            base = first if base is None else min(base, first)
    n_grid = end - (base or 0)
    if plan.period <= 0 and base is None and len(counts) > 1:
        raise DumpError(f"{plan.label}: chips have different numbers of samples ({', '.join(map(str, sorted(counts)))}) and "
                        "no sample period is given to align them; give --sample-period (or metadata sample_period_ns)")
    if n_grid > 2 * count_max + 16:
        raise DumpError(f"{plan.label}: the samples span {n_grid} grid points for {count_max} rows: a timestamp is far off "
                        "the sampling grid (corrupt?) or the sample period is wrong")
    plan.n_grid, plan.sample_base = n_grid, base


@dataclass
class Chunk:
    """One piece: ``dump`` holds grid points ``first`` … ``first + S − 1`` of host ``host`` (its
    windows are windows ``first`` … of the whole dump); ``group``: index of the host in the plan."""

    group: int
    host: str | None
    first: int
    dump: CounterDump


def iter_chunks(plan: DumpPlan, signals: list[str] | None = None, chunk_rows: int = CHUNK_ROWS) -> Iterator[Chunk]:
    """The pieces of the dump (module docstring), host by host in sorted order, in time order within a
    host; ``signals``: the signals to read (default: every signal in the dump)."""
    gen = plan.gen
    want = [s for s in (signals if signals is not None else plan.columns) if s in plan.columns]
    for gi, (host, parts) in enumerate(plan.groups.items()):
        chip, hs, ts, sample, per_part = _group_keys(plan, host)
        g = _grid(plan.label, chip, hs, ts, plan.period, sample, sample_base=plan.sample_base, n_grid=plan.n_grid)
        C = len(g.keys)
        row_grid = np.empty(len(chip), np.int64)
        row_grid[g.order] = g.grid
        whole = plan.long or any(p.row_group_ends is None for p in parts)
        step = plan.n_grid if whole else max(1, chunk_rows // max(C, 1))
        offsets = np.concatenate([[0], np.cumsum(per_part)])
        chips_ = g.keys[:, 1].astype(np.int64)
        hosts_ = None if g.host_names is None else g.host_names[g.keys[:, 0]]
        carry = None
        a = 0
        while a < plan.n_grid - 1 or (a == 0 and plan.n_grid == 1):
            b = min(a + step, plan.n_grid - 1)
            lo = a if carry is None else a + 1
            raw, missing = _place(plan, parts, want, row_grid, offsets, lo, b, a, C, g, carry)
            dump = CounterDump(plan.label, chips_, g.stamps[a:b + 1], raw, g.present[a:b + 1], missing, dict(plan.meta),
                               hosts=hosts_, absent=plan.absent, notes=plan.notes)
            yield Chunk(gi, host, a, dump)
            carry = ({n: v[-1] for n, v in raw.items()}, {n: v[-1] for n, v in missing.items()})
            a = b
            if b >= plan.n_grid - 1:
                break


def _place(plan, parts, want, row_grid, offsets, lo, b, a, C, g, carry):
    """Registers of grid points a … b: the carried sample at a, and the rows of lo … b read from the parts."""
    gen = plan.gen
    S = b - a + 1
    raw = {n: np.zeros((S, C, gen.signals[n].instances), np.uint64) for n in want}
    missing = {n: np.zeros((S, C, gen.signals[n].instances), bool) for n in want}
    if carry is not None:
        for n in want:
            raw[n][0] = carry[0][n]
            missing[n][0] = carry[1].get(n, False)
    key_pos = {(None if g.host_names is None else g.host_names[k[0]], int(k[1])): i for i, k in enumerate(g.keys)}
    for pi, part in enumerate(parts):
        sel = np.flatnonzero((row_grid[offsets[pi]:offsets[pi + 1]] >= lo) & (row_grid[offsets[pi]:offsets[pi + 1]] <= b))
        if not len(sel) and not plan.long:
            continue
        cols = _key_columns(plan) + ([c for s in want for c in plan.columns[s]] if not plan.long else ["signal", "instance", "value"])
        if plan.long:
            t = _read(part, gen, cols)
            if part.host is not None:
                t = t.filter(pc.equal(pc.cast(t.column("host"), pa.string()), part.host))
        else:
            file_rows = sel if part.rows is None else part.rows[sel]
            if part.row_group_ends is None:
                t = _read(part, gen, cols).take(file_rows)
            else:
                rgs = np.unique(np.searchsorted(part.row_group_ends, file_rows, side="right"))
                t = _read(part, gen, cols, rgs.tolist()).take(_relative(part, rgs, file_rows))
        _fill(plan, t, str(part.path), want, raw, missing, key_pos, g, a, lo, b)
    return raw, {n: m for n, m in missing.items() if m.any()}


def _relative(part: Part, rgs: np.ndarray, file_rows: np.ndarray) -> np.ndarray:
    """Positions of ``file_rows`` in the concatenation of row groups ``rgs``."""
    sizes = np.diff(part.row_group_ends, prepend=0)
    starts = part.row_group_ends - sizes
    read_start = np.concatenate([[0], np.cumsum(sizes[rgs])[:-1]])
    which = np.searchsorted(part.row_group_ends[rgs], file_rows, side="right")
    return read_start[which] + (file_rows - starts[rgs][which])


def _fill(plan, t: pa.Table, p: str, want, raw, missing, key_pos, g, a, lo, b) -> None:
    notes: list[str] = []
    chip, hs, ts = _keys(t, p, plan.unit)
    if plan.long:
        columns = _long_columns(t, p, plan.gen, notes)
        chip, hs, ts, columns = _pivot(chip, hs, ts, t, p, {k: v for k, v in columns.items() if k in raw})
    else:
        columns = _wide_columns(t.select([c for c in t.column_names if c not in ("host", "chip", plan.stamp, "sample")]), p,
                                plan.gen, notes)
    for note in notes:
        if note not in plan.notes:
            plan.notes.append(note)
    hs = [None] * len(chip) if hs is None else hs
    ci = np.array([key_pos[(h, int(c))] for h, c in zip(hs, chip)], np.int64) if len(chip) else np.zeros(0, np.int64)
    grid = np.empty(len(chip), np.int64)
    for c in np.unique(ci):  # grid point of each row: its timestamp among its chip's samples
        m = ci == c
        sel = g.ci == c
        pos = np.searchsorted(np.asarray(g.stamps[g.grid[sel], c]), ts[m])
        grid[m] = g.grid[sel][np.clip(pos, 0, sel.sum() - 1)]
    keep = (grid >= lo) & (grid <= b)
    for name in want:
        if name not in columns:
            continue
        vals, nulls = columns[name]
        raw[name][grid[keep] - a, ci[keep]] = vals[keep]
        missing[name][grid[keep] - a, ci[keep]] = nulls[keep]
