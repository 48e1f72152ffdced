"""Apportioning one chip's counter windows to its spans with fitted rates (``analysis.attribution``, whose
module docstring states the rule and its error): the shares of each (span, window) pair and of each
window's gap, the sums, hard bound and split-half estimate per group, and the gauges' time-weighted means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .attribution import GroupTotals, _Chip


def apportion(
    ch: _Chip, rates: np.ndarray, cell: np.ndarray, n_cells: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shares (n, k) of each triple and (W, k) of each window's gap for ``k`` counters with ``rates``
    (cells + 1, k), and the fitted prediction of each window's increase (W, k; NaN where a window
    falls back to time weighting)."""
    Mw = ch.window_matrix()
    wt = ch.to[:, None] * rates[cell[ch.ts]]
    gw = ch.gap[:, None] * rates[n_cells][None, :]
    S = Mw @ wt + gw
    fall = ~(S > 0)
    if fall.any():  # nothing fitted in the window: time weighting
        wt = np.where(fall[ch.tw], ch.to[:, None], wt)
        gw = np.where(fall, ch.gap[:, None], gw)
    denom = Mw @ wt + gw
    denom = np.where(denom > 0, denom, 1.0)
    return wt / denom[ch.tw], gw / denom, np.where(fall, np.nan, S)


@dataclass
class Shares:
    """One chip's counters apportioned with its rates: ``X`` per (span, window) and counter column,
    ``Xg`` the gap's column totals, ``AD`` per (span, window) and counter (instance totals ``D``),
    ``bound_gap`` the gap's hard bound, ``halves`` the split-half shares (none when pure)."""

    X: np.ndarray
    Xg: np.ndarray
    AD: np.ndarray
    D: np.ndarray
    bound_gap: np.ndarray
    halves: list


def chip_shares(ch: _Chip, names, rates, cell, n_cells, col_sig, edges, pure) -> Shares:
    """Apportion chip ``ch``'s window values to its spans and gap with ``rates`` (all, even, odd)."""
    W = len(ch.gap)
    F = np.concatenate([np.nan_to_num(ch.values[n].reshape(W, -1), nan=0.0) for n in names], axis=1)
    D = np.stack([F[:, edges[j] : edges[j + 1]].sum(axis=1) for j in range(len(names))], axis=1)
    r_all, r_even, r_odd = rates
    share_t, share_g, _ = apportion(ch, r_all, cell, n_cells)
    halves = [apportion(ch, r, cell, n_cells)[:2] for r in (r_even, r_odd)] if not pure else []
    X = share_t[:, col_sig] * F[ch.tw]
    Xg = (share_g[:, col_sig] * F).sum(axis=0)
    AD = share_t * D[ch.tw]
    gap_shared = ((ch.gap > 0) & (ch.gap < ch.length - 0.5))[:, None]
    A_gap = share_g * D
    bound_gap = np.where(gap_shared, np.maximum(A_gap, D - A_gap), 0.0).sum(axis=0)
    return Shares(X, Xg, AD, D, bound_gap, halves)


def add_to_grouping(tot: GroupTotals, g: str, ch: _Chip, sh: Shares, names, shapes, edges) -> None:
    """Add one chip's apportioned counters to grouping ``g``'s totals: the sums per group, the hard
    bound (windows a group shares) and the split-half estimate."""
    K = len(tot.groups)
    Gm, M, pg, pw, Tp = ch.group_matrices(g, tot._gi, K)  # type: ignore[attr-defined]
    amt = np.asarray(Gm @ sh.X)
    amt[K - 1] += sh.Xg
    A = np.asarray(M @ sh.AD)  # (P, k) per (group, window) pair
    Dp = sh.D[pw]
    shared = (Tp < ch.length[pw] - 0.5)[:, None]
    b_p = np.where(shared, np.maximum(A, Dp - A), 0.0)
    bound = np.stack([np.bincount(pg, weights=b_p[:, j], minlength=K) for j in range(len(names))], axis=1)
    bound[K - 1] += sh.bound_gap
    est = np.zeros((K, len(names)))
    if sh.halves:
        (te, ge), (to_, go) = sh.halves
        half = [np.asarray(Gm @ (st * sh.D[ch.tw])) for st in (te, to_)]
        half[0][K - 1] += (ge * sh.D).sum(axis=0)
        half[1][K - 1] += (go * sh.D).sum(axis=0)
        est = np.abs(half[0] - half[1])
    for j, name in enumerate(names):
        v = amt[:, edges[j] : edges[j + 1]].reshape((K,) + shapes[j])
        tot.sums[name] = tot.sums[name] + v if name in tot.sums else v
        tot.bound[name] = tot.bound.get(name, 0.0) + bound[:, j]
        tot.estimate[name] = tot.estimate.get(name, 0.0) + est[:, j]


def gauge_means(name, data, out) -> None:
    """Gauge (or packed field) ``name``'s time-weighted mean over each group's spans, for every grouping
    of ``out`` ({by: GroupTotals}), from the chips ``data``: into ``GroupTotals.means``."""
    for g, tot in out.items():
        K = len(tot.groups)
        num = den = None
        for ch in data:
            v = ch.values[name]
            W = len(ch.gap)
            flat = v.reshape(W, -1)
            ok = np.isfinite(flat)
            x = np.where(ok, flat, 0.0)
            gi = tot._gi[ch.ts]  # type: ignore[attr-defined]
            n = np.stack([np.bincount(gi, weights=ch.to * x[ch.tw, j], minlength=K) for j in range(flat.shape[1])], 1)
            d = np.stack([np.bincount(gi, weights=ch.to * ok[ch.tw, j], minlength=K) for j in range(flat.shape[1])], 1)
            n[K - 1] += ch.gap @ x
            d[K - 1] += ch.gap @ ok
            num = n if num is None else num + n
            den = d if den is None else den + d
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        tot.means[name] = m.reshape((K,) + data[0].values[name].shape[1:])


__all__ = ["Shares", "add_to_grouping", "apportion", "chip_shares", "gauge_means"]
