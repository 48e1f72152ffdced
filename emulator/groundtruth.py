"""Ground truth of a run, computed from the emulated events.

Read from each chip's timeline (segment amounts, with the step in progress at the end cut there)
and the step-end impulses — never from the counter dump, so that metrics computed from the raw
registers can be checked against it. Each chip's counter totals are taken over the span its samples
cover: host time [0, duration / (1 + drift)], i.e. ``duration`` on its own clock (``emulator.clocks``;
within ±100 ppm of [0, duration] on the host clock), so that a counter-derived rate divided by the
chips' own ``interval`` is compared with the same span.

Per chip and summed over chips:
- bytes: ``hbm_read_bytes``, ``hbm_write_bytes``, ``sram_read_bytes``, ``sram_write_bytes``,
  ``c2c_tx_bytes``, ``c2c_rx_bytes``, ``pcie_rx_bytes``, ``pcie_tx_bytes`` (B);
- ``flops`` (matrix-engine hardware FLOP, FP4 + FP8 + BF16, padding included; also ``flops_fp4``,
  ``flops_fp8``, ``flops_bf16``), ``model_flops`` (the model FLOPs of ``emulator.model_flops``: no
  padding, causal attention, LM head once per sampled row; the chip's share), ``vector_flops``
  (FLOP), ``energy_j`` and ``job_energy_j`` (J; every chip is assigned to the job the whole run),
  ``job_time_s``;
- ``hbm_bytes_by_tag``: HBM bytes by what they carry (``weights``, ``kv_read``, ``kv_write``,
  ``activations``), which add up to ``hbm_read_bytes + hbm_write_bytes``; ``c2c_bytes_by_collective``:
  transmitted bytes by collective (``allreduce``, ``all_to_all``, ``all_gather``, ``send_recv``),
  which add up to ``c2c_tx_bytes``;
- ``quantities``: the total of every amount of the emulator's quantity registry
  (``emulator/data/quantities.yaml``; per chip over its span, summed over chips at the top level),
  from which the truth of any ``linear`` binding follows (Σ coefficient × amount, then the split);
  ``impulses`` (per chip): the step-end counts of the chip's scheduler rank; ``events``: the random
  events of each signal bound to ``event_rate``;
- ``topdown_s``: seconds in each cycle class (compute, memory, collective, host_wait, idle), which
  add up to the chip's span; collective time includes the time waiting for other chips;
  ``topdown2_s``: seconds in each level-2 class (``emulator.subclasses``: compute_matrix,
  compute_vector, memory_weights, memory_kv, memory_activations, collective_wait,
  collective_transfer, host_launch, host_pcie), which add up to their level-1 class;
- ``busy_s``: busy seconds of mxu, vpu, hbm, c2c, dma, as the mean over the block's instances;
  ``link_busy_s``: busy seconds of each chip-to-chip link;
- token counts (leader chip of each scheduler rank only, so the server total counts each token once): ``input_tokens``
  (prefilled prompt tokens, at the end of their step), ``output_tokens`` (sampled), ``tokens``
  (input + output), ``requests_completed``; ``steps`` (forward passes finished, every chip);
- ``collective_wait_s``: time from the chip's arrival at each collective to the last chip's arrival,
  over host time [0, duration]; ``waits_for``: {chip: seconds} it waited with that chip last to arrive.
Server-level: ``hfu`` = Σ over precisions of flops_p ÷ (chips × the dense peak of p × duration): the
share of the chips' time the executed matrix FLOPs take at each precision's own peak (with one
precision, flops ÷ (chips × peak × duration)); ``mfu`` = model_flops ÷ flops × hfu (hfu ≥ mfu; with no
matrix FLOPs, model_flops over the peak of the model's math precision), as
``metrics/library/compute.metrics``; ``tokens_per_second`` = tokens ÷ duration;
``output_tokens_per_second``; ``idle_power_w`` (a chip's idle floor, spec.power.idle);
``steps`` counts forward passes of the TP group once. Multi-chip: ``clocks`` (each chip's
``offset_ns`` and ``drift_ppm``; also ``clock_offsets_ns``, ``clock_drifts_ppm``), ``straggler``
(the chip the others' collective waits are blamed on, when the total wait is ≥ 0.5 % of the chips'
time and one chip carries most of the blame; else None), ``step_skew_s`` (p50/max over steps of
the largest arrival spread at a collective), ``load_imbalance`` (1 − mean/max over chips of the
matrix-engine busy time), ``throttled_link`` (the knob, when set). Latency (``emulator.records``):
``ttft_p50_s`` … ``itl_p99_s``. Per op class (slot): ``by_op`` (``emulator.opsnapshots.by_op``).
"""

from __future__ import annotations

import numpy as np

from .hardware import Hardware
from .ops import C2C_TAGS, CLASSES, HBM_TAGS
from .opsnapshots import by_op
from .quantities import of_kind
from .subclasses import SUBCLASSES
from .signals import ColumnPlan
from .timeline import Timeline

AMOUNTS = frozenset(of_kind("amount"))
BLOCK_BUSY = {"mxu": "mxu_busy", "vpu": "vpu_busy", "hbm": "hbm_active", "c2c": "c2c_busy", "dma": "dma_busy"}


SUMMED = (
    "hbm_read_bytes",
    "hbm_write_bytes",
    "sram_read_bytes",
    "sram_write_bytes",
    "flops",
    "flops_fp8",
    "flops_bf16",
    "flops_fp4",
    "model_flops",
    "vector_flops",
    "c2c_tx_bytes",
    "c2c_rx_bytes",
    "pcie_rx_bytes",
    "pcie_tx_bytes",
    "energy_j",
    "job_energy_j",
    "job_time_s",
    "input_tokens",
    "output_tokens",
    "tokens",
    "requests_completed",
)  # the per-chip amounts the server-level truth sums over chips


def _busy(tot: dict, hw: Hardware, c: int, used: int, slow) -> tuple[dict, list]:
    """A chip's busy seconds per block (``c2c``: the mean over its links) and per link (the links used
    busy as the chip's c2c, the throttled one, on its chip, as the slow link)."""
    busy = {b: tot[q] for b, q in BLOCK_BUSY.items()}
    link_busy = [tot["c2c_busy"] if i < used else 0.0 for i in range(hw.links)]
    if slow is not None and int(slow[0]) == c:
        link_busy[int(slow[1])] = tot["c2c_busy_slow"]
    busy["c2c"] = sum(link_busy) / hw.links
    return busy, link_busy


def _chip_truth(c: int, tl: Timeline, e: int, lead: bool, plan: ColumnPlan, hw: Hardware, used: int, slow) -> dict:
    """Chip ``c``'s amounts over its span (to core cycle ``e``): bytes, FLOP, energy, tokens (the
    leader's only), top-down and busy seconds, events, quantities and impulses (module docstring)."""
    f = hw.core_hz
    tot = tl.totals_at(e)
    imp = {k: int(v[0]) for k, v in tl.impulses_at(np.array([e])).items()}
    busy, link_busy = _busy(tot, hw, c, used, slow)
    return {
        "chip": c,
        "hbm_read_bytes": tot["hbm_read"],
        "hbm_write_bytes": tot["hbm_write"],
        "sram_read_bytes": tot["sram_read"],
        "sram_write_bytes": tot["sram_write"],
        "flops": tot["mxu_flops_fp4"] + tot["mxu_flops_fp8"] + tot["mxu_flops_bf16"],
        "flops_fp8": tot["mxu_flops_fp8"],
        "flops_bf16": tot["mxu_flops_bf16"],
        "flops_fp4": tot["mxu_flops_fp4"],
        "model_flops": tot["model_flops"],
        "vector_flops": tot["vpu_flops"],
        "hbm_bytes_by_tag": {t: tot[q] for t, q in HBM_TAGS.items()},
        "c2c_bytes_by_collective": {t: tot[q] for t, q in C2C_TAGS.items()},
        "c2c_tx_bytes": tot["c2c_tx"],
        "c2c_rx_bytes": tot["c2c_rx"],
        "pcie_rx_bytes": tot["pcie_rx"],
        "pcie_tx_bytes": tot["pcie_tx"] if lead else 0.0,
        "energy_j": tot["energy"],
        "job_energy_j": tot["energy"],
        "job_time_s": tot["job_time"],
        "input_tokens": imp["input_tokens"] if lead else 0,
        "output_tokens": imp["output_tokens"] if lead else 0,
        "requests_completed": imp["requests_completed"] if lead else 0,
        "steps": imp["steps"],
        "topdown_s": {k: tot[k] / f for k in CLASSES},
        "topdown2_s": {k: tot[k] / f for k in SUBCLASSES},
        "busy_s": busy,
        "link_busy_s": link_busy,
        "events": {
            p.signal.name: int(sum(np.count_nonzero(t <= e) for t in p.event_times[c]))
            for p in plan.signals
            if p.kind == "events"
        },
        "quantities": {k: float(v) for k, v in tot.items() if k in AMOUNTS},
        "impulses": imp,
    }


def peak_time_utilisation(d: dict, hw, peak: float, chips_time_s: float) -> tuple[float, float]:
    """(MFU, HFU) of FLOP totals ``d`` (``flops_fp8``, ``flops_bf16``, ``flops_fp4``, ``flops``,
    ``model_flops``) over ``chips_time_s`` chip-seconds: HFU = Σ_p flops_p / peak_p / chips_time_s, each
    precision at its own dense peak (``hw.peak``); MFU = model_flops / flops × HFU, or model_flops over
    ``peak`` (the model's math precision) when no matrix FLOPs ran. As ``metrics/library/compute.metrics``."""
    at_peak = sum(float(d.get(f"flops_{p}", 0.0)) / hw.peak(p) for p in ("fp8", "bf16", "fp4") if d.get(f"flops_{p}"))
    hfu = at_peak / chips_time_s
    mfu = d["model_flops"] / d["flops"] * hfu if d["flops"] > 0 else d["model_flops"] / (peak * chips_time_s)
    return mfu, hfu


def _chip_rates(d: dict, c: int, chips: int, hw, peak: float, duration_s: float, f: float, waits) -> None:
    """Add a chip's tokens, MFU, HFU, mean power and (with ``waits``) its collective waits to ``d``."""
    d["tokens"] = d["input_tokens"] + d["output_tokens"]
    d["mfu"], d["hfu"] = peak_time_utilisation(d, hw, peak, duration_s)
    d["avg_power_w"] = d["energy_j"] / duration_s
    if waits is not None:
        d["collective_wait_s"] = float(waits["wait_cycles"][c] / f)
        d["waits_for"] = {
            str(j): float(waits["waits_for"][c, j] / f) for j in range(chips) if waits["waits_for"][c, j] > 0
        }


def _sums(per_chip: list[dict], duration_s: float, chips: int) -> dict:
    """The server-level sums over chips (``steps``: the first chip's, the TP group's forward passes)."""

    def total(key):
        return sum(p[key] for p in per_chip)

    return {
        "duration_s": duration_s,
        "chips": chips,
        **{k: total(k) for k in SUMMED},
        "events": {k: sum(p["events"][k] for p in per_chip) for k in per_chip[0]["events"]},
        "quantities": {k: sum(p["quantities"][k] for p in per_chip) for k in per_chip[0]["quantities"]},
        "steps": per_chip[0]["steps"],
        "topdown_s": {k: sum(p["topdown_s"][k] for p in per_chip) for k in CLASSES},
        "topdown2_s": {k: sum(p["topdown2_s"][k] for p in per_chip) for k in SUBCLASSES},
        "busy_s": {k: sum(p["busy_s"][k] for p in per_chip) for k in BLOCK_BUSY},
        "hbm_bytes_by_tag": {t: sum(p["hbm_bytes_by_tag"][t] for p in per_chip) for t in HBM_TAGS},
        "c2c_bytes_by_collective": {t: sum(p["c2c_bytes_by_collective"][t] for p in per_chip) for t in C2C_TAGS},
    }


def ground_truth(
    tls: list[Timeline],
    prof_of: np.ndarray,
    plan: ColumnPlan,
    hw: Hardware,
    cfg,
    chips: int,
    duration_s: float,
    end_cycles: np.ndarray,
    links_used: int,
    extra: dict,
    *,
    clocks=(),
    waits=None,
    knobs=None,
) -> dict:
    """Ground-truth dictionary (JSON-serialisable) of the run; ``extra`` is merged at the top level.

    Args:
        tls, prof_of: the timeline of each chip profile and each chip's profile index.
        end_cycles: (chips,) core cycle of each chip's last sample.
        waits: ``trace.collective_waits`` (None: no waits).
    """
    f = hw.core_hz
    used = min(links_used, hw.links)
    peak = hw.peak(hw.math_dtype(cfg.prec.weights))
    slow = knobs.throttled_link if knobs is not None else None
    per_chip = []
    for c in range(chips):
        d = _chip_truth(c, tls[int(prof_of[c])], int(end_cycles[c]), bool(plan.leaders[c]), plan, hw, used, slow)
        _chip_rates(d, c, chips, hw, peak, duration_s, f, waits)
        per_chip.append(d)
    gt = _sums(per_chip, duration_s, chips)
    gt["peak_flops_model_precision"] = peak
    gt["mfu"], gt["hfu"] = peak_time_utilisation(gt, hw, peak, chips * duration_s)
    gt["tokens_per_second"] = gt["tokens"] / duration_s
    gt["output_tokens_per_second"] = gt["output_tokens"] / duration_s
    gt["input_tokens_per_second"] = gt["input_tokens"] / duration_s
    gt["avg_power_w"] = gt["energy_j"] / duration_s
    gt["idle_power_w"] = hw.idle_power
    gt["clocks"] = [
        {"chip": c, "offset_ns": int(k.offset_ns), "drift_ppm": float(k.drift_ppm)} for c, k in enumerate(clocks)
    ]
    gt["clock_offsets_ns"] = [int(k.offset_ns) for k in clocks]
    gt["clock_drifts_ppm"] = [float(k.drift_ppm) for k in clocks]
    gt.update(_multichip(per_chip, waits, f, chips, duration_s, tls[0], knobs))
    gt.update(extra)
    gt["by_op"] = by_op(tls, prof_of, end_cycles, f)  # per slot (op class), for attribution (emulator.opsnapshots)
    gt["per_chip"] = per_chip
    return gt


def _multichip(per_chip: list[dict], waits, f: float, chips: int, duration_s: float, tl0, knobs) -> dict:
    """Straggler, skew, imbalance and the throttled link (see the module docstring)."""
    mxu = np.array([p["busy_s"]["mxu"] for p in per_chip])
    out = {
        "load_imbalance": {"mxu_busy": float(1 - mxu.mean() / mxu.max()) if mxu.max() > 0 else 0.0},
        "collective_wait_s": [p.get("collective_wait_s", 0.0) for p in per_chip],
        "straggler": None,
        "step_skew_s": {"p50": 0.0, "max": 0.0},
        "throttled_link": None,
    }
    if knobs is not None and knobs.throttled_link is not None:
        c, link, fac = knobs.throttled_link
        out["throttled_link"] = {"chip": int(c), "link": int(link), "factor": float(fac)}
    if waits is None:
        return out
    in_run = tl0.starts < duration_s * f
    skew = waits["step_skew_cycles"][: len(tl0)][in_run] / f
    if len(skew):
        out["step_skew_s"] = {"p50": float(np.percentile(skew, 50)), "max": float(skew.max())}
    total = float(waits["wait_cycles"].sum() / f)
    blame = waits["blame_cycles"] / f
    if chips > 1 and total >= 0.005 * chips * duration_s:
        c = int(np.argmax(blame))
        share = float(blame[c] / blame.sum()) if blame.sum() > 0 else 0.0
        if share > 0.5:
            out["straggler"] = {"chip": c, "blamed_wait_s": float(blame[c]), "share": share}
    out["collective_wait_total_s"] = total
    return out
