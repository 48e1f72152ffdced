"""A run's counter samples and device spans on the host timeline, each with an error bound, through
the piecewise clock fits of ``analysis.clock_fit`` (``perfonto align`` and ``perfonto timeline``).

- Counter samples (``counters.parquet``): each chip's samples in row order are one time-ordered
  sequence, so the clock epoch of a sample follows from the order (``ChipClock.map(ordered=True)``).
- Device spans (``trace.parquet``, clock ``device``): mapped with their step's submission as the host
  hint (a span cannot start before its step was submitted), start and end apart.
- Submit bracket of step ``s``: from the start of its host ``submit`` slice to the last end of any host
  slice of that step (``api``, ``submit``, ``dma``, ``step``: the host has the step's results then).
  A device span is *outside its submit bracket* when it starts before the bracket by more than its
  error bound or ends after it by more than its error bound (work that cannot have been caused by the
  submission, or a wrong alignment): flagged, never moved. Spans of a step without a submit slice are
  not checked.
- Unmappable stamps (between a reset and the next sync read, or in two epochs at once) get a NaN host
  time and bound and the reason (``clock_fit.REASONS``), never a guess.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .clock_fit import REASONS, ChipClock
from .crosschip import _true_host, text
from .run_files import Run, read_parquet

HOST_KINDS = ("api", "submit", "dma", "step")


def map_counters(run: Run, clocks: dict[int, ChipClock]) -> pa.Table:
    """``chip``, ``timestamp_ns`` (device), ``host_ns``, ``host_err_ns`` (float64 ns, NaN when
    unmappable) and ``unmappable`` (the reason, null when mapped) of every counter sample."""
    t = read_parquet(run.file("counters.parquet"), columns=["chip", "timestamp_ns"])
    chip = t.column("chip").to_numpy().astype(np.int64)
    host, err, why = _map_all(clocks, chip, t.column("timestamp_ns").to_numpy(), ordered=True)
    return (
        t.append_column("host_ns", pa.array(host))
        .append_column("host_err_ns", pa.array(err))
        .append_column("unmappable", _reasons(why))
    )


def _map_all(clocks, chip, device_ns, ordered=False, hint=None):
    host = np.full(len(chip), np.nan)
    err = np.full(len(chip), np.nan)
    why = np.full(len(chip), 4, np.int8)  # 4: a chip without sync reads
    for c, clk in clocks.items():
        sel = np.flatnonzero(chip == c)
        h, e, w = clk.map(device_ns[sel], ordered=ordered, hint_ns=None if hint is None else hint[sel])
        host[sel], err[sel], why[sel] = h, e, w
    return host, err, why


def _reasons(why: np.ndarray) -> pa.Array:
    text_of = {**REASONS, 4: "no_sync: the chip has no sync reads"}
    return pa.array([text_of[int(w)] or None for w in why], pa.string())


def map_trace(run: Run, clocks: dict[int, ChipClock]) -> pa.Table:
    """``trace.parquet`` with ``host_start_ns``, ``host_end_ns``, ``host_start_err_ns``,
    ``host_end_err_ns`` (float64 ns; host events as they are, with bound 0), ``unmappable`` (reason or
    null) and ``outside_submit`` (bool; see the module docstring)."""
    t = read_parquet(run.file("trace.parquet"))
    dev = text(t, "clock") == "device"
    kind = text(t, "kind")
    chip = t.column("chip").to_numpy().astype(np.int64)
    step = t.column("step").to_numpy().astype(np.int64)
    s = t.column("start_ns").to_numpy()
    e = t.column("end_ns").to_numpy()
    lo, hi = _brackets(kind, ~dev, step, s, e)
    hs, he = s.astype(np.float64), e.astype(np.float64)
    es, ee = np.zeros(len(s)), np.zeros(len(s))
    why = np.zeros(len(s), np.int8)
    i = np.flatnonzero(dev)
    hint = np.where(np.isfinite(lo[i]), lo[i], np.nan)  # no submission: no hint, an ambiguous stamp stays so
    hs[i], es[i], ws = _map_all(clocks, chip[i], s[i], hint=hint)
    he[i], ee[i], we = _map_all(clocks, chip[i], e[i], hint=hint)
    why[i] = np.where(ws != 0, ws, we)
    outside = dev & (why == 0) & ((hs + es < lo) | (he - ee > hi))
    for name, col in (("host_start_ns", hs), ("host_end_ns", he), ("host_start_err_ns", es), ("host_end_err_ns", ee)):
        t = t.append_column(name, pa.array(col))
    return t.append_column("unmappable", _reasons(why)).append_column("outside_submit", pa.array(outside))


def _brackets(kind, host, step, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Per trace row, its step's submit bracket (host ns; −inf…inf where the step has no submit slice)."""
    lo = np.full(len(kind), -np.inf)
    hi = np.full(len(kind), np.inf)
    sub = np.flatnonzero(host & (kind == "submit"))
    if not len(sub):
        return lo, hi
    first = {}
    for j in sub:
        first[int(step[j])] = min(first.get(int(step[j]), np.inf), float(start[j]))
    last: dict[int, float] = {}
    for j in np.flatnonzero(host & np.isin(kind, HOST_KINDS)):
        last[int(step[j])] = max(last.get(int(step[j]), -np.inf), float(end[j]))
    for k, v in first.items():
        sel = step == k
        lo[sel], hi[sel] = v, last[k]
    return lo, hi


def _stats(x: np.ndarray) -> dict:
    x = x[np.isfinite(x)]
    if not len(x):
        return {}
    return {"median": float(np.median(x)), "p99": float(np.quantile(x, 0.99)), "max": float(x.max())}


def alignment_summary(run: Run, clocks: dict[int, ChipClock], counters: pa.Table, trace: pa.Table | None) -> dict:
    """The ``alignment`` section of ``alignment.json``: per chip its epochs (``segments``: offset,
    drift, whether the drift was fitted, reads, bound at the centre), ``resets``, the unmappable
    stamps by reason and the error bounds (ns) of the mapped ones; device spans outside their submit
    bracket (count and the first 20); with a ground truth of the clocks, the error against it and the
    share of stamps within their bound. Keeps the keys of ``crosschip.alignment_errors``."""
    chip = counters.column("chip").to_numpy().astype(np.int64)
    ts = counters.column("timestamp_ns").to_numpy()
    host, err = counters.column("host_ns").to_numpy(), counters.column("host_err_ns").to_numpy()
    why = counters.column("unmappable").to_pylist()
    if trace is not None:
        dev = text(trace, "clock") == "device"
        tc = trace.column("chip").to_numpy().astype(np.int64)[dev]
        chip = np.concatenate([chip, tc, tc])
        ts = np.concatenate([ts, *(trace.column(k).to_numpy()[dev] for k in ("start_ns", "end_ns"))])
        host = np.concatenate([host, *(trace.column(k).to_numpy()[dev] for k in ("host_start_ns", "host_end_ns"))])
        err = np.concatenate(
            [err, *(trace.column(k).to_numpy()[dev] for k in ("host_start_err_ns", "host_end_err_ns"))]
        )
        tw = [w for w, d in zip(trace.column("unmappable").to_pylist(), dev) if d]
        why = why + tw + tw
    why_arr = np.array([w or "" for w in why], dtype=object)
    gt = run.ground_truth if run.ground_truth and "clock_offsets_ns" in run.ground_truth else None
    e = np.abs(host - _true_host(gt, chip, ts)) if gt else None
    out: dict = {"chips": [], "samples": int(len(ts)), "unmappable": int(np.sum(why_arr != ""))}
    out["bound_ns"] = _stats(err)
    for c, clk in sorted(clocks.items()):
        sel = chip == c
        out["chips"].append(_chip_row(c, clk, sel, why_arr, err, e, gt))
    if e is not None:
        ok = np.isfinite(e)
        out["error_ns"] = _stats(e)
        out["within_bound"] = float(np.mean(e[ok] <= err[ok])) if ok.any() else None
    if trace is not None:
        out["outside_submit"] = _outside(trace)
    return out


def _chip_row(c, clk: ChipClock, sel, why_arr, err, e, gt) -> dict:
    reasons: dict = {}
    for w in why_arr[sel]:
        if w:
            key = w.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
    row = {
        "chip": c,
        "offset_ns": clk.offset_ns,
        "drift_ppm": clk.drift_ppm,
        "reads_kept": clk.kept,
        "reads": clk.total,
        "residual_ns": clk.residual_ns,
        "segments": [s.as_dict() for s in clk.segments],
        "resets": list(clk.resets),
        "unmappable": reasons,
        "bound_ns": _stats(err[sel]),
    }
    if gt is not None and c < len(gt["clock_offsets_ns"]):
        row["true_offset_ns"] = float(gt["clock_offsets_ns"][c])
        row["true_drift_ppm"] = float(gt["clock_drifts_ppm"][c])
        row["error_ns"] = _stats(e[sel])
    return row


def _outside(trace: pa.Table) -> dict:
    flag = trace.column("outside_submit").to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(flag)
    kind, name = text(trace, "kind"), text(trace, "name")
    col = {k: trace.column(k).to_numpy() for k in ("chip", "step", "host_start_ns", "host_end_ns")}
    return {
        "count": int(len(rows)),
        "spans": [
            {
                "row": int(i),
                "chip": int(col["chip"][i]),
                "step": int(col["step"][i]),
                "kind": str(kind[i]),
                "name": str(name[i]),
                "host_start_ns": float(col["host_start_ns"][i]),
                "host_end_ns": float(col["host_end_ns"][i]),
            }
            for i in rows[:20]
        ],
    }


__all__ = ["alignment_summary", "map_counters", "map_trace"]
