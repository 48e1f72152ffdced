"""The per-chip and server levels of ``analysis.engine``'s pass, from the sums it carried: the metrics in
classes by the signals with null windows they read; per chip, each class evaluated over its run-level
sums; at server level over the chips combined — for a class whose signals were null in some window, over
the windows valid on every chip (one host: carried in the pass; a fleet: ``_second_pass`` reads again
only the pieces that hold such windows) — and the max/min rollups from the carried extremes.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from perfonto.ontology import kinds
from perfonto.capture.pieces import iter_chunks
from perfonto.metrics.levels import group_inputs, group_scale, leader_counts
from perfonto.metrics.bridge import totals
from perfonto.metrics.windows import prepare

from .evaluate import Evaluation
from .level_sums import ChipSums, combine, masked_sums, run_values

if TYPE_CHECKING:
    from .engine import _Pass


def _levels(graph, evaluator, st: _Pass, chunk_rows, progress) -> Evaluation:
    """Per-chip and server-level values from the carried sums (and a second pass where needed): the
    metrics in classes by the signals with null windows they read (``_classes``); a class whose
    signals were null somewhere takes its server level over the windows valid on every chip
    (``_class_masks``: carried in the first pass for one host, else ``_second_pass``)."""
    sums, plan, C = st.sums, st.plan, st.C
    deps = ChipSums(graph).deps
    keys = _classes(graph, deps, sums)
    masks = _class_masks(st, keys, deps)
    need = {k: sorted(set().union(*[deps[m] for m in keys[k]])) for k in masks}
    if st.server is not None:  # one host: carried in the first pass
        srv_sums = {k: st.server.sums[k] for k in masks}
    else:
        srv_sums = _second_pass(graph, st, masks, need, chunk_rows, progress) if masks else {}
    total_time = float(st.chip_time.mean()) if C else 0.0
    per_chip: dict[str, np.ndarray] = {}
    server: dict[str, np.ndarray] = {}
    coverage: dict[str, float] = {}
    counted: dict[str, np.ndarray] = {}  # per chip, the most of each leader-counted amount any class counted
    for key, names in keys.items():
        vals, dt = chip_values(sums, key)
        for n, v in vals.items():
            if kinds.leader_counted(graph.generation, n):
                counted[n] = v if n not in counted else np.fmax(counted[n], v)
        per_chip.update(_chip_level(graph, evaluator, names, vals, dt, C))
        if key in srv_sums:
            vals, dt = run_values(graph.generation, *srv_sums[key]), srv_sums[key][1]
        values, kept = _server_level(graph, evaluator, names, vals, dt, C)
        for n in names:
            server[n] = values[n]
            coverage[n] = kept / total_time if total_time > 0 else 0.0
    _extremes(st, per_chip, server, coverage)
    quiet = leader_counts(graph, counted, deps)  # any class's count: one class's null windows hide no leader
    chips = np.concatenate([plan.chip_numbers[h] for h in plan.groups]) if C else np.zeros(0, np.int64)
    hosts = (
        None
        if list(plan.groups) == [None]
        else np.array([h for h, c in plan.chips.items() for _ in range(c)], dtype=object)
    )
    return Evaluation(None, {}, per_chip, server, chips, st.nulls, coverage, hosts, quiet=quiet)


def _classes(graph, deps: dict, sums: list[ChipSums]) -> dict[frozenset, list[str]]:
    """The metrics by class: the signals with a null window somewhere (on any host) that each reads."""
    dirty = frozenset().union(*[s.dirty for s in sums]) if sums else frozenset()
    keys: dict[frozenset, list[str]] = {}
    for m in graph.metrics:
        keys.setdefault(frozenset(deps[m] & dirty), []).append(m)
    return keys


def _class_masks(st: _Pass, keys: dict[frozenset, list[str]], deps: dict) -> dict[frozenset, np.ndarray]:
    """Per class with a window null on some chip: the windows valid for its signals on every chip (a bridged
    run of missing samples that a null window cuts left out whole, ``engine_bridge.Held.whole_runs``)."""
    masks = {}
    for key in keys:
        bad = np.zeros(max(st.plan.n_grid - 1, 0), bool)
        for s in key:
            if s in st.bad_any:
                bad |= st.bad_any[s]
        if bad.any():
            masks[key] = ~st.held.whole_runs(bad, set().union(*[deps[m] for m in keys[key]]))
    return masks


def _chip_level(graph, evaluator, names: list[str], vals: dict, dt: np.ndarray, C: int) -> dict[str, np.ndarray]:
    """A class's per-chip values from each chip's run-level inputs ``vals`` over ``dt`` s; NaN on a chip
    without a valid window (nothing to report, not 0)."""
    out = evaluator.evaluate(
        with_nan_inputs(graph.generation, evaluator, {n: v[None] for n, v in vals.items()}, C), dt[None], 1.0
    )
    per_chip = {}
    for n in names:
        v = np.array(out[n][0], dtype=np.float64)
        v[dt <= 0] = np.nan  # no valid window on that chip: nothing to report, not 0
        per_chip[n] = v
    return per_chip


def _server_level(graph, evaluator, names: list[str], vals: dict, dt: np.ndarray, C: int):
    """A class's server-level values from per-chip run sums ``vals`` over ``dt`` s, combined over the
    ``C`` chips; a metric with a group rule (a per-chip time over a leader count) over the groups'
    times. Returns (metric → value, NaN when no time was kept; the kept time in s)."""
    gen = graph.generation
    rolled, interval, _ = combine(gen, vals, dt, np.zeros(C, np.int64), 1)
    out = evaluator.evaluate(
        with_nan_inputs(gen, evaluator, {n: v[None] for n, v in rolled.items()}, 1),
        interval.reshape(1, 1),
        float(C),
    )
    if any(graph.metrics[n].group_rule for n in names):  # a per-chip time over a leader count: the groups' times
        grp = group_inputs(gen, rolled, group_scale(gen, vals, np.zeros(C, np.int64), 1))
        out_grp = evaluator.evaluate(
            with_nan_inputs(gen, evaluator, {n: v[None] for n, v in grp.items()}, 1),
            interval.reshape(1, 1),
            float(C),
        )
        out = {n: (out_grp[n] if graph.metrics[n].group_rule else v) for n, v in out.items()}
    kept = float(interval[0]) if C else 0.0
    values = {
        n: np.full_like(np.asarray(out[n][0, 0], dtype=np.float64), np.nan) if kept <= 0 else out[n][0, 0]
        for n in names
    }
    return values, kept


def _extremes(st: _Pass, per_chip: dict, server: dict, coverage: dict) -> None:
    """The max/min rollup metrics: per chip the extremes carried in the pass, the server's over the
    chips (NaN where every chip's is)."""
    for n, how in st.rollup.items():
        per_chip[n] = st.extremes[n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            server[n] = (np.nanmax if how == "max" else np.nanmin)(st.extremes[n], axis=0)
        coverage[n] = 1.0


def with_nan_inputs(gen, evaluator, inputs: dict[str, np.ndarray], C: int) -> dict[str, np.ndarray]:
    """``inputs`` plus NaN arrays (1, C, …) for the evaluator inputs they lack (the metrics evaluated
    from them do not read those)."""
    out = dict(inputs)
    for name in getattr(evaluator, "INPUTS", ()):
        if name not in out:
            axes = gen.fields[name].axes if name in gen.fields else gen.signals[name].axes
            out[name] = np.full((1, C) + tuple(s for _, s in axes), np.nan)
    return out


def chip_values(sums: list[ChipSums], key: frozenset) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-chip run-level values (all chips, host by host) of the metrics of global class ``key``."""
    parts, dts = [], []
    for s in sums:
        k = frozenset(key & s.dirty)
        vals, dt = s.run_values(k)
        parts.append(vals)
        dts.append(dt)
    names = set(parts[0]).intersection(*parts[1:]) if parts else set()
    return {n: np.concatenate([p[n] for p in parts]) for n in names}, np.concatenate(dts)


def _second_pass(graph, st: _Pass, masks: dict[frozenset, np.ndarray], need: dict, chunk_rows, progress) -> dict:
    """Per-chip sums of the classes in ``masks`` (of the signals in ``need``) over the windows valid on
    every chip: a clean piece none of whose windows is masked adds its sums from the first pass; the
    others — pieces with a null, or holding a window null on another host — are read again."""
    gen, plan, C = graph.generation, st.plan, st.C
    acc: dict[frozenset, tuple[dict, np.ndarray]] = {}

    def slot(key, names):
        if key not in acc:
            acc[key] = ({n: np.zeros((C,) + _shape(gen, n)) for n in names}, np.zeros(C))
        return acc[key]

    again: dict[tuple[int, int], list[frozenset]] = {}  # piece -> the classes it is read again for
    for (group, first), (full, dt) in st.clean.items():
        step_w = _piece_windows(st, group, first, chunk_rows)
        c0, c1 = int(st.offsets[group]), int(st.offsets[group + 1])
        for key, good in masks.items():
            if good[first : first + step_w].all():
                s, d = slot(key, need[key])
                for n in need[key]:
                    s[n][c0:c1] += full[n]
                d[c0:c1] += dt
            else:
                again.setdefault((group, first), []).append(key)
    for piece in st.dirty_pieces:
        again[piece] = list(masks)

    def select(group: int, first: int) -> bool:
        return (group, first) in again

    done, total = 0, len(again)
    for ch in iter_chunks(plan, [n for n, _ in st.layout], chunk_rows, select=select):
        st.stats["read again"] += 1
        w = totals(st.held.windows(ch.group, ch.first, prepare(ch.dump, gen)))  # bridged as in the pass
        Wc, Cc = w.interval.shape
        c0 = int(st.offsets[ch.group])
        for key in again[(ch.group, ch.first)]:
            good = masks[key]
            mask = np.broadcast_to(good[ch.first : ch.first + Wc, None], (Wc, Cc))
            s, dt = masked_sums(w, gen, need[key], mask)
            a, d = slot(key, need[key])
            for n, v in s.items():
                a[n][c0 : c0 + Cc] += v
            d[c0 : c0 + Cc] += dt
        done += 1
        if progress:
            progress("server level: pieces with windows null on some chip, read again", done, total)
    return acc


def _shape(gen, name: str) -> tuple[int, ...]:
    axes = gen.fields[name].axes if name in gen.fields else gen.signals[name].axes
    return tuple(s for _, s in axes)


def _piece_windows(st: _Pass, group: int, first: int, chunk_rows: int) -> int:
    """Windows of the piece of host ``group`` that starts at grid point ``first``."""
    C = int(st.offsets[group + 1] - st.offsets[group])
    step = max(1, chunk_rows // max(C, 1))
    return min(step, st.plan.n_grid - 1 - first)
