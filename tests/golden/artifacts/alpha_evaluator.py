"""perfonto generated evaluator.

Generation: alpha (ontology hash dab8f7b7d0048343); catalog hash 0e9c7bf0d5ac8b7b; 5 metrics.
Do not edit: regenerate with perfonto.
"""
import numpy as np
GENERATION = 'alpha'
CATALOG_HASH = '0e9c7bf0d5ac8b7b'
SIGNALS = ('mem.rd', 'mem.wr', 'eng.busy', 'eng.cycles', 'eng.level')
METRICS = {'eng.power': {'unit': 'W', 'axes': (), 'description': 'Mean board power.'}, 'eng.utilization': {'unit': 'percent', 'axes': (), 'description': 'Busy share of cycles.'}, 'mem.bandwidth': {'unit': 'GB/s', 'axes': (), 'description': 'Read + write bandwidth.'}, 'mem.read_bandwidth': {'unit': 'GB/s', 'axes': (), 'description': 'Read bandwidth over both ports.'}, 'mem.utilization': {'unit': 'percent', 'axes': (), 'description': 'Bandwidth over the peak | escaped <text>.'}}
INPUTS = ('eng.level', 'eng.busy', 'eng.cycles', 'mem.rd', 'mem.wr')
_INPUT_SRC = ((0, 6, 7, ()), (0, 4, 5, ()), (0, 5, 6, ()), (0, 0, 2, (2,)), (0, 2, 4, (2,)))
_SCALAR_METRICS = ('eng.power', 'eng.utilization', 'mem.bandwidth', 'mem.read_bandwidth', 'mem.utilization')
_AXIS_METRICS = ()
_REGS = (('mem.rd', 0, 2), ('mem.wr', 2, 4), ('eng.busy', 4, 5), ('eng.cycles', 5, 6), ('eng.level', 6, 7))
_K1 = 4
_K2 = 6
_K3 = 6
_K = 6
_G = 7
_N = 7
_NF = 0
_MASK = np.array([281474976710655, 281474976710655, 281474976710655, 281474976710655, 4294967295, 4294967295], dtype=np.uint64)
_HALF = np.array([140737488355328, 140737488355328, 140737488355328, 140737488355328], dtype=np.uint64)
_SCALE = np.array([64.0, 64.0, 64.0, 64.0, 1.0, 1.0], dtype=np.float64)
_RATE = np.array([1000000000.0, 1000000000.0], dtype=np.float64)
_WRAP = np.array([4294967296.0, 4294967296.0], dtype=np.float64)
_GSCALE = np.array([0.0005], dtype=np.float64)
_HIST = ()
_RESET = ()
_SENT = ((5, 6, np.array([4294967295], dtype=np.uint64)),)
_FIELD_SRC = np.array([], dtype=np.intp)
_FIELD_LO = np.array([], dtype=np.uint64)
_FIELD_MASK = np.array([], dtype=np.uint64)
_FIELD_SCALE = np.array([], dtype=np.float64)
_FIELD_SENT = ()
_CHUNK_ROWS = 1024
_PRE = (('sum', 4), ('sum', 3))
_PRE_SEGS = (('sum', np.array([2, 4, 0, 2], dtype=np.intp), ((0, 0), (1, 2))),)

def _metrics(inp, interval, chips, O, A, pre):
    """All metrics of one chunk of windows: inputs in the order of INPUTS, each (S, C, *sizes); writes O[k] (S, C) and A[j] (S, C, *sizes); the caller finishes inf to null."""
    s0 = inp[0]
    s1 = inp[1]
    s2 = inp[2]
    s3 = inp[3]
    s4 = inp[4]
    O[0][...] = s0
    np.multiply(s1 / s2, 100.0, out=O[1])
    t1 = s3[..., 0] + s3[..., 1]
    np.multiply((t1 + (s4[..., 0] + s4[..., 1])) / interval, 1e-09, out=O[2])
    m2 = O[2]
    np.multiply(t1 / interval, 1e-09, out=O[3])
    z3 = _nz(100.0 * chips)
    np.multiply(m2 / z3, 100.0, out=O[4])

def _metrics_one(inp, interval, chips, O, A, pre):
    """All metrics of one chunk of windows: inputs in the order of INPUTS, each (S, C, *sizes); writes O[k] (S, C) and A[j] (S, C, *sizes); the caller finishes inf to null."""
    s0 = inp[0]
    s1 = inp[1]
    s2 = inp[2]
    O[0][...] = s0
    np.multiply(s1 / s2, 100.0, out=O[1])
    t1 = pre[1]
    np.multiply((t1 + pre[0]) / interval, 1e-09, out=O[2])
    m2 = O[2]
    np.multiply(t1 / interval, 1e-09, out=O[3])
    z3 = _nz(100.0 * chips)
    np.multiply(m2 / z3, 100.0, out=O[4])
_INPUTS_ONE = (0, 1, 2)


def _nz(b):
    """The denominator ``b`` with zeros replaced by NaN, so that ``a / _nz(b)`` is null where b == 0
    and exactly ``a / b`` elsewhere (same rounding as the interpreter's masked ``np.divide``)."""
    if isinstance(b, float):
        return b if b != 0 else np.nan
    return np.where(b == 0, np.nan, b)


def _cmp(fn, a, b):
    """Comparison ``fn`` as 1.0/0.0, null when either operand is null."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, fn(a, b).astype(np.float64))


def _and(a, b):
    return _cmp(lambda x, y: (x != 0) & (y != 0), a, b)


def _or(a, b):
    return _cmp(lambda x, y: (x != 0) | (y != 0), a, b)


def _not(a):
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), np.nan, (a == 0).astype(np.float64))


def _where(c, a, b):
    """``a if c else b``; null when the condition is null."""
    c = np.asarray(c, dtype=np.float64)
    return np.where(np.isnan(c), np.nan, np.where(c != 0, a, b))


def _fin(o):
    """Finish a metric in place: inf (overflow) becomes null."""
    np.copyto(o, np.nan, where=np.isinf(o))
    return o


def _buf(ws, key, shape, dtype=np.float64):
    """A work array of ``shape`` kept in ``ws`` (a dict) and reused by the next chunk: no new pages to
    fault in per chunk. Its first axis may be shorter than last time (the last chunk)."""
    a = ws.get(key)
    if a is None or a.shape[0] < shape[0] or a.shape[1:] != tuple(shape[1:]) or a.dtype != dtype:
        a = ws[key] = np.empty(shape, dtype)
    return a[:shape[0]]


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
        for ia, ib, cols in _RESET:
            changed = (cur[..., ia:ib] != prev[..., ia:ib]).any(axis=2, keepdims=True)
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


def _isin(x, values):
    hit = x == values[0]
    for v in values[1:]:
        hit |= x == v
    return hit


def _inputs(V, F, which=None):
    """Views of the window values in the order of ``INPUTS``, each (S, C, *instance sizes); with
    ``which`` (input indices), only those (the others are None)."""
    if which is not None:
        out = [None] * len(_INPUT_SRC)
        for i in which:
            src, a, b, sizes = _INPUT_SRC[i]
            arr = F if src else V
            out[i] = arr[..., a] if not sizes else (arr[..., a:b] if len(sizes) == 1 else arr[..., a:b].reshape(arr.shape[:2] + sizes))
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


def _result(O, A):
    out = dict(zip(_SCALAR_METRICS, O))
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


def _run(inp, interval, chips, O, A, V=None):
    if interval.size > 64:
        _metrics(inp, interval, chips, O, A, None)
    else:
        _metrics_one(inp, interval, chips, O, A, _pre_rollups(inp, V))
    np.copyto(O, np.nan, where=np.isinf(O))
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
    O, A = _outputs(W, C)
    step = max(1, _CHUNK_ROWS // max(C, 1))
    with np.errstate(all="ignore"):
        for w0 in range(0, W, step):
            w1 = min(W, w0 + step)
            _run(tuple(x[w0:w1] for x in arrays), interval[w0:w1], chips, O[:, w0:w1], [a[w0:w1] for a in A])
    return _result(O, A)


class Stream:
    """Live evaluation: feed samples as they arrive; each call returns the metrics of the new windows.

    The stream keeps the previous sample's registers (the baseline of the next window's deltas) and
    applies the window rules of ``metrics/windows.py`` (module docstring). Per-window values are per
    chip (``chips`` = 1 for spec constants).
    """

    def __init__(self):
        self._T = None  # int64 (C,) previous timestamps
        self._R = None  # uint64 (C, _N) previous registers
        self._B = None  # bool (C, _N) previous null/absent flags, or None
        self._ws = {}  # work arrays reused from chunk to chunk

    def _pack(self, registers, lead, i0, i1):
        R = _buf(self._ws, "R", (i1 - i0 + 1,) + lead + (_N,), np.uint64)
        for name, a, b in _REGS:
            x = np.asarray(registers[name])
            R[1:, ..., a:b] = x[i0:i1].reshape((i1 - i0,) + lead + (b - a,))
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
        registers: {signal: uint64 array (C, *instance sizes)} raw registers;
        present: optional bool (C,), False where a chip has no sample;
        missing: optional {signal: bool (C, *instance sizes)}, True where a register is null.
        Returns None for the first sample (it only sets the baseline), else {metric: float64 array
        (C, *instance sizes)} for the window that ends at this sample; NaN is null.
        """
        ts = np.asarray(timestamp_ns, dtype=np.int64)
        C = ts.shape[0]
        R = np.empty((2, C, _N), dtype=np.uint64)
        if _REGS:
            np.concatenate([np.asarray(registers[name]).reshape(C, b - a) for name, a, b in _REGS], axis=1, out=R[1], casting="unsafe")
        B = None
        if present is not None or missing:
            B = self._flags(None if present is None else np.asarray(present, dtype=bool)[None],
                            None if not missing else {k: np.asarray(v, dtype=bool)[None] for k, v in missing.items()}, (C,), 0, 1)
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
        O, A = _outputs(1, C)
        with np.errstate(all="ignore"):
            V, F, interval = _windows(T, R, B, self._ws)
            _run(_inputs(V, F, _INPUTS_ONE), interval, 1.0, O, A, self._ws["V"][:1])
        self._set_last(ts, R[1], None if B is None else B[1])
        if not A:
            return dict(zip(_SCALAR_METRICS, O[:, 0]))
        return {k: v[0] for k, v in _result(O, A).items()}

    def push_block(self, timestamps_ns, registers, present=None, missing=None):
        """Add S consecutive samples: timestamps_ns int (S, C); registers {signal: uint64 (S, C, *sizes)};
        present bool (S, C) and missing {signal: bool (S, C, *sizes)} optional, as in ``push``.
        Returns {metric: float64 (S', C, *sizes)} for the S' new windows (S' = S, or S − 1 when the
        stream had no baseline yet), or None when there is no window yet. Evaluated in chunks of about
        ``_CHUNK_ROWS`` rows, so temporaries do not grow with S.
        """
        T = np.asarray(timestamps_ns, dtype=np.int64)
        S, C = T.shape
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
        O, A = _outputs(n_win, C)
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
                w0, w1 = i0 - start, i1 - start
                _run(_inputs(V, F), interval, 1.0, O[:, w0:w1], [a[w0:w1] for a in A])
                self._set_last(Tc[-1], R[-1], None if B is None else B[-1])
        return _result(O, A)

    def _set_last(self, t, r, b):
        self._T = np.array(t, dtype=np.int64)
        self._R = np.array(r, dtype=np.uint64)
        self._B = None if b is None or not b.any() else np.array(b, dtype=bool)
