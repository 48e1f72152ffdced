"""The long layout of the collector format (``capture.dump``): one row per chip, sample, signal and
instance — ``signal``, ``instance`` (the flat index over the block's axes; empty for a signal
without instances) and ``value`` — read into one column (N, I) per signal on one row per (host,
chip, timestamp). Every declared instance must appear in some row of the whole dump
(``check_instances_seen``); an instance missing at some timestamps only is a null register there."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perfonto.ontology.diagnostics import did_you_mean
from perfonto.ontology.resolved import Generation

from .dump_io import DumpError


def _long_columns(t: pa.Table, p: str, gen: Generation, notes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """signal → (row indices (K,), instance (K,), values (K,), nulls (K,), declared instance count) of a long table."""
    from .dump import _check_type  # the register-type rules, shared with the wide layout

    if t.column("signal").null_count:
        raise DumpError(f"{p}: `signal` holds nulls; every row names its signal")
    val = t.column("value")
    if not pa.types.is_integer(val.type):
        raise DumpError(f"{p}: column `value` has type {val.type}; raw registers are unsigned integers")
    sig_col = pc.cast(t.column("signal"), pa.string()).combine_chunks()
    dic = sig_col.dictionary_encode()
    codes = dic.indices.to_numpy(zero_copy_only=False)
    labels = dic.dictionary.to_pylist()
    if "instance" in t.column_names:
        inst_col = t.column("instance")
        if not pa.types.is_integer(inst_col.type) and not pa.types.is_null(inst_col.type):
            raise DumpError(
                f"{p}: column `instance` has type {inst_col.type}; it is the instance's flat index (an integer)"
            )
        inst = (
            inst_col.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            if not pa.types.is_null(inst_col.type)
            else np.full(t.num_rows, -1, np.int64)
        )
    else:
        inst = np.full(t.num_rows, -1, np.int64)
    vnull = val.is_null().to_numpy(zero_copy_only=False)
    values = val.fill_null(0).to_numpy(zero_copy_only=False)
    if values.dtype.kind == "i" and values.size and (values < 0).any():
        bad = int(np.flatnonzero(values < 0)[0])
        raise DumpError(f"{p}: row {bad + 1}: `value` is negative; raw registers are unsigned")
    out = {}
    for k, name in enumerate(labels):
        if name not in gen.signals:
            hint = did_you_mean(name, gen.signals)
            notes.append(
                f"signal `{name}` is not a signal of `{gen.name}`; its rows are ignored"
                + (f" ({hint})" if hint else "")
            )
            continue
        sig = gen.signals[name]
        _check_type(p, "value", sig, val.type)
        rows = np.flatnonzero(codes == k)
        ii = inst[rows]
        n = sig.instances
        if n == 1:
            if np.any(ii > 0):
                raise DumpError(
                    f"{p}: signal `{name}` has no instances, but rows give instance {int(ii.max())}; leave "
                    "`instance` empty"
                )
            ii = np.zeros(len(rows), np.int64)
        elif sig.slots is not None:  # instance = the slot's flat index; rows of slots that are not present are left out
            n_full = sig.full_instances
            if np.any((ii < 0) | (ii >= n_full)):
                bad = ii[(ii < 0) | (ii >= n_full)][0]
                raise DumpError(
                    f"{p}: signal `{name}` has {n_full} slots (0 … {n_full - 1}); a row gives instance "
                    f"{'none' if bad < 0 else int(bad)}"
                )
            pos = np.full(n_full, -1, np.int64)
            pos[list(sig.slots)] = np.arange(n)
            keep = pos[ii] >= 0
            rows, ii = rows[keep], pos[ii[keep]]
        elif np.any((ii < 0) | (ii >= n)):
            bad = ii[(ii < 0) | (ii >= n)][0]
            raise DumpError(
                f"{p}: signal `{name}` has {n} instances (0 … {n - 1}); a row gives instance "
                f"{'none' if bad < 0 else int(bad)}"
            )
        out[name] = (rows, ii, values[rows].astype(np.uint64, copy=False), vnull[rows], n)
    return out


def _long_keys(t: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Signal code and instance (−1 for none) of every row of a long table whose columns were checked."""
    sig = pc.cast(t.column("signal"), pa.string()).fill_null("").combine_chunks()
    codes = sig.dictionary_encode().indices.to_numpy(zero_copy_only=False)
    if "instance" not in t.column_names or not pa.types.is_integer(t.column("instance").type):
        return codes, np.full(t.num_rows, -1, np.int64)
    return codes, t.column("instance").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def check_instances_seen(p: str, gen: Generation, name: str, given) -> None:
    """Refuse a long-layout signal of which some declared instance appears in no row of the whole
    dump (a dump of another generation, or of a SKU whose ``slots`` are not declared); an instance
    missing at some timestamps only is a null register there ("missing sample").

    ``given``: the distinct flat instance indices of the signal's rows (out-of-range ones are
    refused elsewhere and ignored here).

    Raises:
        DumpError: naming the signal, the instances given and the declared count, with the fix.
    """
    sig = gen.signals[name]
    if sig.instances <= 1:
        return
    expect = list(sig.slots) if sig.slots is not None else list(range(sig.instances))
    have = sorted({int(i) for i in given} & set(expect))
    unseen = [i for i in expect if i not in have]
    if not unseen:
        return
    declared = (
        f"{sig.instances} present slots ({_spans(expect)}) of {sig.full_instances}"
        if sig.slots is not None
        else f"{sig.instances} instances (0 … {sig.instances - 1})"
    )
    raise DumpError(
        f"{p}: signal `{name}`: the rows give {_instances(have)} only, but generation `{gen.name}` "
        f"declares {declared}; {_instances(unseen)} appear{'s' if len(unseen) == 1 else ''} in no row of the dump. Is "
        f"--generation right? If the hardware has only these `{sig.block}` instances (a SKU), declare the "
        f"SKU's `slots:` on block `{sig.block}` in its generation. (An instance missing at some timestamps "
        "only is read as a missing sample.)"
    )


def _instances(idx: list[int]) -> str:
    return "no instance" if not idx else f"instance {idx[0]}" if len(idx) == 1 else f"instances {_spans(idx)}"


def _spans(idx: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0 … 2, 5"``."""
    out, i = [], 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[i]) if j == i else f"{idx[i]}, {idx[j]}" if j == i + 1 else f"{idx[i]} … {idx[j]}")
        i = j + 1
    return ", ".join(out)


def _pivot(chip, host, ts, t: pa.Table, p: str, columns: dict):
    """Long rows → one row per (host, chip, timestamp) and signal columns (N, I)."""
    hk = np.zeros(len(chip), np.int64) if host is None else np.unique(host, return_inverse=True)[1]
    key = np.stack([hk, chip, ts], axis=1)
    uniq, row_of = np.unique(key, axis=0, return_inverse=True)
    row_of = row_of.reshape(-1)
    N = len(uniq)
    wide = {}
    for name, (rows, inst, vals, nulls, declared) in columns.items():
        size = max(int(declared), 1)  # every declared instance; one no row of a piece gives is a null register there
        arr = np.zeros((N, size), np.uint64)
        missing = np.ones((N, size), bool)
        r = row_of[rows]
        seen = np.zeros((N, size), np.int32)
        np.add.at(seen, (r, inst), 1)
        if (seen > 1).any():
            i = np.argwhere(seen > 1)[0]
            raise DumpError(
                f"{p}: signal `{name}` instance {int(i[1])} has two rows for one chip and timestamp; "
                "each register is sampled once per sample"
            )
        arr[r, inst] = vals
        missing[r, inst] = nulls
        wide[name] = (arr, missing)
    hosts = None
    if host is not None:
        names = np.unique(host)
        hosts = names[uniq[:, 0]]
    return uniq[:, 1], hosts, uniq[:, 2], wide
