"""Modelling assumptions of the emulator: efficiency curves, latencies, power and telemetry constants.

Everything here is an assumption (not a Sohu figure) and is meant to be fitted later (issue 6,
against ``shared/data/calibration``). The efficiency curves follow the size-dependent efficiency
factors of analytical LLM-inference models (LLM-Viewer, GenZ, Calculon): an operation reaches a
fraction ``e_max`` of the peak rate for large problems, and half of that at a "half size"::

    eff(n) = e_max · n / (n + n_half)

with ``n`` the tokens (rows) of a matmul or vector op, or the bytes of a memory transfer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Assumptions:
    """Modelling constants (units in the names or the comments).

    Efficiency (dimensionless, ``eff(n) = e_max · n / (n + n_half)``):
        mxu_eff_max, mxu_half_tokens: matrix engine vs. rows of the GEMM (tokens).
        vpu_eff_max, vpu_half_tokens: vector unit vs. rows (tokens).
        hbm_eff_max, hbm_half_bytes: HBM vs. bytes moved by the op (row-buffer misses, refresh and
            turnarounds cap sustained bandwidth near 90 % on HBM3-class memory).
        sram_eff_max: SRAM bandwidth efficiency (SRAM time counts on the compute side).
        link_eff: payload fraction of the chip-to-chip link rate (flit headers, CRC).
        pcie_eff: payload fraction of the PCIe rate (TLP headers).
    Latency (s):
        hop_latency_s: per ring step of a collective (software + SerDes + switchless hop).
        host_step_s: host scheduling and launch overhead per step (before the forward pass).
        pcie_latency_s: one PCIe round of sampled tokens back to the host (after the pass).
    Collectives:
        ring_links: links a chip uses for a ring collective (0 = all links: a bidirectional ring
            with half the links towards each neighbour, the message split between directions).
        sample_topk: candidates per token all-gathered for sampling (value + index, 8 B each).
    Host traffic (B):
        token_id_bytes: one token ID over PCIe; request_meta_bytes: per-request step metadata
        (positions, block table delta); command_bytes: command buffer per step.
    Memory:
        kv_memory_fraction: share of HBM the runtime may use for weights + KV cache (the rest is
            workspace, as vLLM's ``gpu_memory_utilization``).
        kv_page_tokens: tokens per KV-cache page (allocation granularity).
    Vector work (FLOP per element):
        norm_flops: RMSNorm with the residual add (square, sum, scale, weight, add).
        rope_flops: rotary embedding (2 mul + 1 add per element) plus FP8 quantisation of K/V.
        softmax_flops: online softmax per attention score (max, sub, exp, sum, rescale).
        silu_mul_flops: SiLU(x)·y per element (neg, exp, add, div, mul, mul).
        sample_flops: per logit (scale, max, exp, sum, top-k compare).
    Instruction/descriptor granularity:
        mxu_tile_flops: FLOP of one matrix tile instruction (128×128×128 MACs = 2·128³).
        vpu_instruction_flops: FLOP of one vector instruction (512 lanes × FMA).
        seq_instructions_per_op: sequencer instructions to launch one op.
        dma_descriptor_bytes: bytes per DMA descriptor.
    Power (P = idle + (tdp − idle) · activity; activity = Σ weight · utilisation ≤ 1):
        power_w_mxu, power_w_hbm, power_w_vpu, power_w_c2c: weights (sum to 1).
    Thermal (first-order: T → ambient + R·P with time constant tau):
        ambient_c (°C), r_th_c_per_w (°C/W), tau_th_s (s).
    Telemetry:
        hbm_refresh_fraction: HBM controller cycles in refresh (tRFC/tREFI-like, all the time).
        sram_conflict_fraction: bank-conflict cycles per bank access cycle.
        ecc_rate_per_stack_s: corrected single-bit errors per stack per second (Poisson).
        retry_rate_per_link_s: link retransmissions per used link per second (Poisson).
        interleave_jitter: relative spread of the bytes per HBM stack / SRAM bank / DMA engine
            (address interleaving is near-uniform; the split is drawn once per chip from the seed).
    """

    mxu_eff_max: float = 0.90
    mxu_half_tokens: float = 64.0
    vpu_eff_max: float = 0.70
    vpu_half_tokens: float = 16.0
    hbm_eff_max: float = 0.90
    hbm_half_bytes: float = 256 * 1024
    sram_eff_max: float = 0.80
    link_eff: float = 0.90
    pcie_eff: float = 0.85

    hop_latency_s: float = 1.0e-6
    host_step_s: float = 50.0e-6
    pcie_latency_s: float = 2.0e-6

    ring_links: int = 0
    sample_topk: int = 64

    token_id_bytes: float = 4.0
    request_meta_bytes: float = 16.0
    command_bytes: float = 4096.0

    kv_memory_fraction: float = 0.90
    kv_page_tokens: int = 16

    norm_flops: float = 5.0
    rope_flops: float = 3.0
    softmax_flops: float = 5.0
    silu_mul_flops: float = 6.0
    sample_flops: float = 5.0

    mxu_tile_flops: float = 2.0 * 128**3
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
    ecc_rate_per_stack_s: float = 0.05
    retry_rate_per_link_s: float = 0.02
    interleave_jitter: float = 0.005


def efficiency(n: np.ndarray, e_max: float, n_half: float) -> np.ndarray:
    """Size-dependent efficiency ``e_max · n / (n + n_half)`` (0 where ``n ≤ 0``).

    Args:
        n: problem size (tokens or bytes), any shape.
    Returns:
        Array of the same shape, in [0, e_max).
    """
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = e_max * n / (n + n_half)
    return np.where(n > 0, out, 0.0)
