"""Load imbalance and saturation across and within the chips of a run, from its counters (windows on the
host timeline through each chip's clock fit).

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

import numpy as np

from .align import ClockFit
from .saturation import per_chip as sat_per_chip, ranges as sat_ranges
from .run_files import Run, RunError

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


__all__ = ["IMBALANCE_LABEL", "LOAD", "SLOW_LINK_RATIO", "counter_analysis", "imbalance_note"]
