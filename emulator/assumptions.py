"""Modelling assumptions of the emulator: efficiency curves, overheads, latencies, memory, power.

Nothing here is a datasheet figure. Eight constants are *fitted* by ``perfonto calibrate`` on the
public measurements of ``emulator/data/calibration.yaml`` and stored in ``emulator/data/fitted.yaml``
(``FITTED``); ``fitted_assumptions()`` applies them. The others are fixed with the reason given
beside each. Presets (``emulator/data/presets.yaml``) change named constants on top.

Size-dependent efficiency, as in the analytical LLM-inference models Calculon (Isaev et al., SC'23)
and GenZ (Bambhaniya et al., 2024): an operation reaches a fraction ``e_max`` of the peak rate for
large problems and half of that at a "half size"::

    eff(n) = e_max · n / (n + n_half)

with ``n`` the rows of a GEMM (tokens per weight matrix; for grouped expert GEMMs, tokens per expert)
or of a vector op, or the bytes of a memory transfer. The efficiency of FP4 GEMMs is
``fp4_eff_ratio`` × that of FP8/BF16 GEMMs at the same size (block-scale handling in NVFP4 kernels).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

DATA = Path(__file__).parent / "data"

#: The constants ``perfonto calibrate`` fits, with their bounds (physical ranges) and units.
FITTED_BOUNDS: dict[str, tuple[float, float, str]] = {
    "mxu_eff_max": (0.30, 1.00, "fraction of the dtype's dense peak a large GEMM sustains"),
    "mxu_half_rows": (1.0, 2048.0, "GEMM rows (tokens per weight matrix) at which efficiency is half of mxu_eff_max"),
    "fp4_eff_ratio": (0.30, 1.00, "FP4 GEMM efficiency over FP8 GEMM efficiency at the same size"),
    "kv_read_eff": (0.20, 1.00, "fraction of the HBM peak that decode attention's paged KV-cache reads sustain"),
    "op_overhead_s": (0.0, 50e-6, "fixed time per executed op (kernel launch, ramp-up and tail), s"),
    "host_step_s": (0.0, 20e-3, "host scheduling and launch time per step, before the forward pass, s"),
    "a2a_eff": (0.05, 1.00, "fraction of the link rate the all-to-all of MoE dispatch and combine sustains"),
    "expert_imbalance": (1.0, 3.0, "hottest expert-parallel rank's routed load over the mean, beyond routing noise"),
}


@dataclass(frozen=True)
class Assumptions:
    """Modelling constants (units in the names or the comments).

    Fitted (``FITTED_BOUNDS``; the defaults here are the Sohu design assumptions, replaced by the
    fitted values in ``fitted_assumptions()``):
        mxu_eff_max, mxu_half_rows, fp4_eff_ratio, kv_read_eff, op_overhead_s, host_step_s.
    Efficiency (fixed):
        hbm_eff_max: fraction of the HBM peak that weight and activation streams sustain (0.90:
            refresh, bank conflicts and read/write turnarounds cost HBM3 ~10 %; left out of the fit
            because the calibration rows barely depend on it — their decode steps are
            compute-bound at trtllm-bench's batch sizes — and a free fit runs it to its bound).
        vpu_eff_max, vpu_half_tokens: vector unit vs. rows (tokens).
        hbm_half_bytes: bytes of one op's transfer at which HBM efficiency halves (small transfers
            cannot keep every channel busy).
        sram_eff_max: SRAM bandwidth efficiency (SRAM time counts on the compute side).
        link_eff: payload fraction of the chip-to-chip link rate a collective sustains (NVLink ring
            all-reduce reaches ~80 % of the link rate in nccl-tests' bus bandwidth).
        a2a_eff: the same for the all-to-all of MoE dispatch and combine (many small messages to every
            peer: nccl-tests' alltoall bus bandwidth is below its all-reduce's).
        expert_imbalance: the hottest expert-parallel rank's routed load ÷ the mean, beyond the
            binomial noise of routing (``emulator.moe``; 1 = a perfectly balanced router).
        moe_half_rows: tokens per expert at which a grouped expert GEMM's efficiency is half of
            ``mxu_eff_max`` (``emulator.moe.grouped_gemm_efficiency``): 64, the M tile of Hopper's
            warpgroup MMA (``wgmma`` m64), with which grouped MoE GEMM kernels tile each expert's
            rows — an expert with ``t ≪ 64`` tokens fills ``t/64`` of its tiles, whatever the dense
            GEMMs of the same step do (an assumption, not fitted: no calibration row isolates it).
        a2a_half_bytes: bytes sent to one peer at which the all-to-all's link efficiency is half of
            ``a2a_eff`` (``emulator.moe.a2a_efficiency``): 256 KiB, small messages to many peers
            cannot keep the links busy (as ``hbm_half_bytes`` for HBM; an assumption). Its latency
            is ``hop_latency_s`` per exchange step, ``ep − 1`` steps.
        pcie_eff: payload fraction of the PCIe rate (TLP headers).
    Execution model:
        activations_in_hbm: every op reads its input activations from HBM and writes its outputs
            back (a GPU running one kernel per op); False: activations stay in on-chip SRAM between
            ops (a fused dataflow pipeline, the Sohu design).
        overlap_collectives: collectives run on the links while the next op computes (only their
            latency is exposed); False: they are serialised with compute (as NCCL/TRT-LLM do).
        overlap_ops: the units work concurrently on different ops (a pipelined dataflow design
            streams weights and KV and runs norms and activations while the matrix engine works on
            other ops): a layer takes as long as its busiest unit, ``max(Σ MXU, Σ VPU, Σ SRAM,
            Σ HBM)`` over its ops, instead of ``Σ max(...)`` (one kernel at a time, as on a GPU).
    Latency (s):
        hop_latency_s: per ring step of a collective (software + SerDes + switch hop).
        pcie_latency_s: one PCIe round of sampled tokens back to the host (after the pass).
    Collectives:
        ring_links: links a chip uses for a ring collective (0 = all links).
        sample_topk: candidates per token all-gathered for sampling (value + index, 8 B each).
        draft_layers: decoder layers of the draft network of speculative decoding, in layers of the
            target model's shape, run once per draft token (DeepSeek-V3's multi-token-prediction
            module is one layer sharing the embedding and LM head: DeepSeek-V3 report, §2.2).
    Host traffic (B):
        token_id_bytes, request_meta_bytes, command_bytes.
    Memory:
        kv_memory_fraction: share of the HBM left after the weights and the runtime reserve that the
            KV cache takes (TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction``, default 0.90).
        runtime_reserve_bytes: HBM the runtime keeps besides weights and KV cache (CUDA context,
            activation workspace, CUDA graphs, communication buffers; ~4 GB on TRT-LLM).
        kv_page_tokens: tokens per KV-cache page (allocation granularity).
        head_dtype: dtype of the embedding and LM head (ModelOpt FP8/FP4 checkpoints keep them BF16).
    Vector work (FLOP per element):
        norm_flops, rope_flops, softmax_flops, silu_mul_flops, sample_flops, router_flops.
    Instruction/descriptor granularity:
        mxu_tile_flops, vpu_instruction_flops, seq_instructions_per_op, dma_descriptor_bytes.
        mxu_pad_rows: the matrix engine processes a GEMM's rows (tokens) in blocks of this many; a
            partial block is padded, and the padding is hardware work (counted by ``mxu.flops_*``,
            so HFU ≥ MFU) though not model work. Time is unaffected: the size-dependent efficiency
            ``eff(rows)`` already charges small GEMMs for it.
    Power (P = idle + (tdp − idle) · activity; activity = Σ weight · utilisation ≤ 1):
        power_w_mxu, power_w_hbm, power_w_vpu, power_w_c2c (sum to 1).
    Thermal (first-order: T → ambient + R·P with time constant tau):
        ambient_c (°C), r_th_c_per_w (°C/W), tau_th_s (s).
    Telemetry:
        hbm_refresh_fraction, sram_conflict_fraction, interleave_jitter (the rates of random events,
        ECC corrections and link retries, are the signals' ``event_rate`` bindings in the ontology).
    """

    mxu_eff_max: float = 0.90
    mxu_half_rows: float = 64.0
    fp4_eff_ratio: float = 1.0
    hbm_eff_max: float = 0.90
    kv_read_eff: float = 0.80
    op_overhead_s: float = 0.0
    host_step_s: float = 50.0e-6

    vpu_eff_max: float = 0.70
    vpu_half_tokens: float = 16.0
    hbm_half_bytes: float = 256 * 1024
    sram_eff_max: float = 0.80
    link_eff: float = 0.90
    a2a_eff: float = 0.60
    expert_imbalance: float = 1.0
    moe_half_rows: float = 64.0
    a2a_half_bytes: float = 256 * 1024
    pcie_eff: float = 0.85

    activations_in_hbm: bool = False
    overlap_collectives: bool = False
    overlap_ops: bool = False

    hop_latency_s: float = 1.0e-6
    pcie_latency_s: float = 2.0e-6

    ring_links: int = 0
    sample_topk: int = 64
    draft_layers: float = 1.0

    token_id_bytes: float = 4.0
    request_meta_bytes: float = 16.0
    command_bytes: float = 4096.0

    kv_memory_fraction: float = 0.90
    runtime_reserve_bytes: float = 4.0e9
    kv_page_tokens: int = 16
    head_dtype: str = "bf16"

    norm_flops: float = 5.0
    rope_flops: float = 3.0
    softmax_flops: float = 5.0
    silu_mul_flops: float = 6.0
    sample_flops: float = 5.0
    router_flops: float = 6.0

    mxu_tile_flops: float = 2.0 * 128**3
    mxu_pad_rows: int = 16
    vpu_instruction_flops: float = 1024.0
    seq_instructions_per_op: float = 24.0
    dma_descriptor_bytes: float = 65536.0

    power_w_mxu: float = 0.55
    power_w_hbm: float = 0.25
    power_w_vpu: float = 0.10
    power_w_c2c: float = 0.10

    ambient_c: float = 30.0
    r_th_c_per_w: float = 0.075
    tau_th_s: float = 5.0

    hbm_refresh_fraction: float = 0.035
    sram_conflict_fraction: float = 0.02
    interleave_jitter: float = 0.005

    def replace(self, **changes) -> "Assumptions":
        """A copy with ``changes``; unknown names raise ``ValueError`` with the known ones."""
        types = {f.name: type(f.default) for f in dataclasses.fields(self)}
        bad = sorted(set(changes) - set(types))
        if bad:
            raise ValueError(f"unknown assumption(s) {', '.join(bad)}; known: {', '.join(sorted(types))}")
        try:  # YAML reads 4.0e9 as a string: coerce to the field's type
            return dataclasses.replace(
                self, **{k: types[k](v) if types[k] is not bool else bool(v) for k, v in changes.items()}
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad assumption value: {exc}") from None


def efficiency(n: np.ndarray, e_max: float, n_half: float) -> np.ndarray:
    """Size-dependent efficiency ``e_max · n / (n + n_half)`` (0 where ``n ≤ 0``).

    Args:
        n: problem size (rows or bytes), any shape.
    Returns:
        Array of the same shape, in [0, e_max).
    """
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = e_max * n / (n + n_half)
    return np.where(n > 0, out, 0.0)


@lru_cache(maxsize=None)
def load_fitted(path: str | None = None) -> dict:
    """The fitted-parameter file (``emulator/data/fitted.yaml``): ``{"parameters": {...}, ...}``.

    Returns an empty ``parameters`` mapping when the file does not exist yet (before the first
    ``perfonto calibrate``).
    """
    p = Path(path) if path else DATA / "fitted.yaml"
    if not p.exists():
        return {"parameters": {}}
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    doc.setdefault("parameters", {})
    return doc


def fitted_assumptions(base: Assumptions | None = None, **changes) -> Assumptions:
    """``base`` (default ``Assumptions()``) with the fitted parameters of ``fitted.yaml``, then ``changes``."""
    params = {k: float(v) for k, v in load_fitted()["parameters"].items() if k in FITTED_BOUNDS}
    return (base or Assumptions()).replace(**params, **changes)
