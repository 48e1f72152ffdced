"""Piecewise clock fits that survive device-clock resets and say how sure they are.

One chip's sync reads (host_before ``T1``, device stamp(s), host_after ``T4``) are split into *epochs*
at detected resets, and each epoch gets its own line ``device = offset + (1 + drift) × host``.

Offset of one read, without the midpoint bias (NTP's four-timestamp estimate, RFC 5905 §8): with the
device's stamps at the request's arrival ``T2`` (``device_before_ns``) and at the reply's departure
``T3`` (``device_after_ns``), ``y = (T2 + T3)/2 − (T1 + T4)/2`` and the network round trip is
``(T4 − T1) − (T3 − T2)``. With one stamp ``device_ns`` taken after ``processing_ns`` of device work
(declared), ``T2 = device_ns − processing_ns`` and ``T3 = device_ns``. Whatever the two one-way legs
are, the read's true offset lies within ± half its network round trip of ``y`` (``half``).

Reset detection, between consecutive reads ``i − 1`` and ``i`` (host order):
- *backwards*: the device clock went backwards (``T2[i] < T3[i − 1]``);
- *jump*: ``|y[i] − y[i − 1]| > half[i] + half[i − 1] + max_drift × Δhost + 2 ns`` — larger than any
  drift up to ``max_drift_ppm`` (default 1000 ppm, ten times a crystal's specification) and any
  asymmetry of the two reads could make it.

Fit of one epoch (robust, as NTP's clock filter prefers the reads with the shortest round trip):
keep the fastest half of the reads by ``half`` — but at least ``DRIFT_MIN_READS + 2`` = 5 (all when
there are fewer), so that the filter never leaves too few reads for the drift test below — fit,
drop reads more than 4 robust SDs (MAD × 1.4826, floor 1 ns) off the fit, refit (3 rounds at most).
Model-selection rule for the drift (stated): the slope is fitted only when the epoch keeps
``DRIFT_MIN_READS`` = 3 reads or more and the least-squares slope is further from zero than
``t_crit(n − 2)`` of its standard errors — the two-sided 0.3 % critical value of Student's t with
``n − 2`` degrees of freedom (3.0 for many reads, 4.9 for 8, 236 for 3: a t test at the "3 σ" level
that does not trust a slope from a handful of noisy reads); otherwise the epoch is offset only (the mean of
``y``), and a drift it may hide (``|slope| + t_crit × SE``, or ``DRIFT_BOUND_PPM`` = 100 ppm when there are
fewer than 3 reads) widens the error bound away from the reads' centre.

Error bound of a mapped time at host ``x`` (``t = x − x̄``, the fit's weights ``w_i = 1/n + t (x_i − x̄)/Sxx``):
``Σ|w_i| half_i`` (the hard bound from the round trips, computed as ``mean(half) + |t| Σ|x_i − x̄| half_i /
Sxx``), plus ``3 s √(1/n + t²/Sxx)`` (three standard errors of the fit, ``s`` the residual SD), plus the
unfitted drift × ``|t|``. Within an epoch the fit maps ``host = (device − offset) / (1 + drift)``.

Which epoch a device stamp belongs to (``ChipClock.map``): epoch ``k`` *claims* a stamp whose device
time is at or after its first read's ``T2`` (for ``k > 0``) and whose mapped host time is before the
next epoch's first read (for all but the last; with resets, the first epoch also stops one sync
interval before its first read). A stamp of epoch ``k > 0`` before its first read lies between the reset
and the next sync point: it is **unmappable** (``reset_gap``), never guessed. A stamp two epochs claim is
resolved by the order of a time-ordered sequence (counter samples: the epoch never goes back, and moves
on at a backwards step of the device time) or by a host hint (the earliest host time it can have, e.g. its
submission: the earliest epoch's time at or after the hint less its bound; when every epoch puts it
before the hint, the latest of them, and it is outside its bracket either way), else it is ``ambiguous``
(also when one epoch claims it and another holds it in its reset gap). In a time-ordered sequence, a
backwards step of the device time that stays in one epoch is a reset no sync read saw (before the first
read or after the last): of the runs it splits the epoch's stamps into, those whose device times miss
the epoch's reads are ``unseen_reset`` (when another run meets them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DRIFT_MIN_READS = 3
DRIFT_T = 3.0
DRIFT_BOUND_PPM = 100.0
K_SIGMA = 3.0
MAX_DRIFT_PPM = 1000.0
SLACK_NS = 2.0
#: reason codes of ``ChipClock.map`` → text
REASONS = {
    0: "",
    1: "reset_gap: between a device clock reset and the next sync read",
    2: "ambiguous: two clock epochs fit this device time",
    3: "outside: further than one sync interval before the first sync read",
    5: "unseen_reset: across a device clock reset that no sync read follows or precedes",
}


@dataclass(frozen=True)
class Reads:
    """One chip's sync reads in host order (float64 ns): midpoint ``x``, offset ``y``, ``half`` network
    round trip, device stamps ``dev_lo`` (T2) and ``dev_hi`` (T3), host stamps ``h0``/``h1``."""

    x: np.ndarray
    y: np.ndarray
    half: np.ndarray
    dev_lo: np.ndarray
    dev_hi: np.ndarray
    h0: np.ndarray
    h1: np.ndarray


def make_reads(
    h0, device, h1, device_before=None, device_after=None, processing_ns: float = 0.0, where="", rows=None
) -> Reads:
    """Validate and prepare sync reads (equal-length arrays, ns). ``device_before``/``device_after``
    (both or neither) replace ``device`` and ``processing_ns``. ``where``: names the source in errors.

    Raises:
        ValueError: unequal lengths, no read, non-finite stamps, host_after before host_before,
            device_after before device_before, or device work longer than the host's round trip —
            naming the row (0-based, in the given order) and the column.
    """
    h0, h1, d = (np.asarray(a, np.float64) for a in (h0, h1, device))
    if (device_before is None) != (device_after is None):
        raise ValueError(f"{where}sync reads need both device_before_ns and device_after_ns, or neither")
    if device_before is None:
        lo, hi = d - float(processing_ns), d
    else:
        lo, hi = np.asarray(device_before, np.float64), np.asarray(device_after, np.float64)
    if not (len(h0) == len(h1) == len(lo) == len(hi)) or len(h0) == 0:
        raise ValueError(f"{where}sync reads: columns of unequal length or no read")
    one = device_before is None
    dev = (("device_ns", d),) if one else (("device_before_ns", lo), ("device_after_ns", hi))
    for name, col in (("host_before_ns", h0), ("host_after_ns", h1), *dev):
        _bad(~np.isfinite(col), where, rows, name, "is not a finite number")
        _bad(np.abs(col) >= 2.0**63, where, rows, name, "is outside the range of a nanosecond stamp; check its unit")
    _bad(h1 < h0, where, rows, "host_after_ns", "is before host_before_ns (the host clock went backwards)")
    _bad(hi < lo, where, rows, "device_after_ns", "is before device_before_ns (or processing_ns is negative)")
    net = (h1 - h0) - (hi - lo)
    long = (
        f"--device-processing-ns ({float(processing_ns):g} ns) is longer than this read's host round trip; "
        "give a shorter one"
        if one
        else "device work longer than the host round trip; check the stamps"
    )
    _bad(net < -SLACK_NS, where, rows, "device_ns" if one else "device_after_ns", long)
    order = np.argsort(h0, kind="stable")
    h0, h1, lo, hi, net = h0[order], h1[order], lo[order], hi[order], np.maximum(net[order], 0.0)
    x = (h0 + h1) / 2
    return Reads(x, (lo + hi) / 2 - x, net / 2 + 0.5, lo, hi, h0, h1)  # + 0.5 ns: integer stamps


def _bad(mask, where, rows, col, what) -> None:
    if np.any(mask):
        i = int(np.flatnonzero(mask)[0])
        i = int(rows[i]) if rows is not None else i
        raise ValueError(f"{where}sync read row {i}, column {col}: {what}; fix or drop that read")


def find_resets(r: Reads, max_drift_ppm: float = MAX_DRIFT_PPM) -> list[tuple[int, str]]:
    """Indices ``i`` (into ``r``, host order) where a new epoch starts, with the kind (``backwards`` or
    ``jump``); see the module docstring for the rule."""
    if len(r.x) < 2:
        return []
    back = r.dev_lo[1:] < r.dev_hi[:-1]
    tol = r.half[1:] + r.half[:-1] + max_drift_ppm * 1e-6 * np.diff(r.x) + SLACK_NS
    jump = np.abs(np.diff(r.y)) > tol
    return [(int(i) + 1, "backwards" if back[i] else "jump") for i in np.flatnonzero(back | jump)]


@dataclass(frozen=True)
class Segment:
    """One epoch's fit: ``y = a + b (x − xr)`` on ``n`` kept of ``total`` reads; error-bound terms
    ``h0``, ``h1`` (ns, ns/ns), ``s`` (residual SD, ns), ``sxx`` (ns²), ``dfree`` (unfitted drift bound);
    its first read's device stamp ``dev_first`` (and last read's ``dev_last``) and host span
    ``host_first``…``host_last``."""

    a: float
    b: float
    xr: float
    drift_fitted: bool
    n: int
    total: int
    s: float
    sxx: float
    h0: float
    h1: float
    dfree: float
    dev_first: float
    host_first: float
    host_last: float
    dev_last: float = np.nan

    @property
    def offset_ns(self) -> float:
        return self.a - self.b * self.xr

    def to_host(self, device_ns) -> np.ndarray:
        """Host time (ns) of device stamps, by this epoch's line."""
        return (np.asarray(device_ns, np.float64) - self.a + self.b * self.xr) / (1.0 + self.b)

    def bound(self, host_ns) -> np.ndarray:
        """Error bound (ns) of a time mapped to ``host_ns`` (module docstring)."""
        t = np.abs(np.asarray(host_ns, np.float64) - self.xr)
        se = np.sqrt(1.0 / self.n + (t * t / self.sxx if self.sxx > 0 else 0.0))
        return self.h0 + self.h1 * t + K_SIGMA * self.s * se + self.dfree * t

    def as_dict(self) -> dict:
        return {
            "offset_ns": self.offset_ns,
            "drift_ppm": self.b * 1e6,
            "drift_fitted": self.drift_fitted,
            "reads_kept": self.n,
            "reads": self.total,
            "residual_ns": self.s,
            "host_first_ns": self.host_first,
            "host_last_ns": self.host_last,
            "bound_at_centre_ns": float(self.bound(self.xr)),
        }


def fit_segment(x, y, half, dev_first: float | None = None, dev_last: float | None = None) -> Segment:
    """Fit one epoch's reads (arrays of equal length ≥ 1, host order) by the rule of the module docstring."""
    x, y, half = (np.asarray(a, np.float64) for a in (x, y, half))
    n_keep = max((len(x) + 1) // 2, min(len(x), DRIFT_MIN_READS + 2))  # the fastest half, at least 5
    keep = np.zeros(len(x), bool)
    keep[np.argsort(half, kind="stable")[:n_keep]] = True
    for _ in range(3):
        a, b, xr, _ = _choose(x[keep], y[keep])
        res = y - a - b * (x - xr)
        mad = 1.4826 * np.median(np.abs(res[keep] - np.median(res[keep])))
        new = keep & (np.abs(res) <= 4 * max(mad, 1.0))
        if new.sum() < min(3, keep.sum()) or np.array_equal(new, keep):
            break
        keep = new
    a, b, xr, (fitted, s, sxx, dfree) = _choose(x[keep], y[keep])
    sxx = sxx if fitted else 0.0  # offset only: its spread is s/√n, a drift it may hide is dfree
    xs, hs = x[keep], half[keep]
    h1 = float(np.sum(np.abs(xs - xr) * hs) / sxx) if fitted else 0.0
    return Segment(
        float(a), float(b), float(xr), fitted, int(keep.sum()), len(x), float(s), float(sxx), float(hs.mean()), h1,
        float(dfree), float(dev_first if dev_first is not None else np.nan), float(x[0]), float(x[-1]),
        float(dev_last if dev_last is not None else np.nan),
    )  # fmt: skip


def _choose(x, y):
    """Offset only, or offset and drift (the stated rule): ``(a, b, xr, (fitted, s, sxx, dfree))``."""
    n = len(x)
    xr = float(x.mean())
    xc = x - xr
    sxx = float(np.sum(xc * xc))
    a = float(y.mean())
    s0 = float(np.std(y, ddof=1)) if n >= 2 else 0.0
    if n < DRIFT_MIN_READS or sxx <= 0:
        return a, 0.0, xr, (False, s0, sxx, DRIFT_BOUND_PPM * 1e-6)
    b = float(np.sum(xc * (y - a)) / sxx)  # y centred: y may be ~1e18 (host stamps since the epoch)
    s1 = float(np.sqrt(np.sum((y - a - b * xc) ** 2) / (n - 2)))
    se_b = s1 / np.sqrt(sxx)
    if abs(b) > t_crit(n - 2) * se_b:
        return a, b, xr, (True, s1, sxx, 0.0)
    return a, 0.0, xr, (False, s0, sxx, abs(b) + t_crit(n - 2) * se_b)


def t_crit(dof: int) -> float:
    """Two-sided critical value of Student's t at the level of a 3 σ normal test (p ≈ 0.0027).

    ``scipy.special``'s inverse t CDF and normal CDF: the values of ``scipy.stats.t.ppf(norm.cdf(3), dof)``
    (bit for bit) without importing ``scipy.stats`` (~1 s of every ``perfonto run``'s start)."""
    from scipy.special import ndtr, stdtrit

    return float(stdtrit(dof, ndtr(DRIFT_T)))


@dataclass(frozen=True)
class ChipClock:
    """A chip's piecewise clock: ``segments`` (one per epoch, host order) and ``resets`` (dicts: the
    kind, the host interval it happened in, the offset jump). Attributes of the first epoch keep the
    single-line interface (``offset_ns``, ``drift``, ``to_host``) of ``align.ClockFit``."""

    segments: tuple[Segment, ...]
    resets: tuple[dict, ...]
    lead_ns: float

    offset_ns = property(lambda self: self.segments[0].offset_ns)
    drift = property(lambda self: self.segments[0].b)
    drift_ppm = property(lambda self: self.segments[0].b * 1e6)
    residual_ns = property(lambda self: self.segments[0].s)
    kept = property(lambda self: sum(s.n for s in self.segments))
    total = property(lambda self: sum(s.total for s in self.segments))

    def to_host(self, device_ns, ordered: bool = False) -> np.ndarray:
        """Host time (ns, float64) of device stamps, NaN where unmappable (``map``)."""
        return self.map(device_ns, ordered=ordered)[0]

    def map(self, device_ns, ordered: bool = False, hint_ns=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(host_ns, bound_ns, reason)`` of device stamps (arrays like ``device_ns``; NaN host and
        bound where ``reason`` (int8, ``REASONS``) is not 0). ``ordered``: the stamps are one
        time-ordered sequence; ``hint_ns``: per stamp, the earliest host time it can have."""
        d = np.asarray(device_ns, np.float64)
        segs = self.segments
        hosts = np.stack([s.to_host(d) for s in segs]) if len(d) else np.zeros((len(segs), 0))
        if len(segs) == 1:
            pick, reason = np.zeros(len(d), np.int64), np.zeros(len(d), np.int8)
        else:
            claim, gap = self._status(d, hosts)
            if ordered:
                late = np.stack([hosts[k] > s.host_last for k, s in enumerate(segs)])
                amb = claim & late & np.r_[gap[1:], np.zeros((1, len(d)), bool)]
                pick, reason = _walk(d, claim, gap, amb)
            else:
                pick, reason = _by_hint(hosts, claim, gap, hint_ns, self)
        if ordered:
            reason = _unseen(d, pick, reason, segs)
        ok = reason == 0
        idx = np.arange(len(d))
        host = np.where(ok, hosts[np.maximum(pick, 0), idx], np.nan)
        bound = np.full(len(d), np.nan)
        for k, s in enumerate(segs):
            sel = ok & (pick == k)
            bound[sel] = s.bound(host[sel])
        return host, bound, reason

    def _status(self, d, hosts):
        """Per epoch and stamp: claimed (mappable by it) and in its reset gap (module docstring)."""
        segs, K = self.segments, len(self.segments)
        claim = np.zeros(hosts.shape, bool)
        gap = np.zeros(hosts.shape, bool)
        for k, s in enumerate(segs):
            lo = d >= s.dev_first if k > 0 else hosts[0] >= s.host_first - self.lead_ns
            hi = hosts[k] <= segs[k + 1].host_first if k < K - 1 else np.ones(len(d), bool)
            claim[k] = lo & hi
            if k > 0:
                gap[k] = (d < s.dev_first) & (hosts[k] >= segs[k - 1].host_last - s.bound(segs[k - 1].host_last))
        return claim, gap


def _unseen(d, pick, reason, segs) -> np.ndarray:
    """Reasons of a time-ordered sequence with its backwards steps of the device time that no detected
    reset explains (the step stays in one epoch: a reset before the first or after the last sync read).
    Such steps split an epoch's stamps into runs; when one run meets the epoch's reads (device times within
    ``dev_first``…``dev_last``), the runs that miss them are of a clock the reads never saw (5,
    ``unseen_reset``). Runs that all meet the reads stay mapped: rows a little out of time order look the
    same, and the device times cannot tell them from a reset."""
    if len(d) < 2:
        return reason
    step = np.flatnonzero((d[1:] < d[:-1]) & (pick[1:] == pick[:-1])) + 1
    if not len(step):
        return reason
    run = np.zeros(len(d), np.int64)
    run[step] = 1
    run = np.cumsum(run)
    out = reason.copy()
    for k in np.unique(pick[step]):
        s, mine = segs[k], pick == k
        ids = np.unique(run[mine])
        hit = [r for r in ids if d[mine & (run == r)].min() <= s.dev_last and d[mine & (run == r)].max() >= s.dev_first]
        for r in ids:
            sel = mine & (run == r) & (out == 0)
            out[sel] = 5 if hit and r not in hit else 0
    return out


def _walk(d, claim, gap, amb):
    """Epochs of a time-ordered sequence: never back; onwards at a backwards step of the device time or
    where the current epoch stops claiming. ``amb``: the current epoch claims the stamp only by
    extrapolation past its last read while the next holds it in its reset gap (ambiguous)."""
    K, N = claim.shape
    pick = np.zeros(N, np.int64)
    reason = np.zeros(N, np.int8)
    back = np.r_[False, d[1:] < d[:-1]]
    k = 0
    for i in range(N):
        if back[i] or not claim[k, i]:
            nxt = next((m for m in range(k + 1, K) if claim[m, i] or gap[m, i]), None)
            if nxt is not None:
                k = nxt
            reason[i] = 0 if claim[k, i] else (1 if gap[k, i] else 3)
        elif amb[k, i]:
            reason[i] = 2
        pick[i] = k
    return pick, reason


def _by_hint(hosts, claim, gap, hint, clock: ChipClock):
    """Epochs of unordered stamps. One epoch claims it and none holds it in a reset gap: that epoch.
    None claims it: the reset gap, or outside. Else ambiguous, unless a hint settles it: the earliest
    candidate at or after the hint (less its bound), a claim mapped and a gap unmappable; when every
    candidate is before the hint, the latest claim (outside its bracket either way, so flagged)."""
    K, N = claim.shape
    n_claim, n_gap = claim.sum(axis=0), gap.sum(axis=0)
    pick = np.where(n_claim >= 1, np.argmax(claim, axis=0), -1)
    reason = np.where(n_claim == 0, np.where(n_gap > 0, 1, 3), np.where((n_claim == 1) & (n_gap == 0), 0, 2))
    reason = reason.astype(np.int8)
    if hint is None:
        return pick, reason
    hint = np.asarray(hint, np.float64)
    segs = clock.segments
    for i in np.flatnonzero(reason == 2):
        cand = [k for k in range(K) if claim[k, i] or gap[k, i]]
        after = [k for k in cand if hosts[k, i] + segs[k].bound(hosts[k, i]) >= hint[i]]
        if after:
            k = min(after, key=lambda k: hosts[k, i])
            pick[i], reason[i] = k, 0 if claim[k, i] else 1
        elif np.isfinite(hint[i]) and n_claim[i]:
            pick[i] = max((k for k in cand if claim[k, i]), key=lambda k: hosts[k, i])
            reason[i] = 0
    return pick, reason


def fit_chip(reads: Reads, max_drift_ppm: float = MAX_DRIFT_PPM) -> ChipClock:
    """The piecewise clock of one chip's reads (``make_reads``): epochs split at ``find_resets``."""
    cuts = find_resets(reads, max_drift_ppm)
    bounds = [0, *[i for i, _ in cuts], len(reads.x)]
    segs = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        sl = slice(lo, hi)
        segs.append(fit_segment(reads.x[sl], reads.y[sl], reads.half[sl], reads.dev_lo[lo], reads.dev_hi[hi - 1]))
    resets = tuple(
        {
            "kind": kind,
            "after_host_ns": float(reads.h1[i - 1]),
            "before_host_ns": float(reads.h0[i]),
            "offset_jump_ns": float(reads.y[i] - reads.y[i - 1]),
        }
        for i, kind in cuts
    )
    lead = float(np.median(np.diff(reads.x))) if len(reads.x) > 1 else 0.0
    return ChipClock(tuple(segs), resets, lead)


def _column(table, name: str, where: str) -> np.ndarray:
    """A sync-read column as numpy: ``chip`` integer without nulls, the stamps integer or floating
    (a null stamp becomes NaN, reported by ``make_reads``); else ValueError naming the column."""
    import pyarrow as pa

    c = table.column(name)
    if name != "chip" and (pa.types.is_timestamp(c.type) or pa.types.is_duration(c.type)):  # e.g. pandas datetime64
        c = c.cast(pa.timestamp("ns") if pa.types.is_timestamp(c.type) else pa.duration("ns")).cast(pa.int64())
    typ = c.type.value_type if pa.types.is_dictionary(c.type) else c.type
    ok = pa.types.is_integer(typ) or (name != "chip" and pa.types.is_floating(typ))
    if not ok:
        want = "an integer chip index" if name == "chip" else "integer or floating nanoseconds"
        raise ValueError(f"{where}: column {name} is {typ}, not {want}; rewrite sync.parquet with that type")
    if name == "chip" and c.null_count:
        row = int(np.flatnonzero(c.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"{where}: sync read row {row}, column chip: is empty; fix or drop that read")
    if pa.types.is_dictionary(c.type):
        c = c.cast(typ)
    return c.to_numpy(zero_copy_only=False)


def clocks_of_table(table, processing_ns: float = 0.0, where: str = "sync reads") -> dict[int, ChipClock]:
    """Every chip's piecewise clock from a sync-read table (pyarrow): columns ``chip``,
    ``host_before_ns``, ``device_ns``, ``host_after_ns``, and optionally ``device_before_ns`` and
    ``device_after_ns`` (the device's stamps at the request's arrival and the reply's departure).

    Raises:
        ValueError: a missing column or one of the wrong type, no read, a bad read (``make_reads``), naming
            ``where``, the chip and the row; or a chip more than half of whose reads (3 or more) start a new
            epoch (device stamps that do not follow the host clock).
    """
    names = set(table.column_names)
    pair = {"device_before_ns", "device_after_ns"}
    if len(names & pair) == 1:
        [have], [lack] = names & pair, pair - names
        raise ValueError(f"{where}: column {have} without {lack}; give both device stamps, or neither (device_ns)")
    need = {"chip", "host_before_ns", "host_after_ns"} | ({"device_ns"} if "device_before_ns" not in names else set())
    missing = sorted(need - names)
    if missing:
        raise ValueError(f"{where}: no column(s) {', '.join(missing)}; a sync read is host_before_ns, device_ns, "
                         "host_after_ns per chip (or device_before_ns and device_after_ns for device_ns)")  # fmt: skip
    if processing_ns and "device_before_ns" in names:
        raise ValueError(
            f"{where}: --device-processing-ns ({float(processing_ns):g} ns) applies to one device stamp per read; "
            "this file's device_before_ns and device_after_ns measure the processing time: drop the option"
        )
    if table.num_rows == 0:
        raise ValueError(f"{where}: no sync read (0 rows); the driver's host/device clock reads are needed per chip")
    col = {k: _column(table, k, where) for k in names & (need | pair)}
    chip = col["chip"]
    out = {}
    for c in np.unique(chip):
        sel = chip == c
        two = "device_before_ns" in col and "device_after_ns" in col
        reads = make_reads(
            col["host_before_ns"][sel],
            col["device_after_ns"][sel] if two else col["device_ns"][sel],
            col["host_after_ns"][sel],
            col["device_before_ns"][sel] if two else None,
            col["device_after_ns"][sel] if two else None,
            processing_ns,
            where=f"{where}, chip {int(c)}: ",
            rows=np.flatnonzero(sel),
        )
        clk = fit_chip(reads)
        if len(clk.resets) >= 3 and 2 * len(clk.resets) > clk.total:
            raise ValueError(
                f"{where}, chip {int(c)}: {len(clk.resets)} of {clk.total} sync reads start a new clock epoch (a reset "
                "or a jump): the device stamps do not follow the host clock; check that device_ns is the chip's "
                "own clock in ns"
            )
        out[int(c)] = clk
    return out


__all__ = [
    "REASONS",
    "ChipClock",
    "clocks_of_table",
    "t_crit",
    "Reads",
    "Segment",
    "find_resets",
    "fit_chip",
    "fit_segment",
    "make_reads",
]
