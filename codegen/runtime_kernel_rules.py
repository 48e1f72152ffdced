"""The window rules of a block of rows in the fused kernel, copied verbatim into every generated evaluator
after ``codegen/runtime_kernel.py`` (numba compiles them with the rest: ``_JITTED``, ``_KINLINE`` there).

``_rules_block`` applies rules 2–8 of ``metrics/windows.py`` to rows ``r0 .. r1`` of a chunk, column by
column, exactly as the NumPy path does (``codegen/runtime_stream.py``: same integer arithmetic, same
float operations in the same order), as named steps: intervals, each column's own rules (``_column``:
counters by class, gauges and packed registers, sentinels and declared ranges), histograms, unit fields
(rule 4d), reset groups, the nulls that spread between columns, the late columns' nulls and the packed
fields. Registers are read as ``X[colmap[j], r]`` (see ``codegen/runtime_kernel.py``).
"""
# Names such as _NAN are defined by the generated evaluator this source is copied into.
# ruff: noqa: F821

import numpy as np


def _load(X, colmap, R0, C, j, r0, n, cc, pp):
    """The raw registers of layout column ``j`` for rows ``r0 .. r0 + n`` into ``cc`` and the same
    chips' previous samples into ``pp`` (the baseline ``R0`` before the chunk's first sample)."""
    x = X[colmap[j]]
    cur = x[r0 : r0 + n]  # views indexed by the loop variable only: see _column
    for q in range(n):
        cc[q] = cur[q]
    if r0 >= C:
        prev = x[r0 - C : r0 - C + n]
        for q in range(n):
            pp[q] = prev[q]
    else:
        for q in range(n):
            r = r0 + q
            pp[q] = x[r - C] if r >= C else R0[r % C, j]


def _column(
    j,
    k,
    ca,
    co,
    pa_,
    po,
    n,
    v,
    bd,
    dd,
    keep,
    IV,
    mask,
    scale,
    half,
    rate,
    wrap,
    gscale,
    modm,
    sent_off,
    sent_vals,
    late,
):
    """Rules 3–7 and 4c, 5 for layout column ``j`` over ``n`` rows: current registers ``ca[co + q]``,
    previous ``pa_[po + q]`` (the registers in place, or the baseline block's copies). The common
    counters (a power-of-two width, no declared range, advance not needed later) take one loop that
    reads the two registers and writes the value and its null flag (``_counter_fast``); the others
    first keep the advance in ``dd`` (rule 4d reads it later: ``_advance``), then apply their class's
    rule to it (``_counter_rule``); gauges and packed registers read the registers alone
    (``_level``). Then sentinels and declared ranges (``_sentinels_and_range``) and, when no later rule
    changes the column, its nulls (``_null_flagged``).

    Loops index views with the loop variable alone (``ca[co:co + n]``, then ``ca[q]``): numba wraps
    a negative index, so ``ca[co + q]`` with ``co`` unknown is not provably contiguous and LLVM does
    not vectorize it (a block-wise read of the registers measured 6 GB/s so, 35 GB/s as a view)."""
    ca = ca[co : co + n]
    pa_ = pa_[po : po + n]
    if k <= 1 and not keep and modm[j] == 0:
        _counter_fast(k, ca, pa_, n, v, bd, IV, mask[j], scale[j], half[j], rate[j], wrap[j])
    elif k <= 3:
        _advance(ca, pa_, n, dd, mask[j], modm[j])
        _counter_rule(k, ca, pa_, n, v, bd, dd, IV, scale[j], half[j], rate[j], wrap[j])
    else:
        _level(k, ca, pa_, n, v, bd, gscale[j])
    _sentinels_and_range(j, ca, pa_, n, bd, modm, sent_off, sent_vals)
    if not late[j]:  # no later rule changes this column: null it now, while it is in cache
        _null_flagged(v, bd, n)


def _counter_fast(k, ca, pa_, n, v, bd, IV, mj, sj, hj, rj, wj):
    """A common counter's value and null flag in one loop over its two registers (class 0: a
    plausible increase is at most half the width; class 1: at most the maximum rate over the
    interval, and the width must not wrap within it)."""
    if k == 0:
        for q in range(n):
            d = (ca[q] - pa_[q]) & mj
            v[q] = float(d) * sj
            bd[q] = d > hj
    else:
        for q in range(n):
            d = (ca[q] - pa_[q]) & mj
            v[q] = float(d) * sj
            limit = rj * IV[q] / sj + 1.0
            bd[q] = float(d) > limit or limit >= wj


def _advance(ca, pa_, n, dd, mj, mod):
    """A counter's raw advance into ``dd``: the modular delta in its width, or with a declared range
    ``mod`` (rule 4c) the delta plus ``mod`` where the register went down."""
    if mod != 0:  # rule 4c
        for q in range(n):
            c, p = ca[q], pa_[q]
            d = (c - p) & mj
            dd[q] = d + mod if c < p else d
    else:
        for q in range(n):
            dd[q] = (ca[q] - pa_[q]) & mj


def _counter_rule(k, ca, pa_, n, v, bd, dd, IV, sj, hj, rj, wj):
    """A counter's value from its advance ``dd`` and its class's null flag: 0 half the width, 1 the
    maximum rate, 2 a register that went down, 3 none (histogram buckets: their rule comes later)."""
    if k == 0:
        for q in range(n):
            d = dd[q]
            v[q] = float(d) * sj
            bd[q] = d > hj
    elif k == 1:
        for q in range(n):
            d = dd[q]
            v[q] = float(d) * sj
            limit = rj * IV[q] / sj + 1.0
            bd[q] = float(d) > limit or limit >= wj
    elif k == 2:
        for q in range(n):
            v[q] = float(dd[q]) * sj
            bd[q] = ca[q] < pa_[q]
    else:
        for q in range(n):
            v[q] = float(dd[q]) * sj
            bd[q] = False


def _level(k, ca, pa_, n, v, bd, gj):
    """A gauge's (class 4) window value, the mean of its two samples scaled (``gj`` holds the half),
    or a packed register's (class 5) current raw value; neither is null by its class's rule."""
    if k == 4:
        for q in range(n):
            v[q] = (float(ca[q]) + float(pa_[q])) * gj
            bd[q] = False
    else:
        for q in range(n):
            v[q] = float(ca[q])
            bd[q] = False


def _sentinels_and_range(j, ca, pa_, n, bd, modm, sent_off, sent_vals):
    """Rule 5 (either sample holds one of column ``j``'s sentinels) and rule 4c (a raw value at or
    beyond its declared range) set the null flag."""
    for s in range(sent_off[j], sent_off[j + 1]):  # rule 5
        sv = sent_vals[s]
        for q in range(n):
            if ca[q] == sv or pa_[q] == sv:
                bd[q] = True
    if modm[j] != 0:  # rule 4c: a raw value at or beyond the range
        mod = modm[j]
        for q in range(n):
            if ca[q] >= mod or pa_[q] >= mod:
                bd[q] = True


def _null_flagged(v, bd, n):
    """The flagged values of a column made null (NaN)."""
    for q in range(n):
        if bd[q]:
            v[q] = _NAN


def _rules_block(
    X,
    colmap,
    T,
    T0,
    R0,
    C,
    r0,
    r1,
    V,
    F,
    IV,
    BD,
    DD,
    GF,
    cc,
    pp,
    K,
    G,
    N,
    cls,
    mask,
    scale,
    half,
    rate,
    wrap,
    gscale,
    hist,
    sent_off,
    sent_vals,
    reset_of,
    groups,
    modm,
    us_i,
    us_f,
    fsrc,
    flo,
    fmask,
    fscale,
    fsent_off,
    fsent_vals,
    late,
):
    """Window values of rows ``r0 .. r1`` (rules 2–8 of ``metrics/windows.py``), column by column:
    ``V`` (N + 1, rows) values, ``F`` (fields + 1, rows), ``IV`` (rows,) intervals in s; null is NaN.
    The same integer and float operations as the NumPy path, in the same order: intervals, each
    column's rules, histograms, unit fields (rule 4d), reset groups, a unit field's register nulls,
    the late columns' nulls, then the packed fields."""
    n = r1 - r0
    _intervals(T, T0, C, r0, n, IV)
    for j in range(N):
        _column_at(
            X,
            colmap,
            R0,
            C,
            j,
            cls[j],
            r0,
            n,
            V,
            BD,
            DD,
            cc,
            pp,
            IV,
            mask,
            scale,
            half,
            rate,
            wrap,
            gscale,
            modm,
            sent_off,
            sent_vals,
            us_i,
            late,
        )
    _histograms(X, colmap, R0, C, r0, n, BD, GF, cc, pp, hist, sent_off, groups.shape[0])
    _unit_fields(X, colmap, R0, C, r0, n, V, IV, BD, DD, cc, pp, K, scale, modm, sent_off, sent_vals, us_i, us_f)
    _reset_groups(X, colmap, R0, C, r0, n, GF, cc, pp, groups)
    _spread_nulls(n, BD, GF, K, reset_of, us_i)
    for j in range(N):
        if late[j]:
            _null_flagged(V[j], BD[j], n)
    _fields(X, colmap, R0, C, r0, n, F, cc, pp, fsrc, flo, fmask, fscale, fsent_off, fsent_vals)


def _intervals(T, T0, C, r0, n, IV):
    """Each row's window duration in seconds: its sample's timestamp less the same chip's previous
    one (``T0``, the baseline, before the chunk's first sample)."""
    for q in range(n):
        r = r0 + q
        IV[q] = float(T[r] - (T[r - C] if r >= C else T0[r % C])) * 1e-9


def _column_at(
    X,
    colmap,
    R0,
    C,
    j,
    k,
    r0,
    n,
    V,
    BD,
    DD,
    cc,
    pp,
    IV,
    mask,
    scale,
    half,
    rate,
    wrap,
    gscale,
    modm,
    sent_off,
    sent_vals,
    us_i,
    late,
):
    """``_column`` for layout column ``j`` (class ``k``) of rows ``r0 .. r0 + n``: its registers
    read in place (this and the previous sample of each row) or, in the chunk's first sample, copied
    beside the baseline's (``_load``)."""
    if r0 >= C:  # registers read in place: this and the previous sample of each row
        x = X[colmap[j]]
        _column(
            j,
            k,
            x,
            r0,
            x,
            r0 - C,
            n,
            V[j],
            BD[j],
            DD[min(j, DD.shape[0] - 1)],
            us_i[j, 0] >= 0,
            IV,
            mask,
            scale,
            half,
            rate,
            wrap,
            gscale,
            modm,
            sent_off,
            sent_vals,
            late,
        )
    else:  # the chunk's first sample: the previous one is the baseline
        _load(X, colmap, R0, C, j, r0, n, cc, pp)
        _column(
            j,
            k,
            cc,
            0,
            pp,
            0,
            n,
            V[j],
            BD[j],
            DD[min(j, DD.shape[0] - 1)],
            us_i[j, 0] >= 0,
            IV,
            mask,
            scale,
            half,
            rate,
            wrap,
            gscale,
            modm,
            sent_off,
            sent_vals,
            late,
        )


def _histograms(X, colmap, R0, C, r0, n, BD, GF, cc, pp, hist, sent_off, g):
    """Rule 4 for every histogram instance: a bucket that went down in a window (a reset) nulls every
    bucket of the instance there; a bucket with sentinels keeps its own sentinel flag too. ``GF[g]`` (the row
    past the reset groups') is the instance's scratch flag."""
    for h in range(hist.shape[0]):
        a, ni, nb = hist[h, 0], hist[h, 1], hist[h, 2]
        for i in range(ni):
            for q in range(n):
                GF[g, q] = False
            for b in range(a + i * nb, a + (i + 1) * nb):
                _load(X, colmap, R0, C, b, r0, n, cc, pp)
                for q in range(n):
                    if cc[q] < pp[q]:
                        GF[g, q] = True
            for b in range(a + i * nb, a + (i + 1) * nb):
                sent = sent_off[b + 1] > sent_off[b]
                for q in range(n):
                    if not sent or not BD[b, q]:
                        BD[b, q] = GF[g, q]
                    if sent and GF[g, q]:
                        BD[b, q] = True


def _unit_fields(X, colmap, R0, C, r0, n, V, IV, BD, DD, cc, pp, K, scale, modm, sent_off, sent_vals, us_i, us_f):
    """Rule 4d for each counter column with a unit field: its value times base ** (field × scale),
    the field read from the current sample of its register; with a maximum rate, the plausibility
    check again at that unit (a window not flagged by a sentinel or range is cleared when it
    passes); a field that changed within the window nulls it."""
    for j in range(K):
        ra = us_i[j, 0]
        if ra >= 0:  # rule 4d
            lo, um = np.uint64(us_i[j, 1]), np.uint64(us_i[j, 2])
            _load(X, colmap, R0, C, ra, r0, n, cc, pp)
            for q in range(n):
                ec = (cc[q] >> lo) & um
                mult = us_f[j, 1] ** (float(ec) * us_f[j, 0])
                V[j, q] *= mult
                if us_i[j, 3]:
                    limit = us_f[j, 2] * IV[q] / (scale[j] * mult) + 1.0
                    if not (float(DD[j, q]) > limit or limit >= us_f[j, 3]):
                        if not _flagged(X, colmap, R0, C, j, r0 + q, modm, sent_off, sent_vals):
                            BD[j, q] = False
                    else:
                        BD[j, q] = True
                if ec != ((pp[q] >> lo) & um):
                    BD[j, q] = True


def _reset_groups(X, colmap, R0, C, r0, n, GF, cc, pp, groups):
    """Rule 4a's flag per reset group and row, ``GF[g]``: an indicator register of the group went
    down (an uptime) or changed at all (a boot counter or start time)."""
    for g in range(groups.shape[0]):
        for q in range(n):
            GF[g, q] = False
        for b in range(groups[g, 0], groups[g, 1]):
            _load(X, colmap, R0, C, b, r0, n, cc, pp)
            for q in range(n):
                if (cc[q] < pp[q]) if groups[g, 2] else (cc[q] != pp[q]):
                    GF[g, q] = True


def _spread_nulls(n, BD, GF, K, reset_of, us_i):
    """Null flags that spread between columns: a reset group's flag to each of its counters (rule 4a),
    then a unit field's register's flag to the counter the field scales."""
    for j in range(K):
        g = reset_of[j]
        if g >= 0:
            for q in range(n):
                if GF[g, q]:
                    BD[j, q] = True
    for j in range(K):
        ra = us_i[j, 0]
        if ra >= 0:
            for q in range(n):
                if BD[ra, q]:
                    BD[j, q] = True


def _fields(X, colmap, R0, C, r0, n, F, cc, pp, fsrc, flo, fmask, fscale, fsent_off, fsent_vals):
    """Rule 8 (and 5): each packed field's value, its bits of the current register scaled, null where the
    raw register holds one of the field's sentinels."""
    for k in range(fsrc.shape[0]):
        _load(X, colmap, R0, C, fsrc[k], r0, n, cc, pp)
        for q in range(n):
            raw = cc[q]
            x = float((raw >> flo[k]) & fmask[k]) * fscale[k]
            for s in range(fsent_off[k], fsent_off[k + 1]):
                if raw == fsent_vals[s]:
                    x = _NAN
            F[k, q] = x


def _flagged(X, colmap, R0, C, j, r, modm, sent_off, sent_vals):
    """Whether column ``j``'s window at row ``r`` is null by a sentinel or a declared range (rules 5
    and 4c, which no later rule clears)."""
    c = X[colmap[j], r]
    p = X[colmap[j], r - C] if r >= C else R0[r % C, j]
    if modm[j] != 0 and (c >= modm[j] or p >= modm[j]):
        return True
    for s in range(sent_off[j], sent_off[j + 1]):
        if c == sent_vals[s] or p == sent_vals[s]:
            return True
    return False
