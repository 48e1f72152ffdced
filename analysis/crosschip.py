"""Cross-chip analysis of a run on the host timeline: clock alignment, collective waits and the
straggler, per-step skew, load imbalance, and PCIe / link saturation.

A run folder (``RUN``, written by ``emulator.run`` or ``perfonto run``) holds ``sync.parquet`` (the
driver's host/device/host clock reads), ``trace.parquet`` (host events on the host clock, device
events on each chip's clock) and ``counters.parquet`` (samples stamped by each chip's clock).

- Alignment (``fit_clocks``): one piecewise fit per chip (``analysis.clock_fit``: an epoch per clock
  reset); a device timestamp maps to host time as ``(device − offset) / (1 + drift)`` of its epoch.
  With the emulator's ground truth, the error of every mapped counter sample and device event is
  reported (``alignment_errors``).
- Collective wait (op-detail traces): a chip's wait in one collective call is the time from its
  arrival (the start of its collective span, on the host timeline) to the last chip's arrival, as
  NCCL's profiler and Nsight Systems define it; it is blamed on the last-arriving chip. Waits are
  counted within host time [0, duration]. The *straggler* is the chip blamed for most of the wait,
  named when the total wait is at least ``STRAGGLER_MIN_WAIT`` of the chips' time and that chip
  carries more than half of it. Step-detail traces carry each chip's own count of cycles waited
  per step instead; the chip that waited least in a step is blamed for the others' wait.
- Per-step skew: the largest spread of the chips' arrival times over the step's collectives, and the
  spread of the chips' forward-pass start times.
- Load imbalance and PCIe / link saturation from the counters: ``analysis.chip_load``.
"""

from __future__ import annotations


import numpy as np
import pyarrow as pa

from perfonto.capture.dump_grid import ClockReset

from .align import ClockFit
from .chip_load import counter_analysis
from .run_files import ChipsMissing, Run, RunError, read_parquet

STRAGGLER_MIN_WAIT = 0.005


def fit_clocks(run: Run, processing_ns: float = 0.0) -> dict[int, ClockFit]:
    """Every chip's clock from its sync reads: piecewise at clock resets, with error bounds
    (``analysis.clock_fit.ChipClock``, which keeps ``ClockFit``'s attributes)."""
    from .clock_fit import clocks_of_table

    path = run.file("sync.parquet")
    return clocks_of_table(read_parquet(path), processing_ns, where=str(path))  # type: ignore[return-value]


def to_host(fits: dict[int, ClockFit], chip: np.ndarray, device_ns: np.ndarray) -> np.ndarray:
    """Host time (ns, float64) of device timestamps of the given chips."""
    out = np.full(len(device_ns), np.nan)
    for c, f in fits.items():
        sel = chip == c
        out[sel] = f.to_host(device_ns[sel])
    return out


def _true_host(gt: dict, chip: np.ndarray, device_ns: np.ndarray) -> np.ndarray:
    off = np.array(gt["clock_offsets_ns"], np.float64)
    drift = np.array(gt["clock_drifts_ppm"], np.float64) * 1e-6
    return (device_ns.astype(np.float64) - off[chip]) / (1.0 + drift[chip])


def text(table, name: str) -> np.ndarray:
    """A string (or dictionary-encoded string) column as a numpy array of str."""

    return table.column(name).cast(pa.string()).to_numpy(zero_copy_only=False).astype(str)


def _device_events(run: Run) -> tuple[np.ndarray, np.ndarray]:
    if not run.file("trace.parquet").exists():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = read_parquet(run.file("trace.parquet"), columns=["clock", "chip", "start_ns", "end_ns"])
    dev = text(t, "clock") == "device"
    chip = t.column("chip").to_numpy()[dev]
    return np.concatenate([chip, chip]), np.concatenate(
        [t.column("start_ns").to_numpy()[dev], t.column("end_ns").to_numpy()[dev]]
    )


def alignment_errors(run: Run, fits: dict[int, ClockFit], dump=None) -> dict:
    """Per chip, the fitted and true offset and drift, and the error (ns) of the mapped counter
    timestamps and device-event timestamps against the ground truth: median, p99, max, overall and
    per chip. Empty without a ground truth holding the clocks."""
    out = {
        "chips": [
            {
                "chip": c,
                "offset_ns": f.offset_ns,
                "drift_ppm": f.drift_ppm,
                "reads_kept": f.kept,
                "reads": f.total,
                "residual_ns": f.residual_ns,
            }
            for c, f in sorted(fits.items())
        ]
    }
    gt = run.ground_truth
    if not gt or "clock_offsets_ns" not in gt:
        return out
    chip, ts = _sample_times(run, dump)
    ec, et = _device_events(run)
    chip = np.concatenate([chip, ec.astype(np.int64)])
    ts = np.concatenate([ts, et])
    err = np.abs(to_host(fits, chip, ts) - _true_host(gt, chip, ts))
    mapped = np.isfinite(err)  # NaN: unmappable after a clock reset (analysis.clock_fit)
    chip, err = chip[mapped], err[mapped]
    out["samples"] = int(len(err))
    out["error_ns"] = {"median": float(np.median(err)), "p99": float(np.quantile(err, 0.99)), "max": float(err.max())}
    for row in out["chips"]:
        c = row["chip"]
        e = err[chip == c]
        row["true_offset_ns"] = float(gt["clock_offsets_ns"][c])
        row["true_drift_ppm"] = float(gt["clock_drifts_ppm"][c])
        row["error_ns"] = {"median": float(np.median(e)), "p99": float(np.quantile(e, 0.99)), "max": float(e.max())}
    return out


def _sample_times(run: Run, dump=None) -> tuple[np.ndarray, np.ndarray]:
    """(chip, device timestamp) of every counter sample: from the read dump, else the run's file."""
    if dump is not None:
        chip = np.broadcast_to(dump.chips.astype(np.int64), dump.timestamps_ns.shape)[dump.present]
        return chip, dump.timestamps_ns[dump.present]
    t = read_parquet(run.file("counters.parquet"), columns=["chip", "timestamp_ns"])
    return t.column("chip").to_numpy().astype(np.int64), t.column("timestamp_ns").to_numpy()


def aligned_trace(run: Run, fits: dict[int, ClockFit]):
    """``trace.parquet`` with ``host_start_ns`` and ``host_end_ns`` (float64): device events mapped
    through their chip's clock fit, host events as they are. Piecewise clocks (``fit_clocks``) map with
    each span's submission as a hint (``analysis.clock_run.map_trace``, as ``perfonto align`` and the
    timeline do), so a span after a device-clock reset lands in its own epoch, not NaN as ambiguous."""
    from .clock_fit import ChipClock

    if fits and all(isinstance(f, ChipClock) for f in fits.values()):
        from .clock_run import map_trace  # imports this module

        return map_trace(run, fits)  # type: ignore[arg-type]
    t = read_parquet(run.file("trace.parquet"))
    dev = text(t, "clock") == "device"
    chip = t.column("chip").to_numpy()
    hs = t.column("start_ns").to_numpy().astype(np.float64)
    he = t.column("end_ns").to_numpy().astype(np.float64)
    hs[dev] = to_host(fits, chip[dev], t.column("start_ns").to_numpy()[dev])
    he[dev] = to_host(fits, chip[dev], t.column("end_ns").to_numpy()[dev])
    return t.append_column("host_start_ns", pa.array(hs)).append_column("host_end_ns", pa.array(he))


# ---- collective waits, straggler, skew -------------------------------------------------------------


def instance_waits(instance: np.ndarray, chip: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per collective span (same order as the inputs): the time (ns) from its chip's arrival to the
    last arrival of the same collective call (``instance``), and the chip that arrived last."""
    order = np.argsort(instance, kind="stable")
    inst, a, c = instance[order], arrival[order], chip[order]
    if len(inst) == 0:
        return np.zeros(0), np.zeros(0, np.int64)
    start = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    g = np.repeat(np.arange(len(start)), np.diff(np.r_[start, len(inst)]))
    last = np.maximum.reduceat(a, start)
    who = np.full(len(start), -1, np.int64)
    is_last = a == last[g]
    who[g[is_last]] = c[is_last]
    wait, last_chip = np.empty(len(a)), np.empty(len(a), np.int64)
    wait[order] = last[g] - a
    last_chip[order] = who[g]
    return wait, last_chip


def collective_analysis(trace, chips: int, duration_ns: float) -> dict:
    """Waits, blame, straggler and per-step skew from an aligned trace (see the module docstring)."""
    kind = text(trace, "kind")
    chip = trace.column("chip").to_numpy()
    step = trace.column("step").to_numpy()
    hs = trace.column("host_start_ns").to_numpy()
    coll = kind == "collective"
    wait = np.zeros(chips)
    blame = np.zeros(chips)
    waits_for = np.zeros((chips, chips))
    skew_steps: dict[int, float] = {}
    detail = "op" if coll.any() else "step"
    unmapped = 0
    if coll.any():  # a call with an arrival of no host time (after a clock reset): its last arrival is unknown
        lost = np.unique(trace.column("instance").to_numpy()[coll & ~np.isfinite(hs)])
        unmapped = len(lost)
        coll &= ~np.isin(trace.column("instance").to_numpy(), lost)
    if coll.any():
        inst = trace.column("instance").to_numpy()[coll]
        c, a, st = chip[coll], hs[coll], step[coll]
        order = np.lexsort((c, inst))
        inst, c, a, st = inst[order], c[order], a[order], st[order]
        start = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
        last = np.maximum.reduceat(a, start)
        first = np.minimum.reduceat(a, start)
        size = np.diff(np.r_[start, len(inst)])
        g = np.repeat(np.arange(len(start)), size)
        clip = lambda x: np.clip(x, 0.0, duration_ns)  # noqa: E731
        w = clip(last[g]) - clip(a)
        is_last = a == last[g]
        n_last = np.bincount(g, weights=is_last.astype(float))
        total_i = np.bincount(g, weights=w)
        np.add.at(wait, c, w)
        np.add.at(blame, c[is_last], (total_i[g] / n_last[g])[is_last])
        # whom chip i waited for: the last chip to arrive at each call (one of them when several tie)
        owner = np.full(len(start), -1)
        owner[g[is_last]] = c[is_last]  # one last chip per instance (ties: any of them)
        np.add.at(waits_for, (c, owner[g]), w)
        np.fill_diagonal(waits_for, 0.0)
        spread = last - first
        st_first = st[start]
        in_run = (first >= 0) & (first <= duration_ns)
        steps_u, inv = np.unique(st_first[in_run], return_inverse=True)
        mx = np.full(len(steps_u), -np.inf)
        np.maximum.at(mx, inv, spread[in_run])
        skew_steps = {int(k): float(v) for k, v in zip(steps_u, mx)}
    else:
        ex = (kind == "exec") & (trace.column("wait_ns").to_numpy() >= 0)
        if ex.any():
            wn = trace.column("wait_ns").to_numpy()[ex].astype(np.float64)
            c, st, a = chip[ex], step[ex], hs[ex]
            ok = a <= duration_ns
            np.add.at(wait, c[ok], wn[ok])
            for s_ in np.unique(st[ok]):
                sel = ok & (st == s_)
                least = c[sel][np.argmin(wn[sel])]
                blame[least] += wn[sel].sum()
                np.add.at(waits_for, (c[sel], np.full(sel.sum(), least)), wn[sel])
                skew_steps[int(s_)] = float(wn[sel].max() - wn[sel].min())
            np.fill_diagonal(waits_for, 0.0)
    total = float(wait.sum())
    straggler = None
    if chips > 1 and total >= STRAGGLER_MIN_WAIT * chips * duration_ns and blame.sum() > 0:
        j = int(np.argmax(blame))
        share = float(blame[j] / blame.sum())
        if share > 0.5:
            straggler = {"chip": j, "blamed_wait_s": float(blame[j] * 1e-9), "share": share}
    exec_skew = _exec_skew(kind, chip, step, hs, duration_ns)
    sk = np.array(list(skew_steps.values())) if skew_steps else np.zeros(0)
    return {
        "detail": detail,
        "unmapped_calls": unmapped,
        "wait_s": [float(x * 1e-9) for x in wait],
        "waits_for": {
            str(i): {str(j): float(waits_for[i, j] * 1e-9) for j in np.flatnonzero(waits_for[i] > 0)}
            for i in range(chips)
        },
        "total_wait_s": total * 1e-9,
        "duration_s": duration_ns * 1e-9,
        "wait_share_of_time": total / (chips * duration_ns) if duration_ns > 0 else 0.0,
        "blame_s": [float(x * 1e-9) for x in blame],
        "straggler": straggler,
        "skew": {
            "steps": int(len(sk)),
            "arrival_p50_s": float(np.percentile(sk, 50) * 1e-9) if len(sk) else 0.0,
            "arrival_max_s": float(sk.max() * 1e-9) if len(sk) else 0.0,
            "exec_start_max_s": exec_skew,
            "per_step_s": {str(k): v * 1e-9 for k, v in sorted(skew_steps.items())[:64]},
        },
    }


def _exec_skew(kind, chip, step, hs, duration_ns) -> float:
    ex = (kind == "exec") & (hs <= duration_ns)
    if not ex.any():
        return 0.0
    st, a = step[ex], hs[ex]
    order = np.argsort(st, kind="stable")
    st, a = st[order], a[order]
    start = np.flatnonzero(np.r_[True, st[1:] != st[:-1]])
    spread = np.maximum.reduceat(a, start) - np.minimum.reduceat(a, start)
    return float(spread.max() * 1e-9)


def analyse(path, gen=None, threshold: float = 0.9, with_alignment: bool = True, dump=None, windows=None) -> dict:
    """Everything above for one run (a folder, or a ``Run``): ``{"alignment", "collective",
    "imbalance", "saturation", "slow_links", "chips", "duration_s"}``. ``dump``/``windows``: the
    counters already read and prepared. The duration is the metadata's, the ground truth's, or
    the longest chip's span of samples on the host timeline.

    Raises:
        RunError: the run lacks the sync reads or the counters, or a chip of the counters has no
            sync reads; ``ChipsMissing`` (a RunError): the chips are not numbered 0 .. N-1.
    """
    run = path if isinstance(path, Run) else Run.open(path)
    fits = fit_clocks(run)
    if dump is not None:
        no_sync = sorted(set(int(c) for c in dump.chips) - set(fits))
        if no_sync:
            raise RunError(
                f"{run.file('sync.parquet')}: no sync reads for chip(s) {', '.join(map(str, no_sync))} of the "
                "counters; the driver's host/device clock reads are needed for every chip"
            )
    chips = len(fits)
    if sorted(fits) != list(range(chips)):  # waits, blame and links are indexed by chip number
        raise ChipsMissing(run.file("sync.parquet"), sorted(fits), dump is not None)
    try:
        duration_ns = run.duration_ns
    except RunError:
        if dump is None:
            raise
        host = [fits[int(c)].to_host(dump.timestamps_ns[[0, -1], i]) for i, c in enumerate(dump.chips)]
        duration_ns = float(max(h[1] - h[0] for h in host))
    out = {"chips": chips, "duration_s": duration_ns * 1e-9}
    if with_alignment:
        out["alignment"] = alignment_errors(run, fits, dump)
    if run.file("trace.parquet").exists():
        out["collective"] = collective_analysis(aligned_trace(run, fits), chips, duration_ns)
    try:
        out.update(counter_analysis(run, fits, gen, threshold, dump, windows))
    except ClockReset as exc:  # the clocks and the trace align across a reset; the counters' windows cannot
        out["counters_skipped"] = f"load imbalance and saturation (from the counters' windows) are skipped: {exc}"
    return out


__all__ = [
    "Run",
    "RunError",
    "aligned_trace",
    "alignment_errors",
    "analyse",
    "collective_analysis",
    "counter_analysis",
    "fit_clocks",
    "to_host",
]
