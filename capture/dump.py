"""The collector format: a counter dump read into raw registers on a common sampling grid.

What a collector writes (the full description, for people who write collectors, is the guide
``collector-format.md``; ``schemas/collector.schema.json`` is its machine-readable form):

- **Layouts.** *Wide*: one row per chip and sample — key columns, then one column per signal
  (a block with instances as a fixed-size list, or one column per instance named ``signal[i]``).
  *Long*: one row per chip, sample, signal and instance — ``signal``, ``instance`` (empty or null
  for a signal without instances; the flat index over the block's axes otherwise) and ``value``.
  Every declared instance appears in some row (``check_instances_seen``); one missing at some
  timestamps only is a null register there.
- **Keys.** ``chip`` (integer, required), ``host`` (optional; chips are keyed by (host, chip), so two
  hosts may both number their chips 0..7), an optional ``sample`` number, and the timestamp:
  ``timestamp_ns``, ``timestamp_us``, ``timestamp_ms`` or ``timestamp_s``, or ``timestamp`` with its
  unit given (metadata ``timestamp_unit`` or the reader's argument).
- **Files.** Parquet, Arrow IPC or CSV; one file, a folder (Hive partitions become columns) or a glob
  (``capture.dump_io``). Parquet/Arrow metadata under the key ``perfonto`` (JSON) may give
  ``generation``, ``sample_period_ns``, ``timestamp_unit``, ``model``, ``duration_ns``.
- **Subsets.** A dump may hold any subset of the generation's signals; the absent ones are listed
  in ``CounterDump.absent`` and the metrics that read them are unavailable ("not in the dump").
  Columns that are not signals are ignored with a note (and a "did you mean").
- **Types.** Registers are unsigned integers. A counter column of a floating type, of a storage type
  narrower than the counter's register width, of a signed type whose sign bit the register would need
  (a 64-bit counter as int64; a 32- or 48-bit one in int64, as Spark and Hive write, is read), or with
  another instance count than the generation declares, is a ``DumpError`` naming the file, the column
  and the fix. A signed column may hold no negative value.
- **Slots.** On a block whose generation declares ``slots`` (a SKU with 4 of its 8 memory channels
  populated), a signal holds the present slots only: a list column of every slot (8) or of the
  present ones (4, in slot order), ``name[i]`` columns of every slot or of the present slots (``i``
  the slot's flat index), long rows whose ``instance`` is a slot's flat index (rows of slots that
  are not present are left out).

Samples are placed on a grid: with a sample period (metadata or argument), a chip's sample lands at
index round((t − t0) / period), so a dropped sample leaves a hole; with a ``sample`` column, that is
the grid; otherwise every chip must have the same number of samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perfonto.ontology.diagnostics import did_you_mean
from perfonto.ontology.resolved import Generation

from .dump_grid import Grid, _grid, drift_note, time_reversals  # noqa: F401  (the grid placement, shared with capture.dump_scan)
from .dump_io import DumpError, check_unique_columns, load, rows_counted, two_layouts
from .dump_wide import _check_type, _wide_one  # noqa: F401  (one register column, shared with capture.pieces and dump_long)
from .dump_long import _long_columns, _long_keys, _pivot, check_instances_seen  # noqa: F401  (shared with capture.dump_scan)

TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
KEYS = {"host", "chip", "sample", "timestamp", "signal", "instance", "value"} | {f"timestamp_{u}" for u in TIME_UNITS}
LONG_TYPES = {
    "chip": pa.int64(),
    "value": pa.uint64(),
    "instance": pa.int64(),
    "signal": pa.string(),
    "host": pa.string(),
}


@dataclass
class CounterDump:
    """Raw samples of one capture on a common sampling grid.

    ``raw[name]``: uint64 (samples, chips, instances), only for the signals the dump holds;
    ``timestamps_ns``: int64 (samples, chips); ``present``: bool (samples, chips) — False where the
    chip has no sample at that grid point; ``missing[name]``: bool like ``raw`` — True where the
    register was null; ``chips``: chip number of each chip column; ``hosts``: host of each chip
    column (None when the dump names no hosts); ``absent``: the generation's signals not in the dump;
    ``notes``: what the reader ignored.
    """

    path: str
    chips: np.ndarray
    timestamps_ns: np.ndarray
    raw: dict[str, np.ndarray]
    present: np.ndarray
    missing: dict[str, np.ndarray] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    hosts: np.ndarray | None = None
    absent: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def keys(self) -> list[tuple[str | None, int]]:
        """(host, chip) of every chip column."""
        hosts = self.hosts if self.hosts is not None else [None] * len(self.chips)
        return [(h, int(c)) for h, c in zip(hosts, self.chips)]


def csv_types(gen: Generation) -> dict[str, pa.DataType]:
    """Column types a CSV dump is read with: registers unsigned 64-bit, keys as the format says."""
    types = dict(LONG_TYPES)
    types.update(
        {
            "timestamp_ns": pa.int64(),
            "timestamp_us": pa.float64(),
            "timestamp_ms": pa.float64(),
            "timestamp_s": pa.float64(),
            "timestamp": pa.float64(),
            "sample": pa.int64(),
        }
    )
    for name, sig in gen.signals.items():
        types[name] = pa.uint64()
        for i in range(max(sig.instances, sig.full_instances) if sig.instances > 1 or sig.full_instances else 0):
            types[f"{name}[{i}]"] = pa.uint64()
    return types


def read_counters(
    source, gen: Generation, *, timestamp_unit: str | None = None, sample_period_ns: int | None = None
) -> CounterDump:
    """Read a counter dump in the collector format (see the module docstring) for ``gen``.

    ``source``: a path, folder, glob or ``pa.Table``. ``timestamp_unit`` (ns, us, ms, s) for a bare
    ``timestamp`` column; ``sample_period_ns`` overrides the metadata's.

    Raises:
        DumpError: unreadable or corrupt input, a column that contradicts the ontology, keys that
            are missing or null, timestamps that do not increase, no signal of ``gen`` at all.
    """
    loaded = load(source, "counter dump", csv_types(gen))
    t, p, meta = loaded.table, loaded.label, loaded.meta
    names = t.column_names
    check_unique_columns(p, names)
    # the collector-format version and duration_ns: checked as the metadata is read (dump_io._meta)
    if meta.get("generation") not in (None, gen.name):
        raise DumpError(
            f"{p}: the dump was written for generation `{meta['generation']}`, not `{gen.name}`; "
            f"{generation_hint(meta['generation'])}"
        )
    check_unit_option(names, p, timestamp_unit)
    unit = timestamp_unit or meta.get("timestamp_unit")
    chip, host, ts = _keys(t, p, unit)
    long = "signal" in names and "value" in names
    notes: list[str] = []
    columns = _long_columns(t, p, gen, notes) if long else _wide_columns(t, p, gen, notes)
    if not columns:
        raise DumpError(
            f"{p}: no column is a signal of generation `{gen.name}` (columns: {', '.join(names[:10])}"
            f"{' …' if len(names) > 10 else ''}); was the dump written for another generation?"
        )
    parts = list(zip(loaded.files or [p], loaded.rows))
    notes += time_reversals(chip, host, ts, parts, _long_keys(t) if long else ())
    if long:
        for name, (_, inst, *_rest) in columns.items():
            sig = gen.signals[name]
            seen = np.unique(inst)
            check_instances_seen(p, gen, name, np.asarray(sig.slots)[seen] if sig.slots is not None else seen)
        chip, host, ts, columns = _pivot(chip, host, ts, t, p, columns)
    period = _period(meta, sample_period_ns, p)
    sample = None
    if "sample" in names and not long:
        if not pa.types.is_integer(t.column("sample").type):
            raise DumpError(f"{p}: column `sample` has type {t.column('sample').type}; it must hold sample numbers")
        sample = t.column("sample").to_numpy(zero_copy_only=False).astype(np.int64)
    return _on_grid(p, gen, chip, host, ts, columns, period, sample, meta, notes)


INT64_MAX = 2**63 - 1


def _within_int64(c, key: str, p) -> None:
    """An unsigned key column (a chip id, a timestamp) whose values fit int64, where perfonto holds keys:
    2^63 read as int64 would be chip −9223372036854775808.

    Raises:
        DumpError: the first value past 2^63 − 1, with its row (counted from 1) and column.
    """
    arr = c.to_numpy(zero_copy_only=False)
    big = arr > INT64_MAX
    if big.any():
        i = int(np.argmax(big))
        raise DumpError(
            f"{p}: row {i + 1}, column `{key}`: value {int(arr[i])} is past 2^63 − 1, the largest {key} "
            "perfonto holds; write ids and timestamps that fit a signed 64-bit integer"
        )


def generation_hint(name: str) -> str:
    """What to do with a dump written for generation ``name``: ``--generation NAME`` where it is shipped, else
    ``--catalog DIR`` (the folder it was written with: `--generation sohu_next` only said that no such
    generation exists)."""
    from perfonto.ontology.loader import shipped_generations

    if name in shipped_generations():
        return f"evaluate it with --generation {name}"
    return f"`{name}` is not shipped: evaluate it with --catalog DIR, the catalog folder that declares it"


def check_unit_option(names: list[str], p: str, timestamp_unit: str | None) -> None:
    """Refuse a ``--timestamp-unit`` that contradicts the dump's timestamp column (``timestamp_ns`` read
    with ``--timestamp-unit us`` was read as ns, the option ignored in silence).

    Raises:
        DumpError: naming the column, its unit and the option.
    """
    stamp = [n for n in names if n.startswith("timestamp_") and n[10:] in TIME_UNITS]
    if timestamp_unit is not None and len(stamp) == 1 and stamp[0][10:] != timestamp_unit:
        raise DumpError(
            f"{p}: column `{stamp[0]}` is in {stamp[0][10:]}, and --timestamp-unit {timestamp_unit} says "
            f"otherwise; the option is for a bare `timestamp` column: drop it, or rename the column if it is "
            f"really in {timestamp_unit}"
        )


def _stamp_column(names: list[str], p: str, unit: str | None) -> tuple[str, str]:
    """The one timestamp column (``timestamp_<unit>``, or ``timestamp`` with ``unit``) and its unit."""
    stamp = [n for n in names if n == "timestamp" or (n.startswith("timestamp_") and n[10:] in TIME_UNITS)]
    if len(stamp) != 1:
        raise DumpError(
            f"{p}: {'no' if not stamp else 'more than one'} timestamp column ({', '.join(stamp) or 'none'}); "
            "write one of timestamp_ns, timestamp_us, timestamp_ms, timestamp_s"
        )
    col = stamp[0]
    u = col[10:] if col != "timestamp" else unit
    if u not in TIME_UNITS:
        raise DumpError(
            f"{p}: column `timestamp` has no unit; name it timestamp_ns/_us/_ms/_s or give --timestamp-unit"
        )
    return col, u


def _check_key_columns(t: pa.Table, p: str, col: str) -> None:
    """Refuse nulls in ``chip`` or the timestamp ``col``, a chip that is not an integer, a timestamp that
    is not a number, and an unsigned chip, timestamp or sample past int64."""
    for key in ("chip", col):
        c = t.column(key)
        if c.null_count:
            r = int(np.flatnonzero(c.is_null().to_numpy(zero_copy_only=False))[0])
            raise DumpError(
                f"{p}: row {r + 1}: `{key}` is empty ({rows_counted(p)}; {c.null_count} such "
                "row(s)); every row needs a chip and a timestamp"
            )
        if key == "chip" and not pa.types.is_integer(c.type):
            raise DumpError(f"{p}: column `chip` has type {c.type}; it must be an integer column")
        if key != "chip" and not (pa.types.is_integer(c.type) or pa.types.is_floating(c.type)):
            raise DumpError(f"{p}: column `{key}` has type {c.type}; it must be an integer column")
    for key in ("chip", col, "sample"):
        if key in t.column_names and pa.types.is_unsigned_integer(t.column(key).type):
            _within_int64(t.column(key), key, p)


def _timestamps_ns(t: pa.Table, p: str, col: str, u: str) -> np.ndarray:
    """The timestamps in ns (int64): integer ns as they are, others scaled and rounded (refused when
    not finite or past int64)."""
    raw_ts = t.column(col).to_numpy(zero_copy_only=False)
    if u == "ns" and pa.types.is_integer(t.column(col).type):
        return raw_ts.astype(np.int64)
    f = raw_ts.astype(np.float64) * TIME_UNITS[u]
    if not np.all(np.isfinite(f)) or (f.size and np.abs(f).max() > 9.2e18):
        raise DumpError(f"{p}: column `{col}` holds a non-finite or out-of-range timestamp")
    return np.rint(f).astype(np.int64)


def _hosts(t: pa.Table, p: str) -> np.ndarray | None:
    """Each row's host (as text), or None without a ``host`` column; a null host is refused."""
    if "host" not in t.column_names:
        return None
    hc = t.column("host")
    if hc.null_count:
        raise DumpError(f"{p}: `host` holds nulls; name every row's host, or drop the column")
    return np.asarray(pc.cast(hc, pa.string()).to_numpy(zero_copy_only=False), dtype=object)


def _keys(t: pa.Table, p: str, unit: str | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Each row's chip, host (None without a ``host`` column) and timestamp in ns, checked; ``unit``:
    the unit of a column named ``timestamp`` (``--timestamp-unit``)."""
    names = t.column_names
    if "chip" not in names:
        raise DumpError(f"{p}: no `chip` column; every row names its chip (and `host` where there are several)")
    col, u = _stamp_column(names, p, unit)
    _check_key_columns(t, p, col)
    chip = t.column("chip").to_numpy(zero_copy_only=False).astype(np.int64)
    ts = _timestamps_ns(t, p, col, u)
    host = _hosts(t, p)
    return chip, host, ts


def _wide_columns(t: pa.Table, p: str, gen: Generation, notes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """signal → (values (N, I) uint64, nulls (N, I) bool) from a wide table."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    flat: dict[str, dict[int, str]] = {}
    for col in t.column_names:
        if col in KEYS:
            continue
        if col.endswith("]") and "[" in col:
            base, _, idx = col[:-1].rpartition("[")
            if base in gen.signals and idx.isdecimal() and len(idx) <= 9:  # an index, not a 5000-digit number
                flat.setdefault(base, {})[int(idx)] = col
                continue
        if col in gen.signals:
            out[col] = _wide_one(t, p, col, gen.signals[col])
        elif not _partition_like(t, col):
            hint = did_you_mean(col, gen.signals)
            notes.append(f"column `{col}` is not a signal of `{gen.name}`; ignored" + (f" ({hint})" if hint else ""))
    for base, cols in flat.items():
        sig = gen.signals[base]
        if base in out:
            raise two_layouts(p, base, next(iter(cols.values())))
        order = _flat_order(p, base, sig, cols)
        vals, nulls = [], []
        for i in order:
            v, n = _wide_one(t, p, cols[i], sig, scalar=True)
            vals.append(v[:, 0])
            nulls.append(n[:, 0])
        out[base] = (np.stack(vals, axis=1), np.stack(nulls, axis=1))
    return out


def flat_indices(sig) -> list[int]:
    """The ``name[i]`` index of each of ``sig``'s instances in a dump's flat layout, in instance order:
    0 … n−1, or on a block with ``slots`` the present slots' numbers (a dump of every slot and one of the
    present slots only both number a column by its slot). The rule the dump reader and the SQL target share."""
    return list(sig.slots) if sig.slots is not None else list(range(sig.instances))


def _flat_order(p: str, base: str, sig, cols: dict[int, str]) -> list[int]:
    """The ``name[i]`` indices to read, in instance order: 0 … n−1; on a block with ``slots``, the
    present slots' flat indices, read from a dump of every slot or of the present slots only."""
    have = sorted(cols)
    if sig.slots is None:
        if have == list(range(sig.instances)):
            return have
        raise DumpError(
            f"{p}: per-instance columns of `{base}` are {', '.join(cols[i] for i in have)}; "
            f"the generation declares {sig.instances} instances, `{base}[0]` … `{base}[{sig.instances - 1}]`"
        )
    if have == list(range(sig.full_instances)) or have == sorted(sig.slots):
        return flat_indices(sig)
    raise DumpError(
        f"{p}: per-instance columns of `{base}` are {', '.join(cols[i] for i in have)}; the block has "
        f"{sig.full_instances} slots of which {sig.instances} are present: write `{base}[0]` … "
        f"`{base}[{sig.full_instances - 1}]`, or the present slots only "
        f"({', '.join(f'`{base}[{i}]`' for i in sig.slots[:8])}"
        f"{' …' if sig.instances > 8 else ''})"
    )


def _partition_like(t: pa.Table, col: str) -> bool:
    """A string column of few distinct values (a Hive partition or a label) is ignored without a note."""
    return pa.types.is_string(t.column(col).type) or pa.types.is_large_string(t.column(col).type)


def _period(meta: dict, override: int | None, p: str) -> int:
    raw = override if override is not None else meta.get("sample_period_ns", 0)
    try:
        value = float(raw or 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer past a double's range
        raise DumpError(f"{p}: metadata sample_period_ns is {str(raw)[:40]!r}, not a number of nanoseconds") from None
    if not np.isfinite(value) or value < 0 or value > 8.64e13:
        raise DumpError(f"{p}: sample_period_ns is {raw!r}; give a finite period of at most a day in ns")
    return int(value)


def _on_grid(p, gen, chip, host, ts, columns, period, sample, meta, notes) -> CounterDump:
    g = _grid(p, chip, host, ts, period, sample)
    keys, host_names, order, ci, grid, stamps, present = (
        g.keys,
        g.host_names,
        g.order,
        g.ci,
        g.grid,
        g.stamps,
        g.present,
    )
    note = drift_note(p, stamps, present, period) if sample is None else None
    if note:
        notes.append(note)
    S, C = present.shape
    raw: dict[str, np.ndarray] = {}
    missing: dict[str, np.ndarray] = {}
    for name in gen.signals:
        if name not in columns:
            continue
        arr, nulls = columns[name]
        n_inst = arr.shape[1]
        out = np.zeros((S, C, n_inst), dtype=np.uint64)
        out[grid, ci] = arr[order]
        raw[name] = out
        if nulls.any():
            m = np.zeros((S, C, n_inst), dtype=bool)
            m[grid, ci] = nulls[order]
            missing[name] = m
    for name, sig in gen.signals.items():
        if name in raw and sig.scale_field is not None and gen.fields[sig.scale_field[0]].register not in raw:
            del raw[name]
            missing.pop(name, None)
            notes.append(
                f"`{name}` takes its unit from `{sig.scale_field[0]}`, whose register is not in the dump: "
                "it is left out (metrics over it are unavailable)"
            )
    absent = tuple(n for n in gen.signals if n not in raw)
    for name, sig in gen.signals.items():
        ind = sig.reset_indicator
        if name in raw and ind is not None and ind not in raw:
            notes.append(
                f"`{name}` declares reset indicator `{ind}`, which is not in the dump: resets are inferred from "
                "implausible increases only"
            )
    return CounterDump(
        p,
        keys[:, 1].astype(np.int64),
        stamps,
        raw,
        present,
        missing,
        dict(meta),
        hosts=None if host is None else host_names[keys[:, 0]],
        absent=absent,
        notes=notes,
    )
