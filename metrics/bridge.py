"""Missing samples bridged in the run totals (issue 27): a missing sample loses no counts.

A counter's running total missing at samples k … k+m−1 (an absent sample, or an empty cell) makes the
m+1 windows touching them null (``metrics.windows`` rule 6, reason ``missing sample``): how the counts
split between those windows is unknown. Their *sum* is known: the running totals on either side give
the increase ``v(k+m) − v(k−1)`` over the bridged span ``t(k+m) − t(k−1)``, read by the same rules as a
window's (rule 3: modulo the wrap width or range; rule 4: a reset when the reset indicator changed
between the two ends, or the increase is implausible over the span; rule 4b: null when the counter could
have wrapped more than once over the span). So the run level — per chip, per server, every ratio of
totals — reads the gap's windows as valid, the bridged increase in the last of them and 0 in the others
(``totals``); the windows themselves stay null.

Not bridged (the windows stay out of the run totals, and a note says why): a reset or an ambiguous
wrap over the span; a gap at the start of the run (no running total before it) or at its end (it never
closes); an end of the span that is not a reading (a sentinel, a value beyond the counter's range); a
capture whose running totals a reader summed from a tool's per-interval increments (its metadata says
``increments``: perf stat, Nsight Compute, rocprof; or lists the signals, as a multiplexed capture does for
its scaled registers), where the running total after a missing increment lacks that increment, so the
difference across the gap would undercount.
Only counters (``window: increase``) with a constant scale are bridged: a gauge's samples are levels,
not totals, and a counter with a unit field (rule 4d) has no known unit over the gap.

``Bridger`` reads a dump in pieces in time order (``analysis.engine``): the last good running total of
every open gap is carried from piece to piece (``Carry``), so a gap that straddles a piece boundary is
bridged as in the whole dump; ``bridge_dump`` is the whole dump as one piece (the reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from perfonto.ontology import kinds

from .windows import MISSING, REASONS, RESET, RESET_INFERRED, VALID, WRAP_AMBIGUOUS, Windows, max_rate
from .windows import modular_delta, range_delta


INCREMENTS = "the capture gives per-interval increments (metadata `increments`), and a missing one is lost"
LOST = "lost increments"  # the key of a summed capture's gaps in ``Bridger.unbridged`` (``notes`` words them)


def bridgeable(sig) -> bool:
    """Can a gap in ``sig``'s samples be bridged: a counter (``window: increase``) of constant scale."""
    return kinds.of(sig).window == "increase" and sig.scale_field is None


@dataclass
class Carry:
    """One signal's state at the end of a piece, per (chip, instance): ``open`` — the piece ended in a gap;
    then ``has`` — a good sample came before it, ``raw`` its running total, ``t`` its time (ns), ``ok`` —
    it can end a span (no sentinel, within range), ``ind`` the reset indicator there (C, indicator
    instances) and ``w0`` the gap's first window (run numbering)."""

    open: np.ndarray
    has: np.ndarray
    raw: np.ndarray
    t: np.ndarray
    ok: np.ndarray
    w0: np.ndarray
    ind: np.ndarray | None = None


@dataclass
class Piece:
    """What bridging one piece gives: ``fills[s]`` (W, C, I) the run-level value of each bridged window
    (the increase over the gap in its last window, −0.0 in the others; NaN elsewhere); ``waiting[s]`` (W, C, I)
    the windows of a gap still open at the piece's end; ``closed[s]`` (C, I) the gaps open before the piece
    that it closed, bridged; ``ended[s]`` (C, I) those it closed without a bridge (reset, ambiguous wrap)."""

    fills: dict[str, np.ndarray] = field(default_factory=dict)
    waiting: dict[str, np.ndarray] = field(default_factory=dict)
    closed: dict[str, np.ndarray] = field(default_factory=dict)
    ended: dict[str, np.ndarray] = field(default_factory=dict)


class Bridger:
    """Bridges the gaps of a dump read in pieces in time order (module docstring); ``notes()`` says which
    gaps were left out of the run totals, and why."""

    def __init__(self, gen) -> None:
        self.gen = gen
        self.carry: dict[str, Carry] = {}
        # (signal, why) -> [count, first chip, first sample, every chip with such a gap] (chips as host/chip)
        self.unbridged: dict[tuple[str, str], list] = {}
        self.chips = np.zeros(0, np.int64)
        self.hosts = None

    def piece(self, dump, first: int) -> Piece:
        """Bridge the piece ``dump`` whose first sample is sample ``first`` of the run (for a piece after the
        first, the previous piece's last sample)."""
        out = Piece()
        summed = dump.metadata.get("increments")  # True: every register; a list: those signals (multiplexed)
        for name, raw in dump.raw.items():
            sig = self.gen.signals.get(name)
            if sig is None or not bridgeable(sig):
                continue
            bad = np.broadcast_to(~dump.present[:, :, None] | dump.missing.get(name, False), raw.shape)
            # True: a reader summed every register, skipping a lost increment (the window after it is known);
            # a list: multiplexed registers that restart from the raw value after a gap (nothing is known)
            lost = summed is True
            if lost or (isinstance(summed, list) and name in summed):
                self._note_gaps(name, dump, bad, first, LOST if lost else INCREMENTS)
                if not lost:
                    continue
            c = self.carry.get(name)
            if not bad.any() and (c is None or not c.open.any()):
                self.carry.pop(name, None)
                continue
            self._signal(out, name, sig, dump, raw, bad, first, lost)
        return out

    def _note_gaps(self, name: str, dump, bad, first: int, why: str) -> None:
        """Count the gaps of a capture of increments (``why``: ``LOST`` or ``INCREMENTS``) for the notes."""
        starts = bad.copy()
        starts[1:] &= ~bad[:-1]
        starts[0] &= first == 0  # a piece's first sample is the previous piece's last
        cc, _ = np.nonzero(starts)[1:]
        self._count(name, starts[starts], why, dump, cc, first + np.nonzero(starts)[0])

    def _signal(self, out: Piece, name: str, sig, dump, raw, bad, first: int, lost: bool = False) -> None:
        """Bridge ``name``'s gaps in this piece (module docstring). ``lost``: the running totals were summed
        by a reader that skipped each missing increment (metadata ``increments: true``), so the increase
        over a gap is the increment of its last window alone: that window is valid with it, the gap's other
        windows stay null (never 0: their counts are lost)."""
        S = raw.shape[0]
        ts = dump.timestamps_ns
        ok = ~bad
        if sig.sentinel:
            ok = ok & ~np.isin(raw, np.array(sig.sentinel, dtype=np.uint64))
        if sig.modulus is not None:
            ok = ok & (raw < np.uint64(sig.modulus))
        ind = dump.raw.get(sig.reset_indicator) if sig.reset_indicator else None
        c = self.carry.get(name) or self._empty(raw, ind)
        j = np.arange(S)[:, None, None]
        last = np.maximum.accumulate(np.where(~bad, j, -1), axis=0)  # last good sample at or before each
        nxt = np.minimum.accumulate(np.where(~bad, j, S)[::-1], axis=0)[::-1]  # next good sample at or after
        close = np.zeros(raw.shape, bool)
        close[1:] = ~bad[1:] & bad[:-1]
        good = np.zeros(raw.shape, bool)  # a closing sample whose span is bridged
        amount = np.zeros(raw.shape)
        cj, cc, ci = np.nonzero(close)
        if cj.size:
            lj = last[cj - 1, cc, ci]
            inside = lj >= 0
            l0 = np.maximum(lj, 0)
            prev = np.where(inside, raw[l0, cc, ci], c.raw[cc, ci])
            t0 = np.where(inside, ts[l0, cc], c.t[cc, ci])
            has = inside | c.has[cc, ci]
            end_ok = np.where(inside, ok[l0, cc, ci], c.ok[cc, ci]) & ok[cj, cc, ci]
            why = self._span(sig, prev, raw[cj, cc, ci], (ts[cj, cc] - t0).astype(np.float64) * 1e-9)
            if ind is not None:
                carried = c.ind if c.ind is not None else ind[l0, cc]
                left = np.where(inside[:, None], ind[l0, cc], carried[cc, ci] if c.ind is not None else carried)
                hit = (ind[cj, cc] < left) if sig.reset_kind == "decrease" else (ind[cj, cc] != left)
                why[hit.any(axis=-1) & (why == VALID)] = RESET
            fine = has & end_ok & (why == VALID)
            good[cj, cc, ci] = fine
            amount[cj, cc, ci] = self._wrapped(sig, prev, raw[cj, cc, ci], fine).astype(np.float64) * sig.scale
            self._count(name, ~has, "at the start of the run (no running total before it)", dump, cc, first + cj)
            not_read = "an end of the gap is not a reading (a sentinel or out of range)"
            self._count(name, has & ~end_ok, not_read, dump, cc, first + cj)
            for code in (RESET, RESET_INFERRED, WRAP_AMBIGUOUS):
                self._count(name, has & end_ok & (why == code), REASONS[code] + " over the gap", dump, cc, first + cj)
        touch = bad[:-1] | bad[1:]
        cl = nxt[1:]  # each window's closing sample (S: the gap is still open at the piece's end)
        k = np.minimum(cl, S - 1)
        bridged = touch & (cl < S) & np.take_along_axis(good, k, axis=0)
        at_end = cl == np.arange(1, S)[:, None, None]
        sizes = tuple(s for _, s in sig.axes)
        W, C = S - 1, raw.shape[1]
        inner = np.nan if lost else -0.0  # a window inside the gap: lost, or 0 with the increase at its end
        fill = np.where(bridged, np.where(at_end, np.take_along_axis(amount, k, axis=0), inner), np.nan)
        out.fills[name] = fill.reshape((W, C) + sizes)
        out.waiting[name] = (touch & (cl >= S)).reshape((W, C) + sizes)
        first_close = nxt[0]  # the first good sample: where a gap open before the piece closes
        fc = np.minimum(first_close, S - 1)[None]
        closes = c.open & (first_close < S)
        closed = closes & np.take_along_axis(good, fc, axis=0)[0]
        if lost:  # the windows held from an earlier piece are lost increments: they stay out
            closed = np.zeros_like(closed)
        out.closed[name] = closed.reshape((C,) + sizes)
        out.ended[name] = (closes & ~closed).reshape((C,) + sizes)
        self.chips, self.hosts = dump.chips, getattr(dump, "hosts", None)
        self._carry(name, c, raw, ts, ok, ind, bad, last, first)

    def _empty(self, raw, ind) -> Carry:
        shape = raw.shape[1:]
        z = np.zeros(shape, bool)
        return Carry(
            z,
            z,
            np.zeros(shape, np.uint64),
            np.zeros(shape, np.int64),
            z,
            np.zeros(shape, np.int64),
            None if ind is None else np.zeros(shape + ind.shape[2:], ind.dtype),
        )

    def _carry(self, name: str, c: Carry, raw, ts, ok, ind, bad, last, first: int) -> None:
        """The state at the piece's end: where it ended in a gap, the last good sample before it (this
        piece's, or the one carried when the whole piece was in the gap)."""
        lj = last[-1]
        here = lj >= 0
        l0 = np.maximum(lj, 0)
        cc = np.arange(raw.shape[1])[:, None]
        new = Carry(
            bad[-1].copy(),
            np.where(here, True, c.has),
            np.where(here, raw[l0, cc, np.arange(raw.shape[2])], c.raw),
            np.where(here, ts[l0, cc], c.t),
            np.where(here, ok[l0, cc, np.arange(raw.shape[2])], c.ok),
            np.where(here, first + lj, np.where(c.open, c.w0, first)),
            None,
        )
        if ind is not None:
            new.ind = np.where(here[..., None], ind[l0, cc], c.ind if c.ind is not None else 0)
        self.carry[name] = new

    def _span(self, sig, prev, cur, dt):
        """Rules 4 and 4b over a bridged span: VALID, RESET_INFERRED or WRAP_AMBIGUOUS per span."""
        why = np.zeros(cur.shape, np.uint8)
        if sig.wrap_width is None:  # unknown width: a decrease is a reset
            why[cur < prev] = RESET_INFERRED
            return why
        M = sig.modulus if sig.modulus is not None else 1 << sig.wrap_width
        delta = self._wrapped(sig, prev, cur, np.ones(cur.shape, bool))
        rate = max_rate(self.gen, sig)
        if rate is None:
            why[delta > np.uint64(M // 2)] = RESET_INFERRED
            return why
        limit = rate * dt / sig.scale + 1.0
        why[delta.astype(np.float64) > limit] = RESET_INFERRED
        why[limit >= float(M)] = WRAP_AMBIGUOUS
        return why

    @staticmethod
    def _wrapped(sig, prev, cur, fine):
        """The raw increase modulo the counter's range (0 where not ``fine``)."""
        prev = np.where(fine, prev, cur).astype(np.uint64)
        cur = cur.astype(np.uint64)
        if sig.wrap_width is None:
            return cur - prev
        if sig.modulus is not None:
            return range_delta(prev, cur, sig.modulus)
        return modular_delta(prev, cur, sig.wrap_width)

    @staticmethod
    def _who(chips, hosts, col: int) -> str:
        """Chip column ``col`` as the notes name it: ``host/chip`` in a dump of hosts (every host has a chip 2)."""
        return f"{hosts[col]}/{int(chips[col])}" if hosts is not None else str(int(chips[col]))

    def _count(self, name: str, mask, why: str, dump, cc, samples) -> None:
        if not mask.any():
            return
        rec = self.unbridged.setdefault((name, why), [0, None, None, set()])
        hosts = getattr(dump, "hosts", None)
        if rec[0] == 0:
            i = int(np.argmax(mask))
            at = "from" if why in (INCREMENTS, LOST) else "closing at"
            rec[1], rec[2] = self._who(dump.chips, hosts, int(cc[i])), f"{at} sample {int(samples[i])}"
        rec[0] += int(mask.sum())
        rec[3].update(self._who(dump.chips, hosts, int(c)) for c in np.unique(np.asarray(cc)[np.asarray(mask)]))

    def notes(self) -> list[str]:
        """Notes on the gaps left out of the run totals (the gaps still open count as never closing: call when
        the run has been read): one per reason and set of chips, naming every signal it cuts (a chip that stops
        reporting cuts every counter at once: one note, not one per signal)."""
        for name, c in self.carry.items():
            if c.open.any():
                col, i = np.argwhere(c.open)[0][0], tuple(np.argwhere(c.open)[0])
                why = "at the end of the run (it never closes)"
                rec = self.unbridged.setdefault((name, why), [0, None, None, set()])
                rec[0] += int(c.open.sum())
                rec[1] = self._who(self.chips, self.hosts, int(col)) if rec[1] is None else rec[1]
                rec[2] = f"from sample {int(c.w0[i] + 1)}" if rec[2] is None else rec[2]
                rec[3].update(
                    self._who(self.chips, self.hosts, int(k))
                    for k in np.flatnonzero(c.open.reshape(len(c.open), -1).any(axis=1))
                )
        groups: dict[tuple, list[tuple[str, int]]] = {}
        for (name, why), (n, chip, sample, chips) in sorted(self.unbridged.items()):
            groups.setdefault((why, chip, sample, frozenset(chips)), []).append((name, n))
        return [_gap_note(names, why, chip, sample, chips) for (why, chip, sample, chips), names in groups.items()]


def _gap_note(names: list[tuple[str, int]], why: str, chip: str, sample: str, chips: frozenset) -> str:
    """One note on the gaps of ``names`` ((signal, gaps) each) left out for ``why`` on ``chips``."""
    if len(names) == 1:
        name, n = names[0]
        where = f"{n} gap(s) of missing samples"
    else:
        shown = ", ".join(s for s, _ in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        name, where = f"{len(names)} signals ({shown})", "gaps of missing samples"
    on = sorted(chips)
    if len(names) > 1:
        where += (
            f" on chip {on[0]}"
            if len(on) == 1
            else f" on {len(on)} chips ({', '.join(on[:6])}{' …' if len(on) > 6 else ''})"
        )
    if why == LOST:
        return (
            f"{name}: {where}, {INCREMENTS} (first: chip {chip}, {sample}): the gap's windows are left out of the run "
            "and server totals; the window after it, whose own increment the tool printed, is null in the window table "
            "(its start is missing) but counted in the run totals"
        )
    return (
        f"{name}: {where} not bridged in the run totals, {why} (first: chip {chip}, {sample}): "
        "their windows are left out of the run and server totals"
    )


def bridge_dump(dump, gen) -> tuple[dict[str, np.ndarray], list[str]]:
    """The whole dump as one piece: (``fills``: {signal: (W, C, I) run-level values of the bridged windows,
    NaN elsewhere} for the signals with a missing sample, notes on the gaps not bridged)."""
    b = Bridger(gen)
    p = b.piece(dump, 0)
    return {n: f for n, f in p.fills.items() if np.isfinite(f).any()}, b.notes()


def totals(w: Windows) -> Windows:
    """The windows as the run totals read them: the bridged windows of ``w.bridged`` valid, holding their
    share of the bridged increase (module docstring); ``w`` itself when nothing was bridged.

    Shapes: ``w.bridged[s]`` is shaped like ``w.values[s]`` (W, C, …), NaN where not bridged."""
    bridged = getattr(w, "bridged", None)
    if not bridged:
        return w
    values, null = dict(w.values), dict(w.null)
    for n, f in bridged.items():
        if n not in values:
            continue
        hit = np.isfinite(f) & (null[n] == MISSING) if n in null else np.isfinite(f)
        values[n] = np.where(hit, f, values[n])
        if n in null:
            null[n] = np.where(hit, np.uint8(VALID), null[n])
    return replace(w, values=values, null=null, bridged={})


def spans(w: Windows, signals) -> tuple[np.ndarray, np.ndarray] | None:
    """Where ``w.bridged`` makes windows valid for any of ``signals`` (any instance): (``span`` (W, C) True at
    those windows, ``cont`` (W, C) True where a gap's span goes on into the next window — a window of a gap
    other than its last holds −0.0, whose sign bit marks it); None when none is. A span holds one bridged
    increase, in its last window: it is counted whole or not at all (``atomic``)."""
    span: np.ndarray | None = None
    cont: np.ndarray | None = None
    for s in signals:
        f = w.bridged.get(s) if w.bridged else None
        if f is None:
            continue
        hit = np.isfinite(f) & (w.null[s] == MISSING) if s in w.null else np.isfinite(f)
        on = (hit & np.signbit(f)).reshape(hit.shape[0], hit.shape[1], -1).any(axis=2)
        hit = hit.reshape(hit.shape[0], hit.shape[1], -1).any(axis=2)
        span = hit if span is None else span | hit
        cont = on if cont is None else cont | on
    return None if span is None or cont is None else (span, cont)


def atomic(bad: np.ndarray, sc: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """``bad`` (W, C) with every bridged span (``spans``: overlapping spans of a chip together) bad whole where
    any of its windows is: a bridged increase sits in the gap's last window, so a total over part of its
    windows would lose it (or keep it without the time it took)."""
    if sc is None or not (bad & sc[0]).any():
        return bad
    W, C = bad.shape
    s, c, b = sc[0].T.reshape(-1), sc[1].T.reshape(-1), bad.T.reshape(-1)  # chip by chip
    start = s & ~np.r_[False, c[:-1]]
    start[::W] = s[::W]  # a span does not go on into the next chip
    rid = np.cumsum(start) * s  # 0: not bridged
    hit = np.zeros(int(rid.max()) + 1, bool)
    hit[rid[b & s]] = True
    hit[0] = False
    return bad | hit[rid].reshape(C, W).T


def server_bad(bad: np.ndarray, span: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """(W, C) the windows left out at server level, from each chip's ``bad`` (W, C): a window bad on one chip
    is left out on all, and a bridged run cut by that is left out whole (``atomic``), until nothing changes."""
    while True:
        col = np.broadcast_to(bad.any(axis=1, keepdims=True), bad.shape)
        new = atomic(col, span)
        if (new == col).all():
            return col
        bad = new
