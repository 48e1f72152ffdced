"""Helper functions copied verbatim into every generated evaluator (which must import NumPy only).

Null is NaN inside arrays. Division by zero gives NaN (null), never inf; comparisons and conditions
with a null operand are null; inf from overflow is turned into null at the end (``_finish``).
"""
import numpy as np


def _div(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    out = np.full(a.shape, np.nan)
    np.divide(a, b, out=out, where=(b != 0))
    return out


def _lift(x, k):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return x
    return x.reshape(x.shape + (1,) * k)


def _rollup(fn, x, k):
    x = np.asarray(x, dtype=np.float64)
    return fn(x, axis=tuple(range(x.ndim - k, x.ndim)))


def _cmp(fn, a, b):
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
    c = np.asarray(c, dtype=np.float64)
    return np.where(np.isnan(c), np.nan, np.where(c != 0, a, b))


def _finish(v, shape):
    v = np.asarray(v, dtype=np.float64)
    v = np.broadcast_to(v.reshape(v.shape + (1,) * (len(shape) - v.ndim)) if 0 < v.ndim < len(shape) else v, shape)
    return np.where(np.isinf(v), np.nan, v)
