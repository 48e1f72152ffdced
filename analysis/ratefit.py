"""Fitting each op class's counter rates to the windows (``analysis.attribution``): non-negative
least squares ``D_w ≈ Σ_k T_wk r_k`` (Lawson & Hanson, *Solving Least Squares Problems*, 1974;
``scipy.optimize.nnls``), one rate per op class over the run, then per step for the classes that
occur often enough to have one — kept only where they predict that step's held-out windows
clearly better (split-half: fitted on the even windows, judged on the odd ones)."""

from __future__ import annotations

import numpy as np

HALF = 0.5  # a step's own fit uses the windows its frequent ops fill at least half of
BETTER = 0.25  # ... and is kept where it leaves under a quarter of the run rates' held-out squared error


def nnls_many(A: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Non-negative least squares ``min ||A x − y||, x ≥ 0`` for every column ``y`` of ``Y`` (rows ×
    k; NaN rows of a column are left out of its fit): one QR factorisation per set of rows, then
    ``nnls(R, Qᵀy)`` (Lawson & Hanson 1974) per column. Columns of ``A`` are scaled to unit maximum
    for conditioning. Returns (n, k); a column whose fit fails is NaN."""
    from scipy.optimize import nnls

    n, k = A.shape[1], Y.shape[1]
    out = np.full((n, k), np.nan)
    cs = A.max(axis=0) if A.shape[0] else np.ones(n)
    cs = np.where(cs > 0, cs, 1.0)
    ok = np.isfinite(Y)
    if ok.all():
        masks, which = np.ones((Y.shape[0], 1), bool), np.zeros(k, np.int64)
    else:
        masks, which = np.unique(ok, axis=1, return_inverse=True)
    for m in range(masks.shape[1]):
        rows = masks[:, m]
        cols = np.flatnonzero(which.reshape(-1) == m)
        if rows.sum() == 0:
            out[:, cols] = 0.0
            continue
        R, C = _factor(A[rows] / cs, Y[rows][:, cols])
        for j, col in enumerate(cols):
            scale = float(np.abs(Y[rows, col]).max())
            if scale <= 0:
                out[:, col] = 0.0
                continue
            try:
                x, _ = nnls(R, C[:, j] / scale, maxiter=50 * n + 100)
            except RuntimeError:
                continue
            out[:, col] = x * scale / cs
    return out


def _factor(A: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``R``, ``C`` with ``||R x − C[:, j]||² = ||A x − Y[:, j]||² + const``: the Cholesky factor of
    ``AᵀA`` (QR of ``A`` when it is singular)."""
    G = np.einsum("ij,ik->jk", A, A)  # einsum: no multi-threaded BLAS for these thin products
    try:
        L = np.linalg.cholesky(G + 1e-12 * np.trace(G) * np.eye(len(G)) / max(len(G), 1))
        return L.T, np.linalg.solve(L, np.einsum("ij,ik->jk", A, Y))
    except np.linalg.LinAlgError:
        Q, R = np.linalg.qr(A)
        return R, Q.T @ Y


def fit_rates(T, D: np.ndarray, cell_class: np.ndarray, cell_seg: np.ndarray) -> np.ndarray:
    """Rates (counter units per ns) of every rate cell (gap last) for every column of ``D`` (rows ×
    counters of window increases; NaN windows left out) from the windows' time per cell ``T`` (csr,
    rows × cells + 1, ns): one rate per op class over the run, then per step for the cells that have
    one (``cell_seg`` ≥ 0, module docstring) where they predict the step's odd windows, fitted on
    its even ones, with under ``BETTER`` of the run rates' squared error. Returns (cells + 1, counters); equal rates
    (plain time weighting) where a fit fails."""
    from scipy import sparse

    D = D.reshape(D.shape[0], -1)
    n_cls = int(cell_class.max()) + 1
    P = sparse.csr_matrix(
        (np.ones(len(cell_class)), (np.arange(len(cell_class)), cell_class)), shape=(len(cell_class), n_cls)
    )
    Tg = np.asarray((T @ P).todense())
    used = Tg.sum(axis=0) > 0
    r = np.ones((n_cls, D.shape[1]))
    x = nnls_many(Tg[:, used], D)
    r[used] = np.where(np.isfinite(x), x, 1.0)
    failed = ~np.isfinite(x).all(axis=0)
    rates = r[cell_class]
    Tc = T.tocsc()
    length = np.asarray(T.sum(axis=1)).ravel()
    for s in np.unique(cell_seg[cell_seg >= 0]):
        cols = np.flatnonzero(cell_seg == s)
        sub = np.asarray(Tc[:, cols].todense())
        frac = sub.sum(axis=1) / np.where(length > 0, length, 1.0)
        rows = frac >= HALF
        if rows.sum() < max(2 * len(cols), 4):
            continue
        A = sub[rows]
        target = D[rows] - T[rows] @ rates + np.einsum("ij,jk->ik", A, rates[cols])
        # keep the step's own rates only where they predict the step's held-out (odd) windows much
        # better than the run's rates do: identical steps, or too few windows, keep the run's
        odd = np.arange(len(A)) % 2 == 1
        x_even = nnls_many(A[~odd], np.where(odd[:, None], np.nan, target)[~odd])
        run_r = rates[cols]
        sse = lambda x: np.nansum((target[odd] - np.einsum("ij,jk->ik", A[odd], x)) ** 2, axis=0)  # noqa: E731
        better = np.isfinite(x_even).all(axis=0) & (sse(np.nan_to_num(x_even)) < BETTER * sse(run_r))
        x = nnls_many(A, target)
        good = better & np.isfinite(x).all(axis=0) & ~failed
        rates[np.ix_(cols, np.flatnonzero(good))] = x[:, good]
    return rates


__all__ = ["BETTER", "HALF", "fit_rates", "nnls_many"]
