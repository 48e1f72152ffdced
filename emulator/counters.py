"""Sample the timeline as raw counter registers and write them to Parquet, block by block.

Raw values (what a driver would read from the chip):
- counter: ``floor(cumulative value in the signal's unit / scale) mod 2**width``;
- gauge: ``floor(level / scale)`` (a level register truncates, so a full SRAM never reads above its capacity).

Exactness: cumulative counts (bytes, FLOPs) can pass 2**53 in long runs, where float64 cannot hold
them to one unit. Each block of samples is therefore evaluated *relative to an anchor* (the start of
the step holding the block's first sample), where amounts are small, and the register value at
the anchor is carried exactly as an integer plus a fraction in [0, 1)::

    raw(s) = B_int + floor(B_frac + Δ(s)),   Δ(s) = (relcum(anchor, s) @ M)

Values are made non-decreasing across samples (a float tie can never step a register backwards),
then reduced modulo ``2**width``. Impulse and event counters are exact integers throughout.

Chips: each chip samples at its own instants (its device clock's grid, ``emulator.clocks``: ``s_cyc``
has one column per chip) and reads the timeline of its own profile (``emulator.knobs``; all
profiles share their step boundaries, so one anchor step serves every chip). ``timestamp_ns`` is
the chip's device-clock time of the sample.

Layout: columns ``chip`` (int32), ``timestamp_ns`` (int64), then one column per *bound* signal (a
signal with an emulator binding, ``emulator.signals``) in ``gen.signals`` order, ``uint64`` or
``fixed_size_list<uint64>[instances]`` for blocks with instance axes; rows ordered by sample, then
chip. A signal without a binding has no column.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from perfonto.ontology import Generation

from .signals import ColumnPlan
from .thermal import Thermal
from .timeline import QUANTITY_NAMES, Timeline

_ENERGY = QUANTITY_NAMES.index("energy")


def schema(plan: ColumnPlan, metadata: dict) -> pa.Schema:
    """Arrow schema of the counter dump of the bound signals of ``plan`` with ``metadata`` under the
    key ``perfonto``."""
    fields = [pa.field("chip", pa.int32()), pa.field("timestamp_ns", pa.int64())]
    for p in plan.signals:
        sig = p.signal
        t = pa.list_(pa.uint64(), sig.instances) if sig.axes else pa.uint64()
        fields.append(pa.field(sig.name, t))
    return pa.schema(fields, metadata={"perfonto": json.dumps(metadata, sort_keys=True)})


class _Registers:
    """Exact carried register bases of the linear counters of all chips."""

    def __init__(self, M: np.ndarray):
        q, chips, c = M.shape
        self.M3 = M
        self.M = M.reshape(q, chips * c)
        self.b_int = np.zeros(chips * c, np.int64)
        self.b_frac = np.zeros(chips * c)
        self.last = np.zeros(chips * c, np.int64)

    def _apply(self, rel: np.ndarray) -> np.ndarray:
        """``rel`` (k, Q) for every chip alike, or (k, chips, Q) per chip → (k, chips·C)."""
        if rel.ndim == 2:
            return rel @ self.M
        return np.einsum("kcq,qcn->kcn", rel, self.M3).reshape(rel.shape[0], -1)

    def values(self, rel: np.ndarray) -> np.ndarray:
        """(k, chips·C) unwrapped raw values for relative quantities ``rel`` (k, Q) or (k, chips, Q)."""
        v = np.floor(self.b_frac + self._apply(rel)).astype(np.int64) + self.b_int
        v = np.maximum.accumulate(np.vstack([self.last[None], v]), axis=0)[1:]
        if len(v):
            self.last = v[-1]
        return v

    def advance(self, rel_at_new_anchor: np.ndarray) -> None:
        v = self.b_frac + self._apply(rel_at_new_anchor).reshape(-1)
        fl = np.floor(v)
        self.b_int += fl.astype(np.int64)
        self.b_frac = v - fl


def _modulus(width: int) -> int:
    """``2**width`` as an int64 modulus (a 64-bit register cannot wrap within int64 values)."""
    return min(1 << int(width), int(np.iinfo(np.int64).max))


def _column(arr: np.ndarray, listed: bool) -> pa.Array:
    """(rows, n) uint64 → Arrow column (fixed-size list when the signal has instance axes)."""
    if listed:
        return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), arr.shape[1])
    return pa.array(arr[:, 0])


@dataclass
class _Block:
    """One block of ``m`` samples of every chip: the samples' core cycles ``s`` (m, chips), the linear
    registers ``lin`` (m, chips, columns), the impulse counts ``imp`` and gauge levels ``lev`` (name →
    (m, chips)), the leader chips and the unit registry."""

    m: int
    chips: int
    s: np.ndarray
    lin: np.ndarray
    imp: dict
    lev: dict
    leaders: np.ndarray
    reg: object


def _linear(p, blk: _Block) -> np.ndarray:
    """A linear signal's registers: its columns of the linear registers."""
    return blk.lin[:, :, p.col : p.col + p.instances]


def _impulse(p, blk: _Block) -> np.ndarray:
    """An impulse signal's register: the step-end count (× its factor) modulo its width on the chips that
    count it (the leaders when ``leader_only``), 0 on the others; every instance alike."""
    v = blk.imp[p.impulse] if p.factor == 1.0 else np.floor(blk.imp[p.impulse] * p.factor + 1e-9).astype(np.int64)
    v = v % _modulus(p.signal.width)
    out = np.zeros((blk.m, blk.chips, 1), np.int64)
    mask = blk.leaders if p.leader_only else np.ones(blk.chips, bool)
    out[:, mask, 0] = v[:, mask]
    return np.broadcast_to(out, (blk.m, blk.chips, p.instances))


def _events(p, blk: _Block) -> np.ndarray:
    """An event signal's registers: the events up to each sample (× its factor), modulo its width."""
    out = np.empty((blk.m, blk.chips, p.instances), np.int64)
    for c in range(blk.chips):
        for i in range(p.instances):
            out[:, c, i] = np.searchsorted(p.event_times[c][i], blk.s[:, c], side="right")
    if p.factor != 1.0:
        out = np.floor(out * p.factor + 1e-9).astype(np.int64)
    out %= _modulus(p.signal.width)
    return out


def _gauge(p, blk: _Block) -> np.ndarray:
    """A gauge's registers: the level (split over instances by its weights) in the signal's unit, in raw
    counts of its scale, floored at 0."""
    sig = p.signal
    level = blk.lev[p.gauge][:, :, None] * p.gauge_weights[None]
    level = blk.reg.Quantity(level, p.gauge_unit).to(sig.unit).magnitude
    return np.floor(np.maximum(level, 0.0) / sig.scale * (1 + 1e-12)).astype(np.int64)


def _constant(p, blk: _Block) -> np.ndarray:
    """A constant signal's registers: one raw value all run."""
    return np.full((blk.m, blk.chips, p.instances), p.constant, np.int64)


_RAW = {"linear": _linear, "impulse": _impulse, "events": _events, "gauge": _gauge}  # else: constant


def _per_chip(a, chips: int) -> np.ndarray:
    """``a`` (samples,) for every chip alike or (samples, chips), as int64 (samples, chips)."""
    a = np.asarray(a, np.int64)
    return np.repeat(a[:, None], chips, axis=1) if a.ndim == 1 else a


def _levels(tl0: Timeline, s: np.ndarray, ts: np.ndarray, rel: np.ndarray, thermals, e_anchor) -> tuple[dict, dict]:
    """The impulse counts and the gauge levels (with each chip's board power and temperature) at the
    block's samples."""
    chips = s.shape[1]
    imp_c = [tl0.impulses_at(s[:, c]) for c in range(chips)]
    imp = {name: np.stack([d[name] for d in imp_c], axis=1) for name in imp_c[0]}
    lev_c = [tl0.gauges_at(s[:, c]) for c in range(chips)]
    lev = {name: np.stack([d[name] for d in lev_c], axis=1) for name in lev_c[0]}
    power = np.empty((len(s), chips))
    temp = np.empty((len(s), chips))
    for c in range(chips):
        # the board averages power over its own sample period (device clock)
        power[:, c], temp[:, c] = thermals[c].update(ts[:, c] * 1e-9, e_anchor[c] + rel[:, c, _ENERGY])
    return imp, {**lev, "power": power, "temperature": temp}


def write_counters(
    path: Path,
    gen: Generation,
    tls: list[Timeline] | Timeline,
    plan: ColumnPlan,
    t_ns: np.ndarray,
    s_cyc: np.ndarray,
    chips: int,
    thermal: Thermal,
    metadata: dict,
    block_values: int = 4_000_000,
    progress=None,
    profile_of: np.ndarray | None = None,
) -> None:
    """Write the raw registers of every chip at samples ``t_ns`` (timestamps, ns) / ``s_cyc`` (core
    cycles of the timeline), each (samples,) for every chip alike or (samples, chips) per chip.

    Args:
        tls: the timeline of each chip profile (or one timeline for every chip).
        thermal: the telemetry model (copied per chip).
        block_values: about how many register values to hold in memory at once.
        progress: ``progress(samples_done, samples)`` after each block, or None.
        profile_of: (chips,) profile index of each chip (default: all 0).
    """
    import copy

    tls = [tls] if isinstance(tls, Timeline) else list(tls)
    prof = np.zeros(chips, np.int64) if profile_of is None else np.asarray(profile_of, np.int64)
    s_cyc = _per_chip(s_cyc, chips)
    t_ns = _per_chip(t_ns, chips)
    n = s_cyc.shape[0]
    per_sample = chips * max(1, sum(p.instances for p in plan.signals))
    k = max(1, block_values // per_sample)
    C = plan.M.shape[2]
    regs = _Registers(plan.M)
    mod = np.tile(plan.mod, chips)
    sch = schema(plan, metadata)
    anchor = 0
    e_anchor = np.zeros(chips)
    thermals = [copy.deepcopy(thermal) for _ in range(chips)]
    tl0 = tls[0]
    # written under another name and renamed once whole: a run stopped part way (Ctrl-C, an error) leaves no
    # counters.parquet that reads as a shorter capture, and a caller's earlier one stays until then
    partial = Path(str(path) + ".partial")
    try:
        with pq.ParquetWriter(str(partial), sch) as writer:
            for i0 in range(0, n, k):
                i1 = min(n, i0 + k)
                s, ts = s_cyc[i0:i1], t_ns[i0:i1]
                m = len(s)
                rel = np.stack([tls[prof[c]].relcum(anchor, s[:, c]) for c in range(chips)], axis=1)  # (m, chips, Q)
                lin = (regs.values(rel) % mod).reshape(m, chips, C)
                imp, lev = _levels(tl0, s, ts, rel, thermals, e_anchor)
                blk = _Block(m, chips, s, lin, imp, lev, plan.leaders, gen.registry)
                cols = [pa.array(np.tile(np.arange(chips, dtype=np.int32), m)), pa.array(ts.reshape(-1))]
                for p in plan.signals:
                    out = _RAW.get(p.kind, _constant)(p, blk)
                    raw = np.ascontiguousarray(out).astype(np.uint64).reshape(m * chips, p.instances)
                    cols.append(_column(raw, bool(p.signal.axes)))
                writer.write_table(pa.Table.from_arrays(cols, schema=sch))
                if progress is not None:
                    progress(i1, n)
                if i1 < n:
                    nxt = int(tl0.step_at(np.array([s_cyc[i1].min()]))[0])
                    at = np.stack(
                        [tls[prof[c]].relcum(anchor, tl0.starts[nxt : nxt + 1]) for c in range(chips)], axis=1
                    )
                    regs.advance(at)
                    e_anchor += at[0, :, _ENERGY]
                    anchor = nxt
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
