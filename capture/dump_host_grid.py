"""A host's rows on the whole dump's sampling grid, for ``capture.dump_scan``: the regular layout most
collectors write (sample by sample, chips in order) recognised without sorting (``_regular_grid``), and a
host's own grid moved onto the dump's grid points (``_on_dump_grid``), kept compactly when its rows can be
read in file order (``HostGrid.regular``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .dump_grid import Grid

if TYPE_CHECKING:
    from .dump_plan import DumpPlan


@dataclass
class HostGrid:
    """Where a host's rows land: ``grid`` (its ``Grid`` on the whole dump's grid points), ``row_grid``
    (grid point of each row, rows in part order) and ``offsets`` (each part's first row), ``regular``:
    every grid point holds every chip and the rows come sample by sample, chips in order (then the
    rows are read in file order: ``capture.pieces``)."""

    grid: Grid
    row_grid: np.ndarray | None
    offsets: np.ndarray
    regular: bool


def _increasing(chip: np.ndarray, ts: np.ndarray) -> bool:
    """Whether the rows come sample by sample with the same chips in the same order and each chip's
    timestamps increase (the layout most collectors write): a cheap test that spares the sort."""
    n = len(chip)
    if n == 0:
        return True
    rep = np.flatnonzero(chip[1:] == chip[0])
    C = int(rep[0]) + 1 if len(rep) else n
    if n % C:
        return False
    c2 = chip.reshape(-1, C)
    return bool((c2 == c2[0]).all() and (np.diff(ts.reshape(-1, C), axis=0) > 0).all())


def _regular_grid(plan: DumpPlan, chip, hs, ts, sample) -> Grid | None:
    """The host's ``Grid`` without sorting when its rows are regular (``_increasing``, chips ascending,
    one sample per grid point: consecutive samples one period apart within ±25 % — a timer that drifts
    by less than that per step is not a gap — or numbered by ``sample`` one by one); else None."""
    if plan.long or not _increasing(chip, ts):
        return None
    rep = np.flatnonzero(chip[1:] == chip[0])
    C = int(rep[0]) + 1 if len(rep) else len(chip)
    first = chip[:C]
    if len(first) > 1 and not (np.diff(first) > 0).all():
        return None
    S = len(chip) // C
    if S < 2:
        return None
    stamps = np.ascontiguousarray(ts.reshape(S, C))
    if sample is not None:
        s2 = sample.reshape(S, C)
        if not ((s2 == s2[:, :1]).all() and (np.diff(s2[:, 0]) == 1).all()):
            return None
    elif plan.period > 0:
        step = np.diff(stamps, axis=0) / plan.period
        if not ((step > 0.75) & (step < 1.25)).all():
            return None
    if hs is not None:
        h = hs.reshape(S, C)
        if not (h == h[0]).all():
            return None
        names, hk = np.unique(h[0], return_inverse=True)
    else:
        names, hk = None, np.zeros(C, np.int64)
    keys = np.stack([hk.astype(np.int64), first.astype(np.int64)], axis=1)
    label = [f"{names[k[0]]}/{k[1]}" if names is not None else str(k[1]) for k in keys]
    return Grid(keys, names, None, None, None, stamps, np.ones((S, C), bool), np.full(C, S), label)


def _on_dump_grid(g: Grid, shift: int, n_grid: int, per_part: list[int], may_be_regular: bool = True) -> HostGrid:
    """A host's grid ``g`` (its own grid points from 0) moved to the dump's: ``shift`` grid points later,
    ``n_grid`` long (the points before and after the host's samples absent, their timestamps the
    nearest sample's, as ``dump_grid._grid`` fills holes)."""
    S, C = g.present.shape
    offsets = np.concatenate([[0], np.cumsum(per_part)]).astype(np.int64)
    rows = int(offsets[-1])
    if g.order is None:  # regular (``_regular_grid``): row r is chip r % C of sample r // C
        if may_be_regular and shift == 0 and S == n_grid:
            return HostGrid(g, None, offsets, True)
        g = row_order_grid(g, S)
    row_grid = np.empty(rows, np.int64)
    row_grid[g.order] = g.grid + shift
    if may_be_regular and shift == 0 and S == n_grid and g.present.all():
        row_ci = np.empty(rows, np.int64)
        row_ci[g.order] = g.ci
        r = np.arange(rows, dtype=np.int64)
        if np.array_equal(row_grid, r // C) and np.array_equal(row_ci, r % C):  # regular: nothing more to keep
            return HostGrid(
                Grid(g.keys, g.host_names, None, None, None, g.stamps, g.present, g.counts, g.label),
                None,
                offsets,
                True,
            )
    present = np.zeros((n_grid, C), bool)
    present[shift : shift + S] = g.present
    stamps = np.empty((n_grid, C), np.int64)
    stamps[shift : shift + S] = g.stamps
    stamps[:shift] = g.stamps[0]
    stamps[shift + S :] = g.stamps[-1]
    moved = Grid(g.keys, g.host_names, g.order, g.ci, g.grid + shift, stamps, present, g.counts, g.label)
    return HostGrid(moved, row_grid, offsets, False)


def row_order_grid(g: Grid, S: int) -> Grid:
    """A regular host's ``Grid`` (``_regular_grid``: no per-row arrays) with the per-row arrays of
    ``dump_grid._grid`` for its ``S`` × C rows in file order — row r is chip column r % C of grid point
    r // C: ``order`` (the rows by chip column, then time), ``ci`` and ``grid`` of each sorted row."""
    C = len(g.keys)
    return Grid(
        g.keys,
        g.host_names,
        (np.arange(S, dtype=np.int64)[None, :] * C + np.arange(C, dtype=np.int64)[:, None]).reshape(-1),
        np.repeat(np.arange(C, dtype=np.int64), S),
        np.tile(np.arange(S, dtype=np.int64), C),
        g.stamps,
        g.present,
        g.counts,
        g.label,
    )


def missing_chip_notes(plan: DumpPlan) -> list[str]:
    """A note on the chips a dump's hosts lack (a dead chip, a lost capture): chips the metadata's ``chips``
    (each host's chips, as the emulator and ``perfonto run`` write it) numbers but that have no rows, and
    hosts with fewer chips than most hosts have. Nothing is refused: every level reads the chips with rows."""
    have = {h: sorted({int(c) for c in nums}) for h, nums in plan.chip_numbers.items() if len(nums)}
    if not have:
        return []
    counts = [len(v) for v in have.values()]
    meta = plan.meta.get("chips")
    known = isinstance(meta, int) and not isinstance(meta, bool) and meta > 0
    if known and max(max(v) for v in have.values()) >= meta:  # numbers past it: the metadata counts something else
        known = False
    full = int(meta) if known else max(set(counts), key=lambda n: (counts.count(n), n))  # else most hosts' count
    short = {h: [c for c in range(full) if c not in v] for h, v in have.items() if len(v) < full}
    if not short:
        return []
    said = f"the dump's metadata says `chips: {full}`" if known else f"most hosts have {full}"
    if list(have) == [None]:
        gone = short[None]
        return [
            f"{plan.label}: chip {', '.join(map(str, gone))} of {full} ha{'s' if len(gone) == 1 else 've'} no rows "
            f"({said}; "
            f"chips with rows: {', '.join(map(str, have[None]))}): a dead chip, or its capture lost? The server level "
            "and every table are over the chips with rows"
        ]
    each = [f"{h} (no rows for chip {', '.join(map(str, g))})" for h, g in sorted(short.items())]
    return [
        f"{plan.label}: {len(short)} host(s) have fewer chips than the others ({said}): {', '.join(each[:8])}"
        f"{' …' if len(each) > 8 else ''}: a dead chip, or its capture lost? Those hosts' rollups (and their "
        "racks' and pods') are over the chips with rows"
    ]
