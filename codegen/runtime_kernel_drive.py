"""The fused kernel's drivers, copied verbatim into every generated evaluator after
``codegen/runtime_kernel.py``: compile the kernel with numba on first use (or report that it cannot),
lay out the outputs, and the ``Stream`` entry points that go through the kernel (``push``,
``push_block``, ``push_flat``). Every function falls back to the NumPy path of
``codegen/runtime_stream.py`` when numba is absent, switched off, or the rows hold null registers.
"""
# Names such as _N, _K or METRICS are defined by the generated evaluator this source is copied into.
# ruff: noqa: F821

import numpy as np


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
        g.update(zip(_KNAMES, (_KT,)))  # one global: _kernel_call passes it on
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
            raise KeyError(f"no metric named {n!r}{_did_you_mean(n, names)}")
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
        OUT, BITS = _spare_outputs(n_out, n_bits)
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


def _spare_outputs(n_out, n_bits):
    """(OUT float64 of at least ``n_out``, BITS uint8 of at least ``n_bits``, its first ``n_bits`` zero): a
    pair made for an earlier call that nothing refers to any more — a result's values are views of OUT
    and BITS, whose ``base`` is the buffer itself, so a pair whose reference counts are the list's own is
    held by no result, table or thread — else a new pair (kept for later when there are fewer than four).
    A fresh buffer costs the kernel's zeroing of each of its pages at the first write, per piece."""
    import sys
    import threading

    spare = globals().setdefault("_SPARE_OUT", [])  # the pairs this evaluator made (only functions are copied in)
    with globals().setdefault("_SPARE_LOCK", threading.Lock()):
        for pair in spare:
            # the list's tuple holds each array once; getrefcount's argument adds one
            if (
                pair[0].size >= n_out
                and pair[1].size >= n_bits
                and sys.getrefcount(pair[0]) == 2
                and sys.getrefcount(pair[1]) == 2
            ):
                OUT, BITS = pair
                BITS[:n_bits] = 0
                return OUT, BITS
        OUT, BITS = np.empty(n_out), np.zeros(n_bits, np.uint8)
        if len(spare) < 4:
            spare.append((OUT, BITS))
        return OUT, BITS


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
    _gather(stream, registers, (S, C), X.T)
    res = _push_flat(stream, T, X, None, sums=sums)
    return None if res is None else {k: v for k, (v, _) in res.items()}


def _push_flat(stream, timestamps_ns, X, colmap, reuse=False, sums=False, keep_values=False):
    T = _block_stamps(stream, timestamps_ns, None)
    S, C = T.shape
    if X.dtype != np.uint64:  # raw unsigned integers: a float or a negative value is refused
        _check_values("X", X)
        X = X.astype(np.uint64)
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
    _gather(stream, registers, (C,), X.T)  # one copy of every register (refused unless unsigned integers)
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
