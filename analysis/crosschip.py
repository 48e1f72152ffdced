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
- Load imbalance, 1 − mean/max (Nsight Compute's workload-distribution view): across chips of each
  block's busy time or work (bytes, matrix FLOPs) over the run, and across the instances of a block within
  each chip. Busy time uneven with the work even is a slower chip, not an uneven load (``imbalance_note``).
- Saturation: windows where a chip's PCIe traffic (the busier direction) or a link's busy time
  reaches ``threshold`` of the window (merged into intervals of consecutive windows, host time);
  a *slow link* is a link whose payload rate while busy is under ``SLOW_LINK_RATIO`` of the median
  over the links that carried traffic (a throttled or degraded link: it is busy longest for the
  same bytes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .align import ClockFit
from .saturation import per_chip as sat_per_chip, ranges as sat_ranges
from perfonto.ontology.errors import PerfontoError

STRAGGLER_MIN_WAIT = 0.005
SLOW_LINK_RATIO = 0.67
#: block → (signals summed for its load, whether it is a cycle count)
LOAD = {
    "mxu": (("mxu.busy_cycles",), True),
    "mxu_flops": (("mxu.flops_fp8", "mxu.flops_bf16", "mxu.flops_fp4"), False),
    "vpu": (("vpu.busy_cycles",), True),
    "hbm": (("hbm.read_bytes", "hbm.write_bytes"), False),
    "sram": (("sram.read_bytes", "sram.write_bytes"), False),
    "dma": (("dma.bytes",), False),
    "c2c": (("c2c.busy_cycles",), True),
}

#: How the reports name each ``LOAD`` entry: a busy time or the work done (bytes, FLOPs). A chip that is
#: only slower shows in the busy times, with the work even; uneven work (router skew) shows in both.
IMBALANCE_LABEL = {
    "mxu": "mxu busy",
    "mxu_flops": "mxu FLOPs",
    "vpu": "vpu busy",
    "hbm": "hbm bytes",
    "sram": "sram bytes",
    "dma": "dma bytes",
    "c2c": "c2c busy",
}


def imbalance_note(across: dict) -> str | None:
    """A sentence when the matrix engines' busy time is uneven across chips (≥ 5 %) but their work is not
    (< 1 %): one chip ran the same work slower — a straggler, not an uneven load."""
    busy, work = across.get("mxu"), across.get("mxu_flops")
    if busy is None or work is None or busy < 0.05 or work >= 0.01:
        return None
    return (
        f"the chips did the same matrix work (FLOPs {100 * work:.1f} % apart) in busy times {100 * busy:.1f} % apart: "
        "one chip runs it slower, the load itself is even"
    )


MANIFEST = "perfonto.json"  # what a perfonto command wrote into its output folder (``perfonto.outputs``)


class RunError(PerfontoError, ValueError):
    """A run folder without the files the analysis needs."""


def read_parquet(path, columns: list[str] | None = None, schema_only: bool = False):
    """A run's Parquet file (its table, or only its schema), a file pyarrow cannot read refused naming it.

    Raises:
        RunError: the file is not Parquet, is cut short or is damaged (pyarrow's message names no file).
    """
    try:
        return pq.read_schema(str(path)) if schema_only else pq.read_table(str(path), columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise RunError(
            f"{path}: not a readable Parquet file ({exc}); was it overwritten? write the run again "
            "(`perfonto run` or `perfonto analyze`)"
        ) from None


@dataclass
class Run:
    """The files of a run: a run folder, or a capture's files wherever they are (``files`` maps a
    run-folder file name such as ``sync.parquet`` to where that part of the capture is)."""

    path: Path
    meta: dict
    ground_truth: dict | None
    files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> "Run":
        """A run folder. Files the folder does not hold are looked up in its manifest's ``inputs``
        (``perfonto analyze`` records where the capture it analysed lives).

        Raises ``RunError`` when the sync reads or the counters are missing."""
        p = Path(path)
        files: dict[str, Path] = {}
        manifest = p / MANIFEST
        if manifest.is_file():
            try:
                inputs = json.loads(manifest.read_text(encoding="utf-8")).get("inputs", {}) or {}
            except (OSError, ValueError, AttributeError):
                inputs = {}
            for name, where in inputs.items() if isinstance(inputs, dict) else ():
                if isinstance(where, str) and not (p / name).exists():
                    files[name] = Path(where)
        run = cls(p, {}, None, files)
        for name in ("sync.parquet", "counters.parquet"):
            if not run.file(name).exists():
                raise RunError(
                    f"{p}: no {name}; is this the output folder of `perfonto run`, `perfonto analyze` "
                    f"(given --sync) or emulator.run?"
                )
        return run._with_meta()

    @classmethod
    def of(cls, counters, sync, trace=None, ground_truth: dict | None = None, meta: dict | None = None) -> "Run":
        """A capture's files wherever they are (``perfonto analyze``)."""
        files = {"counters.parquet": Path(str(counters)), "sync.parquet": Path(str(sync))}
        if trace is not None:
            files["trace.parquet"] = Path(str(trace))
        run = cls(files["sync.parquet"].parent, dict(meta or {}), ground_truth, files)
        return run if meta is not None else run._with_meta()

    def _with_meta(self) -> "Run":
        c = self.file("counters.parquet")
        meta = {}
        if c.is_file() and c.suffix in (".parquet", ".pq"):
            try:
                schema = pq.read_schema(str(c))
                meta = (
                    json.loads(schema.metadata[b"perfonto"])
                    if schema.metadata and b"perfonto" in schema.metadata
                    else {}
                )
            except (OSError, ValueError, pa.ArrowInvalid):
                meta = {}
        gt_path = self.file("ground_truth.json")
        gt = self.ground_truth
        if gt is None and gt_path.is_file():
            try:
                gt = json.loads(gt_path.read_text())
            except (OSError, ValueError):
                gt = None
        return Run(self.path, meta if isinstance(meta, dict) else {}, gt, self.files)

    @property
    def duration_ns(self) -> float:
        if "duration_ns" in self.meta:
            return float(self.meta["duration_ns"])
        if self.ground_truth:
            return float(self.ground_truth["duration_s"]) * 1e9
        raise RunError(f"{self.path}: the counters' metadata gives no duration_ns")

    def file(self, name: str) -> Path:
        return self.files.get(name, self.path / name)


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
    import pyarrow as pa

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
    through their chip's clock fit, host events as they are."""
    import pyarrow as pa

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


# ---- counters: imbalance and saturation -------------------------------------------------------------


def counter_analysis(
    run: Run, fits: dict[int, ClockFit], gen=None, threshold: float = 0.9, dump=None, windows=None
) -> dict:
    """Load imbalance and saturation windows from the counters (see the module docstring); ``dump``
    and ``windows``, when the caller has read and prepared the counters already."""
    from perfonto.metrics.windows import prepare, read_counters

    if gen is None:
        gen = _generation(run.meta.get("generation", "sohu"))
    if dump is None:
        dump = read_counters(run.file("counters.parquet"), gen)
    w = prepare(dump, gen) if windows is None else windows
    chips = dump.chips.astype(np.int64)
    imbalance = _imbalance(w, chips)
    # window bounds on the host timeline
    stamps = dump.timestamps_ns
    h0 = np.stack([fits[int(c)].to_host(stamps[:-1, i]) for i, c in enumerate(chips)], axis=1)
    h1 = np.stack([fits[int(c)].to_host(stamps[1:, i]) for i, c in enumerate(chips)], axis=1)
    saturated, util_pcie = _pcie_saturation(w, gen, chips, h0, h1, threshold)
    slow = []
    link_util_max = 0.0
    if "c2c.busy_cycles" in w.values:
        link_sat, link_util_max, busy_s = _link_saturation(w, gen, chips, h0, h1, threshold)
        saturated += link_sat
        if "c2c.tx_bytes" in w.values:
            slow = _slow_links(w, busy_s, chips)
    slow.sort(key=lambda d: d["rate_ratio"])
    return {
        "imbalance": imbalance,
        "saturation": {
            "threshold": threshold,
            "intervals": saturated[:200],
            "count": len(saturated),
            "ranges": sat_ranges(saturated)[:200],
            "per_chip": sat_per_chip(saturated),
            "pcie_util_max": float(np.nanmax(util_pcie)) if util_pcie is not None and util_pcie.size else 0.0,
            "link_util_max": link_util_max,
        },
        "slow_links": slow,
    }


def _imbalance(w, chips: np.ndarray) -> dict:
    """Per ``LOAD`` block present in the counters: the imbalance across chips (``1 - mean / max`` of
    the per-chip totals) and, with several instances, within the most imbalanced chip."""
    C = len(chips)
    imbalance: dict = {"across_chips": {}, "within_chip": {}}
    for block, (names, _) in LOAD.items():
        names = [n for n in names if n in w.values]
        if not names:
            continue
        per_inst = sum(np.nansum(w.values[n], axis=0) for n in names)  # (C, instances...)
        per_inst = per_inst.reshape(C, -1)
        per_chip = per_inst.sum(axis=1)
        if per_chip.max() > 0:
            imbalance["across_chips"][block] = float(1 - per_chip.mean() / per_chip.max())
        if per_inst.shape[1] > 1:
            within = _within_chip(block, per_inst, chips)
            if within is not None:
                imbalance["within_chip"][block] = within
    return imbalance


def _within_chip(block: str, per_inst: np.ndarray, chips: np.ndarray) -> dict | None:
    """The imbalance across a block's instances on each chip (c2c: the links used on some chip), and
    the chip where it is largest; None with fewer than two instances."""
    used = per_inst[:, per_inst.max(axis=0) > 0] if block == "c2c" else per_inst
    if used.shape[1] <= 1:
        return None
    v = np.where(
        used.max(axis=1) > 0,
        1 - used.mean(axis=1) / np.where(used.max(axis=1) > 0, used.max(axis=1), 1),
        0.0,
    )
    j = int(np.argmax(v))
    return {"value": float(v[j]), "chip": int(chips[j]), "per_chip": [float(x) for x in v]}


def _pcie_saturation(w, gen, chips, h0, h1, threshold: float) -> tuple[list, np.ndarray | None]:
    """PCIe utilisation (the busier direction over the peak bandwidth) per window and chip, and the
    runs of windows at or past ``threshold``; ``([], None)`` without PCIe byte counters."""
    saturated: list = []
    if not ("pcie.rx_bytes" in w.values and "pcie.tx_bytes" in w.values):
        return saturated, None
    interval = w.interval  # (W, C) s, device clock
    rx = w.values["pcie.rx_bytes"].reshape(len(interval), len(chips))
    tx = w.values["pcie.tx_bytes"].reshape(len(interval), len(chips))
    util_pcie = np.maximum(rx, tx) / (_spec(gen, "spec.pcie.peak_bandwidth", "B/s") * interval)
    for i, c in enumerate(chips):
        saturated += _runs(
            util_pcie[:, i] >= threshold, h0[:, i], h1[:, i], util_pcie[:, i], {"kind": "pcie", "chip": int(c)}
        )
    return saturated, util_pcie


def _link_saturation(w, gen, chips, h0, h1, threshold: float) -> tuple[list, float, np.ndarray]:
    """C2C link utilisation (busy link cycles over the window) per window, chip and link: the runs of
    windows at or past ``threshold``, the largest utilisation, and each link's busy seconds (C, L)."""
    link_hz = (
        _spec(gen, "spec.clock.link", "link_cycle/s")
        if "spec.clock.link" in gen.spec
        else _spec(gen, "spec.clock.core", "core_cycle/s")
    )
    busy = w.values["c2c.busy_cycles"]  # (W, C, L) link cycles
    util = busy / (link_hz * w.interval[:, :, None])
    link_util_max = float(np.nanmax(util)) if util.size else 0.0
    saturated: list = []
    for i, c in enumerate(chips):
        for link in range(util.shape[2]):
            saturated += _runs(
                util[:, i, link] >= threshold,
                h0[:, i],
                h1[:, i],
                util[:, i, link],
                {"kind": "link", "chip": int(c), "link": int(link)},
            )
    return saturated, link_util_max, np.nansum(busy, axis=0) / link_hz


def _slow_links(w, busy_s: np.ndarray, chips) -> list[dict]:
    """Links moving bytes per busy second below ``SLOW_LINK_RATIO`` × the median link's (with at
    least two links carrying traffic)."""
    slow: list[dict] = []
    bytes_ = np.nansum(w.values["c2c.tx_bytes"], axis=0)
    ok = (busy_s > 0) & (bytes_ > 0)
    if ok.sum() >= 2:
        rate = np.where(ok, bytes_ / np.where(busy_s > 0, busy_s, 1), np.nan)
        med = float(np.nanmedian(rate))
        for i, link in zip(*np.nonzero(ok & (rate < SLOW_LINK_RATIO * med))):
            slow.append(
                {
                    "chip": int(chips[i]),
                    "link": int(link),
                    "rate_ratio": float(rate[i, link] / med),
                    "busy_s": float(busy_s[i, link]),
                    "median_busy_s": float(np.median(busy_s[ok])),
                }
            )
    return slow


def _generation(name: str):
    """The shipped generation ``name``; raises ``RunError`` when it does not load."""
    from perfonto.ontology.loader import load_generation

    gen, diags = load_generation(name)
    if gen is None:
        unknown = any(d.code == "unknown-generation" for d in diags)
        raise RunError(
            "; ".join(d.message for d in diags)
            + (
                f": the run was made with a catalog folder declaring `{name}`? give it with --catalog DIR"
                if unknown
                else ""
            )
            or f"cannot load generation `{name}`"
        )
    return gen


def _spec(gen, name: str, unit: str) -> float:
    """Spec constant ``name`` of ``gen`` in ``unit``; raises ``RunError`` naming the constant when absent."""
    const = gen.spec.get(name)
    if const is None:
        raise RunError(f"generation `{gen.name}` has no `{name}`, which the saturation analysis needs")
    return float(gen.registry.Quantity(const.value, const.unit).to(unit).magnitude)


def _runs(mask: np.ndarray, t0: np.ndarray, t1: np.ndarray, util: np.ndarray, label: dict) -> list[dict]:
    """Consecutive True windows merged into host-time intervals."""
    if not mask.any():
        return []
    m = np.r_[False, mask, False]
    starts = np.flatnonzero(~m[:-1] & m[1:])
    ends = np.flatnonzero(m[:-1] & ~m[1:])
    return [
        {
            **label,
            "start_s": float(t0[a] * 1e-9),
            "end_s": float(t1[b - 1] * 1e-9),
            "windows": int(b - a),
            "peak_util": float(np.nanmax(util[a:b])),
        }
        for a, b in zip(starts, ends)
    ]


def analyse(path, gen=None, threshold: float = 0.9, with_alignment: bool = True, dump=None, windows=None) -> dict:
    """Everything above for one run (a folder, or a ``Run``): ``{"alignment", "collective",
    "imbalance", "saturation", "slow_links", "chips", "duration_s"}``. ``dump``/``windows``: the
    counters already read and prepared. The duration is the metadata's, the ground truth's, or
    the longest chip's span of samples on the host timeline.

    Raises:
        RunError: the run lacks the sync reads or the counters, a chip of the counters has no
            sync reads, or the chips are not numbered 0 .. N-1.
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
        raise RunError(
            f"{run.file('sync.parquet')}: the chips are numbered {', '.join(map(str, sorted(fits)))}; the multi-chip "
            f"analysis needs them numbered 0 .. {chips - 1} in the counters, sync reads and trace — renumber them, "
            "or leave out --sync to skip it"
        )
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
    out.update(counter_analysis(run, fits, gen, threshold, dump, windows))
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
