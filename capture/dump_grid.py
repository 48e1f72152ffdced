"""Rows of a counter dump placed on the sampling grid (the rules are in ``capture.dump``'s docstring):
with a sample period, a chip's sample lands at round((t − t0) / period) from its first sample; with
a ``sample`` column, that is the grid; otherwise every chip must have the same number of samples.
Absent grid points get a timestamp interpolated between their chip's neighbours. Rows are placed in
time order whatever order a file gives them in; ``time_reversals`` says where a file's timestamps
of one chip go backwards (a clock problem the user should see, not a silent re-sort)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dump_io import DumpError, rows_counted


@dataclass
class Grid:
    """Where a dump's rows land on the sampling grid (``_grid``): ``keys`` (C, 2) host index and chip
    number of every chip column (``host_names`` for the index, None without hosts); ``order``: the
    rows sorted by chip column, then time; ``ci``/``grid``: the chip column and grid point of each
    sorted row; ``stamps`` (S, C) timestamps with holes interpolated; ``present`` (S, C)."""

    keys: np.ndarray
    host_names: np.ndarray | None
    order: np.ndarray
    ci: np.ndarray
    grid: np.ndarray
    stamps: np.ndarray
    present: np.ndarray
    counts: np.ndarray
    label: list[str]


class Stamps:
    """A regular grid's (S, C) int64 timestamps in less memory, for a plan that keeps every host's
    (``capture.dump_scan``: 2.3 MB a host of 8 chips × 36,001 samples as int64, 0.3 GB for 125 hosts):
    each chip's first stamp, plus the sample period times the grid point, plus the remainder (a timer's
    jitter and drift) in the smallest signed integer type that holds it. Indexing (rows, or rows and
    chips) and ``np.asarray`` give the int64 values exactly, as the array would."""

    def __init__(self, stamps: np.ndarray, period: int):
        self.shape = stamps.shape
        self.dtype = np.dtype(np.int64)
        self.ndim = 2
        self.base = np.array(stamps[0], dtype=np.int64)
        self.period = int(period)
        rest = stamps - self._line(np.arange(stamps.shape[0]))
        for t in (np.int8, np.int16, np.int32):
            if rest.min() >= np.iinfo(t).min and rest.max() <= np.iinfo(t).max:
                rest = rest.astype(t)
                break
        self.rest = rest

    @classmethod
    def compact(cls, stamps: np.ndarray, period: int):
        """``stamps`` as ``Stamps`` when that takes less memory (a sample period, remainders that fit in
        32 bits), else ``stamps`` itself."""
        if period <= 0 or stamps.ndim != 2 or stamps.shape[0] < 2:
            return stamps
        out = cls(stamps, period)
        return out if out.rest.dtype != np.int64 else stamps

    def _line(self, k) -> np.ndarray:
        return self.base + self.period * np.asarray(k, dtype=np.int64)[..., None]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        rows, more = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        out = self._line(np.arange(self.shape[0])[rows]) + self.rest[rows]
        return out[(Ellipsis,) + more] if more else out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)


def _chip_keys(hk: np.ndarray, chip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (host index, chip) pairs, sorted, and each row's index among them (as
    ``np.unique(..., axis=0, return_inverse=True)``, which sorts rows as records and took 1.4 s for
    240k rows; one int64 key per row when the chip numbers fit in 32 bits)."""
    if chip.size and chip.min() >= 0 and chip.max() < (1 << 31) and hk.max() < (1 << 31):
        packed = (hk.astype(np.int64) << 32) | chip
        u, inv = np.unique(packed, return_inverse=True)
        return np.stack([u >> 32, u & 0xFFFFFFFF], axis=1), inv.reshape(-1)
    keys, inv = np.unique(np.stack([hk, chip], axis=1), axis=0, return_inverse=True)
    return keys, inv.reshape(-1)


def _grid(
    p,
    chip,
    host,
    ts,
    period,
    sample,
    *,
    sample_base: int | None = None,
    n_grid: int | None = None,
    check_span: bool = True,
    row_name=None,
) -> Grid:
    """Place rows on the grid (module docstring). ``sample_base`` and ``n_grid`` come from the whole
    dump when ``capture.dump_scan`` places one part of it (default: this part's own); ``check_span``:
    refuse rows that span far more grid points than they fill (``dump_scan`` checks the whole dump)."""
    hk = np.zeros(len(chip), np.int64) if host is None else np.unique(host, return_inverse=True)[1]
    host_names = None if host is None else np.unique(host)
    keys, chip_idx = _chip_keys(hk, np.asarray(chip, np.int64))
    if len(keys) == 0:
        raise DumpError(f"{p}: the dump holds no samples")
    order = np.lexsort((ts, chip_idx))
    ci = chip_idx[order]
    ts_sorted = ts[order]
    C = len(keys)
    counts = np.bincount(ci, minlength=C)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    label = [f"{host_names[k[0]]}/{k[1]}" if host is not None else str(k[1]) for k in keys]
    same = np.diff(ci) == 0
    name = row_name if row_name is not None else (lambda r: f"row {r + 1}")
    _check_distinct(p, ts, order, ci, same, label, name, chip_idx)
    if counts.min() < 2:
        c = int(np.argmin(counts))
        raise DumpError(f"{p}: chip {label[c]} has {int(counts.min())} sample(s); a window needs two")
    if sample is not None:
        grid = sample[order]
        if np.any(grid < 0):
            raise DumpError(f"{p}: negative sample numbers")
        if np.any(np.diff(grid)[same] <= 0):
            k = int(np.flatnonzero(same & (np.diff(grid) <= 0))[0])
            raise ClockReset.of(p, chip_idx, ts, int(ci[k]), label, name, "their sample numbers go back") or DumpError(
                f"{p}: sample numbers of chip {label[int(ci[k])]} do not increase with its timestamps"
            )
        grid = grid - (grid.min() if sample_base is None else sample_base)
    elif period > 0:
        grid = _steps(ts_sorted, same, period)
        if np.any(np.diff(grid)[same] <= 0):
            k = int(np.flatnonzero(same & (np.diff(grid) <= 0))[0])
            raise ClockReset.of(
                p, chip_idx, ts, int(ci[k]), label, name, f"two fall on one {period} ns grid point"
            ) or (_too_close(p, label[int(ci[k])], ts, order[k], order[k + 1], period, name))
    else:
        if not np.all(counts == counts[0]):
            raise DumpError(
                f"{p}: chips have different numbers of samples ({dict(zip(label, counts.tolist()))}) and no "
                "sample period is given to align them; give --sample-period (or metadata sample_period_ns)"
            )
        grid = np.arange(len(order)) - starts[ci]
    S = int(grid.max()) + 1 if n_grid is None else int(n_grid)
    if check_span and n_grid is None and S > 2 * int(counts.max()) + 16:
        raise DumpError(
            f"{p}: the samples span {S} grid points for {int(counts.max())} rows: a timestamp is far off the "
            "sampling grid (corrupt?) or the sample period is wrong"
        )
    present = np.zeros((S, C), dtype=bool)
    present[grid, ci] = True
    stamps = np.zeros((S, C), dtype=np.int64)
    stamps[grid, ci] = ts_sorted
    if not present.all():  # fill holes on the grid so that intervals stay defined (their windows are null)
        for c in range(C):
            have = np.nonzero(present[:, c])[0]
            stamps[:, c] = np.rint(np.interp(np.arange(S), have, stamps[have, c].astype(np.float64))).astype(np.int64)
    return Grid(keys, host_names, order, ci, grid, stamps, present, counts, label)


def _check_distinct(p, ts, order, ci, same, label: list[str], name, chip_idx) -> None:
    """Refuse two samples of one chip at the same timestamp (rows ``order``: by chip, then time). Where the
    chip's rows step back in the file's own order, the repeat is a device-clock reset, its stamps restarting
    on the same period (``ClockReset``), not a duplicate sample: sorting would interleave the two runs.

    Raises:
        DumpError: naming the chip and both rows (``name``: row index → its name in the file)."""
    ts_sorted = ts[order]
    if not np.any(np.diff(ts_sorted)[same] <= 0):
        return
    k = int(np.flatnonzero(same & (np.diff(ts_sorted) <= 0))[0])  # sorted by time within each chip
    reset = ClockReset.of(p, chip_idx, ts, int(ci[k]), label, name, "their stamps repeat")
    if reset is not None:
        raise reset
    a, b = sorted((int(order[k]), int(order[k + 1])))  # the two rows, in the file's order
    what = "a duplicate sample" if ts[a] == ts[b] else "out of order"
    at = f"{name(a)} is at {ts[a]} ns, {name(b)} at {ts[b]} ns" if name(a) else "duplicate or out-of-order samples"
    raise DumpError(
        f"{p}: timestamps of chip {label[int(ci[k])]} do not increase: {at} ({what}; {rows_counted(p)}); "
        "drop the repeated sample or sort the rows by time"
    )


class ClockReset(DumpError):
    """A chip's timestamps go back in the rows' own order and, placed in time order, its samples collide: a
    device-clock reset (or two captures of the chip mixed), which the sampling grid cannot read across."""

    @classmethod
    def of(cls, p, chip_idx: np.ndarray, ts: np.ndarray, c: int, label: list[str], name, why: str):
        """The error for chip column ``c`` when its rows (in the order given) step back in time, else None.
        ``name``: row index → how the message names it ("" where rows have no file number); ``why``: what
        the time order did to its samples."""
        rows = np.flatnonzero(chip_idx == c)
        back = np.flatnonzero(np.diff(ts[rows]) < 0)
        if not len(back):
            return None
        a, b = int(rows[back[0]]), int(rows[back[0] + 1])
        where = (
            f" at {name(b)} ({int(ts[a])} ns in {name(a)}, then {int(ts[b])} ns; {rows_counted(p)})"
            if name(b)
            else (f" ({int(ts[a])} ns, then {int(ts[b])} ns)")
        )
        more = len(back) - 1
        return cls(
            f"{p}: the timestamps of chip {label[c]} go back{where}"
            + (f" and in {more} more place(s)" if more else "")
            + f": it looks like a device-clock reset (or rows of two captures of the chip mixed). Placed in time "
            f"order, the samples before and after it interleave ({why}), and a window across a reset has no known "
            "length, so the dump cannot be placed on one sampling grid. Analyse the rows before and after the "
            "reset apart (split the dump there), or stamp the samples with a clock that does not reset (for a run "
            "folder with sync reads, `perfonto align RUN` maps every sample to host time: `host_ns` in "
            "aligned_counters.parquet)"
        )


def _too_close(p, who: str, ts: np.ndarray, a: int, b: int, period: int, name) -> DumpError:
    """Two samples of chip ``who`` (rows ``a``, ``b``, consecutive in time) under half a period apart."""
    a, b = sorted((int(a), int(b)))
    at = f" ({name(a)} at {int(ts[a])} ns, {name(b)} at {int(ts[b])} ns)" if name(a) else ""
    return DumpError(
        f"{p}: two samples of chip {who} are {abs(int(ts[b]) - int(ts[a]))} ns apart{at}, under half the "
        f"{period} ns sample period, so they fall on the same grid point; is sample_period_ns right (the "
        "metadata's, or --sample-period)?"
    )


DRIFT = 0.25  # a step within ±25 % of the sample period is one period: a drifting timer is not a gap


def _steps(ts_sorted: np.ndarray, same: np.ndarray, period: int) -> np.ndarray:
    """Grid points of time-sorted rows (chip by chip): each chip's first sample at 0, then each step
    between consecutive samples of a chip counts ``rint(step / period)`` periods — one period when
    it is within ``DRIFT`` of one — so a timer that drifts a little each interval (perf's ``-I``
    timer: 2–8 ms per 100 ms) never adds up to an invented gap; a step of 1.5 periods or more is a
    dropped sample. A step under half a period gives two samples one grid point (an error upstream)."""
    d = np.diff(ts_sorted).astype(np.float64) / period
    k = np.where(np.abs(d - 1.0) <= DRIFT, 1.0, np.rint(d))
    k = np.where(same, k, 0.0)  # a new chip starts again at 0
    grid = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
    starts = np.concatenate([[True], ~same])
    base = np.maximum.accumulate(np.where(starts, grid, 0))
    return grid - base


def drift_note(p: str, stamps: np.ndarray, present: np.ndarray, period: int) -> str | None:
    """A note when consecutive samples of a chip (``stamps``, ``present``: (S, C) on the grid) are off the
    period by more than 1 % (the largest offset, in % of the period), else None; such samples were
    placed on the grid within ``DRIFT``."""
    if period <= 0 or len(stamps) < 2:
        return None
    both = present[1:] & present[:-1]
    d = np.diff(stamps, axis=0)[both].astype(np.float64) / period
    if not d.size:
        return None
    worst = float(np.max(np.abs(d - 1.0)))
    if worst <= 0.01:
        return None
    return (
        f"{p}: the sampling timer drifts: consecutive samples are up to {worst:.1%} of the {period} ns period off "
        f"it; each was placed on the next grid point (within ±{DRIFT:.0%} of the period a step is one sample, beyond "
        "it a gap)"
    )


def time_reversals(chip, host, ts, parts: list[tuple[str, int]], extra=(), file_rows=None) -> list[str]:
    """Notes for the files in which a chip's timestamps go backwards from one row to the next of
    that chip (the rows are sorted by timestamp anyway: parts of a dump may interleave in time, but
    within one file time going back is a clock problem). ``parts``: (file, rows) in the order the
    rows were concatenated; ``extra``: more key arrays (the long layout's signal and instance, whose
    rows may come signal by signal); ``file_rows``: each row's row number in its file when the rows
    are a subset of it (one host of a file of several). Rows are counted from 1 (below a CSV header)."""
    hk = np.zeros(len(chip), np.int64) if host is None else np.unique(host, return_inverse=True)[1].reshape(-1)
    notes, start = [], 0
    for label, n in parts:
        sl = slice(start, start + n)
        start += n
        if n < 2:
            continue
        if extra:
            keys = np.stack([hk[sl], chip[sl], *(np.asarray(e)[sl] for e in extra)], axis=1)
            k = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1)
        else:
            k = _chip_keys(hk[sl], np.asarray(chip[sl], np.int64))[1]
        t = ts[sl]
        order = np.argsort(k, kind="stable")
        back = (np.diff(k[order]) == 0) & (np.diff(t[order]) < 0)
        if not back.any():
            continue
        at = np.flatnonzero(back)
        rows = order[at + 1]
        i = int(np.argmin(rows))
        row, prev = int(rows[i]), int(order[at[i]])
        number = (lambda r: r + 1) if file_rows is None else (lambda r: int(np.asarray(file_rows)[r]) + 1)
        who = str(int(chip[sl][row])) if host is None else f"{host[sl][row]}/{int(chip[sl][row])}"
        places = len({(int(k[r]), int(t[r])) for r in rows.tolist()})
        notes.append(
            f"{label}: the timestamps of chip {who} go backwards at row {number(row)} ({int(t[row])} ns, after "
            f"{int(t[prev])} ns in row {number(prev)})"
            + (f" and in {places - 1} more place(s)" if places > 1 else "")
            + "; samples were sorted by timestamp — check the collector's clock (windows across the "
            "reordered samples may read as resets)"
        )
    return notes
