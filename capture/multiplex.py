"""Multiplexed counters: time enabled and time running per counter read, values scaled as perf scales
them, and the groups each counter ran in, so that a metric whose inputs were never counted together can
be marked "mismeasured".

**In the collector format** (wide layout) a register column ``C`` (``name`` or ``name[i]``) may come
with three side columns, each optional except the first two together:

- ``C@enabled_ns``: the time the counter was enabled, ns, a running total (perf's ``time_enabled``,
  ``PERF_FORMAT_TOTAL_TIME_ENABLED`` in ``perf_event_open(2)``);
- ``C@running_ns``: the time it was on the PMU counting, ns, a running total (``time_running``);
- ``C@group``: the multiplex group the counter was scheduled in for the interval that ends at this read
  (an integer; null or negative: not known). Counters of one group are scheduled together
  (``perf_event_open(2)``, "group_fd"; perf's ``{a,b}`` syntax), so their counts share one running time.

Scaling (perf's rule, ``tools/perf/util/evsel.c``, ``perf_counts_values__scale``:
``val = (u64)((double) val * ena / run)``, applied with ``-I`` to each interval's deltas): over a window,
the register's increase (modulo 2^width) times Δenabled / Δrunning, truncated; a window where the counter
was enabled but never ran (Δrunning = 0) is null, as perf's ``<not counted>``. The register is rewritten
as the running total of the scaled increases (modulo 2^width, restarting at a null), so every backend
reads scaled values; each signal's raw and scaled run totals are recorded (``Multiplex.scaling``) and
noted. A capture whose values are already scaled (``perf stat`` prints scaled counts) says so with the
metadata key ``multiplex_scaled: true``: its registers are kept.

**Counted together.** In a window, two inputs of a metric were counted together when either ran the
whole window (Δrunning = Δenabled) or both ran in the same group (same ``@group`` id, ≥ 0). Otherwise
(different groups, or a multiplexed input of unknown group) their counts come from different parts of
the window and their ratio is not a measurement of one interval: ``never_together`` gives, per
metric's inputs, the (window, chip) cells where that holds, labelled with both inputs and groups.
Counters of different instances (``name[0]``, ``name[1]``: CPUs with their own PMUs) are compared only
within one instance number.

A read equal to one of the signal's ``sentinel`` values is null before scaling (the windows on either
side are null, as without side columns).

Limits: wide layout only (a long dump with side columns is refused); one host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from .dump_io import DumpError

SEP = "@"
SIDE = ("enabled_ns", "running_ns", "group")
MISMEASURED = "mismeasured"
_FLAT = re.compile(r"^(?P<base>.+)\[(?P<i>\d{1,9})\]$")  # an index, not a 5000-digit number
_STAMPS = {"timestamp_ns": 1, "timestamp_us": 1_000, "timestamp_ms": 1_000_000, "timestamp_s": 1_000_000_000}


@dataclass
class Series:
    """One register column's side data on one chip, in time order: ``t_ns`` (S,) int64 read times,
    ``enabled``/``running`` (S,) float64 running totals in ns, ``group`` (S,) int64 (-1: not known)."""

    t_ns: np.ndarray
    enabled: np.ndarray
    running: np.ndarray
    group: np.ndarray

    def windows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per window between consecutive reads: (start_ns, end_ns, Δenabled ns, Δrunning ns, group)."""
        return (self.t_ns[:-1], self.t_ns[1:], np.diff(self.enabled), np.diff(self.running), self.group[1:])


@dataclass
class Multiplex:
    """The multiplex side data of a capture: ``series[(signal, instance)][chip]`` (``Series``; instance
    0 for a column without ``[i]``), ``scaled_by_reader`` (the registers held scaled counts already),
    ``scaling[signal]``: {``raw``, ``scaled``: run totals in raw counts, ``running_pct``: Σrunning /
    Σenabled × 100 over its columns and chips}."""

    series: dict[tuple[str, int], dict[int, Series]] = field(default_factory=dict)
    scaled_by_reader: bool = False
    scaling: dict[str, dict[str, float]] = field(default_factory=dict)

    def note(self) -> str:
        """One line for the report: which counters ran part of the time and how they were scaled."""
        parts = []
        for s, d in sorted(self.scaling.items()):
            if d["running_pct"] < 100.0 - 1e-9:
                f = f"x{d['scaled'] / d['raw']:.4g}" if d["raw"] else "no window counted"
                parts.append(f"{s} ran {d['running_pct']:.2f} % ({f})")
        how = "by the reader (perf's printed counts)" if self.scaled_by_reader else "count x enabled / running"
        return f"multiplexed counters scaled as perf scales them ({how}): " + (
            ", ".join(parts) if parts else "every counter ran all of its enabled time"
        )


def side_columns(names) -> dict[str, dict[str, str]]:
    """``{register column: {side: column name}}`` for the ``C@enabled_ns|running_ns|group`` columns in
    ``names``."""
    out: dict[str, dict[str, str]] = {}
    for n in names:
        base, sep, side = n.rpartition(SEP)
        if sep and side in SIDE:
            out.setdefault(base, {})[side] = n
    return out


def _schema_names(source) -> list[str]:
    """The column names of a table, or of every file of a dump path (cheap: schema or header only; a side
    column in any part counts)."""
    if isinstance(source, pa.Table):
        return source.column_names
    from .dump_io import parts_of
    from .instances import _schema_of

    try:
        _, files = parts_of(source, "counter dump")
    except DumpError:
        return []
    names: dict[str, None] = {}
    for f in files:
        try:
            s = _schema_of(Path(f))
        except (DumpError, OSError, pa.ArrowException):
            continue  # the dump's reader says what is wrong with the file
        names |= dict.fromkeys(s.names if isinstance(s, pa.Schema) else s)
    return list(names)


def split_multiplex(source, gen, notes: list[str]) -> tuple[object, Multiplex | None]:
    """``source`` (a collector dump: path or table) without its multiplex side columns, its registers
    scaled (module docstring), and the side data; ``(source, None)`` when it has none.

    Raises:
        DumpError: a side column without its register or its pair, on a signal that is not a counter,
            in a long dump, with hosts, or with values that go back or run longer than enabled (file,
            row and column named).
    """
    if not side_columns(_schema_names(source)):
        return source, None
    from .dump import csv_types
    from .dump_io import load

    loaded = load(source, "counter dump", csv_types(gen))  # a CSV's registers read as the dump reader reads them
    t, label = loaded.table, loaded.label
    sides = side_columns(t.column_names)
    _check_layout(t, sides, gen, label)
    stamp = next((c for c in _STAMPS if c in t.column_names), None)
    if stamp is None:
        raise DumpError(f"{label}: multiplex columns need a `timestamp_ns` (or _us, _ms, _s) column")
    if "chip" not in t.column_names:
        raise DumpError(f"{label}: no `chip` column; every row of a collector dump names its chip")
    from .dump import _check_key_columns
    from .dump_wide import _check_type

    _check_key_columns(t, label, stamp)  # the dump reader's checks, here where the file is still known
    for col in sides:
        m = _FLAT.match(col)
        _check_type(label, col, gen.signals[m.group("base") if m else col], t.schema.field(col).type)
    order = pa.compute.sort_indices(t, [("chip", "ascending"), (stamp, "ascending")])
    t = t.take(order)
    starts = np.cumsum([0, *loaded.rows]) if loaded.rows else np.zeros(1, np.int64)

    def at(i) -> str:
        """A row of the sorted table as the file and 1-based row it was read from (the dump reader's numbering)."""
        k = int(np.asarray(order)[i])
        if len(loaded.files) > 1:
            part = int(np.searchsorted(starts, k, side="right")) - 1
            return f"{loaded.files[part]}: row {k - int(starts[part]) + 1}"
        return f"{label}: row {k + 1}"

    chips = np.asarray(t.column("chip").to_numpy(zero_copy_only=False), np.int64)
    ts = _stamps_ns(t, stamp, label)
    mux = Multiplex(scaled_by_reader=bool(loaded.meta.get("multiplex_scaled")))
    cols = {n: t.column(n) for n in t.column_names if SEP not in n}
    for col, side in sides.items():
        sig = _FLAT.match(col).group("base") if _FLAT.match(col) else col
        inst = int(_FLAT.match(col).group("i")) if _FLAT.match(col) else 0
        e, r, g = (_side(t, side.get(k), label, at) for k in SIDE)
        sig_ = gen.signals[sig]
        _check_width(cols[col], col, sig_.width, at)
        new, raw_total, scaled_total, big = _scale(
            cols[col], e, r, chips, sig_.width or 64, mux.scaled_by_reader, sig_.sentinel or ()
        )
        cols[col] = new
        if big:
            notes.append(
                f"{label}: `{col}`: {big} window(s) whose scaled increase is half the register's range or more, null "
                "(read the counter more often)"
            )
        per = mux.series.setdefault((sig, inst), {})
        for c in np.unique(chips):
            m = chips == c
            per[int(c)] = Series(ts[m], e[m], r[m], g[m].astype(np.int64))
            _check_side(per[int(c)], col, np.nonzero(m)[0], at)
        d = mux.scaling.setdefault(sig, {"raw": 0.0, "scaled": 0.0, "enabled": 0.0, "running": 0.0})
        d["raw"] += raw_total
        d["scaled"] += scaled_total
        for s in per.values():
            d["enabled"] += float(s.enabled[-1] - s.enabled[0])
            d["running"] += float(s.running[-1] - s.running[0])
    for d in mux.scaling.values():
        d["running_pct"] = 100.0 * d.pop("running") / d["enabled"] if d["enabled"] else 100.0
        d.pop("enabled")
    notes.append(mux.note())
    out = pa.table(cols)
    return out.replace_schema_metadata(_increments_meta(t.schema.metadata, mux.scaling)), mux


def _stamps_ns(t: pa.Table, stamp: str, label: str) -> np.ndarray:
    """The rows' times in ns, as the dump reader takes them (scaled to ns, then rounded)."""
    raw_ts = t.column(stamp).to_numpy(zero_copy_only=False)
    if stamp == "timestamp_ns" and pa.types.is_integer(t.column(stamp).type):
        return np.asarray(raw_ts, np.int64)
    f = np.asarray(raw_ts, np.float64) * _STAMPS[stamp]
    if not np.all(np.isfinite(f)) or (f.size and np.abs(f).max() > 9.2e18):
        raise DumpError(f"{label}: column `{stamp}` holds a non-finite or out-of-range timestamp")
    return np.rint(f).astype(np.int64)


def _check_width(column, col: str, width, at) -> None:
    """A negative value, or one past the register's width, is refused with its row, as the dump reader
    does; never masked (a negative one was reported as 2^64 − 1 past the width: a review)."""
    values = np.asarray(column.fill_null(0).to_numpy(zero_copy_only=False))
    if values.dtype.kind == "i" and (values < 0).any():  # a signed column (Spark's): refused as itself, first
        bad = int(np.flatnonzero(values < 0)[0])
        raise DumpError(f"{at(bad)}, column `{col}`: value {int(values[bad])} is negative; raw registers are unsigned")
    if not width or width >= 64:
        return
    raw = values.astype(np.uint64)
    over = np.nonzero(raw >> np.uint64(width))[0]
    if over.size:
        raise DumpError(
            f"{at(over[0])}, column `{col}`: value {int(raw[over[0]])} does not fit the {width}-bit "
            "register; write the register's raw value"
        )


def _increments_meta(md, scaled) -> dict:
    """The table's schema metadata with the multiplexed signals listed under ``increments``: a scaled
    register is a running total of scaled increments, and a window the counter never ran has none, so a
    gap in it must not be bridged from the totals on either side (``metrics.bridge``), which would mix the
    raw value it restarts from with the scaled total before it."""
    md = dict(md or {})
    try:
        doc = json.loads(md.get(b"perfonto", b"{}"))
    except ValueError:
        return md  # the dump reader says what is wrong with it
    if isinstance(doc, dict) and doc.get("increments") is not True:
        doc["increments"] = sorted(set(doc.get("increments") or []) | set(scaled))
        md[b"perfonto"] = json.dumps(doc).encode()
    return md


def _check_layout(t: pa.Table, sides: dict, gen, label: str) -> None:
    """Refuse side columns a reader cannot place (module docstring's limits)."""
    if "signal" in t.column_names:
        raise DumpError(
            f"{label}: multiplex columns (`…@enabled_ns`) need the wide layout; write one column per signal"
        )
    if "host" in t.column_names:
        raise DumpError(f"{label}: multiplex columns are read for one host's dump; give each host's dump on its own")
    for col, side in sides.items():
        m = _FLAT.match(col)
        sig = m.group("base") if m else col
        if col not in t.column_names or sig not in gen.signals:
            raise DumpError(
                f"{label}: column `{side[next(iter(side))]}` names `{col}`, which is not a register column of the "
                f"dump; name the column `<signal>@enabled_ns` after a signal of `{gen.name}`"
            )
        if not {"enabled_ns", "running_ns"} <= set(side):
            raise DumpError(
                f"{label}: `{col}` has {', '.join(sorted(side))} but not both `@enabled_ns` and `@running_ns`"
            )
        from perfonto.ontology import kinds

        if not kinds.of(gen.signals[sig]).counts:
            raise DumpError(f"{label}: `{col}` is a {gen.signals[sig].kind}; only counters are multiplexed and scaled")
        if pa.types.is_list(t.schema.field(col).type) or pa.types.is_fixed_size_list(t.schema.field(col).type):
            raise DumpError(f"{label}: `{col}` is a list column; give multiplexed instances as `{col}[i]` columns")


def _side(t: pa.Table, name: str | None, label: str, at) -> np.ndarray:
    """A side column as float64 (group: -1 where null); an absent ``@group`` is all -1."""
    if name is None:
        return np.full(t.num_rows, -1.0)
    a = t.column(name)
    if not (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)):
        raise DumpError(f"{label}: column `{name}` is {a.type}; it holds numbers (ns, or a group id)")
    null = np.asarray(a.is_null().to_numpy(zero_copy_only=False), bool)
    v = np.array(a.fill_null(0).to_numpy(zero_copy_only=False), np.float64)  # a copy: written below

    if name.endswith("@group"):
        v[null | np.isnan(v)] = -1.0  # null or NaN: the group is not known
        bad = np.nonzero((v != np.floor(v)) | (np.abs(v) > 2**62))[0]
        if bad.size:
            raise DumpError(
                f"{at(bad[0])}, column `{name}`: {v[bad[0]]:g} is not a whole group id; write the "
                "group each read's interval was scheduled in as an integer (null or -1: not known)"
            )
    elif null.any():
        first = np.nonzero(null)[0][0]
        raise DumpError(f"{at(first)}, column `{name}`: null; every read records its times")
    else:
        bad = np.nonzero(~np.isfinite(v) | (np.abs(v) > 9.2e18))[0]
        if bad.size:
            raise DumpError(
                f"{at(bad[0])}, column `{name}`: {v[bad[0]]:g} is not a finite number of ns below 2^63; "
                "write perf's time_enabled / time_running as running totals in ns"
            )
    return v


def _check_side(s: Series, col: str, rows: np.ndarray, at) -> None:
    """Refuse times that go back or a counter that ran longer than it was enabled (row and column named)."""
    _, _, de, dr, _ = s.windows()
    bad = np.nonzero((de < 0) | (dr < 0) | (dr > de * (1 + 1e-9) + 1e-6) | (s.running > s.enabled + 1e-6)[1:])[0]
    if bad.size:
        raise DumpError(
            f"{at(rows[bad[0] + 1])}, column `{col}@enabled_ns`/`{col}@running_ns`: the times go back, or the counter "
            "ran longer than it was enabled; they are running totals of perf's time_enabled and time_running"
        )


def _scale(a: pa.ChunkedArray, e, r, chips, width: int, already: bool, sentinel=()):
    """The register column with each window's increase scaled by Δenabled / Δrunning (module docstring), and
    the run totals (raw, scaled) of its increases, and the number of windows whose scaled increase was half
    the register's range or more (null: the rewritten register cannot carry it; read more often). A read
    equal to one of the signal's ``sentinel`` values is no count: null, as the windows on either side."""
    u = np.asarray(a.fill_null(0).to_numpy(zero_copy_only=False)).astype(np.uint64)
    null = np.asarray(a.is_null().to_numpy(zero_copy_only=False), bool)
    if len(sentinel):
        null = null | np.isin(u, np.asarray(sentinel, dtype=np.uint64))
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    out, out_null = u.copy(), null.copy()
    raw_total = scaled_total = 0.0
    too_big = 0
    for c in np.unique(chips):
        idx = np.nonzero(chips == c)[0]
        with np.errstate(over="ignore"):
            delta = (u[idx][1:] - u[idx][:-1]) & mask
        de, dr = np.diff(e[idx]), np.diff(r[idx])
        ok = ~(null[idx][1:] | null[idx][:-1])
        never = (dr <= 0) & (de > 0)  # enabled, never on the PMU: perf's <not counted>
        if not already:  # an increase with no running time (nor enabled time) was never counted either
            never = never | ((dr <= 0) & (delta > 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(dr > 0, de / np.where(dr > 0, dr, 1.0), 1.0)
        scaled = np.floor(delta.astype(np.float64) * factor)  # perf's (u64) cast truncates
        if not already:  # an increase the register cannot carry (half its range or more): null, never a made-up wrap
            big = ok & (scaled >= float(1 << (width - 1)))
            too_big += int(big.sum())
            never = never | big
        raw_total += float(delta[ok].astype(np.float64).sum())
        scaled_total += float(scaled[ok & ~never].sum()) if not already else float(delta[ok].sum())
        if already:
            out_null[idx[1:][never]] = True
            continue
        restart = ~ok | never  # after a null, the total restarts from the raw register
        scaled[restart] = 0.0
        n = len(idx)
        total = np.zeros(n, np.uint64)
        with np.errstate(over="ignore"):  # uint64 sums wrap modulo 2^64; the mask takes them modulo 2^width
            total[1:] = np.cumsum(scaled.astype(np.uint64))
            first = np.maximum.accumulate(np.where(np.r_[True, restart], np.arange(n), 0))  # each read's segment
            out[idx] = (u[idx][first] - total[first] + total) & mask  # segments between nulls: scaled totals
        out_null[idx[1:][never]] = True
    return pa.array(out, type=a.type, mask=out_null), raw_total, scaled_total, too_big


def window_side(mux: Multiplex, key: tuple[str, int], chips, start_ns: np.ndarray, end_ns: np.ndarray):
    """For grid windows (``start_ns``, ``end_ns``: (W, C) ns; ``chips``: (C,) chip numbers), one register
    column's (multiplexed: bool (W, C), group: int64 (W, C), running share: float (W, C)); a window the
    side data has no read pair for is not multiplexed."""
    W, C = start_ns.shape
    multi, group, share = np.zeros((W, C), bool), np.full((W, C), -1, np.int64), np.ones((W, C))
    for j, c in enumerate(np.asarray(chips).tolist()):
        s = mux.series.get(key, {}).get(int(c))
        if s is None or len(s.t_ns) < 2:
            continue
        t0, t1, de, dr, g = s.windows()
        k = np.clip(np.searchsorted(t0, start_ns[:, j]), 0, len(t0) - 1)
        hit = (t0[k] == start_ns[:, j]) & (t1[k] == end_ns[:, j])
        multi[:, j] = hit & (dr[k] < de[k] * (1 - 1e-9))
        group[:, j] = np.where(hit, g[k], -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            share[:, j] = np.where(hit & (de[k] > 0), dr[k] / np.where(de[k] > 0, de[k], 1.0), 1.0)
    return multi, group, share


def never_together(mux: Multiplex, signals, chips, start_ns, end_ns) -> dict[str, np.ndarray]:
    """``{reason: bool (W, C)}``: the windows where two of ``signals`` (a metric's inputs) were not counted
    together (module docstring), each cell under the first reason that holds, the reason naming both
    inputs and their groups ("mismeasured: a (group 1) and b (group 2) never counted together")."""
    keys = sorted(k for k in mux.series if k[0] in set(signals))
    side = {k: window_side(mux, k, chips, start_ns, end_ns) for k in keys}
    out: dict[str, np.ndarray] = {}
    taken = np.zeros(np.shape(start_ns), bool)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if a[1] != b[1] or a[0] == b[0]:
                continue  # other instances have their own PMU; one signal's instance with itself is one counter
            (ma, ga, _), (mb, gb, _) = side[a], side[b]
            apart = ma & mb & ((ga != gb) | (ga < 0)) & ~taken
            for x, y in sorted(set(zip(ga[apart].tolist(), gb[apart].tolist()))):
                cell = apart & (ga == x) & (gb == y)
                why = (
                    f"{MISMEASURED}: {_name(a)} ({_group(x)}) and {_name(b)} ({_group(y)}) never counted together "
                    "(multiplexed in different groups)"
                )
                out[why] = out.get(why, np.zeros_like(cell)) | cell
                taken |= cell
    return out


def _name(key: tuple[str, int]) -> str:
    return key[0] if key[1] == 0 else f"{key[0]}[{key[1]}]"


def _group(g: int) -> str:
    return f"group {g}" if g >= 0 else "group unknown"


__all__ = ["MISMEASURED", "Multiplex", "Series", "never_together", "side_columns", "split_multiplex", "window_side"]
