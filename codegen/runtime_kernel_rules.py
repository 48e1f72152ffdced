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


def _column(j, ca, co, pa_, po, n, v, bd, dd, IV, cols, sent):
    """Rules 3–7 and 4c, 5 for layout column ``j`` over ``n`` rows: current registers ``ca[co + q]``,
    previous ``pa_[po + q]`` (the registers in place, or the baseline block's copies). The common
    counters (a power-of-two width, no declared range, advance not needed later) take one loop that
    reads the two registers and writes the value and its null flag (``_counter_fast``); the others
    first keep the advance in ``dd`` (rule 4d reads it later: ``_advance``), then apply their class's
    rule to it (``_counter_rule``); gauges and packed registers read the registers alone
    (``_level``). Then sentinels and declared ranges (``_sentinels_and_range``) and, when no later rule
    changes the column, its nulls (``_null_flagged``).

    ``cols[j]`` holds the column's rules (a column record of ``_kernel_records``), ``sent`` the sentinel values.

    Loops index views with the loop variable alone (``ca[co:co + n]``, then ``ca[q]``): numba wraps
    a negative index, so ``ca[co + q]`` with ``co`` unknown is not provably contiguous and LLVM does
    not vectorize it (a block-wise read of the registers measured 6 GB/s so, 35 GB/s as a view)."""
    ca = ca[co : co + n]
    pa_ = pa_[po : po + n]
    rule = cols[j]
    k = rule.cls
    if k <= 1 and rule.unit_reg < 0 and rule.modm == 0:
        _counter_fast(k, ca, pa_, n, v, bd, IV, rule.mask, rule.scale, rule.half, rule.rate, rule.wrap)
    elif k <= 3:
        _advance(ca, pa_, n, dd, rule.mask, rule.modm)
        _counter_rule(k, ca, pa_, n, v, bd, dd, IV, rule.scale, rule.half, rule.rate, rule.wrap)
    else:
        _level(k, ca, pa_, n, v, bd, rule.gscale)
    _sentinels_and_range(ca, pa_, n, bd, rule, sent)
    if not rule.late:  # no later rule changes this column: null it now, while it is in cache
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


def _sentinels_and_range(ca, pa_, n, bd, rule, sent):
    """Rule 5 (either sample holds one of the column's sentinels, ``sent[rule.sent_a:rule.sent_b]``) and
    rule 4c (a raw value at or beyond its declared range ``rule.modm``) set the null flag."""
    for s in range(rule.sent_a, rule.sent_b):  # rule 5
        sv = sent[s]
        for q in range(n):
            if ca[q] == sv or pa_[q] == sv:
                bd[q] = True
    if rule.modm != 0:  # rule 4c: a raw value at or beyond the range
        mod = rule.modm
        for q in range(n):
            if ca[q] >= mod or pa_[q] >= mod:
                bd[q] = True


def _null_flagged(v, bd, n):
    """The flagged values of a column made null (NaN)."""
    for q in range(n):
        if bd[q]:
            v[q] = _NAN


def _rules_block(X, colmap, T, T0, R0, C, r0, r1, V, F, IV, BD, DD, GF, cc, pp, K, N, cols, fields, hist, groups, sent):
    """Window values of rows ``r0 .. r1`` (rules 2–8 of ``metrics/windows.py``), column by column:
    ``V`` (N + 1, rows) values, ``F`` (fields + 1, rows), ``IV`` (rows,) intervals in s; null is NaN.
    The rules are the record arrays of ``_kernel_tables`` (``cols``, ``fields``, ``hist``, ``groups``)
    and their sentinel values ``sent``. The same integer and float operations as the NumPy path, in
    the same order: intervals, each column's rules, histograms, unit fields (rule 4d), reset groups, a
    unit field's register nulls, the late columns' nulls, then the packed fields."""
    n = r1 - r0
    _intervals(T, T0, C, r0, n, IV)
    for j in range(N):
        _column_at(X, colmap, R0, C, j, r0, n, V, BD, DD, cc, pp, IV, cols, sent)
    _histograms(X, colmap, R0, C, r0, n, BD, GF, cc, pp, hist, cols, groups.shape[0])
    _unit_fields(X, colmap, R0, C, r0, n, V, IV, BD, DD, cc, pp, K, cols, sent)
    _reset_groups(X, colmap, R0, C, r0, n, GF, cc, pp, groups)
    _spread_nulls(n, BD, GF, K, cols)
    for j in range(N):
        if cols[j].late:
            _null_flagged(V[j], BD[j], n)
    _fields(X, colmap, R0, C, r0, n, F, cc, pp, fields, sent)


def _intervals(T, T0, C, r0, n, IV):
    """Each row's window duration in seconds: its sample's timestamp less the same chip's previous
    one (``T0``, the baseline, before the chunk's first sample)."""
    for q in range(n):
        r = r0 + q
        IV[q] = float(T[r] - (T[r - C] if r >= C else T0[r % C])) * 1e-9


def _column_at(X, colmap, R0, C, j, r0, n, V, BD, DD, cc, pp, IV, cols, sent):
    """``_column`` for layout column ``j`` of rows ``r0 .. r0 + n``: its registers read in place (this
    and the previous sample of each row) or, in the chunk's first sample, copied beside the baseline's
    (``_load``)."""
    dd = DD[min(j, DD.shape[0] - 1)]
    if r0 >= C:  # registers read in place: this and the previous sample of each row
        x = X[colmap[j]]
        _column(j, x, r0, x, r0 - C, n, V[j], BD[j], dd, IV, cols, sent)
    else:  # the chunk's first sample: the previous one is the baseline
        _load(X, colmap, R0, C, j, r0, n, cc, pp)
        _column(j, cc, 0, pp, 0, n, V[j], BD[j], dd, IV, cols, sent)


def _histograms(X, colmap, R0, C, r0, n, BD, GF, cc, pp, hist, cols, g):
    """Rule 4 for every histogram instance: a bucket that went down in a window (a reset) nulls every
    bucket of the instance there; a bucket with sentinels keeps its own sentinel flag too. ``GF[g]`` (the row
    past the reset groups') is the instance's scratch flag."""
    for h in range(hist.shape[0]):
        a, ni, nb = hist[h].first, hist[h].inst, hist[h].buckets
        for i in range(ni):
            for q in range(n):
                GF[g, q] = False
            for b in range(a + i * nb, a + (i + 1) * nb):
                _load(X, colmap, R0, C, b, r0, n, cc, pp)
                for q in range(n):
                    if cc[q] < pp[q]:
                        GF[g, q] = True
            for b in range(a + i * nb, a + (i + 1) * nb):
                sent = cols[b].sent_b > cols[b].sent_a
                for q in range(n):
                    if not sent or not BD[b, q]:
                        BD[b, q] = GF[g, q]
                    if sent and GF[g, q]:
                        BD[b, q] = True


def _unit_fields(X, colmap, R0, C, r0, n, V, IV, BD, DD, cc, pp, K, cols, sent):
    """Rule 4d for each counter column with a unit field: its value times base ** (field × scale),
    the field read from the current sample of its register; with a maximum rate, the plausibility
    check again at that unit (a window not flagged by a sentinel or range is cleared when it
    passes); a field that changed within the window nulls it."""
    for j in range(K):
        u = cols[j]
        ra = u.unit_reg
        if ra >= 0:  # rule 4d
            lo, um = u.unit_lo, u.unit_mask
            _load(X, colmap, R0, C, ra, r0, n, cc, pp)
            for q in range(n):
                ec = (cc[q] >> lo) & um
                mult = u.unit_base ** (float(ec) * u.unit_fscale)
                V[j, q] *= mult
                if u.unit_checked:
                    limit = u.unit_rate * IV[q] / (u.scale * mult) + 1.0
                    if not (float(DD[j, q]) > limit or limit >= u.unit_wrap):
                        if not _flagged(X, colmap, R0, C, j, r0 + q, cols, sent):
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
        down = groups[g].down
        for b in range(groups[g].ind_a, groups[g].ind_b):
            _load(X, colmap, R0, C, b, r0, n, cc, pp)
            for q in range(n):
                if (cc[q] < pp[q]) if down else (cc[q] != pp[q]):
                    GF[g, q] = True


def _or_row(n, dst, j, src, i):
    """Null flags of row ``i`` of ``src`` added to row ``j`` of ``dst`` (its first ``n`` entries)."""
    for q in range(n):
        if src[i, q]:
            dst[j, q] = True


def _spread_nulls(n, BD, GF, K, cols):
    """Null flags that spread between columns: a reset group's flag to each of its counters (rule 4a),
    then a unit field's register's flag to the counter the field scales."""
    for j in range(K):
        if cols[j].reset_of >= 0:
            _or_row(n, BD, j, GF, cols[j].reset_of)
    for j in range(K):
        if cols[j].unit_reg >= 0:
            _or_row(n, BD, j, BD, cols[j].unit_reg)


def _fields(X, colmap, R0, C, r0, n, F, cc, pp, fields, sent):
    """Rule 8 (and 5): each packed field's value, its bits of the current register scaled, null where the
    raw register holds one of the field's sentinels."""
    for k in range(fields.shape[0]):
        f = fields[k]
        lo, fm, sc = f.lo, f.mask, f.scale
        _load(X, colmap, R0, C, f.src, r0, n, cc, pp)
        for q in range(n):
            raw = cc[q]
            x = float((raw >> lo) & fm) * sc
            for s in range(f.sent_a, f.sent_b):
                if raw == sent[s]:
                    x = _NAN
            F[k, q] = x


def _flagged(X, colmap, R0, C, j, r, cols, sent):
    """Whether column ``j``'s window at row ``r`` is null by a sentinel or a declared range (rules 5
    and 4c, which no later rule clears)."""
    c = X[colmap[j], r]
    p = X[colmap[j], r - C] if r >= C else R0[r % C, j]
    rule = cols[j]
    mod = rule.modm
    if mod != 0 and (c >= mod or p >= mod):
        return True
    for s in range(rule.sent_a, rule.sent_b):
        if c == sent[s] or p == sent[s]:
            return True
    return False
