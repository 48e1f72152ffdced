"""Kernels (Nsight Compute's kernel launches, rocprofv3's dispatches) as a capture in the collector format:
one window per kernel.

The collector format holds counter samples, not spans, so a kernel becomes the window between two samples:
a sample at every kernel boundary (every start and end, all chips together), each signal's running total
there. A kernel's counts are its window's increase, so a window's metric values are the kernel's (DRAM
bandwidth = the kernel's bytes over its duration). Time between kernels is a window of its own in which
nothing counts. Where kernels of two chips overlap in time, a kernel spans several windows and its
counts are spread over them in proportion to time (a note says how many); each chip's totals over the run
stay exact. A kernel whose count of a signal is unknown (the tool printed ``n/a``) nulls the samples up to
its end: its windows, and the window after it, are null for that signal (reason ``missing sample``), and
its count is left out of the running totals after it.

``kernel_trace`` gives the same kernels as op spans in the trace format (``kind`` op, ``clock`` device,
``name`` the kernel's, ``start_ns``/``end_ns`` on the capture's time axis), for per-op attribution.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from .dump_io import DumpError


@dataclass
class Kernel:
    """One kernel: ``chip``, ``start_ns`` < ``end_ns`` (any origin), ``name``, ``counts`` (signal → raw
    counts over the kernel; None where the tool gave no value), ``where`` (file:row, for messages)."""

    chip: int
    start_ns: int
    end_ns: int
    name: str
    counts: dict[str, float | None] = field(default_factory=dict)
    where: str = ""


def check_totals(kernels: list[Kernel], gen, where, device: str) -> None:
    """No signal's running total on a chip (the kernels in the order they are read) reaches 2^64 raw counts,
    the width of the capture's counters: the value whose kernel takes it past is named — ``where(kernel,
    signal)`` gives its ``file:line: column`` — rather than the capture alone (a value of 1e30, or a signal's
    scale too fine for the counts); ``device``: what a chip is called (``device``, ``agent``).

    Raises:
        DumpError: naming the value's place, the signal, the chip and the total.
    """
    total: dict[tuple[int, str], float] = {}
    for k in kernels:
        for sig, v in k.counts.items():
            t = total[(k.chip, sig)] = total.get((k.chip, sig), 0.0) + (v or 0.0)
            if t >= 2.0**64:
                raise DumpError(
                    f"{where(k, sig)}: this kernel takes the running total of `{sig}` on {device} {k.chip} past 2^64 "
                    f"raw counts ({t:.3g} raw counts of scale {gen.signals[sig].scale:g}), the most a counter of the "
                    "capture holds; is the value or its unit right, or the signal's scale?"
                )


def kernel_table(kernels: list[Kernel], signals: list[str], *, label: str, notes: list[str]) -> pa.Table:
    """The kernels in the collector format (module docstring): ``chip``, ``sample``, ``timestamp_ns`` (from
    the first kernel's start), one uint64 running-total column per signal in ``signals``.

    Raises:
        DumpError: no kernel, or a running total past 2^64 raw counts (``label`` names the capture).
    """
    if not kernels:
        raise DumpError(f"{label}: no kernel rows; give the tool's export of at least one kernel")
    times = np.unique(np.array([t for k in kernels for t in (k.start_ns, k.end_ns)], dtype=np.int64))
    chips = sorted({k.chip for k in kernels})
    col = {c: i for i, c in enumerate(chips)}
    S, C = len(times), len(chips)
    inc = {s: np.zeros((S, C)) for s in signals}  # inc[s][k]: the increase over the window ending at sample k
    null = {s: np.zeros((S, C), bool) for s in signals}
    spread = 0
    for k in kernels:
        i0, i1 = int(np.searchsorted(times, k.start_ns)), int(np.searchsorted(times, k.end_ns))
        c = col[k.chip]
        share = np.diff(times[i0 : i1 + 1]).astype(np.float64) / float(k.end_ns - k.start_ns)
        spread += i1 - i0 > 1
        for s in signals:
            v = k.counts.get(s)
            if v is None:
                null[s][i0 + 1 : i1 + 1, c] = True
            else:
                inc[s][i0 + 1 : i1 + 1, c] += v * share
    if spread:
        notes.append(
            f"{label}: {spread} kernel(s) overlap another chip's kernel boundaries: each one's counts are spread over "
            "its windows in proportion to time (each chip's totals over the run are exact)"
        )
    cols: dict[str, pa.Array] = {
        "chip": pa.array(np.tile(np.array(chips, np.int64), S)),
        "sample": pa.array(np.repeat(np.arange(S, dtype=np.int64), C)),
        "timestamp_ns": pa.array(np.repeat(times - times[0], C)),
    }
    for s in signals:
        total = np.rint(np.cumsum(np.where(null[s], 0.0, inc[s]), axis=0))
        if total.size and total.max() >= 2.0**64:
            raise DumpError(f"{label}: the running total of `{s}` passes 2^64 raw counts; is the signal's scale right?")
        cols[s] = pa.array(total.reshape(-1).astype(np.uint64), mask=null[s].reshape(-1))
    return pa.table(cols)


def kernel_capture(path, gen, read, notes: list[str] | None, sample_period_ns: int | None, *, source: str, export: str):
    """The kernels ``read(path, gen, notes)`` gives as a capture of ``gen`` in the collector format, one window
    per kernel (``kernel_table`` over the signals the kernels count), its metadata naming the generation and
    the tool (``source``).

    Raises:
        DumpError: what ``read`` raises, or a sample period given (``export``: the tool's export, whose
            windows are its kernels).
    """
    notes = notes if notes is not None else []
    if sample_period_ns is not None:
        raise DumpError(f"{path}: --sample-period does not apply to {export}")
    kernels = read(path, gen, notes)
    signals = list(kernels[0].counts) if kernels else []  # the signals with a column
    t = kernel_table(kernels, signals, label=str(path), notes=notes)
    return t.replace_schema_metadata(
        {"perfonto": json.dumps({"generation": gen.name, "source": source, "increments": True})}
    )


def kernel_trace(kernels: list[Kernel]) -> pa.Table:
    """The kernels as op spans in the trace format, on the time axis of ``kernel_table`` (0 at the first
    kernel's start)."""
    t0 = min(k.start_ns for k in kernels) if kernels else 0
    return pa.table(
        {
            "kind": pa.array(["op"] * len(kernels), pa.string()),
            "name": pa.array([k.name for k in kernels], pa.string()),
            "clock": pa.array(["device"] * len(kernels), pa.string()),
            "chip": pa.array([k.chip for k in kernels], pa.int64()),
            "start_ns": pa.array([k.start_ns - t0 for k in kernels], pa.int64()),
            "end_ns": pa.array([k.end_ns - t0 for k in kernels], pa.int64()),
        }
    )


TRACES = {"ncu": ("ncu", "ncu_trace"), "rocprof": ("rocprof", "rocprof_trace")}  # format -> (module, reader)


def capture_trace(fmt: str, counters, trace, gen):
    """The op spans of a capture: ``trace`` when given (a path or a ``pa.Table``), else, for a tool's file of
    one row per kernel (``TRACES``: Nsight Compute, rocprof), its kernels as op spans (``kernel_trace``), so
    that ``--by op`` groups them by kernel name; None for another format without a trace.

    Raises:
        DumpError: the tool's file cannot be read (as its reader says)."""
    if trace is not None or fmt not in TRACES or not isinstance(counters, (str, Path)):
        return trace
    from importlib import import_module

    module, fn = TRACES[fmt]
    return getattr(import_module(f"perfonto.capture.{module}"), fn)(counters, gen)


def counter_signals(gen, tool: str) -> dict[str, str]:
    """signal → the name ``tool`` gives it, for the signals of ``gen`` whose ``sources`` name one.

    Raises:
        DumpError: such a signal that is not a counter (a kernel's value is an amount over the kernel; a
        gauge's level has no meaning per kernel window).
    """
    out = {}
    for name, sig in gen.signals.items():
        src = dict(sig.sources).get(tool)
        if not src:
            continue
        if sig.kind != "counter":
            raise DumpError(
                f"generation `{gen.name}`, signal `{name}` (sources.{tool}: {src}): a {sig.kind}; a per-kernel value "
                "is read into a counter (an amount per kernel, a percentage as the time it stands for)"
            )
        out[name] = src
    return out


def unread_note(p: str, what: str, signals: dict[str, str], unread: list[str]) -> str:
    """The note for the signals ``unread`` (each with its name in the tool, from ``signals``) that the
    capture ``p`` has no ``what`` (column, counter) for."""
    return (
        f"{p}: no {what} for {', '.join(f'{s} ({signals[s]})' for s in unread)} "
        "(the metrics that read them are unavailable)"
    )


__all__ = [
    "check_totals",
    "Kernel",
    "TRACES",
    "capture_trace",
    "counter_signals",
    "kernel_capture",
    "kernel_table",
    "kernel_trace",
    "unread_note",
]
