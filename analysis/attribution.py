"""Counters per layer, op and phase: each counter window's increase apportioned to the device spans
(``analysis.spans``) that overlap it.

**Rule.** On chip ``c``, a counter's increase ``D_w`` over window ``w`` (between two consecutive
samples) is shared among the spans ``i`` that overlap the window and the window's time outside
every span (the group ``(no span)``)::

    A_iw = D_w · o_iw · r_k(i) / Σ_j o_jw · r_k(j)

``o_iw`` is the span's overlap with the window (ns) and ``r_k`` the counter's rate (per ns) in the
span's *rate class* ``k``: its op class — per step for op classes that occur at least ``FREQUENT``
times per step (the layers' ops, whose work changes from step to step as the batch does), over
the whole run for the others. The rates are fitted to the windows by non-negative least squares,
``D_w ≈ Σ_k T_wk r_k`` (``T_wk``: time of class ``k`` in window ``w``), first one rate per op class
over the run, then per step for the frequent classes (over the windows that step fills at least
half of, the other classes held at their run rates), pooled over the chips that ran the same work
(the same op classes for the same time within ``SAME_WORK``). With equal rates the rule is plain time
weighting, which is also what a window gets whose fitted weights are all zero. Every window's
increase is shared out completely, so the groups always add up to the run's totals. Gauges are not
apportioned: a group's value is their time-weighted mean over the group's spans.

**Error.** A window that one group fills completely (or does not touch) is attributed exactly.
In a window that a group ``g`` shares with others, the truth lies in ``[0, D_w]``, so
``|A_g − truth_g| ≤ B_g = Σ_{shared w} max(A_gw, D_w − A_gw)`` — a hard bound, whatever the rates
(``bound`` in the result). It is loose when windows are much longer than ops (1 ms windows over
40 µs ops); the working estimate (``estimate``) is the larger of two, at most the bound: the split-half
difference between the group's attribution with rates fitted on the even windows only and on the odd
windows only, and the *spread* of the rates the windows allow (``analysis.separability``: every rate
vector that explains the windows as well as the fitted one, within the fit's misfit). The spread is
what catches op classes whose time shares move together in every window: under a closed loop every
step is alike and each 1 ms window holds ten layers of the same op sequence, so a misfit of a few per
cent moves their counts by several times themselves, while both halves of a split-half share that
collinearity and agree (a 5 s closed-loop Llama-3.1-8B run: split-half 0.1–3 %, errors −70 … +425 %,
spread 60 % … 10×). Where the rate model is rejected (plain time weighting) the estimate is the bound. On the
emulator (Llama-3-70B on 8 chips, Llama-3.1-8B on 2, 1 ms windows) the per-op-class FLOPs and HBM
bytes of the op classes that carry at least 1 % of either are within 2 % of the ground truth
(``tests/test_attribution_emulator.py``). Ops that always run next to each other in the same window
— once per step, such as the LM head and the transfer of the sampled tokens — cannot be told apart by
the windows: they may swap their work (under 1 % of the run's total there), which the hard bound
covers and op-boundary snapshots remove (where the fit is exact, the spread cannot see it).

**Exact attribution.** With counter snapshots taken at op boundaries (trigger-on-marker; the
collector format's ``snapshots`` dump), the snapshots are merged into the sample stream: every
interval then lies inside one span or between spans, so every window is filled by one group and the
attribution is exact (to the registers' resolution: one count per boundary), with ``B_g = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfonto.metrics.windows import Windows
from perfonto.ontology import kinds

from .apportion import add_to_grouping, chip_shares, gauge_means
from .ratefit import fit_rates
from .separability import class_times, conditioning, group_class_times, spread
from .spans import NO_SPAN, Spans, group_order

FREQUENT = 8  # spans per step from which an op class gets a rate per step
SAME_WORK = 0.01  # chips whose time per op class agrees to 1 % share their fitted rates
TRUST = 1e-3  # the rate model is trusted where it explains the windows to 0.1 % (relative RMS residual)
REJECT = 0.05  # ... and replaced by plain time weighting where it leaves more than 5 %


@dataclass
class GroupTotals:
    """One grouping's attributed values. ``groups``: labels (``(no span)`` last); ``time_s``: (K,)
    span time per group summed over chips (s); ``spans``: (K,) spans per group; ``sums[signal]``:
    (K, *instances) attributed counter increases summed over chips (the signal's unit); ``means[name]``:
    (K, *instances) time-weighted gauge and field means; ``bound`` / ``estimate``: {signal: (K,)} hard
    bound and estimate of the attribution error of the signal's instance total (module docstring)."""

    by: str
    groups: list[str]
    time_s: np.ndarray
    spans: np.ndarray
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    means: dict[str, np.ndarray] = field(default_factory=dict)
    bound: dict[str, np.ndarray] = field(default_factory=dict)
    estimate: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Attribution:
    """``groupings[by]``: ``GroupTotals``; ``source``: ``windows``, ``snapshots`` or
    ``snapshots+windows`` (signals the snapshots lack come from the windows); ``notes``; ``fit``: per
    counter the rate model's relative RMS residual over the windows and how it was used (``exact``:
    every window inside one span; ``fitted``: residual ≤ ``TRUST``; ``approximate``: ≤ ``REJECT``;
    ``time-weighted``: the model did not fit and plain time weighting was used)."""

    groupings: dict[str, GroupTotals]
    source: str
    chips: int
    notes: list[str] = field(default_factory=list)
    fit: dict[str, dict] = field(default_factory=dict)  # counter -> {"residual", "model"} (module docstring)

    def reliable(self, names) -> bool:
        """Whether the counters ``names`` were attributed exactly or by a rate model that fits."""
        return all(self.fit.get(n, {}).get("model") in ("exact", "fitted") for n in names if n in self.fit)


@dataclass
class _Chip:
    """One chip's windows and the (span, window, overlap) triples of its spans."""

    b: np.ndarray  # (S,) int64 sample times (ns, device clock)
    values: dict  # name -> (W, *inst) window values
    tw: np.ndarray  # (n,) window of each triple
    ts: np.ndarray  # (n,) span index (into the attributed Spans)
    to: np.ndarray  # (n,) overlap, ns
    gap: np.ndarray  # (W,) time outside every span, ns
    T: object = None  # csr (W, cells + 1): time per rate cell, last column the gap

    cache: dict = field(default_factory=dict)

    @property
    def length(self) -> np.ndarray:
        return np.diff(self.b).astype(np.float64)

    def window_matrix(self):
        """csr (W, n): sums triples into their windows."""
        from scipy import sparse

        if "w" not in self.cache:
            n = len(self.tw)
            self.cache["w"] = sparse.csr_matrix((np.ones(n), (self.tw, np.arange(n))), shape=(len(self.gap), n))
        return self.cache["w"]

    def group_matrices(self, by: str, gi_all: np.ndarray, K: int):
        """For grouping ``by`` (span group indices ``gi_all``): csr (K, n) summing triples into
        groups; the (group, window) pairs the spans touch — csr (P, n) summing triples into them,
        their group and window (P,) and time (P,) ns."""
        from scipy import sparse

        if by not in self.cache:
            n, W = len(self.tw), len(self.gap)
            gi = gi_all[self.ts]
            Gm = sparse.csr_matrix((np.ones(n), (gi, np.arange(n))), shape=(K, n))
            pairs, row = np.unique(gi * W + self.tw, return_inverse=True)
            M = sparse.csr_matrix((np.ones(n), (row.reshape(-1), np.arange(n))), shape=(len(pairs), n))
            self.cache[by] = (Gm, M, pairs // W, pairs % W, np.asarray(M @ self.to))
        return self.cache[by]


def overlaps(b: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(span, window, overlap ns) of every span ``[start, end)`` with every window ``[b[w], b[w+1])``
    it overlaps (int64 ns; spans outside ``[b[0], b[-1]]`` contribute nothing)."""
    s = np.clip(start, b[0], b[-1])
    e = np.clip(end, b[0], b[-1])
    keep = np.flatnonzero(e > s)
    s, e = s[keep], e[keep]
    w0 = np.searchsorted(b, s, side="right") - 1
    w1 = np.searchsorted(b, e, side="left") - 1
    n = w1 - w0 + 1
    span = np.repeat(keep, n)
    win = np.repeat(w0, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    lo = np.maximum(np.repeat(s, n), b[win])
    hi = np.minimum(np.repeat(e, n), b[win + 1])
    ok = hi > lo
    return span[ok], win[ok], (hi - lo)[ok].astype(np.float64)


def _cells(spans: Spans) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Rate cell of every span; the op class and step of every cell (−1: one rate over the run), the
    gap cell last; the number of span cells."""
    classes, cls = np.unique(spans.name, return_inverse=True)
    cls = cls.reshape(-1)
    seg = np.full(len(spans), -1, np.int64)
    if len(spans) and (spans.step >= 0).any():
        key = (spans.chip * (int(spans.step.max()) + 2) + spans.step) * len(classes) + cls
        uniq, counts = np.unique(key[spans.step >= 0], return_counts=True)
        of = uniq % len(classes)
        per_step = np.array([np.median(counts[of == k]) if (of == k).any() else 0.0 for k in range(len(classes))])
        seg = np.where((per_step >= FREQUENT)[cls] & (spans.step >= 0), spans.step, -1)
    if not len(spans):
        return np.zeros(0, np.int64), np.array([0]), np.array([-1]), 0
    cell_key, cell = np.unique(np.stack([cls, seg], axis=1), axis=0, return_inverse=True)
    n = len(cell_key)
    return cell.reshape(-1), np.r_[cell_key[:, 0], len(classes)], np.r_[cell_key[:, 1], -1], n


def _design(ch: _Chip, cell: np.ndarray, n_cells: int):
    from scipy import sparse

    W = len(ch.gap)
    rows = np.r_[ch.tw, np.arange(W)]
    cols = np.r_[cell[ch.ts], np.full(W, n_cells)]
    return sparse.csr_matrix((np.r_[ch.to, ch.gap], (rows, cols)), shape=(W, n_cells + 1))


def _clusters(chips: list[_Chip], cell_class: np.ndarray) -> list[list[int]]:
    """Chips that ran the same work: the same time per op class within ``SAME_WORK``."""
    vec = [
        np.bincount(cell_class, weights=np.asarray(ch.T.sum(axis=0)).ravel(), minlength=cell_class.max() + 1)
        for ch in chips
    ]
    out: list[list[int]] = []
    for i, v in enumerate(vec):
        for grp in out:
            ref = vec[grp[0]]
            scale = np.maximum(np.maximum(ref, v), 1e-3 * max(ref.sum(), 1.0))
            if np.all(np.abs(v - ref) <= SAME_WORK * scale):
                grp.append(i)
                break
        else:
            out.append([i])
    return out


def _chip_windows(dump, w: Windows) -> list[tuple[int, np.ndarray, dict]]:
    out = []
    for ci, c in enumerate(dump.chips):
        vals = {n: v[:, ci] for n, v in w.values.items()}
        out.append((int(c), dump.timestamps_ns[:, ci].astype(np.int64), vals))
    return out


def attribute(gen, dump, w: Windows, spans: Spans, by=("op",), snapshots=None) -> Attribution:
    """Attribute the windows ``w`` of ``dump`` (``metrics.windows.prepare``) to ``spans`` for every
    grouping in ``by`` (``analysis.spans.BY``). ``snapshots``: per chip ``(chip, times, values)`` of
    op-boundary snapshots merged into the sample stream (``analysis.snapshots.merged_windows``);
    their signals are attributed from them (exactly), the others from ``w``."""
    notes: list[str] = []
    fit: dict[str, dict] = {}
    counters = {n for n, s in gen.signals.items() if kinds.of(s).run == "sum"}
    streams = [("windows", _chip_windows(dump, w))]
    if snapshots:
        streams.insert(0, ("snapshots", snapshots))
    done: set[str] = set()
    parts: list[dict[str, GroupTotals]] = []
    sources = []
    for source, chips in streams:
        names = [n for n in chips[0][2] if n not in done] if chips else []
        if not names:
            continue
        parts.append(_attribute_stream(chips, spans, by, names, counters, fit))
        done |= set(names)
        sources.append(source)
    merged = {}
    for b in by:
        base = parts[-1][b]
        for p in parts[:-1]:
            g = p[b]
            idx = [g.groups.index(x) if x in g.groups else None for x in base.groups]
            for d_name in ("sums", "means", "bound", "estimate"):
                for k, v in getattr(g, d_name).items():
                    out = np.zeros((len(base.groups),) + v.shape[1:])
                    for i, j in enumerate(idx):
                        if j is not None:
                            out[i] = v[j]
                    getattr(base, d_name)[k] = out
        merged[b] = base
    return Attribution(merged, "+".join(sources), len(dump.chips), notes, fit)


def _attribute_stream(chips, spans: Spans, by, names, counters, fit) -> dict[str, GroupTotals]:
    chip_of = {c: i for i, (c, _, _) in enumerate(chips)}
    on = np.isin(spans.chip, list(chip_of))
    sp = spans.take(on)
    cell, cell_class, cell_seg, n_cells = _cells(sp)
    data: list[_Chip] = []
    for c, b, vals in chips:
        sel = np.flatnonzero(sp.chip == c)
        s_i, w_i, o = overlaps(b, sp.start[sel], sp.end[sel])
        W = len(b) - 1
        length = np.diff(b).astype(np.float64)
        gap = np.maximum(length - np.bincount(w_i, weights=o, minlength=W), 0.0)
        ch = _Chip(b, vals, w_i, sel[s_i], o, gap)
        ch.T = _design(ch, cell, n_cells)
        data.append(ch)
    pure = all(_pure(ch) for ch in data)
    clusters = _clusters(data, cell_class) if not pure else [list(range(len(data)))]
    labels = {g: sp.labels(g) for g in by}
    orders = {g: group_order(g, list(labels[g]) + [NO_SPAN]) for g in by}
    out = {}
    for g in by:
        K = len(orders[g])
        idx = {x: i for i, x in enumerate(orders[g])}
        gi = np.array([idx[x] for x in labels[g]], np.int64) if len(sp) else np.zeros(0, np.int64)
        time = np.zeros(K)
        for ch in data:
            time += np.bincount(gi[ch.ts], weights=ch.to, minlength=K)
            time[K - 1] += ch.gap.sum()
        counted = np.unique(np.concatenate([ch.ts for ch in data])) if data else np.zeros(0, np.int64)
        out[g] = GroupTotals(g, orders[g], time * 1e-9, np.bincount(gi[counted], minlength=K).astype(np.int64))
        out[g]._gi = gi  # type: ignore[attr-defined]
    for name in names:
        if name not in counters:
            gauge_means(name, data, out)
    counted = [n for n in names if n in counters]
    if counted:
        fit.update(_counters(counted, data, clusters, cell, cell_class, cell_seg, n_cells, out, pure))
    for g in out.values():
        del g._gi  # type: ignore[attr-defined]
    return out


def _pure(ch: _Chip) -> bool:
    """Every window lies inside one span or outside all spans."""
    per_w = np.bincount(ch.tw, minlength=len(ch.gap)) + (ch.gap > 0)
    return bool((per_w <= 1).all())


def _counters(names, data, clusters, cell, cell_class, cell_seg, n_cells, out, pure) -> dict[str, dict]:
    """Fit, apportion and sum every counter in ``names`` into every grouping of ``out``; the error
    estimate is the larger of the split-half difference (rates fitted on the even and on the odd
    windows alone) and the spread of the rates the windows allow (``analysis.separability``), at most
    the hard bound. Returns the fit's quality per counter (``Attribution.fit``)."""
    rates_of, resid, conds = _fit_cluster_rates(names, data, clusters, cell_class, cell_seg, n_cells, pure)
    shapes = [data[0].values[n].shape[1:] for n in names]
    widths = [int(np.prod(sh)) for sh in shapes]
    col_sig = np.repeat(np.arange(len(names)), widths)
    edges = np.r_[0, np.cumsum(widths)]
    for ci, ch in enumerate(data):
        sh = chip_shares(ch, names, rates_of[ci], cell, n_cells, col_sig, edges, pure)
        for g, tot in out.items():
            add_to_grouping(tot, g, ch, sh, names, shapes, edges)
    for tot in out.values() if not pure else ():  # the spread of the rates the windows allow (analysis.separability)
        gi, K = tot._gi, len(tot.groups)  # type: ignore[attr-defined]
        S = sum(
            spread(c, group_class_times([data[i] for i in grp], gi, K, cell, cell_class), len(names))
            for grp, c in conds
        )
        for j, name in enumerate(names):
            tot.estimate[name] = np.minimum(tot.bound[name], np.maximum(tot.estimate[name], S[:, j]))

    def model(x):
        return "exact" if pure else ("fitted" if x <= TRUST else "approximate" if x <= REJECT else "time-weighted")

    return {n: {"residual": float(x), "model": model(x)} for n, x in zip(names, resid)}


def _fit_cluster_rates(names, data, clusters, cell_class, cell_seg, n_cells, pure) -> tuple[dict, np.ndarray, list]:
    """Per chip, the rates (all windows, even windows, odd windows) fitted on its cluster of chips
    (all ones when every window is pure); per counter the largest relative residual of a fit; per
    cluster its chips and the conditioning of its fit (``analysis.separability``; a counter whose
    model is rejected gets an unbounded spread: plain time weighting, only the hard bound holds)."""
    from scipy import sparse

    rates_of = {}
    resid = np.zeros(len(names))
    conds = []
    for grp in clusters:
        if pure:
            r = (np.ones((n_cells + 1, len(names))),) * 3
        else:
            T = sparse.vstack([data[i].T for i in grp]).tocsr()
            D = np.stack([np.concatenate([_total(data[i].values[n]) for i in grp]) for n in names], axis=1)
            odd = (np.concatenate([np.arange(len(data[i].gap)) for i in grp]) % 2 == 1)[:, None]
            r = [fit_rates(T, x, cell_class, cell_seg) for x in (D, np.where(odd, np.nan, D), np.where(odd, D, np.nan))]
            ok = np.isfinite(D)
            pred = T @ r[0]
            err = np.where(ok, D - pred, 0.0)
            rel = np.sqrt((err**2).sum(axis=0) / np.maximum((np.where(ok, D, 0.0) ** 2).sum(axis=0), 1e-300))
            resid = np.maximum(resid, rel)
            bad = rel > REJECT  # the model does not hold: plain time weighting
            cond = conditioning(class_times(T, cell_class), D, np.where(bad[None, :], np.inf, pred))
            conds.append((grp, cond))
            r = tuple(np.where(bad[None, :], 1.0, x) for x in r)
        for i in grp:
            rates_of[i] = r
    return rates_of, resid, conds


def _total(v: np.ndarray) -> np.ndarray:
    """(W,) instance total of window values (NaN where any instance is null)."""
    return v.reshape(v.shape[0], -1).sum(axis=1)


__all__ = ["Attribution", "FREQUENT", "GroupTotals", "attribute", "overlaps"]
