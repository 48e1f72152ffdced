"""The checks of what a ``Stream`` is fed, copied verbatim into every generated evaluator after
``codegen/runtime_stream.py``: the registers a stream of chosen metrics needs (``_stream_regs``), their
copy into the stream's buffers refusing what is not raw unsigned integers of the expected shapes
(``_gather``: diagnosed only when the copy fails, so a good push pays no pass over its values), and the
time stamps (int64 ns, one per chip, each after its chip's previous one: ``_stamps``, ``_refuse_time``).
A float register (a NaN cast to an integer read 3,246 GB/s for 3,613) and a time going backwards (every
window null, no reason) were taken in silence; each is now an error naming the argument, the signal,
what was given and what is expected.
"""
# Names such as _REGS, _N, SIGNALS or _METRIC_REGS are defined by the generated evaluator this source is copied into.
# ruff: noqa: F821

import numpy as np


def _stream_regs(want):
    """``_REGS`` with the name None for each register that none of the ``want`` metrics (``_wanted``)
    reads (``_METRIC_REGS``): a stream of chosen metrics needs only the others fed; ``_REGS`` itself
    when every register is needed."""
    if want.all():
        return _REGS
    need = set()
    for k in np.flatnonzero(want).tolist():
        need.update(_METRIC_REGS[k])
    return tuple((name if i in need else None, a, b) for i, (name, a, b) in enumerate(_REGS))


def _copy_registers(stream, registers, lead, out, rows):
    """Registers into ``out`` uint64 (*lead, _N): ``registers`` one array of that shape, or {signal:
    array (*lead, *instance sizes)} (``rows``: a slice of their first axis to take); a register the
    stream does not need reads 0. An array that is not uint64 is checked first (``_check_values``:
    a signed one for negative values, anything else refused), so int64 registers (pandas', Python
    lists') take one check and one copy, and uint64 ones only the copy."""
    if isinstance(registers, np.ndarray):
        if registers.shape != out.shape:
            raise ValueError("shape")
        if registers.dtype.kind != "u":
            _check_values("registers", registers)
        np.copyto(out, registers, casting="unsafe")
        return
    if not _REGS:
        return
    shape = out.shape[:-1]  # ``lead``, or its rows and chips flattened into one axis
    parts = []
    for n, a, b in stream._regs:
        if not n:
            parts.append(np.zeros(shape + (b - a,), np.uint64))
            continue
        x = np.asarray(registers[n])
        if rows is not None:
            x = x[rows]
        if x.dtype.kind != "u":
            _check_values(f"registers[{n!r}]", x)
        parts.append(x.reshape(shape + (b - a,)))
    np.concatenate(parts, axis=-1, out=out, casting="unsafe")


def _gather(stream, registers, lead, out, rows=None):
    """``_copy_registers``, refusing registers that are not raw unsigned integers of the expected shapes
    (diagnosed only when the copy fails: no pass over the values of uint64 registers)."""
    try:
        _copy_registers(stream, registers, lead, out, rows)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        _check_registers(stream, registers, lead, rows, e)  # raises the error that says what is wrong
        raise


def _check_registers(stream, registers, lead, rows, err):
    """Raise the error that says what is wrong with ``registers`` (the copy of them raised ``err``):
    argument, signal, what was given and what is expected; ``err`` itself where none of these is."""
    what = "one sample" if len(lead) == 1 else f"{lead[0]} samples"
    if isinstance(registers, np.ndarray):
        want = tuple(lead) + (_N,)
        if registers.shape != want:
            raise ValueError(
                f"registers: an array of shape {registers.shape} given; expected {want} for {what} (chips, "
                f"len(FLAT_COLUMNS) = {_N}), its columns in the order of FLAT_COLUMNS"
            ) from None
        _check_values("registers", registers)
        return
    if not hasattr(registers, "keys"):
        raise TypeError(
            f"registers: {type(registers).__name__} given; expected a dict {{signal: uint64 array (chips, "
            "*instance sizes)}} or one uint64 array (chips, len(FLAT_COLUMNS))"
        ) from None
    _check_signals(stream, registers)
    for name, a, b in stream._regs:
        if name:
            x = np.asarray(registers[name])
            whole = lead if rows is None else (x.shape[0] if x.ndim else 0,) + tuple(lead[1:])  # a block's rows
            _check_shape(name, x, whole, b - a)
            _check_values(f"registers[{name!r}]", x[rows] if rows is not None else x)
    raise err


def _check_signals(stream, registers):
    """Refuse a dict of registers that lacks a signal the stream needs: every one missing is named,
    and each given name that is no signal of the generation (did you mean …)."""
    missing = [n for n, _, _ in stream._regs if n and n not in registers]
    if not missing:
        return
    unknown = [k for k in registers if k not in SIGNALS]
    hint = "".join(f"; {k!r} is no signal{_did_you_mean(str(k), SIGNALS)}" for k in unknown)
    need = sum(1 for n, _, _ in stream._regs if n)
    raise ValueError(
        f"registers: no value for signal(s) {', '.join(map(repr, missing))}{hint}. Each push needs every signal "
        + (
            f"the chosen metrics read ({need})"
            if stream._metrics
            else f"the metrics read ({need}; fewer with Stream(metrics=))"
        )
        + "; a null register is marked with missing=, not left out"
    ) from None


def _check_shape(name, x, lead, n):
    if x.shape[: len(lead)] != tuple(lead) or x.size != int(np.prod(lead)) * n:
        axes = "(samples, chips, instances)" if len(lead) > 1 else "(chips, instances)"
        raise ValueError(
            f"registers[{name!r}]: an array of shape {x.shape} given; expected {tuple(lead) + (n,)} {axes}"
        ) from None


def _check_values(arg, x):
    """Registers are raw unsigned integers: refuse floats and every other non-integer dtype, and negative
    values in a signed integer array."""
    kind = x.dtype.kind
    if kind == "u":
        return
    if kind != "i":
        raise TypeError(
            f"{arg}: {x.dtype} values given; registers are raw unsigned integers (uint64), as the hardware "
            "reads them — a null register is marked with missing={signal: bool array}, not NaN"
        ) from None
    if x.size and x.min() < 0:
        raise ValueError(
            f"{arg}: a negative value ({int(x.min())}) in an array of {x.dtype}; registers are raw unsigned "
            "integers (uint64) — a null register is marked with missing={signal: bool array}"
        ) from None


def _stamps(stream, t, lead):
    """``timestamp_ns`` as int64 of shape ``lead`` ((chips,) for push, (samples, chips) for a block),
    refused when it is not integer nanoseconds or not one per chip (as many as the stream's first
    sample had)."""
    arg = "timestamp_ns" if len(lead) == 1 else "timestamps_ns"
    want = "(chips,)" if len(lead) == 1 else "(samples, chips)"
    if t.dtype.kind not in "iu":
        raise TypeError(
            f"{arg}: {t.dtype} values given; expected int64 nanoseconds, an array of shape {want} "
            "(seconds as float: np.int64(round(seconds * 1e9)))"
        )
    if t.ndim != len(lead):
        raise ValueError(
            f"{arg}: {'a scalar' if t.ndim == 0 else f'shape {t.shape}'} given; expected an int64 array of "
            f"shape {want}, one timestamp per chip"
        )
    if stream._T is not None and t.shape[-1] != stream._T.shape[0]:
        raise ValueError(
            f"{arg}: {t.shape[-1]} chip(s) given; this stream has {stream._T.shape[0]} (set by its first "
            "sample): each sample carries every chip, with present=False where a chip has none"
        )
    if t.dtype.kind == "u" and t.size and int(t.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{arg}: {int(t.max())} ns is past the int64 range of nanosecond time stamps")
    return t.astype(np.int64)


def _block_rows(stream, registers, S):
    """Refuse a block's registers whose first axis is not its ``S`` samples (a shorter array was sliced
    into a reshape error on the NumPy path): the signal, the shape given and the shape expected."""
    if isinstance(registers, np.ndarray) or not hasattr(registers, "keys"):
        return
    for name, a, b in stream._regs:
        if name and name in registers:
            shape = np.shape(registers[name])
            if not shape or shape[0] != S:
                raise ValueError(
                    f"registers[{name!r}]: an array of shape {shape} given; expected ({S}, chips, instances): "
                    f"one row per time stamp ({S} samples)"
                )


def _block_stamps(stream, timestamps_ns, present):
    """``timestamps_ns`` of a block as int64 (samples, chips), refused as ``_stamps`` and
    ``_refuse_time`` say (one pass over the timestamps, none over the registers)."""
    T = np.asarray(timestamps_ns)
    if T.dtype != np.int64 or T.ndim != 2 or (stream._T is not None and T.shape[1:] != stream._T.shape):
        T = _stamps(stream, T, (0, 0))
    if T.shape[0]:
        _refuse_time(stream, T, present)
    return T


def _refuse_time(stream, T, present):
    """Refuse a sample not after the previous one of its chip (a window of zero or negative length):
    ``T`` int64 (samples, chips), ``present`` None or bool of that shape (an absent sample is not
    checked). Returns when every present sample is after its predecessor."""
    prev = np.concatenate([stream._T[None], T[:-1]]) if stream._T is not None else T[:-1]
    cur = T if stream._T is not None else T[1:]
    bad = cur <= prev
    if present is not None:
        bad &= np.asarray(present, dtype=bool).reshape(T.shape)[len(T) - len(cur) :]
    if not bad.any():
        return
    i, c = (int(v[0]) for v in np.nonzero(bad))
    arg = "timestamp_ns" if T.shape[0] == 1 else "timestamps_ns"
    raise ValueError(
        f"{arg}: chip {c} at {int(cur[i, c])} ns is not after its previous sample ({int(prev[i, c])} ns); "
        "samples go forward in time, in int64 ns: feed them in time order and drop a repeated sample"
    )


def _did_you_mean(name, names):
    """'; did you mean …?' naming the one of ``names`` closest to ``name`` (edit distance up to a third
    of its length), or ''."""
    best, limit = None, max(2, len(name) // 3) + 1
    for cand in names:
        prev = list(range(len(cand) + 1))
        for i, ch in enumerate(name, 1):
            row = [i]
            for j, cc in enumerate(cand, 1):
                row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ch != cc)))
            prev = row
        if prev[-1] < limit:
            best, limit = cand, prev[-1]
    return f"; did you mean {best!r}?" if best else ""
