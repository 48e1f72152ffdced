"""A small dirty fleet dump for the fleet tests: an emulated host relabelled as several hosts that each
number their chips from 0, with every window rule exercised — counters that wrap (32- and 48-bit
registers started just below their range), a reset (the boot counter steps and the counters it
guards restart), an implausible decrease (a counter cleared without an indicator), a sentinel
temperature, a null register and a dropped sample — written as a Hive-partitioned folder
(``host=…/part-0.parquet``) with small row groups, so chunked readers cross row-group boundaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto import emulator

PERIOD_NS = 2_000_000


def _set(t: pa.Table, name: str, values: np.ndarray, nulls: np.ndarray | None = None) -> pa.Table:
    i = t.column_names.index(name)
    typ = t.schema.field(name).type
    flat = values.reshape(-1)
    mask = None if nulls is None else nulls.reshape(-1)
    arr = pa.array(flat, pa.uint64(), mask=mask)
    col = pa.FixedSizeListArray.from_arrays(arr, typ.list_size) if pa.types.is_fixed_size_list(typ) else arr
    return t.set_column(i, t.schema.field(name), col)


def _get(t: pa.Table, name: str) -> np.ndarray:
    c = t.column(name).combine_chunks()
    if pa.types.is_fixed_size_list(c.type):
        return c.values.to_numpy(zero_copy_only=False).reshape(len(c), -1).copy()
    return c.to_numpy(zero_copy_only=False).reshape(-1, 1).copy()


def dirty_host(t: pa.Table, host: int, chips: int) -> pa.Table:
    """One host's rows (``t`` as the emulator wrote it, rows by sample then chip), made dirty as the
    module docstring says; host 0 gets the reset and the dropped sample, host 1 the sentinel."""
    S = t.num_rows // chips
    row = lambda s, c: s * chips + c  # noqa: E731
    for name, width in (("mxu.busy_cycles", 32), ("hbm.read_bytes", 48), ("seq.elapsed_cycles", 32)):
        v = _get(t, name)
        v = (v + np.uint64((1 << width) - 7_000_000 - 1000 * host)) & np.uint64((1 << width) - 1)  # wraps early on
        t = _set(t, name, v)
    if host == 0:
        k = S // 2
        boot = _get(t, "seq.boot_count")
        boot[[row(s, 1) for s in range(k, S)]] += 1
        t = _set(t, "seq.boot_count", boot)
        for name in ("seq.elapsed_cycles", "power.energy"):
            v = _get(t, name)
            for s in range(k, S):
                v[row(s, 1)] -= v[row(k, 1)] - np.uint64(5)
            t = _set(t, name, v)
        v = _get(t, "pcie.doorbells")
        v[[row(s, 0) for s in range(k + 3, S)]] = 0  # cleared, no indicator: an implausible decrease
        t = _set(t, "pcie.doorbells", v)
    if host == 1:
        v = _get(t, "power.temperature")
        v[row(S // 3, 0)] = 65535
        t = _set(t, "power.temperature", v)
        v = _get(t, "dma.bytes")
        nulls = np.zeros(v.shape, bool)
        nulls[row(S // 4, 1), 2] = True
        t = _set(t, "dma.bytes", v, nulls)
    t = t.set_column(0, "chip", pa.array(t.column("chip").to_numpy(), pa.int32()))
    if host == 0:  # a dropped sample
        keep = np.ones(t.num_rows, bool)
        keep[row(S // 3 + 1, 0)] = False
        t = t.filter(pa.array(keep))
    return t


def dirty_fleet(tmp: Path, sohu, hosts: int = 3, chips: int = 2, duration_s: float = 0.3, row_group: int = 50) -> Path:
    """Emulate one host and write ``hosts`` dirty copies of it as ``tmp/fleet/host=h<i>/part-0.parquet``."""
    run = emulator.run(
        sohu,
        model="llama3-70b",
        chips=chips,
        duration_s=duration_s,
        sample_period_s=PERIOD_NS * 1e-9,
        seed=3,
        out_dir=tmp / "emu",
        warmup_steps=50,
    )
    base = pq.read_table(run.counters_path)
    out = tmp / "fleet"
    for h in range(hosts):
        folder = out / f"host=h{h}"
        folder.mkdir(parents=True)
        t = dirty_host(base, h, chips)
        pq.write_table(t, folder / "part-0.parquet", row_group_size=row_group)
    return out
