"""One register column of a wide counter table (``capture.dump``'s collector format) as raw values and
nulls, checked: a scalar column, a fixed-size list (or a list of one length) per instance, or on a block
with ``slots`` a list of every slot (the present ones kept); an integer type wide enough for the
register (a signed one only where the register is narrower than its sign bit: Spark and Hive write
int64), no negative value, no value past the register's width.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from perfonto.ontology import kinds

from .dump_io import DumpError


def _check_type(p: str, col: str, sig, typ: pa.DataType) -> None:
    if not pa.types.is_integer(typ):
        raise DumpError(
            f"{p}: column `{col}` has type {typ}; raw registers are unsigned integers "
            "(write the register's raw value, not a scaled or converted one)"
        )
    if kinds.of(sig).counts:
        # a signed column holds a register narrower than its sign bit (Spark and Hive have no unsigned
        # type: a 48-bit counter arrives as int64); negative values are refused where they are read
        if pa.types.is_signed_integer(typ) and (sig.width is None or sig.width >= typ.bit_width):
            width = f"a {sig.width}-bit" if sig.width is not None else "a counter of undeclared width's"
            raise DumpError(
                f"{p}: column `{col}` is signed ({typ}); its sign bit cannot hold {width} register — "
                f"write it as uint{max(8, typ.bit_width)}"
            )
        if sig.width is not None and typ.bit_width < sig.width:
            raise DumpError(
                f"{p}: column `{col}` is {typ}, narrower than the counter's {sig.width}-bit register; "
                f"write it as uint{64 if sig.width > 32 else 32} so the high bits are not lost"
            )


def _as_fixed_list(c: pa.Array, p: str, col: str, n_inst: int, wide: int) -> pa.Array:
    """A list column (pandas, CSV-less writers) as a fixed-size list: of every slot when its first
    non-null row holds ``wide`` of them, else of ``n_inst`` instances; every row must hold as many."""
    lengths = pc.list_value_length(c).to_numpy(zero_copy_only=False)
    first = lengths[~np.isnan(lengths.astype(np.float64))][:1]
    size = wide if wide and first.size and first[0] == wide else n_inst
    ok = np.isnan(lengths.astype(np.float64)) | (lengths == size)
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        raise DumpError(
            f"{p}: row {bad + 1}: column `{col}` holds {int(lengths[bad])} instances, the generation "
            f"declares {n_inst}" + (f" present of {wide} slots" if wide else "")
        )
    return c.cast(pa.list_(c.type.value_type, size))


def _every_slot(c: pa.Array, p: str, col: str, sig, wide: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-size list of every slot (``wide``): the present slots' values and nulls (a null row is
    null in each)."""
    _check_type(p, col, sig, c.type.value_type)
    row_null = c.is_null().to_numpy(zero_copy_only=False)
    values = c.values.slice(c.offset * wide, len(c) * wide)
    keep = np.asarray(sig.slots)
    nulls = (values.is_null().to_numpy(zero_copy_only=False).reshape(-1, wide) | row_null[:, None])[:, keep]
    arr = values.fill_null(0).to_numpy(zero_copy_only=False).reshape(-1, wide)[:, keep]
    return arr, nulls


def _per_instance(c: pa.Array, p: str, col: str, sig, n_inst: int, wide: int, scalar: bool):
    """A fixed-size list of ``n_inst`` instances: its values and nulls (a null row is null in each);
    another size, or a list where one instance is read, is refused."""
    if scalar or c.type.list_size != n_inst:
        raise DumpError(
            f"{p}: column `{col}` has {c.type.list_size} instances, the generation declares {n_inst}"
            + (f" present of {wide} slots (write {n_inst} or {wide})" if wide else "")
        )
    _check_type(p, col, sig, c.type.value_type)
    row_null = c.is_null().to_numpy(zero_copy_only=False) if c.null_count else np.zeros(len(c), bool)
    values = c.values.slice(c.offset * n_inst, len(c) * n_inst)  # every row's slots, null rows included
    if c.null_count == 0 and values.null_count == 0:  # the common case: a view of the buffer, no copy
        nulls = np.broadcast_to(np.False_, (len(c), n_inst))
        arr = values.to_numpy(zero_copy_only=False).reshape(-1, n_inst)
    else:
        nulls = values.is_null().to_numpy(zero_copy_only=False).reshape(-1, n_inst) | row_null[:, None]
        arr = values.fill_null(0).to_numpy(zero_copy_only=False).reshape(-1, n_inst)
    return arr, nulls


def _one_value(c: pa.Array, p: str, col: str, sig, n_inst: int) -> tuple[np.ndarray, np.ndarray]:
    """A scalar column (one instance): its values and nulls as (rows, 1); refused for a block with
    several instances."""
    if n_inst != 1:
        raise DumpError(
            f"{p}: column `{col}` is a scalar but `{sig.block}` has {n_inst} instances; write a "
            f"fixed-size list or one column per instance (`{col}[0]` …)"
        )
    _check_type(p, col, sig, c.type)
    if c.null_count == 0:
        return c.to_numpy(zero_copy_only=False).reshape(-1, 1), np.broadcast_to(np.False_, (len(c), 1))
    return (
        c.fill_null(0).to_numpy(zero_copy_only=False).reshape(-1, 1),
        c.is_null().to_numpy(zero_copy_only=False).reshape(-1, 1),
    )


def _wide_one(t: pa.Table, p: str, col: str, sig, scalar: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Column ``col`` of ``t`` (signal ``sig``; with ``scalar``, one instance of a per-instance column
    ``name[i]``) as (values (rows, instances) uint64, nulls (rows, instances) bool), checked.

    Raises:
        DumpError: another number of instances, a type that is not an unsigned integer wide enough for
            the register, a negative value or one past the register's width (naming file, row, column).
    """
    c = t.column(col)
    c = c.chunk(0) if c.num_chunks == 1 else c.combine_chunks()  # one chunk (a piece's batch): read in place, no copy
    n_inst = 1 if scalar else sig.instances
    wide = 0 if scalar or sig.slots is None else sig.full_instances  # a dump of every slot, present or not
    if (pa.types.is_list(c.type) or pa.types.is_large_list(c.type)) and not scalar:
        c = _as_fixed_list(c, p, col, n_inst, wide)
    if pa.types.is_fixed_size_list(c.type) and wide and c.type.list_size == wide:
        arr, nulls = _every_slot(c, p, col, sig, wide)
    elif pa.types.is_fixed_size_list(c.type):
        arr, nulls = _per_instance(c, p, col, sig, n_inst, wide, scalar)
    else:
        arr, nulls = _one_value(c, p, col, sig, n_inst)
    if arr.dtype.kind == "i" and arr.size and (arr < 0).any():
        raise DumpError(f"{p}: column `{col}` holds negative values; raw registers are unsigned")
    arr = arr.astype(np.uint64, copy=False)
    _within_width(arr, p, col, sig)
    return arr, nulls


def _within_width(arr: np.ndarray, p: str, col: str, sig) -> None:
    """Raw values of a register declared ``width`` bits wide (< 64) lie below 2^width (its sentinels
    excepted): a larger value is not a reading of that register, and masking it to the width (as a
    wrap would) gives a wrong window, so it is refused where it is.

    Raises:
        DumpError: the first value past the width, with its row (counted from 1 in this file or piece).
    """
    width = getattr(sig, "width", None)
    if not isinstance(width, int) or width >= 64 or not arr.size:
        return
    limit = np.uint64(1 << width)
    if arr.max() < limit:  # the common case: one pass, no temporaries
        return
    over = arr >= limit
    for s in getattr(sig, "sentinel", ()) or ():
        over &= arr != np.uint64(s)
    if over.any():
        r, k = np.unravel_index(int(np.argmax(over)), arr.shape)
        inst = f"[{k}]" if arr.ndim == 2 and arr.shape[1] > 1 else ""
        raise DumpError(
            f"{p}: row {r + 1}, column `{col}{inst}`: value {int(arr[r, k])} does not fit the {width}-bit register "
            f"`{sig.name}` (at most {(1 << width) - 1}); check the collector's register width, or declare the "
            "signal's width as the register has it"
        )
