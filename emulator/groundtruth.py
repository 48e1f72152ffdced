"""Ground truth of a run, computed from the emulated events over exactly [0, duration].

Read from the timeline (segment amounts, with the step in progress at ``duration`` cut there) and
the step-end impulses — never from the counter dump, so that metrics computed from the raw
registers can be checked against it.

Per chip and summed over chips:
- bytes: ``hbm_read_bytes``, ``hbm_write_bytes``, ``sram_read_bytes``, ``sram_write_bytes``,
  ``c2c_tx_bytes``, ``c2c_rx_bytes``, ``pcie_rx_bytes``, ``pcie_tx_bytes`` (B);
- ``flops`` (matrix-engine FLOP, FP4 + FP8 + BF16; also ``flops_fp4``, ``flops_fp8``, ``flops_bf16``),
  ``vector_flops`` (FLOP), ``energy_j`` (J);
- ``hbm_bytes_by_tag``: HBM bytes by what they carry (``weights``, ``kv_read``, ``kv_write``,
  ``activations``), which add up to ``hbm_read_bytes + hbm_write_bytes``; ``c2c_bytes_by_collective``:
  transmitted bytes by collective (``allreduce``, ``all_to_all``, ``all_gather``, ``send_recv``),
  which add up to ``c2c_tx_bytes``;
- ``topdown_s``: seconds in each cycle class (compute, memory, collective, host_wait, idle), which
  add up to the duration on each chip;
- ``busy_s``: busy seconds of mxu, vpu, hbm, c2c, dma, as the mean over the block's instances;
- token counts (leader chip of each scheduler rank only, so the server total counts each token once): ``input_tokens``
  (prefilled prompt tokens, at the end of their step), ``output_tokens`` (sampled), ``tokens``
  (input + output), ``requests_completed``; ``steps`` (forward passes finished, every chip).
Server-level: ``mfu`` = flops ÷ (chips × FP8 peak × duration); ``tokens_per_second`` = tokens ÷
duration; ``output_tokens_per_second``; ``steps`` counts forward passes of the TP group once.
"""
from __future__ import annotations

import numpy as np

from .hardware import Hardware
from .ops import C2C_TAGS, CLASSES, HBM_TAGS
from .signals import ColumnPlan
from .timeline import Timeline

BLOCK_BUSY = {"mxu": "mxu_busy", "vpu": "vpu_busy", "hbm": "hbm_active", "c2c": "c2c_busy", "dma": "dma_busy"}


def ground_truth(tl: Timeline, plan: ColumnPlan, hw: Hardware, chips: int, duration_s: float, duration_cycles: int,
                 links_used: int, extra: dict) -> dict:
    """Ground-truth dictionary (JSON-serialisable) of the run; ``extra`` is merged at the top level."""
    tot = tl.totals_at(duration_cycles)
    imp = {k: int(v[0]) for k, v in tl.impulses_at(np.array([duration_cycles])).items()}
    events = {p.key or p.signal.name: [int(sum(np.count_nonzero(t <= duration_cycles) for t in chip)) for chip in p.event_times]
              for p in plan.signals if p.kind == "events"}
    f = hw.core_hz
    per_chip = []
    for c in range(chips):
        lead = bool(plan.leaders[c])
        busy = {b: tot[q] for b, q in BLOCK_BUSY.items()}
        busy["c2c"] *= min(links_used, hw.links) / hw.links
        d = {
            "chip": c,
            "hbm_read_bytes": tot["hbm_read"], "hbm_write_bytes": tot["hbm_write"],
            "sram_read_bytes": tot["sram_read"], "sram_write_bytes": tot["sram_write"],
            "flops": tot["mxu_flops_fp4"] + tot["mxu_flops_fp8"] + tot["mxu_flops_bf16"], "flops_fp8": tot["mxu_flops_fp8"],
            "flops_bf16": tot["mxu_flops_bf16"], "flops_fp4": tot["mxu_flops_fp4"], "vector_flops": tot["vpu_flops"],
            "hbm_bytes_by_tag": {t: tot[q] for t, q in HBM_TAGS.items()},
            "c2c_bytes_by_collective": {t: tot[q] for t, q in C2C_TAGS.items()},
            "c2c_tx_bytes": tot["c2c_tx"], "c2c_rx_bytes": tot["c2c_rx"],
            "pcie_rx_bytes": tot["pcie_rx"], "pcie_tx_bytes": tot["pcie_tx"] if lead else 0.0,
            "energy_j": tot["energy"],
            "input_tokens": imp["input_tokens"] if lead else 0, "output_tokens": imp["output_tokens"] if lead else 0,
            "requests_completed": imp["requests_completed"] if lead else 0, "steps": imp["steps"],
            "topdown_s": {k: tot[k] / f for k in CLASSES},
            "busy_s": busy,
            "ecc_corrected": events.get("hbm.ecc_corrected", [0] * chips)[c],
            "c2c_retries": events.get("c2c.retries", [0] * chips)[c],
        }
        d["tokens"] = d["input_tokens"] + d["output_tokens"]
        d["mfu"] = d["flops"] / (hw.peak_fp8 * duration_s)
        d["avg_power_w"] = d["energy_j"] / duration_s
        per_chip.append(d)

    def total(key):
        return sum(p[key] for p in per_chip)

    gt = {
        "duration_s": duration_s, "chips": chips,
        **{k: total(k) for k in ("hbm_read_bytes", "hbm_write_bytes", "sram_read_bytes", "sram_write_bytes", "flops",
                                 "flops_fp8", "flops_bf16", "flops_fp4", "vector_flops", "c2c_tx_bytes", "c2c_rx_bytes",
                                 "pcie_rx_bytes", "pcie_tx_bytes", "energy_j", "input_tokens", "output_tokens",
                                 "tokens", "requests_completed", "ecc_corrected", "c2c_retries")},
        "steps": imp["steps"],
        "topdown_s": {k: sum(p["topdown_s"][k] for p in per_chip) for k in CLASSES},
        "busy_s": {k: sum(p["busy_s"][k] for p in per_chip) for k in BLOCK_BUSY},
        "hbm_bytes_by_tag": {t: sum(p["hbm_bytes_by_tag"][t] for p in per_chip) for t in HBM_TAGS},
        "c2c_bytes_by_collective": {t: sum(p["c2c_bytes_by_collective"][t] for p in per_chip) for t in C2C_TAGS},
    }
    gt["mfu"] = gt["flops"] / (chips * hw.peak_fp8 * duration_s)
    gt["tokens_per_second"] = gt["tokens"] / duration_s
    gt["output_tokens_per_second"] = gt["output_tokens"] / duration_s
    gt["input_tokens_per_second"] = gt["input_tokens"] / duration_s
    gt["avg_power_w"] = gt["energy_j"] / duration_s
    gt.update(extra)
    gt["per_chip"] = per_chip
    return gt
