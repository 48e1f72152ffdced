"""Host-side event trace of a run (``trace.parquet``) and the collective waits of the ground truth.

Per step that does work (correlation id = the global step index, column ``step``):

- ``api`` (host, thread ``runtime``): the serving runtime's launch call for the step;
- ``submit`` (host, thread ``driver``): the driver builds the command buffer and rings each chip's
  doorbell;
- ``dma`` ``h2d`` (host clock, thread ``pcie`` of each chip): the PCIe transfer of the step's prompt
  tokens, request metadata and command buffer, ending when the chip starts the forward pass; ``d2h``:
  the sampled tokens back, on the chips that send them (rank leaders);
- ``step`` (host, thread ``steps``): from the launch call to the arrival of the sampled tokens (or
  to the next launch call, when the host launches the next step before this one's tokens arrive);
- ``exec`` (device clock, thread ``stream`` of each chip): the forward pass on the chip;
- at ``op`` detail, every op (thread ``mxu`` for matrix ops, ``vpu`` for vector ops) and every
  collective (thread ``c2c``; ``instance`` is the same on every chip for one collective call, so the
  chips' arrivals can be compared) of the forward pass, and the host transfers as the device sees
  them (``host_io``, thread ``pcie``). Device events carry device-clock timestamps.

The host prepares step ``j`` while the chips still run step ``j − 1``: the launch call takes
``API_S`` and the submission ``SUBMIT_S`` right before the host-to-device transfer starts (trace-only
host costs; the device timing is the emulator's). Columns: ``kind``, ``name``, ``unit`` (the thread),
``clock`` (``host`` / ``device``) as dictionary strings; ``chip`` (int32, −1 on the host),
``start_ns``/``end_ns`` (int64, on ``clock``; the chip's device clock for device events), ``step``
(int64), ``layer`` (int32: the layer within the chip's pipeline stage, −1 outside layers),
``instance`` (int64, −1 when not a collective), ``bytes`` (float64), ``wait_ns`` (int64: at ``step``
detail the chip's own count of cycles waited in collectives during the step, converted to ns; −1
otherwise — at ``op`` detail waits are measured by comparing the chips' collective spans).

Detail ``auto`` writes ``op`` detail up to ``OP_DETAIL_ROWS`` rows and ``step`` detail beyond.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .clocks import DeviceClock
from .ops import EmuConfig
from .timeline import Timeline

API_S = 6e-6
SUBMIT_S = 2e-6
OP_DETAIL_ROWS = 1_500_000
KINDS = ("api", "submit", "dma", "step", "exec", "op", "collective", "host_io")
UNITS = ("runtime", "driver", "steps", "pcie", "stream", "mxu", "vpu", "c2c")


@dataclass
class Executions:
    """Slot executions of a set of steps (arrays of equal length): ``step``, ``slot``, ``layer``,
    ``seq`` (index of the execution within its step), ``start``/``dur``/``wait`` (core cycles)."""

    step: np.ndarray
    slot: np.ndarray
    layer: np.ndarray
    seq: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    wait: np.ndarray


def step_sequence(plan) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step spelled out: (slot, group, repetition, layer) of each execution, in time order."""
    slots, groups, reps, layers = [], [], [], []
    G = len(plan.reps)
    base = 0
    for g in range(G):
        idx = np.flatnonzero(plan.group == g)
        for r in range(int(plan.reps[g])):
            slots.append(idx)
            groups.append(np.full(len(idx), g))
            reps.append(np.full(len(idx), r))
            layers.append(np.full(len(idx), base + r if 0 < g < G - 1 else -1))
        if 0 < g < G - 1:
            base += int(plan.reps[g])
    return tuple(np.concatenate(x).astype(np.int64) for x in (slots, groups, reps, layers))


def executions(tl: Timeline, steps: np.ndarray) -> Executions:
    """Every slot execution of ``steps`` (their start cycles, durations and waits)."""
    k, g, r, layer = step_sequence(tl.plan)
    J = np.asarray(steps, np.int64)
    start = tl.starts[J, None] + tl.goff[J][:, g] + r[None, :] * tl.glen[J][:, g] + tl.sstart[J][:, k]
    dur = tl.table.dur[J][:, k]
    aw = tl.table.arrival_wait
    wait = aw[J][:, k] if aw is not None else np.zeros_like(dur)
    E = len(k)
    return Executions(
        np.repeat(J, E),
        np.tile(k, len(J)),
        np.tile(layer, len(J)),
        np.tile(np.arange(E), len(J)),
        start.reshape(-1),
        dur.reshape(-1),
        wait.reshape(-1),
    )


def collective_waits(tls: list[Timeline], prof_of: np.ndarray, end_cycles: int) -> dict:
    """Ground truth of the collective waits over host time [0, ``end_cycles``] (core cycles).

    Returns ``{"wait_cycles": (chips,), "blame_cycles": (chips,), "waits_for": (chips, chips),
    "step_skew_cycles": (steps,)}``: a chip's wait in a collective is the time from its arrival to
    the last chip's arrival (the start of its collective slot); all chips' waits in a collective are
    blamed on the last-arriving chips (split evenly among ties); ``waits_for[i, j]``: cycles chip
    ``i`` waited with chip ``j`` among the last to arrive; a step's skew is its largest arrival spread
    over its collectives (cycles)."""
    chips = len(prof_of)
    tl0 = tls[0]
    P = len(tls)
    n_steps = len(tl0)
    zero = {
        "wait_cycles": np.zeros(chips),
        "blame_cycles": np.zeros(chips),
        "waits_for": np.zeros((chips, chips)),
        "step_skew_cycles": np.zeros(n_steps),
    }
    if P == 1 or any(t.table.arrival_wait is None for t in tls):
        return zero
    counts = np.bincount(prof_of, minlength=P).astype(np.float64)
    reps = tl0.plan.slot_reps.astype(np.float64)
    W = np.stack([t.table.arrival_wait for t in tls]).astype(np.float64)  # (P, steps, slots) per execution
    full = tl0.ends <= end_cycles
    Wt = W * np.where(full, 1.0, 0.0)[None, :, None] * reps[None, None, :]  # within the window, all repetitions
    for j in np.flatnonzero((tl0.starts < end_cycles) & ~full):  # the step in progress at the end
        for p, t in enumerate(tls):
            ex = executions(t, np.array([j]))
            got = np.clip(end_cycles - ex.start, 0, ex.wait).astype(np.float64)
            Wt[p, j] = np.bincount(ex.slot, weights=got, minlength=W.shape[2])
    last = (W == 0) & (W.max(axis=0, keepdims=True) > 0)  # (P, steps, slots)
    n_last = np.maximum((last * counts[:, None, None]).sum(axis=0), 1.0)
    total = (Wt * counts[:, None, None]).sum(axis=0)  # all chips' wait per instance
    blame_p = np.array([(np.where(last[q], total / n_last, 0.0)).sum() for q in range(P)])
    pair = np.array([[np.where(last[q], Wt[p] / n_last, 0.0).sum() for q in range(P)] for p in range(P)])
    out = dict(zero)
    out["wait_cycles"] = Wt.sum(axis=(1, 2))[prof_of]
    out["blame_cycles"] = blame_p[prof_of]
    wf = pair[prof_of][:, prof_of]
    np.fill_diagonal(wf, 0.0)
    out["waits_for"] = wf
    out["step_skew_cycles"] = W.max(axis=(0, 2))
    return out


def write_trace(
    path: Path,
    tls: list[Timeline],
    prof_of: np.ndarray,
    clocks: list[DeviceClock],
    cfg: EmuConfig,
    leaders: np.ndarray,
    end_cycles: int,
    detail: str = "auto",
) -> dict:
    """Write ``trace.parquet`` for the steps that start before ``end_cycles``; returns ``{"detail",
    "rows", "steps"}``.

    Raises:
        ValueError: unknown ``detail`` (``auto``, ``op``, ``step``).
    """
    if detail not in ("auto", "op", "step"):
        raise ValueError(f"trace detail must be auto, op or step (got {detail!r})")
    tl0 = tls[0]
    plan, hw, a = cfg.plan, cfg.hw, cfg.a
    f = hw.core_hz
    chips = len(prof_of)
    ns = 1e9 / f
    in_run = np.flatnonzero(tl0.starts < end_cycles)
    real = in_run[tl0.table.impulses["steps"][in_run] > 0]
    E = len(step_sequence(plan)[0])
    if detail == "auto":
        detail = "op" if len(real) * E * chips <= OP_DETAIL_ROWS else "step"
    i_in, i_out = plan.index("host_in"), plan.index("host_out")
    G = len(plan.reps)
    pcie = hw.pcie_bw * a.pcie_eff
    # host-side timing of every real step (host ns, float)
    st = tl0.starts[real].astype(np.float64)
    hi1 = st + tl0.table.dur[real, i_in]
    rx = tl0.table.q["pcie_rx"][real, i_in]
    h2d = np.minimum(rx / pcie * 1e9, (hi1 - st) * ns)
    ho0 = st + tl0.goff[real, G - 1] + tl0.sstart[real, i_out]
    ho1 = ho0 + tl0.table.dur[real, i_out]
    tx = tl0.table.q["pcie_tx"][real, i_out]
    d2h = np.minimum(a.pcie_latency_s * 1e9 + tx / pcie * 1e9, (ho1 - ho0) * ns)
    hi1_ns, ho0_ns, ho1_ns = hi1 * ns, ho0 * ns, ho1 * ns
    dma0 = hi1_ns - h2d
    sub0 = dma0 - SUBMIT_S * 1e9
    api0 = sub0 - API_S * 1e9
    R = len(real)
    rows: dict[str, list] = {
        k: []
        for k in ("kind", "name", "unit", "clock", "chip", "start", "end", "step", "layer", "instance", "bytes", "wait")
    }
    vocab = list(plan.slots) + ["launch_step", "submit", "step", "h2d", "d2h", "forward"]  # slot names first

    def add(kind, name, unit, clock, chip, start, end, step, layer=-1, instance=-1, nbytes=0.0, wait=-1):
        n = len(start)
        rows["kind"].append(np.full(n, KINDS.index(kind), np.int8))
        code = vocab.index(name) if isinstance(name, str) else np.asarray(name)  # a name or slot indices
        rows["name"].append(np.broadcast_to(np.asarray(code, np.int32), (n,)))
        rows["unit"].append(np.full(n, UNITS.index(unit), np.int8))
        rows["clock"].append(np.full(n, 0 if clock == "host" else 1, np.int8))
        for key, v, dt in (
            ("chip", chip, np.int32),
            ("start", start, np.int64),
            ("end", end, np.int64),
            ("step", step, np.int64),
            ("layer", layer, np.int32),
            ("instance", instance, np.int64),
            ("bytes", nbytes, np.float64),
            ("wait", wait, np.int64),
        ):
            rows[key].append(np.broadcast_to(np.asarray(v).astype(dt), (n,)))

    rint = lambda x: np.rint(x).astype(np.int64)  # noqa: E731
    add("api", "launch_step", "runtime", "host", -1, rint(api0), rint(sub0), real)
    add("submit", "submit", "driver", "host", -1, rint(sub0), rint(dma0), real)
    # a step marker runs from its launch call to its sampled tokens (or to the next launch, which
    # the host may issue while the chips still finish this step), so markers never overlap
    nxt = np.r_[api0[1:], np.inf]
    add("step", "step", "steps", "host", -1, rint(api0), rint(np.minimum(ho1_ns, nxt)), real)
    for c in range(chips):
        clk = clocks[c]
        add("dma", "h2d", "pcie", "host", c, rint(dma0), rint(hi1_ns), real, nbytes=rx)
        if leaders[c]:
            add("dma", "d2h", "pcie", "host", c, rint(ho1_ns - d2h), rint(ho1_ns), real, nbytes=tx)
        tl = tls[prof_of[c]]
        if detail == "step":
            aw = tl.table.arrival_wait
            w = (aw[real] @ plan.slot_reps) if aw is not None else np.zeros(R, np.int64)
            add(
                "exec",
                "forward",
                "stream",
                "device",
                c,
                clk.device_int(hi1_ns),
                clk.device_int(ho0_ns),
                real,
                wait=rint(w * ns),
            )
            continue
        add("exec", "forward", "stream", "device", c, clk.device_int(hi1_ns), clk.device_int(ho0_ns), real)
        ex = executions(tl, real)
        kind = np.array(plan.kinds)[ex.slot]
        keep = (ex.dur > 0) & (kind != "idle")
        ex_s, ex_d = ex.start[keep], ex.dur[keep]
        slot, kind, layer = ex.slot[keep], kind[keep], ex.layer[keep]
        t0, t1 = clk.device_int(ex_s * ns), clk.device_int((ex_s + ex_d) * ns)
        flops = (tl.table.q["mxu_flops_fp8"] + tl.table.q["mxu_flops_bf16"] + tl.table.q["mxu_flops_fp4"]) > 0
        is_mm = flops.any(axis=0)[slot]
        steps_k = ex.step[keep]
        txb = tl.table.q["c2c_tx"][steps_k, slot]
        inst = ex.step[keep] * E + ex.seq[keep]
        comm = (kind == "collective") & (txb > 0)  # a collective slot that moves no data is local work
        for kd, unit, sel, inst_v, by in (
            ("op", "mxu", (kind == "op") & is_mm, -1, 0.0),
            ("op", "vpu", ((kind == "op") & ~is_mm) | ((kind == "collective") & ~comm), -1, 0.0),
            ("collective", "c2c", comm, inst, txb),
            ("host_io", "pcie", (kind == "host_in") | (kind == "host_out"), -1, 0.0),
        ):
            if not sel.any():
                continue
            add(
                kd,
                slot[sel],
                unit,
                "device",
                c,
                t0[sel],
                t1[sel],
                steps_k[sel],
                layer[sel],
                inst_v[sel] if isinstance(inst_v, np.ndarray) else inst_v,
                by[sel] if isinstance(by, np.ndarray) else by,
            )
    cat = {k: np.concatenate(v) for k, v in rows.items()}

    def dictionary(codes, vocab):
        return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, np.int32)), pa.array(list(vocab), pa.string()))

    table = pa.table(
        {
            "kind": dictionary(cat["kind"], KINDS),
            "name": dictionary(cat["name"], vocab),
            "unit": dictionary(cat["unit"], UNITS),
            "clock": dictionary(cat["clock"], ("host", "device")),
            "chip": pa.array(cat["chip"], pa.int32()),
            "start_ns": pa.array(cat["start"], pa.int64()),
            "end_ns": pa.array(cat["end"], pa.int64()),
            "step": pa.array(cat["step"], pa.int64()),
            "layer": pa.array(cat["layer"], pa.int32()),
            "instance": pa.array(cat["instance"], pa.int64()),
            "bytes": pa.array(cat["bytes"], pa.float64()),
            "wait_ns": pa.array(cat["wait"], pa.int64()),
        },
        metadata={"perfonto": f'{{"detail": "{detail}", "api_s": {API_S}, "submit_s": {SUBMIT_S}}}'},
    )
    pq.write_table(table, str(path))
    return {"detail": detail, "rows": table.num_rows, "steps": int(R)}


__all__ = [
    "API_S",
    "Executions",
    "OP_DETAIL_ROWS",
    "SUBMIT_S",
    "collective_waits",
    "executions",
    "step_sequence",
    "write_trace",
]
