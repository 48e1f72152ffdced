"""A counter dump of any size, read in pieces: one chip group (a host) at a time, and within it one
time range at a time, each piece a ``CounterDump`` whose windows are exactly those of the whole dump.

``plan_dump`` looks at the files (schemas, Hive partitions, row groups, the key columns) without
reading the registers: which hosts there are (a ``host=…`` folder, or the files' ``host`` column),
the generation every part was written for (two generations in one dump is an error naming both
files), and the sampling grid of the whole dump (its length, the first sample number), so that every
piece is placed on the grid as ``capture.dump.read_counters`` would place the whole dump.
The key columns are read here, once, and every host's placement kept (``HostGrid``);
``capture.pieces.iter_chunks`` then reads the register columns in pieces of about ``chunk_rows`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perfonto.ontology.diagnostics import did_you_mean
from perfonto.ontology.resolved import Generation

from .dump import (
    KEYS,
    TIME_UNITS,
    _keys,
    _long_keys,
    _period,
    check_instances_seen,
    check_unit_option,
    csv_types,
    generation_hint,
)
from .dump_grid import Stamps, _grid, drift_note, time_reversals
from .dump_host_grid import HostGrid, _increasing, _on_dump_grid, _regular_grid, missing_chip_notes
from .dump_io import (
    PARQUET,
    DumpError,
    _meta,
    _partition_columns,
    check_partition,
    check_unique_columns,
    damaged,
    partition_array,
    parts_of,
    read_one,
    two_layouts,
)
from .partitions import folder_keys, segment

CHUNK_ROWS = 32_768


@dataclass
class Part:
    """One file's rows of one host: ``rows`` (file row numbers) when the file holds several hosts."""

    path: Path
    partition: dict[str, str]
    host: str | None
    rows: np.ndarray | None = None
    row_group_ends: np.ndarray | None = None  # Parquet: cumulative row counts of its row groups
    table: pa.Table | None = (
        None  # a CSV or Arrow IPC part (read once: CSV parsed, Arrow memory-mapped) or a table given
    )


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
    grids: dict = field(default_factory=dict)  # host -> HostGrid (the planned placement of its rows)
    string_columns: set = field(
        default_factory=set
    )  # columns of a string type (Hive partitions, labels: ignored silently)
    multiplex: object | None = None  # capture.multiplex.Multiplex: times enabled and running, groups (when given)

    @property
    def rows(self) -> int:
        """Sample rows of the whole dump on the grid (chips × grid points), the slots a reader sizes for."""
        return sum(self.chips.values()) * self.n_grid

    @property
    def rows_present(self) -> int:
        """Sample rows the dump holds (``rows`` less the grid points its chips have no sample at)."""
        return sum(int(np.sum(g.grid.counts)) for g in self.grids.values())


def _schema(path: Path, gen: Generation) -> tuple[pa.Schema, np.ndarray | None, pa.Table | None]:
    """A part's schema and, for Parquet, its row groups' cumulative row counts; other parts are read
    here, once (the table is kept: a CSV is parsed once, an Arrow IPC file stays memory-mapped)."""
    if path.name.lower().endswith(PARQUET):
        try:
            pf = pq.ParquetFile(str(path))
        except (OSError, pa.ArrowInvalid) as exc:
            raise DumpError(
                f"{path}: not a readable Parquet counter dump ({' '.join(str(exc).split())[:300]})"
            ) from None
        md = pf.metadata
        return pf.schema_arrow, np.cumsum([md.row_group(i).num_rows for i in range(md.num_row_groups)]), None
    t = read_one(path, "counter dump", csv_types(gen))
    return t.schema, None, t


def _read(part: Part, gen: Generation, columns: list[str], row_groups: list[int] | None = None) -> pa.Table:
    """Columns of a part (all its row groups, or the ones given), with its Hive partition columns."""
    if part.table is not None:
        t = part.table.select([c for c in columns if c in part.table.column_names])
    elif part.row_group_ends is not None:
        from .pieces import open_parquet

        pf = open_parquet(part.path)
        have = set(pf.schema_arrow.names)
        cols = [c for c in columns if c in have]
        try:
            t = pf.read_row_groups(
                row_groups if row_groups is not None else list(range(len(part.row_group_ends))),
                columns=cols,
                use_threads=False,
            )
        except (OSError, pa.ArrowException) as exc:  # a page that does not decode: name the part
            raise damaged(part.path, exc) from None
    else:
        t = read_one(part.path, "counter dump", csv_types(gen))
        t = t.select([c for c in columns if c in t.column_names])
    for k, v in part.partition.items():
        if k in columns and k not in t.column_names:
            t = t.append_column(k, partition_array(k, v, t.num_rows))
    return t


def _hosts_of(part: Part, gen: Generation) -> list:
    """The distinct values of a part's ``host`` column: from the Parquet statistics when every row
    group says one host (min = max, no nulls), else read."""
    if part.table is None and part.row_group_ends is not None:
        from .pieces import open_parquet

        md = open_parquet(part.path).metadata
        idx = md.schema.to_arrow_schema().get_field_index("host")
        seen = set()
        for i in range(md.num_row_groups):
            st = md.row_group(i).column(idx).statistics if idx >= 0 else None
            if st is None or not st.has_min_max or st.min != st.max or st.null_count:
                seen = None
                break
            seen.add(st.min.decode() if isinstance(st.min, bytes) else st.min)
        if seen is not None and len(seen) == 1:
            return list(seen)
    return pc.unique(_read(part, gen, ["host"]).column("host")).to_pylist()


def plan_dump(
    source, gen: Generation, *, timestamp_unit: str | None = None, sample_period_ns: int | None = None
) -> DumpPlan:
    """Plan the reading of ``source`` (a file, a folder tree — Hive-partitioned or not —, a glob or a
    ``pa.Table``) in pieces; see the module docstring.

    Raises:
        DumpError: as ``read_counters`` — and parts written for different generations, parts that
            name hosts beside parts that do not.
    """
    given = source if isinstance(source, pa.Table) else None
    label, files = ("<table>", [Path("<table>")]) if given is not None else parts_of(source, "counter dump")
    root = Path(label) if given is None and Path(label).is_dir() else None
    found = _Found()
    for f in files:
        schema, ends, table = (given.schema, None, given) if given is not None else _schema(f, gen)
        _add_file(found, f, schema, ends, table, root, gen)
    _check_parts(label, gen, found)
    plan = _new_plan(label, gen, found, timestamp_unit, sample_period_ns)
    plan.columns = _signal_columns(plan, found.names)
    if not plan.columns:
        names = found.names
        topo = set(names) <= {"host", "chip", "rack", "pod"}
        raise DumpError(
            f"{label}: no column is a signal of generation `{gen.name}` (columns: {', '.join(names[:10])}"
            f"{' …' if len(names) > 10 else ''}); "
            + (
                "these are a topology's columns: give that file with --topology and point at the counter dump"
                if topo
                else "was the dump written for another generation?"
            )
        )
    plan.absent = tuple(n for n in gen.signals if n not in plan.columns)
    if not plan.long:
        _check_same_columns(plan, found)
    _scan_grid(plan)
    plan.notes += missing_chip_notes(plan)
    return plan


def _check_same_columns(plan: DumpPlan, found: _Found) -> None:
    """Every part of a wide dump holds every signal column the dump has (a host whose collector missed a
    register would otherwise read as if the register were absent from the whole dump, or fail mid-read).

    Raises:
        DumpError: naming the part, the first column it lacks and a part that has it."""
    wanted = [c for cols in plan.columns.values() for c in cols]
    for f, have in found.cols_of.items():
        missing = [c for c in wanted if c not in have]
        if missing and len(missing) == len(wanted):  # no signal at all: a file that is no counter part
            raise DumpError(
                f"{f}: holds no signal column (its columns: {', '.join(sorted(have)[:8])}); it is not a counter "
                "part: move it out of the dump's folder"
                + (" (a topology goes to --topology)" if have <= {"host", "chip", "rack", "pod"} else "")
            )
        if missing:
            other = next(g for g, cols in found.cols_of.items() if missing[0] in cols)
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise DumpError(
                f"{f}: no column `{missing[0]}`{more}, which {other} has; every part of a dump holds the same "
                "signal columns: write the missing registers into this part (null where they were not read), "
                "or leave the part out"
            )


@dataclass
class _Found:
    """What the parts' schemas say (``_add_file``, file by file): the first part's metadata, the
    generation each part names (generation → its first file), the parts of each host, every column
    name in order of appearance, the string columns, and a file that names hosts and one that does
    not."""

    meta: dict = field(default_factory=dict)
    gens: dict[str, str] = field(default_factory=dict)
    groups: dict[str | None, list[Part]] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    strings: set[str] = field(default_factory=set)
    with_host: Path | None = None
    without_host: Path | None = None
    cols_of: dict[Path, set[str]] = field(default_factory=dict)  # each file's columns, Hive partition's included


def _add_file(found: _Found, f: Path, schema: pa.Schema, ends, table, root: Path | None, gen: Generation) -> None:
    """One file's metadata, generation, columns (its own and its Hive partition's) and parts."""
    m = _meta(pa.table({}, schema=pa.schema([], metadata=schema.metadata)), str(f))
    found.meta = found.meta or m
    if m.get("generation") is not None:
        found.gens.setdefault(str(m["generation"]), str(f))
    part_cols = {**(folder_keys(root) if root is not None else {}), **_partition_columns(f, root)}
    check_unique_columns(f, list(schema.names))
    cols = list(schema.names) + [k for k in part_cols if k not in schema.names]
    found.names += [c for c in cols if c not in found.names]
    found.cols_of[f] = set(cols)
    found.strings |= {
        fld.name for fld in schema if pa.types.is_string(fld.type) or pa.types.is_large_string(fld.type)
    } | {k for k, v in part_cols.items() if pa.types.is_string(partition_array(k, v, 0).type)}
    if "chip" in part_cols and "chip" in schema.names:  # the rows' chips against their chip=… folder
        col = table.column("chip") if table is not None else pq.read_table(f, columns=["chip"]).column("chip")
        check_partition(f, "chip", part_cols["chip"], col)
    _add_parts(found, f, schema, part_cols, ends, table, gen)


def _add_parts(found: _Found, f: Path, schema: pa.Schema, part_cols: dict, ends, table, gen: Generation) -> None:
    """A file's parts by host: one per host its ``host`` column names (each with the host's rows when
    it names several), else its ``host=…`` folder's, else the group without hosts."""
    if "host" in schema.names:
        hosts = _hosts_of(Part(f, {}, None, None, ends, table), gen)
        if any(h is None for h in hosts):
            raise DumpError(f"{f}: `host` holds nulls; name every row's host, or drop the column")
        if "host" in part_cols:
            check_partition(f, "host", part_cols["host"], pa.array([str(h) for h in hosts], pa.string()))
        for h in sorted(str(x) for x in hosts):
            segment("host", h, what=f"{f}: column host")  # a host names an output folder: refused here if it cannot
            found.groups.setdefault(h, []).append(
                Part(f, part_cols, h, None if len(hosts) == 1 else np.array([]), ends, table)
            )
        found.with_host = found.with_host or f
    elif "host" in part_cols:
        found.groups.setdefault(part_cols["host"], []).append(Part(f, part_cols, None, None, ends, table))
        found.with_host = found.with_host or f
    else:
        found.groups.setdefault(None, []).append(Part(f, part_cols, None, None, ends, table))
        found.without_host = found.without_host or f


def _check_parts(label: str, gen: Generation, found: _Found) -> None:
    """One generation over all parts, and it is ``gen``; every part names its host, or none does."""
    if len(found.gens) > 1:
        (g1, f1), (g2, f2) = list(found.gens.items())[:2]
        raise DumpError(
            f"{f2}: written for generation `{g2}`, but {f1} for `{g1}`; a dump holds one generation — "
            "analyse the generations apart"
        )
    if found.with_host and found.without_host:
        raise DumpError(
            f"{found.without_host}: names no host, but {found.with_host} does; in a fleet every part names its host "
            "(a `host` column or a host=… folder)"
        )
    meta = found.meta
    if meta.get("generation") not in (None, gen.name):
        raise DumpError(
            f"{label}: the dump was written for generation `{meta['generation']}`, not `{gen.name}`; "
            f"{generation_hint(meta['generation'])}"
        )


def _new_plan(
    label: str, gen: Generation, found: _Found, timestamp_unit: str | None, sample_period_ns: int | None
) -> DumpPlan:
    """The plan's frame from the parts: timestamp column and unit, long or wide layout, sample period,
    the host groups in sorted order (the group without hosts first); no columns or grid yet."""
    meta, names = found.meta, found.names
    check_unit_option(names, label, timestamp_unit)
    unit = timestamp_unit or meta.get("timestamp_unit")
    stamps = [n for n in names if n == "timestamp" or (n.startswith("timestamp_") and n[10:] in TIME_UNITS)]
    long = "signal" in names and "value" in names
    period = _period(meta, sample_period_ns, label)
    plan = DumpPlan(
        label,
        gen,
        meta,
        period,
        stamps[0] if len(stamps) == 1 else "timestamp_ns",
        unit,
        long,
        dict(sorted(found.groups.items(), key=lambda kv: "" if kv[0] is None else kv[0])),
        0,
        None,
        {},
        (),
    )
    plan.string_columns = found.strings
    return plan


def _signal_columns(plan: DumpPlan, names: list[str]) -> dict[str, list[str]]:
    """Signal → its columns, in the generation's order: a long dump's signals (each its own column
    name), a wide dump's ``name`` and ``name[i]`` columns (a column that is no signal is noted)."""
    if plan.long:
        return _long_signal_columns(plan)
    return _wide_signal_columns(plan, names)


def _long_signal_columns(plan: DumpPlan) -> dict[str, list[str]]:
    """The signals and, per signal, the instances the rows of the whole dump give (checked against the
    signal's instances when every part's ``instance`` column is an integer one)."""
    gen = plan.gen
    seen: dict[str, set[int]] = {}
    typed = True  # an `instance` column of another type is refused when the part is read
    for parts in plan.groups.values():
        for part in parts:
            t = _read(part, gen, ["signal", "instance"])
            if "instance" in t.column_names and not pa.types.is_null(t.column("instance").type):
                typed &= pa.types.is_integer(t.column("instance").type)
            else:
                t = pa.table({"signal": t.column("signal"), "instance": pa.nulls(t.num_rows, pa.int64())})
            for name, inst in _signal_instances(t):
                seen.setdefault(name, set()).update([int(inst)] if inst else [])
    for name in sorted(seen.keys() & gen.signals.keys()) if typed else ():
        check_instances_seen(plan.label, gen, name, seen[name])
    return {s: [s] for s in gen.signals if s in seen}


def _signal_instances(t: pa.Table) -> list[tuple[str, str]]:
    """The distinct (signal, instance) pairs of a long table's rows, the instance as text ("" for a
    null one); rows without a signal left out."""
    pairs = pc.unique(
        pc.binary_join_element_wise(
            pc.cast(t.column("signal"), pa.string()),
            pc.cast(t.column("instance"), pa.string()).fill_null(""),
            "\x00",
        )
    )
    out = []
    for pair in pairs.to_pylist():
        if pair is not None:
            name, _, inst = pair.partition("\x00")
            out.append((name, inst))
    return out


def _wide_signal_columns(plan: DumpPlan, names: list[str]) -> dict[str, list[str]]:
    """A wide dump's columns by signal (``name``, ``name[i]``); a column that is neither a key, a string
    column nor a signal's is noted once in ``plan.notes`` (with a "did you mean")."""
    gen = plan.gen
    out: dict[str, list[str]] = {}
    for col in names:
        base, _, idx = col[:-1].rpartition("[") if col.endswith("]") and "[" in col else (col, "", "")
        if idx and not (idx.isdecimal() and len(idx) <= 9):  # an index, not a 5000-digit number
            base = col
        if base in gen.signals and col not in KEYS:
            out.setdefault(base, []).append(col)
        elif (
            col not in KEYS and col not in plan.string_columns
        ):  # as read_counters says it (capture.dump._wide_columns)
            hint = did_you_mean(col, gen.signals)
            note = f"column `{col}` is not a signal of `{gen.name}`; ignored" + (f" ({hint})" if hint else "")
            if note not in plan.notes:
                plan.notes.append(note)
    for s, cols in out.items():
        if s in cols and len(cols) > 1:  # the whole signal and one of its instances: which to read?
            other = next(c for c in cols if c != s)
            raise two_layouts(plan.label, s, other)
    return {s: out[s] for s in gen.signals if s in out}


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


def host_grid(plan: DumpPlan, host) -> HostGrid:
    """The planned placement of ``host``'s rows (``plan_dump`` computed it from the key columns)."""
    return plan.grids[host]
