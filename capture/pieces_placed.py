"""The pieces of a host that is not regular (``capture.pieces``), its rows placed by grid point: gaps,
rows out of order, chip-major files, the long layout, CSV. Each piece's rows are found by the grid point
the plan gave them (``capture.dump_scan``), read from the row groups that hold them — re-read where
pieces share a row group — and placed on the piece's grid (``_place``, ``_fill``); a piece's first
sample is the previous piece's last, carried over."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .dump import CounterDump, _keys, _long_columns, _pivot, _wide_columns
from .dump_host_grid import HostGrid, row_order_grid
from .dump_plan import DumpPlan, Part, _read
from .dump_scan_grid import _key_columns


def placed_pieces(
    plan: DumpPlan, gi: int, parts: list[Part], want: list[str], hg: HostGrid, step: int, select, chips_, hosts_
) -> Iterator[tuple[int, CounterDump]]:
    """(first grid point, piece) of each piece of host ``gi`` (the plan's ``gi``-th group, ``parts`` its
    parts) with its rows placed by grid point (``_place``), ``step`` windows a piece — one
    piece for the whole dump when a part is read whole (the long layout, parts without row groups),
    with or without ``select`` (so that a second pass finds the first pass's pieces) — each piece's first
    sample the previous piece's last (carried over, not read again); a piece that ``select`` refuses is
    skipped, and nothing is carried over it."""
    g, row_grid = hg.grid, hg.row_grid
    C = len(g.keys)
    if hg.regular:  # placed by grid point: the row order the plan proved
        g, row_grid = _regular_grid(g, int(hg.offsets[-1]))
    whole = plan.long or any(p.row_group_ends is None for p in parts)
    if whole:  # with ``select`` too: a second pass picks the pieces of the first by their first grid point
        step = plan.n_grid
    carry = None
    a = 0
    while a < plan.n_grid - 1 or (a == 0 and plan.n_grid == 1):
        b = min(a + step, plan.n_grid - 1)
        if select is not None and not select(gi, a):
            carry = None
        else:
            lo = a if carry is None else a + 1
            raw, missing = _place(plan, parts, want, row_grid, hg.offsets, lo, b, a, C, g, carry)
            yield a, _piece_dump(plan, g, a, b, raw, missing, chips_, hosts_)
            carry = ({n: v[-1] for n, v in raw.items()}, {n: v[-1] for n, v in missing.items()})
        a = b
        if b >= plan.n_grid - 1:
            break


def _piece_dump(plan: DumpPlan, g, a: int, b: int, raw: dict, missing: dict, chips_, hosts_) -> CounterDump:
    """Grid points ``a`` … ``b`` of a host as a ``CounterDump`` (its registers placed by ``_place``)."""
    return CounterDump(
        plan.label,
        chips_,
        g.stamps[a : b + 1],
        raw,
        g.present[a : b + 1],
        missing,
        dict(plan.meta),
        hosts=hosts_,
        absent=plan.absent,
        notes=plan.notes,
    )


def _regular_grid(g, rows: int):
    """A regular host's ``Grid`` with the per-row arrays ``_place`` reads (row r: grid point r // C,
    chip column r % C), and each row's grid point."""
    C = len(g.keys)
    return row_order_grid(g, rows // C), np.arange(rows, dtype=np.int64) // C


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
        sel = np.flatnonzero(
            (row_grid[offsets[pi] : offsets[pi + 1]] >= lo) & (row_grid[offsets[pi] : offsets[pi + 1]] <= b)
        )
        if not len(sel) and not plan.long:
            continue
        cols = _key_columns(plan) + (
            [c for s in want for c in plan.columns[s]] if not plan.long else ["signal", "instance", "value"]
        )
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
        columns = _wide_columns(
            t.select([c for c in t.column_names if c not in ("host", "chip", plan.stamp, "sample")]), p, plan.gen, notes
        )
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
