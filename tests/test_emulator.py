"""Tests of the reference emulator: hand-computed values, invariants of the counter dump, ground truth."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfonto import emulator
from perfonto.emulator.assumptions import Assumptions
from perfonto.emulator.hardware import hardware_from_generation
from perfonto.emulator.models import get_model
from perfonto.emulator.ops import CLASSES, EmuConfig, build_ops
from perfonto.emulator.parallel import Mapping, Precision
from perfonto.emulator.scheduler import ContinuousBatcher, StepBatch
from perfonto.emulator.subclasses import CHILDREN, SUBCLASSES
from perfonto.emulator.timeline import CYCLE_QUANTITIES, QUANTITY_NAMES
from perfonto.emulator.thermal import first_order_filter
from perfonto.ontology import load_generation

CYCLE_CLASSES = [f"seq.{c}_cycles" for c in CLASSES]


@pytest.fixture(scope="module")
def gen():
    g, diags = load_generation("sohu")
    assert g is not None, diags
    return g


@pytest.fixture(scope="module")
def hw(gen):
    return hardware_from_generation(gen)


class Dump:
    """Counter dump as arrays of shape (samples, chips, instances)."""

    def __init__(self, gen, path):
        self.gen = gen
        self.table = pq.read_table(path)
        self.meta = json.loads(self.table.schema.metadata[b"perfonto"])
        self.chips = self.meta["chips"]
        self.samples = self.table.num_rows // self.chips

    def raw(self, name):
        sig = self.gen.signals[name]
        col = self.table.column(name).combine_chunks()
        flat = col.flatten().to_numpy() if sig.axes else col.to_numpy()
        return flat.reshape(self.samples, self.chips, sig.instances)

    def delta(self, name):
        """Per-window modular increase, in raw units (uint64)."""
        a = self.raw(name)
        return (a[1:] - a[:-1]) & np.uint64((1 << self.gen.signals[name].width) - 1)

    def total(self, name):
        """Σ of modular deltas × scale over the run, all chips and instances, in the signal's unit."""
        return float(self.delta(name).astype(np.float64).sum()) * self.gen.signals[name].scale


_STEP_COUNTS = (
    "decode_tokens decode_keys prefill_tokens prefill_chunks prefill_pairs prefill_history head_tokens completed"
)


def _batch(**kw) -> StepBatch:
    """One step of one request, every count zero but those given in ``kw``."""
    fields = dict.fromkeys(_STEP_COUNTS.split(), 0) | dict(batch=1, kv_tokens=0, kv_alloc_tokens=0) | kw
    return StepBatch(**{k: np.array([v], np.int64) for k, v in fields.items()})


def _cfg(m, hw, chips, a=None):
    return EmuConfig(m, hw, a or Assumptions(), Mapping(tp=chips), Precision.of("fp8"))


def _layer_sum(table, quantity, chips, cfg):
    return float(table.q[quantity][0, cfg.plan.layer_slots].sum()) * chips


# ---- model shape -------------------------------------------------------------------------------


def test_llama3_70b_parameter_count():
    m = get_model("llama3-70b")
    # per layer: Q 8192·8192 + K,V 2·8192·1024 + O 8192·8192 + FFN 3·8192·28672 + 2 norms of 8192
    assert m.params_per_layer == 67_108_864 + 16_777_216 + 67_108_864 + 704_643_072 + 16_384 == 855_654_400
    assert m.non_embedding_params == 80 * 855_654_400 + 8192 == 68_452_360_192
    assert m.embedding_params == m.lm_head_params == 128_256 * 8192 == 1_050_673_152
    assert m.total_params == 70_553_706_496
    assert m.total_params == pytest.approx(70.55e9, rel=1e-3)
    assert m.kv_bytes_per_token() == 2 * 80 * 8 * 128 == 160 * 1024  # FP8 K and V of one token, all layers


# ---- per-op work by hand -----------------------------------------------------------------------


def test_prefill_layer_flops_by_hand(hw):
    m, chips = get_model("llama3-70b"), 8
    cfg = _cfg(m, hw, chips)
    # one 2048-token prompt from scratch: causal pairs 2048·2049/2
    t = build_ops(_batch(prefill_tokens=2048, prefill_chunks=1, prefill_pairs=2048 * 2049 // 2, head_tokens=1), cfg)
    SLOTS = cfg.plan.slots
    matmul = 2 * 2048 * 855_638_016  # 2·tokens·(layer matmul params), all chips
    attention = 4 * 64 * 128 * 2_098_176  # QKᵀ + PV: 4·H·dh per (query, key) pair
    assert matmul + attention == 3_573_446_344_704
    assert _layer_sum(t, "mxu_flops_fp8", chips, cfg) == pytest.approx(3_573_446_344_704, rel=1e-12)
    gemm = [SLOTS.index(s) for s in ("qkv_proj", "o_proj", "ffn_gate_up", "ffn_down")]
    assert float(t.q["hbm_read"][0, gemm].sum()) * chips == pytest.approx(855_638_016, rel=1e-12)  # FP8 weights
    assert _layer_sum(t, "hbm_write", chips, cfg) == pytest.approx(2048 * 2 * 8 * 128, rel=1e-12)  # FP8 K,V written
    # LM head (BF16, as ModelOpt checkpoints keep it) on the last prompt token only: 2·d·V of model
    # work, but the matrix engine pads its one row to a block of 16 rows (hardware work, HFU)
    assert float(t.q["mxu_flops_bf16"][0, SLOTS.index("lm_head")]) * chips == pytest.approx(16 * 2 * 8192 * 128_256)
    assert float(t.q["hbm_read"][0, SLOTS.index("lm_head")]) * chips == pytest.approx(2 * 8192 * 128_256)  # 2 B each
    # model FLOPs of the step, all chips: 2 · 68,451,041,280 params · 2048 tokens + the head once
    # (one prefill request) + causal attention 4·H·dh·L per pair over 2048·2049/2 pairs
    model = 2 * 68_451_041_280 * 2048 + 2 * 8192 * 128_256 + 4 * 64 * 128 * 80 * 2_098_176
    assert model == 285_877_808_922_624
    assert float((t.q["model_flops"][0] * cfg.plan.slot_reps).sum()) * chips == pytest.approx(model, rel=1e-12)


def test_decode_layer_flops_by_hand(hw):
    m, chips = get_model("llama3-70b"), 8
    cfg = _cfg(m, hw, chips)
    SLOTS = cfg.plan.slots
    # one decode token after a 2048-token prompt and one sampled token: attends to 2049 keys; the
    # matrix engine runs its one row as a block of 16 (padding: hardware work, not model work)
    t = build_ops(_batch(decode_tokens=1, decode_keys=2049, head_tokens=1), cfg)
    assert _layer_sum(t, "mxu_flops_fp8", chips, cfg) == pytest.approx(
        16 * 2 * 855_638_016 + 4 * 64 * 128 * 2049, rel=1e-12
    )
    assert 2 * 855_638_016 + 4 * 64 * 128 * 2049 == 1_778_417_664
    model = 80 * 1_778_417_664 + 2 * 8192 * 128_256  # every layer, plus the head once
    assert model == 144_374_759_424
    assert float((t.q["model_flops"][0] * cfg.plan.slot_reps).sum()) * chips == pytest.approx(model, rel=1e-12)
    # decode attention reads the 2048-token history: 2·Hkv·dh bytes per token
    assert float(t.q["hbm_read"][0, SLOTS.index("attn_decode")]) * chips == pytest.approx(2048 * 2 * 8 * 128)
    # decode is memory-bound: every GEMM of the layer is on the memory side of the roofline
    assert all(CLASSES[t.cls[0, SLOTS.index(s)]] == "memory" for s in ("qkv_proj", "o_proj", "ffn_gate_up", "ffn_down"))


def test_ring_all_reduce_bytes_and_time(hw):
    m, chips, a = get_model("llama3-70b"), 8, Assumptions()
    cfg = _cfg(m, hw, chips, a)
    t = build_ops(_batch(prefill_tokens=2048, prefill_chunks=1, prefill_pairs=2048 * 2049 // 2, head_tokens=1), cfg)
    j = cfg.plan.index("attn_allreduce")
    msg = 2048 * 8192 * 2  # BF16 hidden states of the step
    sent = 2 * 7 / 8 * msg  # ring: 2(N−1)/N · M per chip
    assert t.q["c2c_tx"][0, j] == pytest.approx(sent) == 58_720_256
    seconds = sent / (hw.link_bw * hw.links * a.link_eff) + 2 * 7 * a.hop_latency_s
    assert t.dur[0, j] == math.ceil(seconds * hw.core_hz)
    assert CLASSES[t.cls[0, j]] == "collective"


def test_hardware_is_read_from_the_generation(tmp_path, gen):
    hw = hardware_from_generation(gen)
    assert hw.peak_fp8 == 9000e12 and hw.core_hz == 1.5e9 and hw.hbm_bw == 7.2e12 and hw.hbm_capacity == 144e9
    assert (hw.cores, hw.banks, hw.stacks, hw.dma_engines, hw.links) == (8, 16, 6, 4, 12)
    text = (
        open(gen.source_file)
        .read()
        .replace("value: 9000", "value: 4500")
        .replace("value: 1.5, unit: GHz", "value: 2, unit: GHz")
    )
    p = tmp_path / "half.yaml"
    p.write_text(text)
    g2, diags = load_generation(p)
    assert g2 is not None, diags
    hw2 = hardware_from_generation(g2)
    assert hw2.peak_fp8 == 4500e12 and hw2.core_hz == 2e9


# ---- the counter dump --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_run(gen, tmp_path_factory):
    """4 s at 10 ms: the 32-bit core-cycle counters (1.5 GHz) wrap after 2.86 s."""
    r = emulator.run(gen, duration_s=4.0, sample_period_s=0.01, out_dir=tmp_path_factory.mktemp("long"))
    return r, Dump(gen, r.counters_path)


def test_dump_layout(gen, long_run):
    r, d = long_run
    names = d.table.column_names
    bound = [n for n, s in gen.signals.items() if s.emulator is not None]  # an unbound signal has no column
    assert names[:2] == ["chip", "timestamp_ns"] and names[2:] == bound and "dma.transfer_sizes" not in names
    assert d.meta["unbound_signals"] == ["dma.transfer_sizes"]
    assert (
        str(d.table.schema.field("chip").type) == "int32" and str(d.table.schema.field("timestamp_ns").type) == "int64"
    )
    assert str(d.table.schema.field("hbm.read_bytes").type).startswith("fixed_size_list<element: uint64>[6]")
    assert str(d.table.schema.field("seq.elapsed_cycles").type) == "uint64"
    assert {
        k: d.meta[k] for k in ("generation", "content_hash", "model", "chips", "sample_period_ns", "seed", "isl", "osl")
    } == {
        "generation": "sohu",
        "content_hash": gen.content_hash,
        "model": "llama3-70b",
        "chips": 8,
        "sample_period_ns": 10_000_000,
        "seed": 0,
        "isl": 2048,
        "osl": 128,
    }
    chip = d.table.column("chip").to_numpy().reshape(d.samples, 8)
    ts = d.table.column("timestamp_ns").to_numpy().reshape(d.samples, 8)
    assert (chip == np.arange(8)).all()
    # each chip stamps its samples with its own device clock: first sample at the start of the run
    # (its offset), then exactly one period apart on that clock, the last 4 s later
    assert ts[0].tolist() == r.ground_truth["clock_offsets_ns"] and len(set(ts[0].tolist())) == 8
    assert (np.diff(ts, axis=0) == 10_000_000).all() and (ts[-1] - ts[0] == 4_000_000_000).all()
    assert all(abs(o) <= 10_000_000 for o in r.ground_truth["clock_offsets_ns"])
    assert all(abs(x) <= 100 for x in r.ground_truth["clock_drifts_ppm"])


def test_raw_registers_fit_their_width_and_never_step_back(gen, long_run):
    _, d = long_run
    for name, sig in gen.signals.items():
        if sig.kind == "counter":
            assert (d.raw(name) < (1 << sig.width)).all(), name
            assert (d.delta(name) < (1 << (sig.width - 1))).all(), name  # no backward step seen as a huge delta


def test_cycle_counters_wrap_and_deltas_recover_ground_truth(long_run):
    r, d = long_run
    gt = r.ground_truth
    el = d.raw("seq.elapsed_cycles")
    assert el.max() < 2**32 and (np.diff(el[:, 0, 0].astype(np.int64)) < 0).any()  # it wrapped
    # each chip's samples span 4 s of its own clock: 4 s / (1 + drift) of host time, in core cycles
    span = [round(4e9 / (1 + c["drift_ppm"] * 1e-6) * 1.5) for c in gt["clocks"]]
    assert d.total("seq.elapsed_cycles") == sum(span) == pytest.approx(8 * 4.0 * 1.5e9, rel=1e-4)
    for c in CLASSES:
        assert d.total(f"seq.{c}_cycles") / 1.5e9 == pytest.approx(gt["topdown_s"][c], rel=1e-3, abs=1e-6)
    assert sum(gt["topdown_s"].values()) == pytest.approx(sum(span) / 1.5e9, rel=1e-12)
    for name, key in [
        ("mxu.flops_fp8", "flops_fp8"),
        ("mxu.flops_bf16", "flops_bf16"),
        ("vpu.flops", "vector_flops"),
        ("hbm.read_bytes", "hbm_read_bytes"),
        ("hbm.write_bytes", "hbm_write_bytes"),
        ("c2c.tx_bytes", "c2c_tx_bytes"),
        ("pcie.rx_bytes", "pcie_rx_bytes"),
        ("pcie.tx_bytes", "pcie_tx_bytes"),
        ("power.energy", "energy_j"),
        ("seq.input_tokens", "input_tokens"),
        ("seq.output_tokens", "output_tokens"),
        ("seq.requests_completed", "requests_completed"),
    ]:
        assert d.total(name) == pytest.approx(gt[key], rel=1e-3), name
    assert d.total("seq.steps") == gt["steps"]  # counted once per tensor-parallel group, by its leader
    assert d.total("mxu.busy_cycles") / (8 * 1.5e9) == pytest.approx(gt["busy_s"]["mxu"], rel=1e-3)
    assert d.total("hbm.active_cycles") / (6 * 4.8e9) == pytest.approx(gt["busy_s"]["hbm"], rel=1e-3)
    assert gt["tokens"] == gt["input_tokens"] + gt["output_tokens"]
    assert gt["tokens_per_second"] == gt["tokens"] / 4.0
    # each precision at its own dense peak (sohu: FP8 9e15, BF16 4.5e15 FLOP/s), over 8 chips x 4 s
    hfu = (gt["flops_fp8"] / 9e15 + gt["flops_bf16"] / 4.5e15) / (8 * 4.0)
    assert gt["flops_fp8"] + gt["flops_bf16"] == pytest.approx(gt["flops"]) and gt["hfu"] == pytest.approx(hfu)
    assert gt["mfu"] == pytest.approx(gt["model_flops"] / gt["flops"] * hfu) and gt["mfu"] <= gt["hfu"]
    assert d.total("seq.model_flops") == pytest.approx(gt["model_flops"], rel=1e-3)
    assert d.total("power.job_energy") == pytest.approx(gt["job_energy_j"], rel=1e-3)
    assert d.total("seq.job_time") == pytest.approx(gt["job_time_s"], rel=1e-6) == pytest.approx(8 * 4.0, rel=1e-4)


def test_cycle_classes_sum_to_elapsed_in_every_window(long_run):
    _, d = long_run
    el = d.delta("seq.elapsed_cycles").astype(np.int64)
    classes = sum(d.delta(n).astype(np.int64) for n in CYCLE_CLASSES)
    assert np.abs(classes - el).max() <= 1


def test_busy_never_exceeds_elapsed(long_run):
    _, d = long_run
    el = d.delta("seq.elapsed_cycles").astype(np.float64)  # core cycles, (windows, chips, 1)
    for name, ratio in [
        ("mxu.busy_cycles", 1),
        ("vpu.busy_cycles", 1),
        ("dma.busy_cycles", 1),
        ("sram.bank_conflict_cycles", 1),
        ("hbm.active_cycles", 4.8 / 1.5),
        ("c2c.busy_cycles", 1.6 / 1.5),
    ]:
        assert (d.delta(name) <= el * ratio + 1).all(), name
    busy_and_stall = d.delta("mxu.busy_cycles").astype(np.int64) + d.delta("mxu.operand_stall_cycles").astype(np.int64)
    assert (busy_and_stall <= el + 2).all()


def test_leader_counts_tokens_once(long_run):
    _, d = long_run
    for name in ("seq.input_tokens", "seq.output_tokens", "pcie.tx_bytes"):
        raw = d.raw(name)
        assert raw[-1, 0, 0] > 0 and (raw[:, 1:] == 0).all(), name


def test_energy_is_the_integral_of_power(long_run):
    r, d = long_run
    power_w = d.raw("power.power")[1:].astype(np.float64) * 1e-3  # window-average power, W
    energy_j = d.delta("power.energy").astype(np.float64) * 1e-3
    assert np.abs(power_w * 0.01 - energy_j).max() <= 0.002  # per window, within the mJ/mW rounding
    assert float((power_w * 0.01).sum()) == pytest.approx(r.ground_truth["energy_j"], rel=1e-4)
    assert ((power_w >= 90 - 1e-3) & (power_w <= 700 + 1e-3)).all()  # idle ≤ P ≤ TDP
    temp = d.raw("power.temperature")[:, 0, 0] * 0.01
    assert temp[0] == pytest.approx(30 + 0.075 * 90, abs=0.01) and (np.diff(temp) >= -0.01).all()


def test_matrix_flops_are_2_params_per_token_plus_head_and_attention(gen, tmp_path):
    """Finite offline run that drains: totals follow from the request shape alone."""
    R, isl, osl = 16, 512, 32
    r = emulator.run(
        gen,
        duration_s=0.5,
        sample_period_s=0.01,
        isl=isl,
        osl=osl,
        num_requests=R,
        out_dir=tmp_path,
        assumptions=Assumptions(),
    )
    gt, m = r.ground_truth, get_model("llama3-70b")
    assert (gt["requests_completed"], gt["input_tokens"], gt["output_tokens"]) == (R, R * isl, R * osl)
    forward = R * (isl + osl - 1)  # the last sampled token is never fed back
    pairs = R * (isl * (isl + 1) // 2 + sum(isl + g for g in range(1, osl)))
    expected = (
        2 * m.active_matmul_params * forward + 2 * m.hidden * m.vocab * R * osl + 4 * m.heads * m.head_dim * pairs
    )
    assert gt["flops"] == pytest.approx(expected, rel=0.01)
    assert gt["topdown_s"]["idle"] > 0  # drained before the end: idle
    d = Dump(gen, r.counters_path)
    assert d.raw("seq.batch_size")[-1].max() == 0 and d.total("seq.idle_cycles") / 1.5e9 == pytest.approx(
        gt["topdown_s"]["idle"]
    )


def test_deterministic_for_a_seed(gen, tmp_path):
    a = emulator.run(gen, duration_s=0.2, out_dir=tmp_path / "a", seed=7)
    b = emulator.run(gen, duration_s=0.2, out_dir=tmp_path / "b", seed=7)
    c = emulator.run(gen, duration_s=0.2, out_dir=tmp_path / "c", seed=8)
    ta, tb, tc = (pq.read_table(x.counters_path) for x in (a, b, c))
    assert ta.equals(tb) and a.ground_truth == b.ground_truth
    for name in ("requests.parquet", "sync.parquet", "trace.parquet"):
        assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name)), name
    assert not ta.column("hbm.read_bytes").equals(tc.column("hbm.read_bytes"))  # per-stack split comes from the seed
    # the clocks come from the seed too, so each chip's sampled span differs by its drift (≤ 100 ppm)
    assert c.ground_truth["hbm_read_bytes"] == pytest.approx(a.ground_truth["hbm_read_bytes"], rel=2e-4)
    ideal = dict(duration_s=0.2, clock_offset_max_s=0.0, clock_drift_max_ppm=0.0)
    i7 = emulator.run(gen, out_dir=tmp_path / "i7", seed=7, **ideal).ground_truth
    i8 = emulator.run(gen, out_dir=tmp_path / "i8", seed=8, **ideal).ground_truth
    assert i7["hbm_read_bytes"] == i8["hbm_read_bytes"]


def test_sample_grid_ends_exactly_at_duration(hw):
    t, s = emulator.sample_grid(0.0115, 0.002, hw.core_hz)
    assert t.tolist() == [0, 2_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000, 11_500_000]
    assert s[-1] == 17_250_000
    # a final sample closer than half a period to the last grid point would share its grid point
    # (metrics.windows rebuilds the grid from the period): the run ends on the grid point instead
    t, _ = emulator.sample_grid(0.0105, 0.002, hw.core_hz)
    assert t.tolist() == [0, 2_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000]
    t, _ = emulator.sample_grid(0.011, 0.002, hw.core_hz)  # exactly half a period: kept
    assert t[-1] == 11_000_000


# ---- the closed-form timeline against an explicit expansion -------------------------------------


@pytest.mark.parametrize("model,chips,requests,duration", [("llama3-8b", 2, 40, 0.05), ("deepseek-v3", 8, 160, 0.5)])
def test_timeline_matches_explicit_segments(gen, tmp_path, model, chips, requests, duration):
    """Closed-form cumulative values = a plain expansion of every slot of every layer (DeepSeek-V3:
    two layer groups, 3 dense and 58 MoE layers)."""
    r = emulator.run(
        gen,
        model=model,
        chips=chips,
        duration_s=duration,
        sample_period_s=0.001,
        isl=256,
        osl=8,
        num_requests=requests,
        token_budget=1024,
        out_dir=tmp_path,
        assumptions=Assumptions(),
    )
    tl = r.timeline
    plan = tl.plan
    seq = [
        i for g, n in enumerate(plan.reps) for i in list(np.flatnonzero(plan.group == g)) * int(n)
    ]  # one step, spelled out
    dur = np.concatenate([tl.table.dur[j, seq] for j in range(len(tl))])
    inc = np.concatenate([tl.inc[j, seq] for j in range(len(tl))])
    bounds = np.concatenate([[0], np.cumsum(dur)])
    cum = np.vstack([np.zeros(tl.inc.shape[2]), np.cumsum(inc, axis=0)])
    s = np.random.default_rng(0).integers(0, int(tl.ends[-1]) - 1, 300)
    got = tl.relcum(0, s)
    phased = [CYCLE_QUANTITIES.index(n) for n in SUBCLASSES]  # level-2 classes: each a whole-cycle phase of its slot
    off = np.concatenate([tl.phase_off[j, seq] for j in range(len(tl))])
    amt = np.concatenate([tl.phase_amt[j, seq] for j in range(len(tl))])
    e = np.searchsorted(bounds, s, side="right") - 1  # the execution holding each sample
    wait = amt[e, SUBCLASSES.index("collective_wait")]  # a collective's op work accrues after its wait
    after_wait = np.clip(s - bounds[e] - wait, 0, None) / np.maximum(dur[e] - wait, 1)
    always = [QUANTITY_NAMES.index(n) for n in ("energy", "job_time", "hbm_refresh")]
    for q in range(cum.shape[1]):
        want = np.interp(s, bounds, cum[:, q])
        if q >= len(CYCLE_QUANTITIES) and q not in always:
            want = cum[e, q] + after_wait * inc[e, q]
        if q in phased:
            i = phased.index(q)
            want = cum[e, q] + np.clip(s - bounds[e] - off[e, i], 0, amt[e, i])
        assert np.allclose(got[:, q], want, rtol=1e-9, atol=1e-6), q
    sub = got[:, phased]
    for parent, kids in CHILDREN.items():  # children add up to their parent at every cycle, exactly
        cols = [SUBCLASSES.index(k) for k in kids]
        assert (sub[:, cols].sum(axis=1) == got[:, 1 + parent]).all()
    assert len(tl) > 10 and r.ground_truth["topdown_s"]["idle"] > 0  # prefill, decode and idle steps
    a = len(tl) // 2  # anchored evaluation = difference
    later = s[s >= tl.starts[a]]
    whole = tl.relcum(0, later)
    # the difference of two cumulative values is exact only to their float64 resolution (≈ 2.2e-16 × their size)
    tol = 1e-6 + 1e-14 * np.abs(whole).max(axis=0)
    diff = whole - tl.relcum(0, tl.starts[a : a + 1])
    assert (np.abs(tl.relcum(a, later) - diff) <= tol + 1e-9 * np.abs(diff)).all()


def test_first_order_filter_matches_recursion():
    rng = np.random.default_rng(1)
    x, a = rng.uniform(0, 100, 5000), np.exp(-rng.uniform(0, 0.05, 5000))
    y, prev = [], 3.0
    for xi, ai in zip(x, a):
        prev = ai * prev + (1 - ai) * xi
        y.append(prev)
    assert np.allclose(first_order_filter(x, a, 3.0), y, rtol=1e-10)


# ---- scheduler invariants ----------------------------------------------------------------------


PAGE = 16  # tokens a KV page holds in the scheduler tests


def scheduler_workloads(budget_max: int) -> dict:
    """Hypothesis draws of a scheduler workload: prompt and output lengths, the token budget, the batch
    limit, KV room as a multiple of one request's pages, and the number of requests."""
    return dict(
        isl=st.integers(1, 300),
        osl=st.integers(1, 40),
        budget=st.integers(1, budget_max),
        max_batch=st.integers(1, 64),
        cap_mult=st.integers(1, 20),
        n=st.integers(1, 60),
    )


def batcher(isl, osl, budget, max_batch, cap_mult, n, *, draft_tokens=0, **kw):
    """A batcher of ``n`` requests with KV room for ``cap_mult`` requests' pages (a request's: its prompt,
    its output and its drafts), and that room in tokens."""
    capacity = -(-(isl + osl - 1 + draft_tokens) // PAGE) * PAGE * cap_mult
    s = ContinuousBatcher(
        isl=isl,
        osl=osl,
        token_budget=budget,
        max_batch=max_batch,
        kv_capacity_tokens=capacity,
        num_requests=n,
        page_tokens=PAGE,
        draft_tokens=draft_tokens,
        **kw,
    )
    return s, capacity


@settings(max_examples=30, deadline=None)
@given(**scheduler_workloads(600))
def test_scheduler_conserves_tokens(isl, osl, budget, max_batch, cap_mult, n):
    s, capacity = batcher(isl, osl, budget, max_batch, cap_mult, n)
    b = s.run(100_000)
    assert s.finished
    assert b.prefill_tokens.sum() == n * isl and b.head_tokens.sum() == n * osl and b.completed.sum() == n
    assert b.decode_tokens.sum() == n * (osl - 1)
    assert (b.batch <= max_batch).all() and (b.kv_alloc_tokens <= capacity).all()
    assert (b.tokens <= np.maximum(budget, b.decode_tokens)).all() and (b.tokens > 0).all()
    assert b.prefill_pairs.sum() == n * isl * (isl + 1) // 2


def test_register_bases_stay_exact_past_2_to_the_53():
    """Cumulative counts past 2**53 (where float64 loses units) are carried as exact integers."""
    from fractions import Fraction

    from perfonto.emulator.counters import _Registers

    regs = _Registers(np.ones((1, 1, 1)))
    step = 1.5e15 + 0.25  # exactly representable
    for _ in range(10):
        regs.advance(np.array([[step]]))
    exact = 10 * Fraction(step)  # 15_000_000_000_000_002.5 > 2**53
    assert exact > 2**53 and float(exact) != exact
    assert int(regs.values(np.array([[0.0], [0.5]]))[0, 0]) == math.floor(exact)
    assert int(regs.last[0]) == math.floor(exact + Fraction(1, 2))
