"""Sample the timeline as raw counter registers and write them to Parquet, block by block.

Raw values (what a driver would read from the chip):
- counter: ``floor(cumulative value in the signal's unit / scale) mod 2**width``;
- gauge: ``round(level / scale)``.

Exactness: cumulative counts (bytes, FLOPs) can pass 2**53 in long runs, where float64 cannot hold
them to one unit. Each block of samples is therefore evaluated *relative to an anchor* (the start of
the step holding the block's first sample), where amounts are small, and the register value at
the anchor is carried exactly as an integer plus a fraction in [0, 1)::

    raw(s) = B_int + floor(B_frac + Δ(s)),   Δ(s) = (relcum(anchor, s) @ M)

Values are made non-decreasing across samples (a float tie can never step a register backwards),
then reduced modulo ``2**width``. Impulse and event counters are exact integers throughout.

Layout: columns ``chip`` (int32), ``timestamp_ns`` (int64), then one column per signal in
``gen.signals`` order, ``uint64`` or ``fixed_size_list<uint64>[instances]`` for blocks with
instance axes; rows ordered by sample, then chip.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from ontology import Generation

from .signals import ColumnPlan
from .thermal import Thermal
from .timeline import QUANTITY_NAMES, Timeline

_ENERGY = QUANTITY_NAMES.index("energy")


def schema(gen: Generation, metadata: dict) -> pa.Schema:
    """Arrow schema of the counter dump of ``gen`` with ``metadata`` under the key ``perfonto``."""
    fields = [pa.field("chip", pa.int32()), pa.field("timestamp_ns", pa.int64())]
    for sig in gen.signals.values():
        t = pa.list_(pa.uint64(), sig.instances) if sig.axes else pa.uint64()
        fields.append(pa.field(sig.name, t))
    return pa.schema(fields, metadata={"perfonto": json.dumps(metadata, sort_keys=True)})


class _Registers:
    """Exact carried register bases of the linear counters of all chips."""

    def __init__(self, M: np.ndarray):
        q, chips, c = M.shape
        self.M = M.reshape(q, chips * c)
        self.b_int = np.zeros(chips * c, np.int64)
        self.b_frac = np.zeros(chips * c)
        self.last = np.zeros(chips * c, np.int64)

    def values(self, rel: np.ndarray) -> np.ndarray:
        """(k, chips·C) unwrapped raw values for relative quantities ``rel`` (k, Q)."""
        v = np.floor(self.b_frac + rel @ self.M).astype(np.int64) + self.b_int
        v = np.maximum.accumulate(np.vstack([self.last[None], v]), axis=0)[1:]
        if len(v):
            self.last = v[-1]
        return v

    def advance(self, rel_at_new_anchor: np.ndarray) -> None:
        v = self.b_frac + (rel_at_new_anchor @ self.M).reshape(-1)
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


def write_counters(path: Path, gen: Generation, tl: Timeline, plan: ColumnPlan, t_ns: np.ndarray, s_cyc: np.ndarray,
                   chips: int, thermal: Thermal, metadata: dict, block_values: int = 4_000_000, progress=None) -> None:
    """Write the raw registers of every chip at samples ``t_ns`` (ns) / ``s_cyc`` (core cycles).

    Args:
        block_values: about how many register values to hold in memory at once.
        progress: ``progress(samples_done, samples)`` after each block, or None.
    """
    n = len(s_cyc)
    per_sample = chips * max(1, sum(p.instances for p in plan.signals))
    k = max(1, block_values // per_sample)
    C = plan.M.shape[2]
    regs = _Registers(plan.M)
    mod = np.tile(plan.mod, chips)
    reg = gen.registry
    sch = schema(gen, metadata)
    anchor = 0
    e_anchor = 0.0
    with pq.ParquetWriter(str(path), sch) as writer:
        for i0 in range(0, n, k):
            i1 = min(n, i0 + k)
            s, ts = s_cyc[i0:i1], t_ns[i0:i1]
            m = len(s)
            rel = tl.relcum(anchor, s)
            lin = (regs.values(rel) % mod).reshape(m, chips, C)
            imp = tl.impulses_at(s)
            lev = tl.gauges_at(s)
            power, temp = thermal.update(ts * 1e-9, e_anchor + rel[:, _ENERGY])
            lev = {**lev, "power": power, "temperature": temp}
            cols = [pa.array(np.tile(np.arange(chips, dtype=np.int32), m)), pa.array(np.repeat(ts, chips))]
            for p in plan.signals:
                sig, ni = p.signal, p.instances
                if p.kind == "linear":
                    out = lin[:, :, p.col:p.col + ni]
                elif p.kind == "impulse":
                    v = imp[p.impulse] % _modulus(sig.width)
                    out = np.zeros((m, chips, 1), np.int64)
                    out[:, plan.leaders if p.leader_only else slice(None), 0] = v[:, None]
                    out = np.broadcast_to(out, (m, chips, ni))
                elif p.kind == "events":
                    out = np.empty((m, chips, ni), np.int64)
                    for c in range(chips):
                        for i in range(ni):
                            out[:, c, i] = np.searchsorted(p.event_times[c][i], s, side="right")
                    out %= _modulus(sig.width)
                elif p.kind == "gauge":
                    level = lev[p.gauge][:, None, None] * p.gauge_weights[None]
                    level = reg.Quantity(level, p.gauge_unit).to(sig.unit).magnitude
                    out = np.rint(np.maximum(level, 0.0) / sig.scale).astype(np.int64)
                else:
                    out = np.zeros((m, chips, ni), np.int64)
                cols.append(_column(np.ascontiguousarray(out).astype(np.uint64).reshape(m * chips, ni), bool(sig.axes)))
            writer.write_table(pa.Table.from_arrays(cols, schema=sch))
            if progress is not None:
                progress(i1, n)
            if i1 < n:
                nxt = int(tl.step_at(s_cyc[i1:i1 + 1])[0])
                at = tl.relcum(anchor, tl.starts[nxt:nxt + 1])
                regs.advance(at)
                e_anchor += float(at[0, _ENERGY])
                anchor = nxt
