"""Counter windows: from raw register samples to the per-window values that metrics read.

The window rules, in one place (each has its own tests in ``tests/test_windows*.py``):

1. **Baseline.** S samples of a chip give S − 1 windows; the first sample only sets the baseline.
2. **Interval.** ``interval`` is the difference of the window's two sample timestamps (ns → s), never
   wall-clock time.
3. **Counters.** The value is the increase: ``(cur − prev) mod 2^w`` in unsigned 64-bit integer
   arithmetic before any conversion to float (so a 64-bit counter near 2^60 keeps every unit), where
   ``w`` is the signal's effective wrap width (``effective_width``, else ``width``); then × ``scale``.
4. **Resets.** A window is a reset — null, reason ``reset`` — when (a) the signal's
   ``reset_indicator`` changed between the two samples, or (b) the modular increase is implausible:
   larger than ``max_rate × interval`` (plus one raw unit) when the signal declares ``max_rate``, else
   larger than half the counter's range (2^(w−1)): a counter that really advanced that far between
   two samples would be indistinguishable from one that was reset, so the window is not trusted.
   A counter of ``width: unknown`` cannot wrap in a way we could undo: any decrease is a reset.
   The indicator's kind decides what a reset looks like: a boot counter or a start-time stamp
   (``reset_indicator_kind: boot_counter | start_time``, the default) marks one by any change, an
   uptime (``uptime``) by a decrease only — its normal increase is not a reset.
   A cycle counter's maximum rate is its clock (one count per cycle per register) plus
   ``CLOCK_HEADROOM`` (1 %: a chip's clock runs some ppm fast against the host's timestamps, crystal
   tolerance, spread spectrum; at the bare clock a chip 85 ppm fast had every window called a reset)
   unless it declares another ``max_rate``.
4b. **Ambiguous wraps.** When ``max_rate × interval`` reaches the counter's range (2^w × scale), the
   counter may have wrapped more than once in the window and its increase cannot be known: null,
   reason ``window longer than the counter's wrap period`` (sample faster, or use a wider counter).
   A histogram is reset when any of its buckets decreases.
4c. **Declared ranges.** A counter with ``wrap_range`` wraps at M = range / scale raw counts, which
   need not be a power of two (energy registers, Linux powercap's ``max_energy_range_uj``): the
   increase is ``(cur − prev) mod M`` (``cur − prev``, plus M when the register went down), the
   half-range rule reads ``M // 2`` for 2^(w−1), and rule 4b reads M for 2^w. A raw value at or
   beyond M cannot be a reading of that register: every window touching it is null, reason
   ``raw value at or beyond the counter's range``.
4d. **Unit fields.** A counter with ``scale_field`` takes its unit per sample from a packed field of
   another register (RAPL's energy-status units: ``base: 0.5`` gives 2^-field): the increase is
   × ``scale`` × base^field at the window's end sample, and rule 4's ``max_rate`` limit uses that
   scale. When the field differs between the window's two samples the increase mixes two units:
   null, reason ``unit field changed within the window``. A null, absent or sentinel unit register at
   either end makes the window null (``missing sample``, ``sentinel``).
5. **Sentinels.** A raw value listed in ``sentinel`` means "no data": every window touching it is
   null, reason ``sentinel`` (never a number like 9.2e18 %).
6. **Missing samples.** A sample that is absent (a gap in the chip's sampling grid) or holds a null
   register makes the windows touching it null, reason ``missing sample``; the run totals bridge the gap
   from the running totals on either side (``metrics.bridge``), so a missing sample loses no counts.
7. **Gauges** are time-weighted means: the mean of the two endpoint reads (trapezoid rule on a
   piecewise-linear level), × scale.
8. **Packed fields** are never differenced: a field's value is its bits at the window's end sample,
   × scale.
Null values are NaN inside arrays; ``Windows.null`` holds the reason code of every null value.

Levels: ``run_level`` (one window per chip: counters summed, gauges time-weighted, intervals summed)
and ``server_level`` (counters summed over chips, gauges combined by their ``across_chips`` rule,
interval the run duration, per-chip spec constants × the number of chips). Both take a mask of the
windows to include; ``metrics.levels`` picks, per metric, the windows where its inputs are valid, so
a run-level value is a ratio of sums over the same windows — never a mean of per-window ratios, and
never a total that silently lost a window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfonto.ontology.resolved import Generation
from perfonto.ontology import kinds
from perfonto.ontology.rates import CLOCK_HEADROOM, max_rate  # noqa: F401  (rule 4, shared with the lint)

from perfonto.capture.dump import CounterDump, DumpError, read_counters  # noqa: F401  (the readers of the collector format)

VALID, SENTINEL, RESET, RESET_INFERRED, MISSING, WRAP_AMBIGUOUS, OUT_OF_RANGE, UNIT_CHANGED = 0, 1, 2, 3, 4, 5, 6, 7
REASONS = {
    SENTINEL: "sentinel",
    RESET: "reset (indicator)",
    RESET_INFERRED: "reset (implausible increase or decrease)",
    MISSING: "missing sample",
    WRAP_AMBIGUOUS: "window longer than the counter's wrap period",
    OUT_OF_RANGE: "raw value at or beyond the counter's range",
    UNIT_CHANGED: "unit field changed within the window",
}


@dataclass
class Windows:
    """Prepared values. ``values[name]``: float64 (W, C, *axis sizes) in the signal's unit, NaN where
    null; ``null[name]``: uint8 reason codes of the same shape (0 = valid); ``interval``: (W, C)
    seconds; ``chips``: factor for per-chip spec constants (1, or C at server level); ``bridged[name]``:
    like ``values``, the run-level value of each window of a bridged missing sample, NaN elsewhere
    (``metrics.bridge``), and ``notes`` on the gaps not bridged."""

    interval: np.ndarray
    values: dict[str, np.ndarray]
    chips: float = 1.0
    level: str = "window"
    start_ns: np.ndarray | None = None
    null: dict[str, np.ndarray] = field(default_factory=dict)
    bridged: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def modular_delta(prev: np.ndarray, cur: np.ndarray, width: int) -> np.ndarray:
    """``(cur - prev) mod 2**width`` on uint64 registers, exact for every width up to 64.

    Source: how every wrapping hardware counter is read (e.g. Linux perf's ``delta = (new - prev) &
    ((1 << width) - 1)`` in ``x86_perf_event_update``).
    """
    d = cur.astype(np.uint64) - prev.astype(np.uint64)  # wraps modulo 2**64
    if width < 64:
        d &= np.uint64((1 << width) - 1)
    return d


def range_delta(prev: np.ndarray, cur: np.ndarray, modulus: int) -> np.ndarray:
    """``(cur - prev) mod modulus`` for registers below ``modulus`` (rule 4c), exact in uint64: the
    difference, plus the modulus where the register went down. Values at or beyond the modulus give
    garbage here; ``prepare`` nulls their windows."""
    d = cur.astype(np.uint64) - prev.astype(np.uint64)
    return np.where(cur < prev, d + np.uint64(modulus), d)


def unit_exponent(gen: Generation, sig, dump: CounterDump) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rule 4d: the per-sample unit field of ``sig`` (``scale_field``) as (field value float64 (S, C, 1 or
    I), its raw bits uint64 of that shape, bad-sample reason uint8 of that shape: MISSING or
    SENTINEL per sample), or None when the counter has no unit field or its register is not in the dump."""
    if sig.scale_field is None:
        return None
    f = gen.fields[sig.scale_field[0]]
    if f.register not in dump.raw:
        return None
    reg = gen.signals[f.register]
    raw = dump.raw[f.register]
    bits = (raw >> np.uint64(f.lo)) & np.uint64((1 << (f.hi - f.lo + 1)) - 1)
    bad = np.zeros(raw.shape, np.uint8)
    if reg.sentinel:
        bad[np.isin(raw, np.array(reg.sentinel, dtype=np.uint64))] = SENTINEL
    miss = ~dump.present[:, :, None] | dump.missing.get(f.register, False)
    bad[np.broadcast_to(miss, raw.shape)] = MISSING
    return bits.astype(np.float64) * f.scale, bits, bad


def _touching(bad_sample: np.ndarray) -> np.ndarray:
    """Windows whose start or end sample is bad."""
    return bad_sample[:-1] | bad_sample[1:]


def prepare(dump: CounterDump, gen: Generation) -> Windows:
    """Turn raw samples into windows by the rules of the module docstring."""
    ts = dump.timestamps_ns
    interval = np.diff(ts, axis=0).astype(np.float64) * 1e-9
    values: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    absent = ~dump.present[:, :, None]
    for name, sig in gen.signals.items():
        if name not in dump.raw:  # not in the dump: metrics over it are unavailable
            continue
        raw = dump.raw[name]
        v, reason = _signal_windows(dump, gen, sig, name, interval, absent)
        sizes = tuple(s for _, s in sig.axes)
        shape = (raw.shape[0] - 1, raw.shape[1]) + sizes
        values[name] = v.reshape(shape)
        nulls[name] = reason.reshape(shape)
    for fname, f in gen.fields.items():
        if f.register not in dump.raw:
            continue
        reg = gen.signals[f.register]
        raw = dump.raw[f.register][1:]
        mask = np.uint64((1 << (f.hi - f.lo + 1)) - 1)
        v = ((raw >> np.uint64(f.lo)) & mask).astype(np.float64) * f.scale
        reason = np.zeros(raw.shape, dtype=np.uint8)
        if reg.sentinel:
            reason[np.isin(raw, np.array(reg.sentinel, dtype=np.uint64))] = SENTINEL
        bad = (absent | dump.missing.get(f.register, False))[1:]
        reason[np.broadcast_to(bad, raw.shape)] = MISSING
        shape = (raw.shape[0], raw.shape[1]) + tuple(s for _, s in f.axes)
        values[fname] = np.where(reason == VALID, v, np.nan).reshape(shape)
        nulls[fname] = reason.reshape(shape)
    from .bridge import bridge_dump  # the run totals bridge missing samples (issue 27)

    bridged, notes = bridge_dump(dump, gen)
    return Windows(interval, values, 1.0, "window", ts[:-1], nulls, bridged, notes)


def _signal_windows(dump: CounterDump, gen: Generation, sig, name: str, interval: np.ndarray, absent: np.ndarray):
    """One signal's window values (null where not valid) and reason codes, flat over its instances, by
    its kind's window rule; sentinels and missing samples (rules 5, 6) apply to every kind."""
    raw = dump.raw[name]
    W = raw.shape[0] - 1
    reason = np.zeros((W,) + raw.shape[1:], dtype=np.uint8)
    bad = absent | dump.missing.get(name, False)
    sent = np.isin(raw, np.array(sig.sentinel, dtype=np.uint64)) if sig.sentinel else None
    unit = unit_exponent(gen, sig, dump)  # rule 4d (None: the counter has a constant scale)
    if unit is None:
        scale: float | np.ndarray = sig.scale
    else:
        assert sig.scale_field is not None, "unit_exponent reads a unit field only for a counter with one"
        scale = sig.scale * sig.scale_field[1] ** unit[0][1:]
    rule = kinds.of(sig).window
    if rule in ("increase", "bucket_increase"):
        v = _increase(dump, gen, sig, rule, raw, interval, scale, unit, reason)
    elif rule == "mean":
        r = raw.astype(np.float64)
        v = (r[:-1] + r[1:]) * (0.5 * sig.scale)
    elif rule == "end":  # packed register: only its fields are values
        v = raw[1:].astype(np.float64)
    elif rule in RULES:  # a kind added to ontology/kinds.py with its reference rule
        v, extra = RULES[rule](sig, raw, interval, dump)
        reason[(extra != VALID) & (reason == VALID)] = extra[(extra != VALID) & (reason == VALID)]
    else:
        raise kinds.UnsupportedKind("the reference window rules (metrics.windows)", sig.kind, rule)
    if sent is not None:
        reason[_touching(sent)] = SENTINEL
    reason[_touching(np.broadcast_to(bad, raw.shape))] = MISSING
    return np.where(reason == VALID, v, np.nan), reason


def _increase(dump: CounterDump, gen: Generation, sig, rule: str, raw, interval, scale, unit, reason: np.ndarray):
    """A counter's (or histogram's) increase over each window, in its unit; marks in `reason` the
    windows with an inferred or signalled reset, a value out of range or a changed unit field."""
    prev, cur = raw[:-1], raw[1:]
    delta, implausible = _delta(gen, sig, rule, prev, cur, interval, scale, reason)
    v = delta.astype(np.float64) * scale
    reason[implausible & (reason == VALID)] = RESET_INFERRED
    if sig.reset_indicator is not None and sig.reset_indicator in dump.raw:
        ind = dump.raw[sig.reset_indicator]
        hit = (ind[1:] < ind[:-1]) if sig.reset_kind == "decrease" else (ind[1:] != ind[:-1])
        reason[np.broadcast_to(hit.any(axis=2, keepdims=True), reason.shape)] = RESET
    if sig.modulus is not None:
        reason[_touching(raw >= np.uint64(sig.modulus))] = OUT_OF_RANGE
    if unit is not None:
        _, ubits, ubad = unit
        reason[np.broadcast_to(ubits[1:] != ubits[:-1], reason.shape)] = UNIT_CHANGED
        for code in (SENTINEL, MISSING):
            reason[np.broadcast_to(_touching(ubad == code), reason.shape)] = code
    return v


def _delta(gen: Generation, sig, rule: str, prev, cur, interval, scale, reason: np.ndarray):
    """The raw increase between consecutive samples (modular in the wrap width or range) and where it is
    implausible (a decrease, a jump beyond half the range, or beyond max_rate; a window where max_rate
    cannot tell a wrap is marked ambiguous in `reason`)."""
    if sig.wrap_width is None:  # unknown width: a decrease cannot be told from a reset
        return cur - prev, cur < prev
    if rule == "bucket_increase":
        delta = modular_delta(prev, cur, sig.wrap_width)
        dec = (cur < prev).reshape(cur.shape[:2] + (-1, len(sig.buckets) + 1)).any(axis=-1, keepdims=True)
        return delta, np.broadcast_to(dec, dec.shape[:-1] + (len(sig.buckets) + 1,)).reshape(cur.shape)
    M = sig.modulus if sig.modulus is not None else 1 << sig.wrap_width
    delta = range_delta(prev, cur, M) if sig.modulus is not None else modular_delta(prev, cur, sig.wrap_width)
    rate = max_rate(gen, sig)
    if rate is None:
        return delta, delta > np.uint64(M // 2)
    limit = rate * interval[:, :, None] / scale + 1.0
    implausible = delta.astype(np.float64) > limit
    ambiguous = limit >= float(M)
    reason[np.broadcast_to(ambiguous, reason.shape)] = WRAP_AMBIGUOUS
    return delta, implausible


#: Reference rules of window-rule ids beyond the four above (a kind added to ``ontology/kinds.py``):
#: ``rule(sig, raw uint64 (S, C, I), interval (W, C), dump) -> (values float64 (W, C, I) in the signal's
#: unit, reasons uint8 (W, C, I): VALID or a code of ``REASONS``)``. Rules 5 and 6 (sentinels, missing
#: samples) apply after it, as to every kind.
RULES: dict = {}


def run_level(w: Windows, gen: Generation, mask: np.ndarray | None = None) -> Windows:
    """One window per chip over the windows where ``mask`` (W, C) is True (default: all windows):
    counters summed, gauges and fields time-weighted, intervals summed."""
    dt = w.interval if mask is None else np.where(mask, w.interval, 0.0)
    total = dt.sum(axis=0, keepdims=True)
    values = {}
    for name, v in w.values.items():
        extra = (1,) * (v.ndim - 2)
        keep = (
            np.ones(v.shape, dtype=bool) if mask is None else np.broadcast_to(mask.reshape(mask.shape + extra), v.shape)
        )
        vv = np.where(keep, v, 0.0)
        if kinds.row_of(gen, name).run == "sum":
            values[name] = vv.sum(axis=0, keepdims=True)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                values[name] = (vv * dt.reshape(dt.shape + extra)).sum(axis=0, keepdims=True) / total.reshape(
                    total.shape + extra
                )
    return Windows(total, values, w.chips, "run")


def server_level(run: Windows, gen: Generation) -> Windows:
    """One value for the whole server from a run-level ``Windows`` (chips on axis 1)."""
    n = run.interval.shape[1]
    values = {}
    for name, v in run.values.items():
        rule = kinds.across_rule(gen, name)
        if rule == "sum":
            values[name] = v.sum(axis=1, keepdims=True)
        elif rule == "max":
            values[name] = v.max(axis=1, keepdims=True)
        else:
            values[name] = v.mean(axis=1, keepdims=True)
    interval = run.interval.mean(axis=1, keepdims=True)
    return Windows(interval, values, float(n) * run.chips, "server")
