"""How far the counter windows pin down each group's attributed counts (``analysis.attribution``): the
spread of the per-op-class rates that explain the windows as well as the fitted ones do.

The rates ``r`` (one per op class, the time outside every span last) are fitted to the windows,
``D_w ≈ Σ_k T_wk r_k``, leaving the misfit ``SSE = Σ_w (D_w − Σ_k T_wk r̂_k)²``. Every rate vector whose
prediction differs from the fitted one by no more than that misfit, ``‖T (r − r̂)‖² ≤ SSE``, explains the
windows to within the rate model's own misfit, so the windows cannot choose among them. A group holding ``c_k`` ns
of class ``k`` is given about ``Σ_k c_k r_k`` (its time × its classes' rates); over that ellipsoid this
moves by up to ``√(SSE · cᵀ (TᵀT)⁻¹ c)`` — the group's *spread*, in the counter's unit.

Where classes' time shares move together in every window — every step alike, as under a closed loop, each
1 ms window holding ten layers of the same op sequence — ``TᵀT`` is near-singular along the differences of
their rates, and a misfit of a few per cent moves their counts by several times themselves. A split-half
estimate (rates fitted on the even windows against the odd ones) cannot see this: both halves share the
collinearity and agree on the same wrong split. A direction the windows do not see at all (eigenvalue
of the column-scaled ``TᵀT`` under ``NULL`` of the largest) counts with that eigenvalue: its spread is
large wherever the fit leaves any misfit — and nil where the fit is exact (two ops that always run
together in the same proportion and at constant rates: only the hard bound covers their swap). The
caller caps every estimate at the attribution's hard bound. Non-negativity of the rates is ignored,
so the spread errs on the large side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NULL = 1e-10  # eigenvalue (of the column-scaled Gram matrix, relative to its largest) of a direction no window sees


@dataclass
class Conditioning:
    """One cluster's class-level design over the windows where a set of counters has values: the column
    scales (ns; 0 for a class without time there), the eigen-decomposition of the scaled Gram matrix, and
    per counter (``cols`` of the fitted counters) its misfit ``sse`` (unit²)."""

    scale: np.ndarray
    vals: np.ndarray
    vecs: np.ndarray
    cols: np.ndarray
    sse: np.ndarray


def class_times(T, cell_class: np.ndarray) -> np.ndarray:
    """(W, classes + 1) dense time (ns) of each op class (the gap last) in each window, from the time
    per rate cell ``T`` (csr, W × cells + 1) and each cell's class ``cell_class``."""
    from scipy import sparse

    n = int(cell_class.max()) + 1
    P = sparse.csr_matrix(
        (np.ones(len(cell_class)), (np.arange(len(cell_class)), cell_class)), shape=(len(cell_class), n)
    )
    return np.asarray((T @ P).todense())


def conditioning(Tc: np.ndarray, D: np.ndarray, pred: np.ndarray) -> list[Conditioning]:
    """The ``Conditioning`` of the class times ``Tc`` (W × n, ns) for the window increases ``D`` (W × k;
    NaN where a window has no value) with the fitted predictions ``pred`` (W × k): one per set of windows
    that has values (usually one for all counters)."""
    ok = np.isfinite(D)
    masks, which = np.unique(ok, axis=1, return_inverse=True)
    out = []
    for m in range(masks.shape[1]):
        rows = masks[:, m]
        cols = np.flatnonzero(which.reshape(-1) == m)
        A = Tc[rows]
        scale = np.sqrt(np.einsum("ij,ij->j", A, A))
        s = np.where(scale > 0, scale, 1.0)
        G = np.einsum("ij,ik->jk", A / s, A / s)
        vals, vecs = np.linalg.eigh(G)
        sse = ((D[rows][:, cols] - pred[rows][:, cols]) ** 2).sum(axis=0)
        out.append(Conditioning(scale, vals, vecs, cols, sse))
    return out


def spread(conds: list[Conditioning], C: np.ndarray, k: int) -> np.ndarray:
    """(K, k) spread (module docstring) of ``K`` groups holding ``C`` (K × n) ns of each class, for each
    of the ``k`` fitted counters; ``inf`` for a group with time only in windows where the counter has no value."""
    out = np.zeros((C.shape[0], k))
    for c in conds:
        unseen = ((C > 0) & (c.scale == 0)[None, :]).any(axis=1)
        q = (C / np.where(c.scale > 0, c.scale, 1.0)) @ c.vecs  # (K, n): the groups' time on each eigendirection
        top = float(c.vals.max()) if len(c.vals) else 0.0
        if top <= 0:  # no window with time in it: nothing is pinned down
            out[:, c.cols] = np.where((C.sum(axis=1) > 0)[:, None], np.inf, 0.0)
            continue
        var = (q**2 / np.maximum(c.vals, NULL * top)).sum(axis=1)
        with np.errstate(invalid="ignore"):  # a rejected model's misfit is inf: inf for every group with time
            s = np.where(var[:, None] > 0, np.sqrt(var[:, None] * c.sse[None, :]), 0.0)
        out[:, c.cols] = np.where(unseen[:, None], np.inf, s)
    return out


def group_class_times(chips, gi: np.ndarray, K: int, cell: np.ndarray, cell_class: np.ndarray) -> np.ndarray:
    """(K, classes + 1) time (ns) of each op class in each of ``K`` groups (span group indices ``gi``; the
    gap in the last group and class) summed over ``chips`` (``attribution._Chip``)."""
    n = int(cell_class.max()) + 1
    C = np.zeros((K, n))
    for ch in chips:
        key = gi[ch.ts] * n + cell_class[cell[ch.ts]]
        C += np.bincount(key, weights=ch.to, minlength=K * n).reshape(K, n)
        C[K - 1, n - 1] += ch.gap.sum()
    return C


__all__ = ["NULL", "Conditioning", "class_times", "conditioning", "group_class_times", "spread"]
