"""Formula helpers copied verbatim into every generated evaluator (which must import NumPy only).

The null rules are those of the reference interpreter (``metrics/interpreter.py``): null is NaN inside
arrays; division by zero gives null, never inf; comparisons and conditions with a null operand are
null; a metric's inf (overflow) becomes null when the metric is finished (``_fin``), before any other
metric reads it. Every helper takes and returns float64 arrays (or Python floats) that broadcast
against ``(windows, chips, *instance sizes)``.
"""

import numpy as np


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
