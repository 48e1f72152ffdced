"""Missing samples bridged in ``analysis.engine``'s run totals, piece by piece (``metrics.bridge``).

A gap in a counter's running totals is bridged when its next good sample comes; over a dump read in
pieces that may be in a later piece. So the windows of a piece with a gap still open at its end are
held back from the run-level sums (from the open gap's first window on) until the gap closes — bridged:
those windows count, 0 in the held ones and the increase over the gap where it closes — or is found not
to (a reset or an ambiguous wrap over the gap, the end of the run): they stay out, as in the whole dump.
The last good running total is carried by ``metrics.bridge.Bridger``. A gap stays open only while every
sample of its chip and signal is missing, so what is held is the gap's windows and those after it in
the piece. The values put in each bridged window are kept (per host, sparse) for the fleet's second pass
(``engine_levels._second_pass``), which reads pieces again.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from perfonto.metrics.bridge import Bridger, spans, totals
from perfonto.metrics.windows import VALID, Windows


class Held:
    """Per host of the pass ``st`` (``analysis.engine._Pass``): its ``Bridger`` and the windows held back;
    ``commit`` adds the windows whose run totals are known to the carried sums."""

    def __init__(self, st):
        self.st = st
        self.bridgers: dict[int, Bridger] = {}
        self.held: dict[int, tuple[int, Windows, dict, dict]] = {}  # group -> (first window, windows, fills, waiting)
        self.kept: dict[int, dict[str, list[tuple[np.ndarray, ...]]]] = {}  # group -> signal -> (index, value)
        self.runs: dict[str, list[tuple[int, int]]] = {}  # signal -> bridged runs [start, end) (the fleet's)

    def add(self, ch, w: Windows) -> None:
        """A piece with a null window: bridge its gaps (and those held from before that it closes), then add
        the windows whose run totals are known (``commit``); hold back those of a gap still open."""
        g = ch.group
        br = self.bridgers.setdefault(g, Bridger(self.st.gen))
        p = br.piece(ch.dump, ch.first)
        fills = {n: f for n, f in p.fills.items() if n in w.values}
        waiting = {n: a for n, a in p.waiting.items() if n in w.values}
        first, rows = ch.first, replace(w, bridged={}, notes=[])
        if g in self.held:
            h_first, h_rows, h_fills, h_wait = self.held.pop(g)
            for n, wait in h_wait.items():
                if n not in p.closed:
                    continue
                shut = wait & p.closed[n][None]  # closed and bridged here: 0 in the held windows
                h_fills[n] = np.where(shut, -0.0, h_fills[n])  # -0.0: not the gap's last window (metrics.bridge)
                h_wait[n] = wait & ~shut & ~p.ended[n][None]
            first, rows = h_first, _cat(h_rows, rows)
            fills = _cat_arrays(h_fills, fills, h_rows, w, np.nan)
            waiting = _cat_arrays(h_wait, waiting, h_rows, w, False)
        W = rows.interval.shape[0]
        cut = min([int(np.argmax(a.reshape(W, -1).any(axis=1))) for a in waiting.values() if a.any()], default=W)
        on = np.zeros(W, bool)  # a bridged span goes on into the next window: no cut there
        for f in fills.values():
            on |= (np.isfinite(f) & np.signbit(f)).reshape(W, -1).any(axis=1)
        while cut > 0 and cut < W and on[cut - 1]:
            cut -= 1
        if cut < W:
            self.held[g] = (
                first + cut,
                _rows(rows, cut, W),
                {n: f[cut:] for n, f in fills.items()},
                {n: a[cut:] for n, a in waiting.items()},
            )
        if cut > 0:
            self.commit(g, first, _rows(rows, 0, cut), {n: f[:cut] for n, f in fills.items()})

    def finish(self) -> list[str]:
        """The run is read: the windows still held (gaps that never close) are added without them; the notes
        on the gaps not bridged."""
        for g, (first, rows, fills, _) in sorted(self.held.items()):
            self.commit(g, first, rows, fills)
        self.held.clear()
        notes: list[str] = []
        for b in self.bridgers.values():
            notes += [n for n in b.notes() if n not in notes]
        return notes

    def commit(self, g: int, first: int, rows: Windows, fills: dict[str, np.ndarray]) -> None:
        """Add windows ``first`` … of host ``g`` to its run-level sums (and the server's; the windows null on
        some chip, for the fleet's server level), the bridged windows valid with their ``fills``."""
        st = self.st
        w = replace(rows, bridged={n: f for n, f in fills.items() if np.isfinite(f).any()})
        for n, f in w.bridged.items():
            if st.server is None:  # the fleet's second pass puts them back in the pieces it reads again
                hit = np.isfinite(f)
                idx = np.nonzero(hit)
                self.kept.setdefault(g, {}).setdefault(n, []).append((idx[0] + first,) + tuple(idx[1:]) + (f[hit],))
                self._runs(n, spans(w, [n]), first)
        st.sums[g].add(w)  # the bridged windows valid (metrics.bridge.totals), a cut bridged run left out whole
        if st.server is not None:
            st.server.add(w)
        t = totals(w)
        Wc, Cc = t.interval.shape
        for s, r in t.null.items():
            if r.any():
                flag = (r != VALID).reshape(Wc, Cc, -1).any(axis=(1, 2))
                arr = st.bad_any.setdefault(s, np.zeros(st.W, bool))
                arr[first : first + Wc] |= flag

    def _runs(self, name: str, sc, first: int) -> None:
        """Keep the bridged spans (run numbering, [start, end)) of ``name`` on any chip (``metrics.bridge.spans``)."""
        if sc is None:
            return
        span, cont = sc
        for c in range(span.shape[1]):
            s, k = span[:, c], cont[:, c]
            start = s & ~np.r_[False, k[:-1]]
            end = s & ~k  # a span's last window
            for a, b in zip(np.nonzero(start)[0], np.nonzero(end)[0]):
                self.runs.setdefault(name, []).append((first + int(a), first + int(b) + 1))

    def whole_runs(self, bad: np.ndarray, signals) -> np.ndarray:
        """``bad`` (windows of the run left out on every chip) with each bridged run of ``signals`` that it cuts
        left out whole, until nothing changes (``metrics.bridge.server_bad`` over the fleet)."""
        runs = [r for s in signals for r in self.runs.get(s, [])]
        bad = bad.copy()
        changed = bool(runs)
        while changed:
            changed = False
            for a, b in runs:
                if bad[a:b].any() and not bad[a:b].all():
                    bad[a:b] = True
                    changed = True
        return bad

    def windows(self, g: int, first: int, w: Windows) -> Windows:
        """A piece of host ``g`` read again (windows ``first`` …) with the values its bridged windows had
        in the pass (``w.bridged``; its own gaps, in the piece only, are not bridged again)."""
        W = w.interval.shape[0]
        bridged = {}
        for n, parts in self.kept.get(g, {}).items():
            if n not in w.values:
                continue
            f = np.full(w.values[n].shape, np.nan)
            for part in parts:
                sel = (part[0] >= first) & (part[0] < first + W)
                if sel.any():
                    f[(part[0][sel] - first,) + tuple(a[sel] for a in part[1:-1])] = part[-1][sel]
            bridged[n] = f
        return replace(w, bridged=bridged)


def _rows(w: Windows, a: int, b: int) -> Windows:
    """Windows ``a`` … ``b`` − 1 of ``w``."""
    return replace(
        w,
        interval=w.interval[a:b],
        values={n: v[a:b] for n, v in w.values.items()},
        start_ns=None if w.start_ns is None else w.start_ns[a:b],
        null={n: r[a:b] for n, r in w.null.items()},
    )


def _cat(a: Windows, b: Windows) -> Windows:
    """Windows ``a`` then ``b`` (the inputs both hold; a reason missing on one side is valid there)."""
    names = [n for n in b.values if n in a.values]
    null = {}
    for n in set(a.null) | set(b.null):
        if n in names:
            ra = a.null.get(n, np.zeros(a.values[n].shape, np.uint8))
            rb = b.null.get(n, np.zeros(b.values[n].shape, np.uint8))
            null[n] = np.concatenate([ra, rb])
    starts = None if a.start_ns is None or b.start_ns is None else np.concatenate([a.start_ns, b.start_ns])
    return replace(
        b,
        interval=np.concatenate([a.interval, b.interval]),
        values={n: np.concatenate([a.values[n], b.values[n]]) for n in names},
        start_ns=starts,
        null=null,
    )


def _cat_arrays(a: dict, b: dict, wa: Windows, wb: Windows, empty) -> dict:
    """Per-window arrays of ``a`` (over ``wa``) then ``b`` (over ``wb``), ``empty`` where a side has none."""
    out = {}
    for n in set(a) | set(b):
        if n not in wa.values or n not in wb.values:
            continue
        dtype = bool if empty is False else np.float64
        xa = a.get(n, np.full(wa.values[n].shape, empty, dtype))
        xb = b.get(n, np.full(wb.values[n].shape, empty, dtype))
        out[n] = np.concatenate([xa, xb])
    return out
