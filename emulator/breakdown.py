"""Where a projection's time goes: the top-down split of a projected schedule, without counters.

``time_split(pr)`` classifies every slot of the steady steps of a ``Projection`` (the server at full
load, ``serving.steady_window``) exactly as the counter writer classifies the sequencer's cycles
(``ops.op_table``): an op whose compute side (matrix, vector, SRAM) is at least its HBM side is
*compute*, otherwise *memory*; collectives are *interconnect*; the host slots are *host*; idle
time between steps (online arrivals) is *idle*. Each class's share is its time over the total, so
the shares add up to 1 and match the level-1 ``topdown.*`` metrics a run of the same steps reports
(up to the counter writer's rounding to whole cycles). Level 2 as ``subclasses`` splits it: compute
into matrix / vector, memory into weights / KV cache / activations, interconnect into collectives whose time
the links set (``interconnect.link``) and those whose HBM reads and writes or arithmetic take longer
(``interconnect.local``: faster links do not shorten them).

``mfu``: model FLOPs (``work.model_flops``: no padding, no replicated work) over the peak of the
weights' math dtype × chips × time, over the same steps (PaLM's model FLOPs utilisation).
"""

from __future__ import annotations

import numpy as np

from .ops import slot_seconds, stack_work
from .serving import steady_window
from .work import model_flops

#: Level-1 classes, named as the catalog's ``topdown.<class>_bound`` metrics name them.
LEVEL1 = ("compute", "memory", "interconnect", "host", "idle")


def time_split(pr) -> dict:
    """The split of a ``project.Projection`` (it must keep its ``served`` schedule).

    Returns ``{"shares": {class: fraction}, "level2": {"compute.matrix": …, "memory.weights": …},
    "bottleneck": class with the largest share, "fixed_op_share": the fraction of the time that is the
    ops' fixed cost (``op_overhead_s`` per op and collective: launch, ramp-up, drain; counted inside their
    classes, so a "memory" bottleneck with most of it fixed cost is not bought back with bandwidth),
    "mfu": fraction, "seconds": steady seconds}``; empty shares and a None bottleneck when the steady
    window holds no step.
    """
    sv, cfg = pr.served, pr.config
    if sv is None or sv.seconds is None or not len(sv.seconds):
        return {"shares": {}, "level2": {}, "bottleneck": None, "fixed_op_share": None, "mfu": None, "seconds": 0.0}
    ends = np.cumsum(sv.seconds + sv.idle_s)
    win = steady_window(ends, sv.batch.batch, sv.batch.prefill_tokens, sv.idle_s)
    idx = np.flatnonzero(win & (sv.owner >= 0))
    idle = float(sv.idle_s[win].sum())
    if not len(idx):
        return {"shares": {}, "level2": {}, "bottleneck": None, "fixed_op_share": None, "mfu": None, "seconds": 0.0}
    b = sv.batch.select(idx)
    W = stack_work(b, cfg)
    tm = slot_seconds(W, cfg)
    reps = cfg.plan.slot_reps.astype(np.float64)
    kinds = np.array(cfg.plan.kinds)[None, :]
    t = tm["t"] * reps[None, :]
    compute = (kinds == "op") & (tm["comp"] >= tm["mem"])
    memory = (kinds == "op") & ~compute
    secs = {
        "compute": float(t[compute].sum()),
        "memory": float(t[memory].sum()),
        "interconnect": float(t[kinds.repeat(len(b), 0) == "collective"].sum()),
        "host": float(t[np.isin(kinds.repeat(len(b), 0), ("host_in", "host_out"))].sum()),
        "idle": idle,
    }
    total = sum(secs.values())
    shares = {k: v / total if total > 0 else 0.0 for k, v in secs.items()}
    matrix = compute & (tm["mxu"] > 0) & (tm["mxu"] >= tm["vpu"])
    t_stream = np.maximum(tm["mem"] - tm["mem_kv_read"], 0.0)
    act = (W["act_r"] + W["act_w"]) if cfg.a.activations_in_hbm else np.zeros_like(t)
    parts = {"weights": W["w"], "kv": W["kv_w"], "act": act}
    mem_t = {
        k: np.divide(v * t_stream, tm["stream"], out=np.zeros_like(t), where=tm["stream"] > 0) for k, v in parts.items()
    }
    mem_t["kv"] = mem_t["kv"] + tm["mem_kv_read"]
    mem_sum = sum(mem_t.values())

    def mem_share(k):  # each memory op's time split by its streams' HBM times (as ``subclasses`` does)
        f = np.divide(mem_t[k], mem_sum, out=np.zeros_like(t), where=mem_sum > 0)
        return float((t * f)[memory].sum()) / total if total > 0 else 0.0

    level2 = {
        "compute.matrix": float(t[matrix].sum()) / total if total else 0.0,
        "compute.vector": float(t[compute & ~matrix].sum()) / total if total else 0.0,
        "memory.weights": mem_share("weights"),
        "memory.kv_cache": mem_share("kv"),
        "memory.activations": mem_share("act"),
    }
    # a collective lasts as long as its busiest side: the links, or the reduction's HBM reads and writes
    # and its arithmetic (``ops.slot_seconds``); only the first is bought back with link bandwidth
    coll = kinds.repeat(len(b), 0) == "collective"
    by_link = coll & (tm["link"] >= np.maximum(tm["comp"], tm["mem"]))
    level2["interconnect.link"] = float(t[by_link].sum()) / total if total else 0.0
    level2["interconnect.local"] = float(t[coll & ~by_link].sum()) / total if total else 0.0
    # the ops' fixed cost (launch, ramp-up and drain: ``op_overhead_s`` per op), inside their classes above
    fixed = float((tm["fixed"] * reps[None, :]).sum()) / total if total > 0 else 0.0
    busy = float(sv.seconds[idx].sum()) + idle
    mp = cfg.mapping
    flops_chip = float(model_flops(b, cfg.model).sum()) * mp.ranks / mp.chips
    peak = cfg.hw.peak(cfg.hw.math_dtype(cfg.prec.weights))
    return {
        "shares": shares,
        "level2": level2,
        "bottleneck": max(shares, key=shares.get) if total > 0 else None,
        "fixed_op_share": fixed,
        "mfu": flops_chip / (peak * busy) if busy > 0 else None,
        "seconds": busy,
    }


__all__ = ["LEVEL1", "time_split"]
