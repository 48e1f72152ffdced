"""Top-down level 2: each level-1 cycle class of a slot split into what sets its time.

Level 1 (``ops.CLASSES``) gives every slot one class. Level 2 splits the slot's whole core cycles,
``dur``, into sub-classes that add up to it exactly (integers), each laid out as one contiguous phase
of the slot (``amount`` cycles starting ``offset`` cycles into the slot), so that a counter sampled
in the middle of a slot still reads children that add up to their parent (``timeline``):

- collective → ``collective_wait`` (the cycles waiting for the last chip to arrive, ``knobs.synchronise``;
  first) and ``collective_transfer`` (the collective itself: link transfer, its reduction and latency);
- compute → ``compute_matrix`` (the matrix engine sets the op's time: its roofline time is at least the
  vector unit's) or ``compute_vector`` (the vector unit, or SRAM for an op without matrix work);
  a slot goes to one of them whole;
- memory → ``memory_weights``, ``memory_kv`` (KV-cache reads and writes), ``memory_activations``, in
  proportion to the HBM time of each stream (weights, KV writes and activations share the stream
  efficiency, KV reads have their own: ``ops.slot_seconds``), rounded to whole cycles;
- host → ``host_launch`` (the host's scheduling and launch before a pass, ``Assumptions.host_step_s``;
  first) and ``host_pcie`` (PCIe latency and transfers).
Idle has no level 2.
"""

from __future__ import annotations

import numpy as np

#: level-2 sub-classes, by parent (level-1 class index of ``ops.CLASSES``)
CHILDREN = {
    0: ("compute_matrix", "compute_vector"),
    1: ("memory_weights", "memory_kv", "memory_activations"),
    2: ("collective_wait", "collective_transfer"),
    3: ("host_launch", "host_pcie"),
}
SUBCLASSES = tuple(n for kids in CHILDREN.values() for n in kids)


def _split(dur: np.ndarray, parts: list[np.ndarray]) -> list[np.ndarray]:
    """Whole cycles of ``dur`` in proportion to ``parts`` (same shape), the rounding left to the last."""
    tot = sum(parts)
    out, used = [], np.zeros_like(dur)
    for p in parts[:-1]:
        share = np.divide(p, tot, out=np.zeros(dur.shape), where=tot > 0)
        n = np.minimum(np.floor(dur * share + 0.5).astype(np.int64), dur - used)
        out.append(n)
        used = used + n
    out.append(dur - used)
    return out


def subclass_phases(
    W: dict, tm: dict, dur: np.ndarray, cls: np.ndarray, wait: np.ndarray | None, kinds, a
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{sub-class: (amount, offset)}``, each (steps, slots) int64 core cycles (see the module docstring).

    Args:
        W: the slots' work (``work.stack_work``); tm: their roofline times (``ops.slot_seconds``).
        dur: (steps, slots) lock-step durations; cls: level-1 class per slot; wait: collective wait
            cycles (part of ``dur``) or None; kinds: slot kinds; a: the assumptions.
    """
    dur = np.asarray(dur, np.int64)
    zero = np.zeros_like(dur)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def put(names, amounts, where):
        off = zero
        for n, amt in zip(names, amounts):
            amt = np.where(where, amt, 0).astype(np.int64)
            out[n] = (amt, np.where(where, off, 0).astype(np.int64))
            off = off + amt

    # compute: the unit that sets the op's time takes the whole slot
    matrix = (tm["mxu"] > 0) & (tm["mxu"] >= tm["vpu"])
    put(CHILDREN[0], [np.where(matrix, dur, 0), np.where(matrix, 0, dur)], cls == 0)
    # memory: by the HBM time of each stream
    t_stream = np.maximum(tm["mem"] - tm["mem_kv_read"], 0.0)
    stream = tm["stream"]
    act = (W["act_r"] + W["act_w"]) if a.activations_in_hbm else np.zeros(dur.shape)

    def of_stream(b):
        return np.divide(b * t_stream, stream, out=np.zeros(dur.shape), where=stream > 0)

    put(
        CHILDREN[1],
        _split(dur, [of_stream(W["w"]), of_stream(W["kv_w"]) + tm["mem_kv_read"], of_stream(act)]),
        cls == 1,
    )
    # collective: the wait for the last chip first, then the collective itself
    w = np.minimum(wait if wait is not None else zero, dur)
    put(CHILDREN[2], [w, dur - w], cls == 2)
    # host: the launch before the pass, then PCIe
    k = np.asarray(kinds).reshape(1, -1)
    launch = np.where((k == "host_in") & (W["pcie_rx"] > 0), a.host_step_s, 0.0)
    rest = np.maximum(tm["t"] - launch, 0.0)
    put(CHILDREN[3], _split(dur, [launch, rest]), cls == 3)
    return out


__all__ = ["CHILDREN", "SUBCLASSES", "subclass_phases"]
