"""The parts of a counter dump found from their schemas, for ``capture.dump_scan.plan_dump``, without
reading the registers: each file's schema (Parquet row groups; a CSV or Arrow IPC part read once), its
metadata, generation, columns (its own and its Hive partition's) and hosts (a ``host`` column, from the
Parquet statistics where they say one host, or a ``host=…`` folder), gathered file by file in ``_Found``.

Checked here: one generation over all parts, and it is the one asked for; every part names its host, or
none does; every part of a wide dump holds the same signal columns. ``_new_plan`` then frames the
``DumpPlan`` (timestamp column and unit, layout, sample period, host groups).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from perfonto.ontology.resolved import Generation

from .dump import TIME_UNITS, _period, check_unit_option, csv_types, generation_hint
from .dump_io import (
    PARQUET,
    DumpError,
    _meta,
    _partition_columns,
    check_partition,
    check_unique_columns,
    partition_array,
    read_one,
)
from .dump_plan import DumpPlan, Part, _read
from .partitions import folder_keys, segment


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
