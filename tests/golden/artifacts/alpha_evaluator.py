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
FLAT_COLUMNS = ('mem.rd[0]', 'mem.rd[1]', 'mem.wr[0]', 'mem.wr[1]', 'eng.busy', 'eng.cycles', 'eng.level')
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
_MODC = ()
_USCALE = ()
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
_NAN = np.nan
_INF = np.inf
_KT = None
_KFN = None
_KCACHE = False
_JITTED = ('_kdiv', '_kpow', '_kmin', '_kmax', '_kclamp', '_kcmp_lt', '_kcmp_le', '_kcmp_gt', '_kcmp_ge', '_kcmp_eq', '_kcmp_ne', '_kand', '_kor', '_knot', '_kwhere', '_kdefault', '_kfin', '_emit_block', '_load', '_flagged', '_counter_fast', '_advance', '_counter_rule', '_level', '_sentinels_and_range', '_null_flagged', '_column', '_intervals', '_column_at', '_histograms', '_unit_fields', '_reset_groups', '_spread_nulls', '_fields', '_rules_block', '_sums_block', '_kernel_body', '_kernel_loop', '_kernel_call')
_KINLINE = ('_load', '_column_at', '_column', '_counter_fast', '_advance', '_counter_rule', '_level', '_sentinels_and_range', '_null_flagged')
_KNAMES = ('_KCLS', '_KMASK', '_KSCALE', '_KHALF', '_KRATE', '_KWRAP', '_KGSCALE', '_KHIST', '_KSENT_OFF', '_KSENT_VALS', '_KRESET_OF', '_KGROUPS', '_KMODM', '_KUS_I', '_KUS_F', '_KFSRC', '_KFLO', '_KFMASK', '_KFSCALE', '_KFSENT_OFF', '_KFSENT_VALS', '_KLATE')
_NV = 5
_MOFF = np.array([0, 1, 2, 3, 4], dtype=np.int64)
_MN = np.array([1, 1, 1, 1, 1], dtype=np.int64)
_MDEPS_OFF = np.array([0, 0, 0, 0, 0, 1], dtype=np.int64)
_MDEPS = np.array([2], dtype=np.int64)

def _kernel_body(v, f, iv, n, chips, mv, want):
    """The metrics of one block of window-chip rows (generated; see codegen/kernel.py)."""
    if want[0]:
        for q in range(n):
            x = v[6, q]
            mv[0, q] = _kfin(x)
    if want[1]:
        for q in range(n):
            x = _kdiv(v[4, q], v[5, q]) * 100.0
            mv[1, q] = _kfin(x)
    if want[2]:
        for q in range(n):
            t1 = 0.0
            for i2 in range(2):
                t3 = v[i2, q]
                t1 = t1 + t3
            t4 = 0.0
            for i5 in range(2):
                t6 = v[i5 + 2, q]
                t4 = t4 + t6
            x = _kdiv(t1 + t4, iv[q]) * 1e-09
            mv[2, q] = _kfin(x)
    if want[3]:
        for q in range(n):
            t7 = 0.0
            for i8 in range(2):
                t9 = v[i8, q]
                t7 = t7 + t9
            x = _kdiv(t7, iv[q]) * 1e-09
            mv[3, q] = _kfin(x)
    if want[4]:
        for q in range(n):
            x = _kdiv(mv[2, q], 100.0 * chips) * 100.0
            mv[4, q] = _kfin(x)


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


def _default(a, b):
    """``default(a, b)`` of a captured ``a``: ``a``, its nulls kept (``metrics.optional``; an absent ``a``
    was replaced by ``b`` in the catalog before this code was generated)."""
    return np.asarray(a, dtype=np.float64)


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
        self._jit = jit
        self._push = None  # pre-allocated buffers of ``push``, by chip count
        self.sums = None  # run-level sums of the last push_flat / push_block(sums=True)
        self.values = None  # the inputs' window values of the last push_flat(keep_values=True), with the kernel

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
        registers: {signal: uint64 array (C, *instance sizes)} raw registers, or one uint64 array
        (C, len(FLAT_COLUMNS)) holding every chip's registers in the order of ``FLAT_COLUMNS``;
        present: optional bool (C,), False where a chip has no sample;
        missing: optional {signal: bool (C, *instance sizes)}, True where a register is null.
        Returns None for the first sample (it only sets the baseline), else {metric: float64 array
        (C, *instance sizes)} for the window that ends at this sample; NaN is null. With the compiled
        kernel, all chips go through one call into buffers allocated once per chip count.
        """
        ts = np.asarray(timestamp_ns, dtype=np.int64)
        C = ts.shape[0]
        if present is None and not missing and self._B is None and self._T is not None and _use_kernel(self):
            return _kernel_push(self, ts, registers)
        R = np.empty((2, C, _N), dtype=np.uint64)
        if isinstance(registers, np.ndarray):
            R[1] = registers
        elif _REGS:
            np.concatenate(
                [np.asarray(registers[name]).reshape(C, b - a) for name, a, b in _REGS],
                axis=1,
                out=R[1],
                casting="unsafe",
            )
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
            return dict(zip(_SCALAR_METRICS, OUT[:, 0]))
        return {k: v[0] for k, v in _result(OUT, A).items()}

    def push_block(self, timestamps_ns, registers, present=None, missing=None, _kernel=True, sums=False):
        """Add S consecutive samples: timestamps_ns int (S, C); registers {signal: uint64 (S, C, *sizes)};
        present bool (S, C) and missing {signal: bool (S, C, *sizes)} optional, as in ``push``.
        Returns {metric: float64 (S', C, *sizes)} for the S' new windows (S' = S, or S − 1 when the
        stream had no baseline yet), or None when there is no window yet. Evaluated in chunks of about
        ``_CHUNK_ROWS`` rows, so temporaries do not grow with S. With ``sums``, ``self.sums`` is set to
        the new windows' run-level sums (see ``push_flat``).
        """
        T = np.asarray(timestamps_ns, dtype=np.int64)
        S, C = T.shape
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


def _kdiv(a, b):
    return a / b if b != 0 else _NAN


def _kpow(a, b):
    return a**b


def _kmin(a, b):
    if a != a or b != b:
        return _NAN
    return a if a <= b else b


def _kmax(a, b):
    if a != a or b != b:
        return _NAN
    return a if a >= b else b


def _kclamp(x, lo, hi):
    return _kmin(_kmax(x, lo), hi)


def _kcmp_lt(a, b):
    return _NAN if a != a or b != b else (1.0 if a < b else 0.0)


def _kcmp_le(a, b):
    return _NAN if a != a or b != b else (1.0 if a <= b else 0.0)


def _kcmp_gt(a, b):
    return _NAN if a != a or b != b else (1.0 if a > b else 0.0)


def _kcmp_ge(a, b):
    return _NAN if a != a or b != b else (1.0 if a >= b else 0.0)


def _kcmp_eq(a, b):
    return _NAN if a != a or b != b else (1.0 if a == b else 0.0)


def _kcmp_ne(a, b):
    return _NAN if a != a or b != b else (1.0 if a != b else 0.0)


def _kand(a, b):
    return _NAN if a != a or b != b else (1.0 if (a != 0 and b != 0) else 0.0)


def _kor(a, b):
    return _NAN if a != a or b != b else (1.0 if (a != 0 or b != 0) else 0.0)


def _knot(a):
    return _NAN if a != a else (1.0 if a == 0 else 0.0)


def _kwhere(c, a, b):
    if c != c:
        return _NAN
    return a if c != 0 else b


def _kdefault(a, b):
    return a


def _kfin(x):
    """A metric's value: inf (overflow) is null."""
    return _NAN if x - x != 0 else x


def _emit_block(mv, r0, n, want, OUT, BITS, OFF, BOFF, MOFF, MN):
    """A block's metric values into the output buffers, and the validity bit of every valid one:
    metric k's instance i of row r at ``OUT[OFF[k] + r * n_k + i]`` and bit ``BOFF[k] + r * n_k + i``.
    Values are copied in one loop and the bitmap built a byte (eight values) at a time, without
    branches; bytes are stored whole when the block starts on a byte, else bits are or-ed in."""
    for k in range(want.shape[0]):
        if not want[k]:
            continue
        nk, mo, off, boff = MN[k], MOFF[k], OFF[k], BOFF[k]
        base = r0 * nk
        if nk == 1:
            src = mv[mo]
            dst = OUT[off + r0 : off + r0 + n]
            for q in range(n):
                dst[q] = src[q]
        else:
            for q in range(n):
                for i in range(nk):
                    OUT[off + base + q * nk + i] = mv[mo + i, q]
        vals = OUT[off + base : off + base + n * nk]
        total = n * nk
        if base % 8 == 0:
            full = total // 8
            b0 = (boff + base) >> 3
            for g in range(full):
                byte = 0
                for t in range(8):
                    x = vals[g * 8 + t]
                    byte |= (1 if x == x else 0) << t
                BITS[b0 + g] = np.uint8(byte)
            done = full * 8
        else:
            done = 0
        for p in range(done, total):
            x = vals[p]
            if x == x:
                b = boff + base + p
                BITS[b >> 3] |= np.uint8(1 << (b & 7))


def _kernel_tables():
    """The rule tables of ``codegen/runtime_stream.py`` as per-column arrays (numba reads arrays, not
    nested tuples): class, mask, half range, scale, max rate, wrap, gauge scale; sentinels and reset
    groups as CSR; histogram instances; declared ranges; unit fields."""
    N = _N
    cls = np.full(N, 5, np.int64)
    cls[:_K1] = 0
    cls[_K1:_K2] = 1
    cls[_K2:_K3] = 2
    cls[_K3:_K] = 3
    cls[_K:_G] = 4
    full = lambda src, a, b, dtype: np.concatenate([np.zeros(a, dtype), np.asarray(src, dtype), np.zeros(N - b, dtype)])  # noqa: E731
    mask = full(_MASK, 0, _K, np.uint64)
    scale = full(_SCALE, 0, _K, np.float64)
    half = full(_HALF, 0, _K1, np.uint64)
    rate = full(_RATE, _K1, _K2, np.float64)
    wrap = full(_WRAP, _K1, _K2, np.float64)
    gscale = full(_GSCALE, _K, _G, np.float64)
    hist = np.zeros((len(_HIST), 3), np.int64)
    for k, (a, n, nb) in enumerate(_HIST):
        hist[k] = (a, n, nb)
    sent_off, sent_vals = _csr([(a, b, vals) for a, b, vals in _SENT], N)
    fsent_off, fsent_vals = _csr([(a, b, vals) for a, b, vals in _FIELD_SENT], _NF)
    reset_of = np.full(N, -1, np.int64)
    groups = np.zeros((len(_RESET), 3), np.int64)
    for g, (ia, ib, cols, dec) in enumerate(_RESET):
        groups[g] = (ia, ib, int(dec))
        for a, b in cols:
            reset_of[a:b] = g
    modm = np.zeros(N, np.uint64)
    for a, b, m in _MODC:
        modm[a:b] = m
    us_i = np.full((N, 4), -1, np.int64)  # register column (per counter column), lo, mask, has rate
    us_f = np.zeros((N, 4), np.float64)  # field scale, base, rate, M
    for a, b, ra, rb, lo, fmask, fs, base, rt, m in _USCALE:
        for j in range(a, b):
            us_i[j] = (ra + (j - a if rb - ra > 1 else 0), lo, fmask, 1 if rt else 0)
            us_f[j] = (fs, base, rt, m)
    late = np.zeros(
        N, np.bool_
    )  # columns whose null flags later rules may still change (histograms, unit fields, resets)
    late[_K3:_K] = True
    late[reset_of >= 0] = True
    late[us_i[:, 0] >= 0] = True
    return (
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
        np.asarray(_FIELD_SRC, np.int64),
        np.asarray(_FIELD_LO, np.uint64),
        np.asarray(_FIELD_MASK, np.uint64),
        np.asarray(_FIELD_SCALE, np.float64),
        fsent_off,
        fsent_vals,
        late,
    )


def _csr(entries, n):
    off = np.zeros(n + 1, np.int64)
    per = [[] for _ in range(n)]
    for a, b, vals in entries:
        for j in range(a, b):
            per[j] += [int(x) for x in vals]
    off[1:] = np.cumsum([len(p) for p in per]) if n else off[1:]
    return off, np.array([x for p in per for x in p], np.uint64)


def _sums_block(V, F, IV, r0, n, C, N, NF, K, ACC):
    """Run-level sums of a block's window values, per chip (row ``r`` is chip ``r % C``): counters and
    histograms (columns ``[0, K)``) summed, gauges, packed registers and fields time-weighted (value ×
    interval), the interval summed in ``ACC[:, N + NF]``. Each chip's windows are added one after the
    other in window order into a running sum — the order of ``metrics.windows.run_level``'s sum over
    windows, so a piece without nulls gives the same sums bit for bit. A null (NaN) value makes its
    column's sum NaN: that is how the caller learns that the piece held a null there."""
    for c in range(C):
        q0 = (c - r0 % C) % C  # the block's first row of chip c (none when n <= q0)
        s = ACC[c, N + NF]
        for q in range(q0, n, C):
            s += IV[q]
        ACC[c, N + NF] = s
        for j in range(K):
            v = V[j]
            s = ACC[c, j]
            for q in range(q0, n, C):
                s += v[q]
            ACC[c, j] = s
        for j in range(K, N + NF):
            v = V[j] if j < N else F[j - N]
            s = ACC[c, j]
            for q in range(q0, n, C):
                s += v[q] * IV[q]
            ACC[c, j] = s


def _kernel_loop(
    X,
    colmap,
    T,
    T0,
    R0,
    C,
    start,
    chips,
    want,
    OUT,
    BITS,
    OFF,
    BOFF,
    ACC,
    sums,
    VOUT,
    keepv,
    NV,
    MOFF,
    MN,
    K,
    G,
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
    """Every window-chip row of a chunk from row ``start`` on (0, or C when the chunk's first sample is
    only the baseline), in blocks of 2,048 rows: window values column by column (``_rules_block``), then
    the metrics metric by metric (``_kernel_body``), then into the outputs (``_emit_block``). ``X``
    uint64 (columns, rows), ``T`` int64 (rows,), ``T0`` int64 (C,) and ``R0`` uint64 (C, N): the
    sample before the chunk (the baseline of its first windows when ``start`` is 0). With ``sums``,
    each thread ``t`` also adds the blocks' run-level sums into ``ACC[t]`` (C, N + fields + 1)
    (``_sums_block``), in the same pass; with ``keepv``, every window value goes to ``VOUT`` (N +
    fields, rows): register columns, then fields, NaN where null."""
    N = colmap.shape[0]
    NF = fsrc.shape[0]
    rows = T.shape[0]
    B = 2048  # rows per block: its window values (~4 MB for 240 columns) stay in L3; 512 measured 1.8x slower in cache
    if rows - start < B:  # a short chunk (a streaming push: one sample of each chip) gets scratch of its own size
        B = max(rows - start, 1)
    nblk = (rows - start + B - 1) // B
    nth = max(1, min(_KNTH, nblk))  # threads (``_KNTH``, set by ``_jit``): each its own blocks and scratch
    per = (nblk + nth - 1) // nth
    for t in _prange(nth):
        V = np.empty((N + 1, B))
        F = np.empty((NF + 1, B))
        IV = np.empty(B)
        BD = np.empty((N + 1, B), np.bool_)
        DD = np.empty((max(K, 1), B), np.uint64)
        GF = np.empty((groups.shape[0] + 1, B), np.bool_)
        cc = np.empty(B, np.uint64)
        pp = np.empty(B, np.uint64)
        mv = np.empty((NV + 1, B))
        for blk in range(t * per, min(nblk, (t + 1) * per)):
            r0 = start + blk * B
            r1 = min(rows, r0 + B)
            _rules_block(
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
            )
            if sums:
                _sums_block(V, F, IV, r0, r1 - r0, C, N, NF, K, ACC[t])
            if keepv:
                for j in range(N):
                    VOUT[j, r0 - start : r1 - start] = V[j, : r1 - r0]
                for k in range(NF):
                    VOUT[N + k, r0 - start : r1 - start] = F[k, : r1 - r0]
            _kernel_body(V, F, IV, r1 - r0, chips, mv, want)
            _emit_block(mv, r0 - start, r1 - r0, want, OUT, BITS, OFF, BOFF, MOFF, MN)


def _kernel_call(X, colmap, T, T0, R0, C, start, chips, want, OUT, BITS, OFF, BOFF, ACC, sums, VOUT, keepv):
    """``_kernel_loop`` with the catalog's tables compiled in (a short argument list: each call
    type-checks only these)."""
    _kernel_loop(
        X,
        colmap,
        T,
        T0,
        R0,
        C,
        start,
        chips,
        want,
        OUT,
        BITS,
        OFF,
        BOFF,
        ACC,
        sums,
        VOUT,
        keepv,
        _NV,
        _MOFF,
        _MN,
        _K,
        _G,
        _KCLS,
        _KMASK,
        _KSCALE,
        _KHALF,
        _KRATE,
        _KWRAP,
        _KGSCALE,
        _KHIST,
        _KSENT_OFF,
        _KSENT_VALS,
        _KRESET_OF,
        _KGROUPS,
        _KMODM,
        _KUS_I,
        _KUS_F,
        _KFSRC,
        _KFLO,
        _KFMASK,
        _KFSCALE,
        _KFSENT_OFF,
        _KFSENT_VALS,
        _KLATE,
    )


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


def _jit():
    """The compiled row loop (numba, compiled on first use), or None when numba is not installed or
    ``PERFONTO_NO_JIT`` is set: then the NumPy path evaluates everything."""
    global _KFN, _KT
    if _KFN is not None:
        return _KFN or None
    import threading

    with globals().setdefault("_KLOCK", threading.Lock()):  # one thread jits (the loader's and the caller's may race)
        return _jit_locked()


def _jit_locked():
    global _KFN, _KT
    if _KFN is None:
        import os

        try:
            if os.environ.get("PERFONTO_NO_JIT"):
                raise ImportError("PERFONTO_NO_JIT")
            import numba
        except ImportError:
            _KFN = False
            return None
        g = globals()
        _KT = _kernel_tables()
        g.update(zip(_KNAMES, _KT))
        g["_KNTH"] = max(1, min(int(os.environ.get("PERFONTO_KERNEL_THREADS", "1")), numba.config.NUMBA_NUM_THREADS))
        g["_prange"] = numba.prange  # a plain range unless the loop is compiled parallel
        for name in _JITTED:
            par = (
                name == "_kernel_loop" and g["_KNTH"] > 1
            )  # blocks in parallel: disjoint rows, outputs and bitmap bytes
            # the per-column rules inlined into their loop: a call per column and block cost ~0.2 µs
            # (array arguments and their reference counts); a streaming push of 8 chips measured 45 µs
            # median inlined, 57 µs not
            inline = "always" if name in _KINLINE else "never"
            g[name] = numba.njit(cache=_KCACHE, nogil=True, error_model="numpy", parallel=par, inline=inline)(g[name])
        _KFN = g["_kernel_call"]
    return _KFN or None


def _wanted(metrics):
    """Bool per metric: the ones asked for (names; None: all) and, transitively, the metrics they read."""
    names = list(METRICS)
    if metrics is None:
        return np.ones(len(names), np.bool_)
    pos = {n: k for k, n in enumerate(names)}
    want = np.zeros(len(names), np.bool_)
    todo = []
    for n in metrics:
        if n not in pos:
            raise KeyError(f"no metric named {n!r}")
        todo.append(pos[n])
    while todo:
        k = todo.pop()
        if not want[k]:
            want[k] = True
            todo.extend(_MDEPS[_MDEPS_OFF[k] : _MDEPS_OFF[k + 1]].tolist())
    return want


def _run_kernel(X, colmap, T, T0, R0, C, start, chips, want, pool=None, sums=False, keepv=False):
    """Run the compiled kernel over ``rows = len(T)`` window-chip rows. Returns (OUT float64 flat,
    BITS uint8 flat, OFF, BOFF, ACC): metric k's values at ``OUT[OFF[k]:OFF[k] + rows * n_k]`` and its
    validity bitmap at bit ``BOFF[k]`` (a multiple of 8) of ``BITS``; ``ACC`` is None, or with ``sums``
    float64 (C, _N + _NF + 1): the run-level sums of the rows' window values per chip and register or
    field column, the interval summed in the last column, NaN in a column that held a null
    (``_sums_block``). With ``keepv`` a sixth item: every window value, float64 (_N + _NF, rows)."""
    fn = _jit()
    rows = T.shape[0] - start
    sizes = np.where(want, _MN * rows, 0)
    OFF = np.zeros(len(sizes), np.int64)
    OFF[1:] = np.cumsum(sizes)[:-1]
    bsizes = (sizes + 7) // 8 * 8
    BOFF = np.zeros(len(sizes), np.int64)
    BOFF[1:] = np.cumsum(bsizes)[:-1]
    n_out, n_bits = int(sizes.sum()) + 1, int(bsizes.sum()) // 8 + 1
    if pool is None:
        OUT, BITS = np.empty(n_out), np.zeros(n_bits, np.uint8)
    else:  # two buffers used in turn: no fresh pages to fault in per chunk
        pool.append(pool.pop(0))
        OUT, BITS = pool[-1]
        if OUT.size < n_out or BITS.size < n_bits:
            OUT, BITS = pool[-1] = (np.empty(max(n_out, OUT.size)), np.empty(max(n_bits, BITS.size), np.uint8))
        BITS[:n_bits] = 0
    ACC = np.zeros((_KNTH, C, _N + _NF + 1)) if sums else _no_acc()
    VOUT = np.empty((_N + _NF, rows)) if keepv else np.empty((1, 1))
    fn(X, colmap, T, T0, R0, C, start, float(chips), want, OUT, BITS, OFF, BOFF, ACC, bool(sums), VOUT, bool(keepv))
    res = (OUT, BITS, OFF, BOFF, ((ACC.sum(axis=0) if _KNTH > 1 else ACC[0]) if sums else None))
    return res + (VOUT,) if keepv else res


def _no_acc():
    """The sums' argument when none are asked for (of the type the kernel was compiled for)."""
    return np.zeros((1, 1, 1))


def _use_kernel(stream):
    if stream._jit is False:
        return False
    if stream._jit is None:
        import os

        if os.environ.get("PERFONTO_NO_JIT"):
            return False
    return _jit() is not None


def _kernel_block(stream, T, registers, sums=False):
    """``Stream.push_block`` through the kernel: registers laid out as columns (one copy), then
    ``_push_flat``; returns {metric: values} as the NumPy path does."""
    S, C = T.shape
    X = np.empty((_N, S * C), np.uint64)
    for name, a, b in _REGS:
        X[a:b] = np.asarray(registers[name]).reshape(S * C, b - a).T
    res = _push_flat(stream, T, X, None, sums=sums)
    return None if res is None else {k: v for k, (v, _) in res.items()}


def _push_flat(stream, timestamps_ns, X, colmap, reuse=False, sums=False, keep_values=False):
    T = np.asarray(timestamps_ns, dtype=np.int64)
    S, C = T.shape
    colmap = np.arange(_N, dtype=np.int64) if colmap is None else np.asarray(colmap, dtype=np.int64)
    stream.sums = None
    stream.values = None
    if not _use_kernel(stream) or stream._B is not None:
        regs = {name: np.ascontiguousarray(X[colmap[a:b]].T).reshape(S, C, b - a) for name, a, b in _REGS}
        res = stream.push_block(T, regs, _kernel=False, sums=sums)
        if res is None:
            return None
        return {k: (v, _bitmap(v)) for k, v in res.items()}
    first = 0
    if stream._T is None:
        stream._T = T[0].copy()
        stream._R = np.ascontiguousarray(X[colmap, :C].T)
        first = 1
    if S - first <= 0:
        return None
    pool = None
    if reuse:
        pool = stream._ws.setdefault(
            "kernel_out", [(np.empty(0), np.empty(0, np.uint8)), (np.empty(0), np.empty(0, np.uint8))]
        )
    OUT, BITS, OFF, BOFF, stream.sums, *kept = _run_kernel(
        X, colmap, T.reshape(-1), stream._T, stream._R, C, first * C, 1.0, stream._want, pool, sums, keep_values
    )
    if kept:
        stream.values = _input_values(kept[0], S - first, C)
    stream._T = T[-1].copy()
    stream._R = np.ascontiguousarray(X[colmap, (S - 1) * C :].T)
    W = S - first
    out = {}
    names = list(METRICS)
    for k in np.flatnonzero(stream._want):
        name = names[k]
        if stream._metrics is not None and name not in stream._metrics:
            continue
        n = int(_MN[k])
        sizes = METRICS[name]["axes"]
        vals = OUT[OFF[k] : OFF[k] + W * C * n].reshape((W, C) + tuple(s for _, s in sizes))
        nbytes = (W * C * n + 7) // 8
        out[name] = (vals, BITS[BOFF[k] // 8 : BOFF[k] // 8 + nbytes])
    return out


def _input_values(VV, W, C):
    """{input name: float64 (W, C, *sizes)} from the kernel's window values (``keepv``): views of its
    (columns, rows) buffer, no copy (an input without instances is contiguous)."""
    out = {}
    for name, (src, a, b, sizes) in zip(INPUTS, _INPUT_SRC):
        off = _N if src else 0
        v = VV[off + a : off + b].reshape((b - a, W, C))
        out[name] = v[0] if not sizes else np.moveaxis(v, 0, -1).reshape((W, C) + tuple(sizes))
    return out


def _bitmap(values):
    """Arrow validity bitmap (LSB first) of ``values``: 1 where not NaN."""
    return np.packbits(~np.isnan(values.reshape(-1)), bitorder="little")


def _kernel_push(stream, ts, registers):
    """``Stream.push`` through the kernel: one sample of all chips, into buffers allocated once per
    chip count (metrics without instance axes first, so that they come back as rows of one block)."""
    C = ts.shape[0]
    P = stream._push
    if P is None or P[0] != C:
        want = stream._want
        names = [n for k, n in enumerate(METRICS) if want[k] and (stream._metrics is None or n in stream._metrics)]
        order = sorted(np.flatnonzero(want), key=lambda k: (_MN[k] > 1 or bool(METRICS[list(METRICS)[k]]["axes"]), k))
        sizes = np.zeros(len(want), np.int64)
        sizes[want] = _MN[want] * C
        OFF = np.zeros(len(want), np.int64)
        BOFF = np.zeros(len(want), np.int64)
        pos = bpos = 0
        for k in order:
            OFF[k], BOFF[k] = pos, bpos
            pos += sizes[k]
            bpos += (sizes[k] + 7) // 8 * 8
        keys = list(METRICS)
        scalar = [keys[k] for k in order if not METRICS[keys[k]]["axes"]]
        rest = [
            (keys[k], int(OFF[k]), (C,) + tuple(sz for _, sz in METRICS[keys[k]]["axes"]))
            for k in order
            if METRICS[keys[k]]["axes"]
        ]
        P = (
            C,
            np.empty((_N, C), np.uint64),
            np.empty(C, np.int64),
            np.arange(_N, dtype=np.int64),
            np.empty(pos + 1),
            np.zeros(bpos // 8 + 1, np.uint8),
            OFF,
            BOFF,
            scalar,
            rest,
            set(names),
        )
        stream._push = P
    _, X, T, colmap, OUT, BITS, OFF, BOFF, scalar, rest, keep = P
    if isinstance(registers, np.ndarray):
        X[...] = registers.T
    else:
        for name, a, b in _REGS:
            X[a:b] = np.asarray(registers[name]).reshape(C, b - a).T
    T[...] = ts
    _jit()(
        X,
        colmap,
        T,
        stream._T,
        stream._R,
        C,
        0,
        1.0,
        stream._want,
        OUT,
        BITS,
        OFF,
        BOFF,
        _no_acc(),
        False,
        np.empty((1, 1)),
        False,
    )
    stream._T[...] = T
    stream._R[...] = X.T
    out = OUT.copy()
    res = dict(zip(scalar, out[: len(scalar) * C].reshape(len(scalar), C)))
    for name, off, shape in rest:
        res[name] = out[off : off + int(np.prod(shape))].reshape(shape)
    if len(keep) != len(res):
        res = {k: v for k, v in res.items() if k in keep}
    return res
