"""Window rules and evaluation drivers copied verbatim into every generated evaluator (NumPy only).

The generated module defines the tables these functions read (``INPUTS``, ``_REGS``, ``_MASK``, …; see
``codegen.python_evaluator``) and the fused formula function ``_metrics``. The window rules are those of
``metrics/windows.py`` (its docstring numbers them), applied to raw registers laid out flat: one row
per sample and chip, one column per register instance, counters and histograms first
(``[0, _K)``), then gauges (``[_K, _G)``), then packed registers (``[_G, _N)``); packed fields go
to a second array of ``_NF`` columns. Only the registers the metrics need are laid out (plus their
reset indicators and the packed registers of the fields they read).

Rules, as in ``metrics.windows.prepare``:
- rule 2: interval = (t − t_prev) ns × 1e-9 s;
- rule 3: counter increase = ((cur − prev) mod 2^64) & (2^w − 1) in uint64, × scale, w the effective
  wrap width;
- rule 4c: a counter with a declared range M (``_MODC``) takes ``cur − prev`` (+ M where it went down),
  reads M // 2 and M for the half-range and wrap-period tests, and a raw value ≥ M nulls its windows;
- rule 4d: a counter with a unit field (``_USCALE``) is × base^field of the end sample; the field
  changing in the window, or its register null, absent or a sentinel at either end, nulls the window;
- rule 4: reset when the reset indicator changed (any instance; for an uptime: decreased), or the increase is
  implausible: above max_rate × interval / scale + 1 when the counter has a max rate (declared, or a cycle counter's
  clock plus 1 %: ``metrics.windows.max_rate``), else above 2^(w−1); any decrease for a counter of unknown
  width, or in any bucket of a histogram instance; rule 4b: null when max_rate × interval / scale + 1
  reaches 2^w (the counter may have wrapped more than once);
- rule 5: a window touching a sentinel raw value is null (fields: the end sample only);
- rule 6: a window touching an absent sample or a null register is null (fields: the end sample);
  absent and null registers read as 0, as in ``metrics.windows.read_counters``;
- rule 7: gauge = (prev + cur) × (scale / 2);
- rule 8: packed field = ((cur >> lo) & (2^bits − 1)) × scale; a packed register's own value is its
  end sample.
"""
# Names such as _use_kernel or _run_kernel are defined by the generated evaluator this source is copied into.
# ruff: noqa: F821

import numpy as np

# Tables defined by the generated module (placeholders so that this file imports on its own).
INPUTS = SIGNALS = ()
METRICS = {}
_INPUT_SRC = ()
_SCALAR_METRICS = ()
_AXIS_METRICS = ()
_REGS = ()
_K1 = _K2 = _K3 = _K = _G = _N = _NF = 0
_MASK = _HALF = _SCALE = _RATE = _WRAP = _GSCALE = np.zeros(0)
_FIELD_SRC = _FIELD_LO = _FIELD_MASK = _FIELD_SCALE = np.zeros(0)
_HIST = _RESET = _SENT = _FIELD_SENT = _MODC = _USCALE = ()
_CHUNK_ROWS = 1024


_PRE = _PRE_SEGS = _INPUTS_ONE = _METRIC_REGS = ()


def _metrics(inp, interval, chips, OUT, A, pre):  # replaced by the generated formula function (chunks)
    raise RuntimeError("template placeholder: a generated evaluator module defines _metrics")


def _metrics_one(inp, interval, chips, OUT, A, pre):  # replaced by the generated formula function (one window)
    raise RuntimeError("template placeholder: a generated evaluator module defines _metrics_one")


def _buf(ws, key, shape, dtype=np.float64):
    """A work array of ``shape`` kept in ``ws`` (a dict) and reused by the next chunk: no new pages to
    fault in per chunk. Its first axis may be shorter than last time (the last chunk)."""
    a = ws.get(key)
    if a is None or a.shape[0] < shape[0] or a.shape[1:] != tuple(shape[1:]) or a.dtype != dtype:
        a = ws[key] = np.empty(shape, dtype)
    return a[: shape[0]]


def _windows(T, R, B, ws):
    """Window values from ``S + 1`` consecutive samples.

    T: int64 (S+1, C) timestamps in ns; R: uint64 (S+1, C, _N) raw registers in the flat layout;
    B: None, or bool (S+1, C, _N), True where the register is null or the sample absent; ws: a dict
    of reusable work arrays (the returned arrays live there until the next call).
    Returns (V float64 (S, C, _N) in each signal's unit, F float64 (S, C, _NF) fields, interval
    float64 (S, C) in s); null values are NaN.
    """
    cur, prev = R[1:], R[:-1]
    S, C = cur.shape[0], cur.shape[1]
    interval = (T[1:] - T[:-1]).astype(np.float64) * 1e-9
    V = _buf(ws, "V", (S, C, _N + 1))[..., :_N]  # a spare column for _pre_rollups' reduceat
    bad = _buf(ws, "bad", (S, C, _N), bool)
    K, G = _K, _G
    if K:
        d = _buf(ws, "d", (S, C, K), np.uint64)
        np.subtract(cur[..., :K], prev[..., :K], out=d)
        np.bitwise_and(d, _MASK, out=d)
        for a, b, m in _MODC:  # rule 4c: modulo a declared range
            d[..., a:b] += np.where(cur[..., a:b] < prev[..., a:b], np.uint64(m), np.uint64(0))
        np.multiply(d, _SCALE, out=V[..., :K])
        if _K1:
            np.greater(d[..., :_K1], _HALF, out=bad[..., :_K1])
        if _K2 > _K1:
            limit = _RATE * interval[..., None] / _SCALE[_K1:_K2] + 1.0
            np.greater(d[..., _K1:_K2].astype(np.float64), limit, out=bad[..., _K1:_K2])
            bad[..., _K1:_K2] |= limit >= _WRAP  # rule 4b: the counter may have wrapped more than once
        if _K3 > _K2:
            np.less(cur[..., _K2:_K3], prev[..., _K2:_K3], out=bad[..., _K2:_K3])
        for a, n, nb in _HIST:
            b = a + n * nb
            dec = (cur[..., a:b] < prev[..., a:b]).reshape(S, C, n, nb).any(axis=3, keepdims=True)
            bad[..., a:b] = np.broadcast_to(dec, (S, C, n, nb)).reshape(S, C, n * nb)
        for a, b, ra, rb, lo, mask, fs, base, rate, m in _USCALE:  # rule 4d: the unit of each sample
            ec = (cur[..., ra:rb] >> np.uint64(lo)) & np.uint64(mask)
            mult = base ** (ec * fs)
            V[..., a:b] *= mult
            if rate:
                limit = rate * interval[..., None] / (_SCALE[a:b] * mult) + 1.0
                bad[..., a:b] = (d[..., a:b].astype(np.float64) > limit) | (limit >= m)
            bad[..., a:b] |= ec != ((prev[..., ra:rb] >> np.uint64(lo)) & np.uint64(mask))
        for a, b, m in _MODC:  # rule 4c: a raw value at or beyond the range
            bad[..., a:b] |= (cur[..., a:b] >= np.uint64(m)) | (prev[..., a:b] >= np.uint64(m))
        for ia, ib, cols, dec in _RESET:
            hit = (cur[..., ia:ib] < prev[..., ia:ib]) if dec else (cur[..., ia:ib] != prev[..., ia:ib])
            changed = hit.any(axis=2, keepdims=True)
            for a, b in cols:
                bad[..., a:b] |= changed
    if _N > K:
        bad[..., K:] = False
    if G > K:
        np.multiply(cur[..., K:G].astype(np.float64) + prev[..., K:G], _GSCALE, out=V[..., K:G])
    if _N > G:
        V[..., G:] = cur[..., G:]
    for a, b, values in _SENT:
        hit = _isin(R[..., a:b], values)
        bad[..., a:b] |= hit[1:] | hit[:-1]
    if B is not None:
        bad |= B[1:]
        bad |= B[:-1]
    for a, b, ra, rb, *_ in _USCALE:  # the unit register null, absent or a sentinel at either end
        bad[..., a:b] |= bad[..., ra:rb]
    np.copyto(V, np.nan, where=bad)
    if not _NF:
        return V, None, interval
    raw = cur[..., _FIELD_SRC]
    F = ((raw >> _FIELD_LO) & _FIELD_MASK) * _FIELD_SCALE
    fbad = B[1:][..., _FIELD_SRC] if B is not None else np.zeros(raw.shape, dtype=bool)
    for a, b, values in _FIELD_SENT:
        fbad[..., a:b] |= _isin(raw[..., a:b], values)
    np.copyto(F, np.nan, where=fbad)
    return V, F, interval


def _sums(V, F, interval, ACC):
    """Add one chunk's run-level sums to ``ACC`` (as the kernel's ``_sums_block``: a null value makes
    its column's sum NaN): V (S, C, _N), F (S, C, _NF) or None, interval (S, C)."""
    ACC[:, :_K] += V[..., :_K].sum(axis=0)
    ACC[:, _K:_N] += (V[..., _K:] * interval[..., None]).sum(axis=0)
    if F is not None and _NF:
        ACC[:, _N : _N + _NF] += (F * interval[..., None]).sum(axis=0)
    ACC[:, _N + _NF] += interval.sum(axis=0)


def input_sums(ACC):
    """{signal or field name of ``INPUTS``: float64 (C, *instance sizes)} — the columns of a ``sums``
    accumulator (``Stream.sums[0]``) that hold each input's run-level sum."""
    out = {}
    for name, (src, a, b, sizes) in zip(INPUTS, _INPUT_SRC):
        off = _N if src else 0
        out[name] = ACC[:, off + a : off + b].reshape((ACC.shape[0],) + tuple(sizes))
    return out


def _isin(x, values):
    hit = x == values[0]
    for v in values[1:]:
        hit |= x == v
    return hit


def window_values(T, X, colmap=None):
    """The window value of every input, for a caller that needs them (a piece with null values, whose
    run-level sums go by class): ``T`` int64 (S, C) timestamps, ``X`` uint64 (columns, S × C) registers
    as ``Stream.push_flat`` takes them (``colmap``: the row of ``X`` of each layout column); the first
    sample is the baseline. Returns ({input name: float64 (S − 1, C, *sizes), C-contiguous},
    interval float64 (S − 1, C)), NaN where null — the values the metrics are evaluated over (the
    compiled kernel's when it runs, else ``_windows``)."""
    T = np.asarray(T, dtype=np.int64)
    S, C = T.shape
    cols = np.arange(_N, dtype=np.int64) if colmap is None else np.asarray(colmap, dtype=np.int64)
    interval = (T[1:] - T[:-1]).astype(np.float64) * 1e-9
    if _use_kernel(Stream()):
        want = np.zeros(len(METRICS), np.bool_)
        R0 = np.ascontiguousarray(X[cols, :C].T)
        *_, VV = _run_kernel(X, cols, T.reshape(-1), T[0].copy(), R0, C, C, 1.0, want, None, False, True)
        return _input_values(VV, S - 1, C), interval
    R = np.ascontiguousarray(X[cols].T).reshape(S, C, _N)
    with np.errstate(all="ignore"):
        V, F, interval = _windows(T, R, None, {})
    return {n: np.ascontiguousarray(v) for n, v in zip(INPUTS, _inputs(V, F))}, interval


def _inputs(V, F, which=None):
    """Views of the window values in the order of ``INPUTS``, each (S, C, *instance sizes); with
    ``which`` (input indices), only those (the others are None)."""
    if which is not None:
        out = [None] * len(_INPUT_SRC)
        for i in which:
            src, a, b, sizes = _INPUT_SRC[i]
            arr = F if src else V
            out[i] = (
                arr[..., a]
                if not sizes
                else (arr[..., a:b] if len(sizes) == 1 else arr[..., a:b].reshape(arr.shape[:2] + sizes))
            )
        return out
    out = []
    for src, a, b, sizes in _INPUT_SRC:
        arr = F if src else V
        if not sizes:
            out.append(arr[..., a])
        elif len(sizes) == 1:
            out.append(arr[..., a:b])
        else:
            out.append(arr[..., a:b].reshape(arr.shape[:2] + sizes))
    return tuple(out)


def _outputs(W, C):
    """Output buffers: one (M, W, C) block for the metrics without instance axes, one array per
    metric with them."""
    return np.empty((len(_SCALAR_METRICS), W, C)), [np.empty((W, C) + sizes) for _, sizes in _AXIS_METRICS]


def _result(OUT, A):
    out = dict(zip(_SCALAR_METRICS, OUT))
    out.update(zip((n for n, _ in _AXIS_METRICS), A))
    return {name: out[name] for name in METRICS}


def _pre_rollups(inp, V=None):
    """The rollups listed in ``_PRE`` ((func, input index): over all instances of that input). From the
    flat window values ``V`` (one ``reduceat`` per function over every signal), else input by input."""
    reducers = {"sum": np.add, "max": np.maximum, "min": np.minimum}
    if V is None:
        return [reducers[f].reduce(inp[i].reshape(inp[i].shape[:2] + (-1,)), axis=-1) for f, i in _PRE]
    out = [None] * len(_PRE)
    for f, idx, where in _PRE_SEGS:  # idx: [a0, b0, a1, b1, ...]; V has a spare last column
        r = reducers[f].reduceat(V, idx, axis=-1)
        for k, pos in where:
            out[k] = r[..., pos]
    return out


def _run(inp, interval, chips, OUT, A, V=None):
    if interval.size > 64:
        _metrics(inp, interval, chips, OUT, A, None)
    else:
        _metrics_one(inp, interval, chips, OUT, A, _pre_rollups(inp, V))
    np.copyto(OUT, np.nan, where=np.isinf(OUT))
    for a in A:
        np.copyto(a, np.nan, where=np.isinf(a))


def evaluate(inputs, interval, chips=1.0):
    """Evaluate every metric over prepared windows (``metrics.windows.prepare``).

    inputs: {signal or field name: float64 array (W, C, *instance sizes)} — counter increases (scaled),
    gauge means, field values; NaN is null. Only the names in ``INPUTS`` are read.
    interval: float64 array (W, C), window durations in s.
    chips: factor applied to per-chip spec constants (1 per chip; N for a server-level window).
    Returns {metric name: float64 array (W, C, *instance sizes)} in each metric's declared unit; NaN
    is null. Windows are evaluated in chunks of about ``_CHUNK_ROWS`` window-chip rows, so temporaries
    do not grow with W.
    """
    interval = np.asarray(interval, dtype=np.float64)
    W, C = interval.shape
    arrays = [np.asarray(inputs[n], dtype=np.float64) for n in INPUTS]
    OUT, A = _outputs(W, C)
    step = max(1, _CHUNK_ROWS // max(C, 1))
    with np.errstate(all="ignore"):
        for w0 in range(0, W, step):
            w1 = min(W, w0 + step)
            _run(tuple(x[w0:w1] for x in arrays), interval[w0:w1], chips, OUT[:, w0:w1], [a[w0:w1] for a in A])
    return _result(OUT, A)


class Stream:
    """Live evaluation: feed samples as they arrive; each call returns the metrics of the new windows.

    The stream keeps the previous sample's registers (the baseline of the next window's deltas) and
    applies the window rules of ``metrics/windows.py`` (module docstring). Per-window values are per
    chip (``chips`` = 1 for spec constants).
    """

    def __init__(self, metrics=None, jit=None):
        """``metrics``: names of the metrics to return (None: all); the compiled kernel evaluates only
        those and the metrics they read. ``jit``: use the compiled kernel (numba) when it is installed
        (None: unless ``PERFONTO_NO_JIT`` is set; False: never, the NumPy path only)."""
        self._T = None  # int64 (C,) previous timestamps
        self._R = None  # uint64 (C, _N) previous registers
        self._B = None  # bool (C, _N) previous null/absent flags, or None
        self._ws = {}  # work arrays reused from chunk to chunk
        self._metrics = None if metrics is None else tuple(metrics)
        self._want = _wanted(self._metrics)
        self._regs = _stream_regs(self._want)  # the registers a push needs (the name None: not needed)
        self._jit = jit
        self._push = None  # pre-allocated buffers of ``push``, by chip count
        self.sums = None  # run-level sums of the last push_flat / push_block(sums=True)
        self.values = None  # the inputs' window values of the last push_flat(keep_values=True), with the kernel

    def _pack(self, registers, lead, i0, i1):
        R = _buf(self._ws, "R", (i1 - i0 + 1,) + lead + (_N,), np.uint64)
        _gather(self, registers, (i1 - i0,) + lead, R[1:], slice(i0, i1))
        return R

    def _flags(self, present, missing, lead, i0, i1):
        if present is None and not missing:
            return None
        B = _buf(self._ws, "B", (i1 - i0 + 1,) + lead + (_N,), bool)
        B[...] = False
        if present is not None:
            B[1:] |= ~np.asarray(present, dtype=bool)[i0:i1, ..., None]
        for name, a, b in _REGS:
            m = (missing or {}).get(name)
            if m is not None:
                B[1:, ..., a:b] |= np.asarray(m, dtype=bool)[i0:i1].reshape((i1 - i0,) + lead + (b - a,))
        return B

    def push(self, timestamp_ns, registers, present=None, missing=None):
        """Add one sample of every chip.

        timestamp_ns: int array (C,) — sample times in ns (for an absent chip, its grid time);
        registers: {signal: uint64 array (C, *instance sizes)} raw registers, or one uint64 array
        (C, len(FLAT_COLUMNS)) holding every chip's registers in the order of ``FLAT_COLUMNS``;
        present: optional bool (C,), False where a chip has no sample;
        missing: optional {signal: bool (C, *instance sizes)}, True where a register is null.
        Returns None for the first sample (it only sets the baseline), else {metric: float64 array
        (C, *instance sizes)} for the window that ends at this sample; NaN is null. With the compiled
        kernel, all chips go through one call into buffers allocated once per chip count.
        """
        ts = np.asarray(timestamp_ns)
        if ts.dtype != np.int64 or ts.ndim != 1 or (self._T is not None and ts.shape != self._T.shape):
            ts = _stamps(self, ts, (0,))
        C = ts.shape[0]
        if self._T is not None and (ts <= self._T).any():
            _refuse_time(self, ts[None], None if present is None else np.asarray(present)[None])
        if present is None and not missing and self._B is None and self._T is not None and _use_kernel(self):
            return _kernel_push(self, ts, registers)
        R = np.empty((2, C, _N), dtype=np.uint64)
        _gather(self, registers, (C,), R[1])
        B = None
        if present is not None or missing:
            B = self._flags(
                None if present is None else np.asarray(present, dtype=bool)[None],
                None if not missing else {k: np.asarray(v, dtype=bool)[None] for k, v in missing.items()},
                (C,),
                0,
                1,
            )
            R[1][B[1]] = 0
        if self._T is None:
            self._set_last(ts, R[1], None if B is None else B[1])
            return None
        R[0] = self._R
        if self._B is not None:
            if B is None:
                B = np.zeros(R.shape, dtype=bool)
            B[0] = self._B
        T = np.empty((2, C), dtype=np.int64)
        T[0] = self._T
        T[1] = ts
        OUT, A = _outputs(1, C)
        with np.errstate(all="ignore"):
            V, F, interval = _windows(T, R, B, self._ws)
            _run(_inputs(V, F, _INPUTS_ONE), interval, 1.0, OUT, A, self._ws["V"][:1])
        self._set_last(ts, R[1], None if B is None else B[1])
        if not A:
            return self._select(dict(zip(_SCALAR_METRICS, OUT[:, 0])))
        return self._select({k: v[0] for k, v in _result(OUT, A).items()})

    def push_block(self, timestamps_ns, registers, present=None, missing=None, _kernel=True, sums=False):
        """Add S consecutive samples: timestamps_ns int (S, C); registers {signal: uint64 (S, C, *sizes)};
        present bool (S, C) and missing {signal: bool (S, C, *sizes)} optional, as in ``push``.
        Returns {metric: float64 (S', C, *sizes)} for the S' new windows (S' = S, or S − 1 when the
        stream had no baseline yet), or None when there is no window yet. Evaluated in chunks of about
        ``_CHUNK_ROWS`` rows, so temporaries do not grow with S. With ``sums``, ``self.sums`` is set to
        the new windows' run-level sums (see ``push_flat``).
        """
        T = _block_stamps(self, timestamps_ns, present)
        S, C = T.shape
        _block_rows(self, registers, S)
        self.sums = np.zeros((C, _N + _NF + 1)) if sums else None
        if _kernel and present is None and not missing and self._B is None and S > 1 and _use_kernel(self):
            return _kernel_block(self, T, registers, sums)
        lead = (C,)
        start = 0
        if self._T is None:
            if S == 0:
                return None
            R0 = self._pack(registers, lead, 0, 1)
            B0 = self._flags(present, missing, lead, 0, 1)
            if B0 is not None:
                R0[B0] = 0
            self._set_last(T[0], R0[1], None if B0 is None else B0[1])
            start = 1
        n_win = S - start
        if n_win <= 0:
            return None
        OUT, A = _outputs(n_win, C)
        step = max(1, _CHUNK_ROWS // max(C, 1))
        with np.errstate(all="ignore"):
            for i0 in range(start, S, step):
                i1 = min(S, i0 + step)
                R = self._pack(registers, lead, i0, i1)
                R[0] = self._R
                B = self._flags(present, missing, lead, i0, i1)
                if B is None and self._B is not None:
                    B = _buf(self._ws, "B", R.shape, bool)
                    B[...] = False
                if B is not None:
                    if self._B is not None:
                        B[0] = self._B
                    R[B] = 0
                Tc = np.empty((i1 - i0 + 1, C), dtype=np.int64)
                Tc[0] = self._T
                Tc[1:] = T[i0:i1]
                V, F, interval = _windows(Tc, R, B, self._ws)
                if sums:
                    _sums(V, F, interval, self.sums)
                w0, w1 = i0 - start, i1 - start
                _run(_inputs(V, F), interval, 1.0, OUT[:, w0:w1], [a[w0:w1] for a in A])
                self._set_last(Tc[-1], R[-1], None if B is None else B[-1])
        return self._select(_result(OUT, A))

    def push_flat(self, timestamps_ns, X, colmap=None, reuse=False, sums=False, keep_values=False):
        """Add S consecutive samples given as register columns, read in place: ``timestamps_ns`` int
        (S, C); ``X`` uint64 (columns, S × C) with rows sample-major, chip-minor (the rows of a wide
        collector batch; a zero-copy view of a flat-layout Arrow batch does), ``colmap`` int (_N,):
        the row of ``X`` holding each column of ``FLAT_COLUMNS`` (default: X holds them in order).
        Returns None when there is no window yet, else {metric: (values float64 (S', C, *sizes) with
        NaN where null, validity uint8 — the Arrow bitmap of the values' S' × C × n slots, LSB first)}.
        Uses the compiled kernel when it can (see ``Stream``), else the NumPy path (same results).
        ``reuse``: the kernel writes into two buffers used in turn, so a result is valid until the call
        after the next one (no fresh memory per call; for callers that consume each result at once).
        ``sums``: also set ``self.sums`` to float64 (C, _N + _NF + 1) — per chip and layout column
        (registers, then fields), the sum over the new windows of the window values (counters and
        histograms as they are, gauges, packed registers and fields × the window's interval; NaN where
        the column held a null value), the intervals summed in the last column — computed in the same
        pass (``input_sums`` reads them per input). ``keep_values``: with the compiled kernel, also set
        ``self.values`` to every input's window values ({name: (S', C, *sizes)}, NaN where null), as
        ``window_values`` gives them (else None)."""
        return _push_flat(self, timestamps_ns, X, colmap, reuse, sums, keep_values)

    def _select(self, res):
        if res is None or self._metrics is None:
            return res
        return {k: res[k] for k in self._metrics}

    def _set_last(self, t, r, b):
        self._T = np.array(t, dtype=np.int64)
        self._R = np.array(r, dtype=np.uint64)
        self._B = None if b is None or not b.any() else np.array(b, dtype=bool)
