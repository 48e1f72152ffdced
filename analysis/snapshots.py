"""Op-boundary counter snapshots (the collector format's ``snapshots`` dump) merged into the sample
stream, for exact attribution (``analysis.attribution``).

Hardware with trigger-on-marker reads the counters when the runtime writes a marker — at the start
and end of every op — as well as on its sampling timer. Such a dump is a counter dump in the
collector format (wide or long; a ``sample`` column numbers each chip's snapshots, since they are
not on a grid), stamped on the chip's device clock like the trace's spans, so a snapshot and the
span boundary it was taken at carry the same timestamp. Per chip, the snapshots inside the span of
the regular samples are merged with them (at equal timestamps the snapshot is kept) and the window
rules (``metrics.windows``: wraps, resets, sentinels, scales) turn the merged stream into
intervals that each lie inside one span or between spans.
"""

from __future__ import annotations

import numpy as np

from perfonto.capture.dump import CounterDump, read_counters
from perfonto.metrics.windows import prepare

from .spans import AttributionError


def read_snapshots(source, gen):
    """The snapshot dump (a path, folder, glob or table) as a ``CounterDump``.

    Raises:
        DumpError: the dump cannot be read (see ``capture.dump.read_counters``).
    """
    return read_counters(source, gen)


def merged_windows(snap: CounterDump, dump: CounterDump, gen) -> list[tuple[int, np.ndarray, dict]]:
    """Per chip of ``dump``: ``(chip, times, values)`` — the merged sample times (S,) int64 ns and
    the window values {signal: (S − 1, *instances)} of the signals both dumps hold.

    Raises:
        AttributionError: the dumps share no signal, or name hosts (snapshots are matched by chip).
    """
    if snap.hosts is not None or dump.hosts is not None:
        raise AttributionError(
            f"{snap.path}: snapshots are matched to the counters by chip; a dump naming hosts is not supported"
        )
    names = [n for n in gen.signals if n in snap.raw and n in dump.raw]
    if not names:
        raise AttributionError(f"{snap.path}: the snapshots hold none of the counter dump's signals")
    s_col = {int(c): i for i, c in enumerate(snap.chips)}
    out = []
    for ci, c in enumerate(dump.chips):
        have = dump.present[:, ci]
        t_d = dump.timestamps_ns[have, ci]
        rows_d = {n: dump.raw[n][have, ci] for n in names}
        miss_d = {n: dump.missing[n][have, ci] for n in names if n in dump.missing}
        if int(c) in s_col:
            j = s_col[int(c)]
            sel = snap.present[:, j] & (snap.timestamps_ns[:, j] >= t_d[0]) & (snap.timestamps_ns[:, j] <= t_d[-1])
            t_s = snap.timestamps_ns[sel, j]
            keep_d = ~np.isin(t_d, t_s)  # a snapshot wins over a sample at the same time
            t = np.concatenate([t_d[keep_d], t_s])
            order = np.argsort(t, kind="stable")
            t = t[order]
            raw = {n: np.concatenate([rows_d[n][keep_d], snap.raw[n][sel, j]])[order] for n in names}
            missing = {}
            for n in names:
                md = miss_d.get(n, np.zeros(rows_d[n].shape, bool))[keep_d]
                ms = (
                    snap.missing[n][sel, j]
                    if n in snap.missing
                    else np.zeros((int(sel.sum()),) + rows_d[n].shape[1:], bool)
                )
                if md.any() or ms.any():
                    missing[n] = np.concatenate([md, ms])[order][:, None]
        else:
            t, raw, missing = t_d, rows_d, {n: v[:, None] for n, v in miss_d.items()}
        one = CounterDump(
            snap.path,
            np.array([int(c)]),
            t[:, None],
            {n: v[:, None] for n, v in raw.items()},
            np.ones((len(t), 1), bool),
            missing,
            {},
            None,
            tuple(n for n in gen.signals if n not in raw),
        )
        w = prepare(one, gen)
        out.append((int(c), t.astype(np.int64), {n: v[:, 0] for n, v in w.values.items()}))
    return out


__all__ = ["merged_windows", "read_snapshots"]
