"""The device spans of a trace that counters are attributed to, and how they are grouped.

A trace (``trace.parquet``, see the collector-format guide) holds host events and device events;
the *leaf spans* are the device events of kind ``op`` (a matrix or vector operation), ``collective``
(chip-to-chip communication) and ``host_io`` (the device waiting for a host transfer). An ``exec``
span (a whole forward pass) encloses leaf spans and is not attributed itself. Time on a chip not
covered by any leaf span belongs to the group ``(no span)`` (on the emulator: the idle slot).

Groupings (``--by``):

- ``op``: the span's ``name`` — the op class (``qkv_proj``, ``attn_decode``, ``ffn_allreduce``, …);
- ``layer``: ``layer N`` from the ``layer`` column (the layer within the chip's pipeline stage),
  ``(no layer)`` for spans outside the layers (embedding, LM head, sampling, host transfers);
- ``phase``: ``prefill``, ``decode`` or ``mixed``. A trace may carry a ``phase`` column (it wins
  where it is not null). Otherwise an op whose name says ``prefill`` or ``decode`` (attention) is in
  that phase, and every other span takes the phase of its step on its chip: ``prefill`` when the
  step ran prefill attention only, ``decode`` when it ran decode attention only, ``mixed`` when it
  ran both (continuous batching with chunked prefill), ``unknown`` when it ran neither or the trace
  has no steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from perfonto.ontology.errors import PerfontoError

BY = ("op", "layer", "phase")
LEAF_KINDS = ("op", "collective", "host_io")
NO_SPAN = "(no span)"
NO_LAYER = "(no layer)"
PHASES = ("prefill", "decode", "mixed", "unknown")
REQUIRED = ("kind", "name", "clock", "chip", "start_ns", "end_ns")


class AttributionError(PerfontoError, ValueError):
    """A trace (or snapshot dump) that attribution cannot use; the message names the file and the fix."""


@dataclass
class Spans:
    """Leaf device spans, parallel arrays: ``chip`` (int64), ``start``/``end`` (int64 ns on the chip's
    device clock, ``end`` ≥ ``start``), ``name`` (op class), ``kind``, ``layer`` (int64, −1 outside
    layers), ``step`` (int64, −1 when unknown), ``phase`` (see the module docstring). ``path``:
    where they were read from."""

    chip: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    kind: np.ndarray
    layer: np.ndarray
    step: np.ndarray
    phase: np.ndarray
    path: str = ""

    def __len__(self) -> int:
        return len(self.chip)

    def labels(self, by: str) -> np.ndarray:
        """The group label of every span under grouping ``by`` (one of ``BY``).

        Raises:
            AttributionError: an unknown grouping.
        """
        if by == "op":
            return self.name
        if by == "layer":
            return np.where(self.layer >= 0, np.char.add("layer ", self.layer.astype(str)), NO_LAYER)
        if by == "phase":
            return self.phase
        raise AttributionError(f"unknown grouping {by!r}; use one of {', '.join(BY)}")

    def take(self, sel) -> "Spans":
        """The spans selected by ``sel`` (a mask or indices)."""
        return Spans(
            self.chip[sel],
            self.start[sel],
            self.end[sel],
            self.name[sel],
            self.kind[sel],
            self.layer[sel],
            self.step[sel],
            self.phase[sel],
            self.path,
        )


def group_order(by: str, labels) -> list[str]:
    """Labels in reading order: layers by number, phases prefill → decode → mixed, ops by first
    appearance; ``(no layer)`` and ``(no span)`` last."""
    uniq = list(dict.fromkeys(str(x) for x in labels))
    if by == "layer":
        nums = sorted(int(x.split()[1]) for x in uniq if x.startswith("layer "))
        return [f"layer {n}" for n in nums] + [x for x in uniq if not x.startswith("layer ")]
    if by == "phase":
        return [p for p in PHASES if p in uniq] + [x for x in uniq if x not in PHASES]
    return uniq


def _text(table, name: str) -> np.ndarray:
    import pyarrow as pa

    col = table.column(name)
    return np.asarray(col.cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False), dtype=object).astype(str)


def read_spans(trace, chips=None) -> Spans:
    """The leaf device spans of a trace (a path to ``trace.parquet`` or a ``pa.Table``), optionally
    only those of ``chips`` (chip numbers).

    Raises:
        AttributionError: the trace cannot be read or lacks a required column (``kind``, ``name``,
            ``clock``, ``chip``, ``start_ns``, ``end_ns``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    label = str(trace) if not isinstance(trace, pa.Table) else "trace table"
    try:
        t = trace if isinstance(trace, pa.Table) else pq.read_table(str(trace))
    except (OSError, pa.ArrowInvalid) as exc:
        raise AttributionError(f"{label}: cannot read the trace ({exc})") from None
    missing = [c for c in REQUIRED if c not in t.column_names]
    if missing:
        raise AttributionError(
            f"{label}: the trace has no column {', '.join(missing)}; attribution needs the device "
            f"spans (kind, name, clock, chip, start_ns, end_ns; see the collector-format guide)"
        )
    kind, clock = _text(t, "kind"), _text(t, "clock")
    chip = t.column("chip").to_numpy(zero_copy_only=False)
    keep = (clock == "device") & np.isin(kind, LEAF_KINDS)
    if chips is not None:
        keep &= np.isin(chip, np.asarray(chips))
    idx = np.flatnonzero(keep)

    def ints(name, default=-1):
        if name not in t.column_names:
            return np.full(len(idx), default, np.int64)
        col = t.column(name).fill_null(default).to_numpy(zero_copy_only=False)
        return np.asarray(col, np.int64)[idx]

    start, end = ints("start_ns", 0), ints("end_ns", 0)
    bad = end < start
    if bad.any():
        i = int(idx[np.flatnonzero(bad)[0]])
        raise AttributionError(
            f"{label}: row {i + 1} ends before it starts (start_ns {start[bad][0]}, end_ns {end[bad][0]})"
        )
    names = _text(t, "name")[idx]
    step = ints("step")
    chip_v = np.asarray(chip, np.int64)[idx]
    given = _text(t, "phase")[idx] if "phase" in t.column_names else np.full(len(idx), "", dtype=object).astype(str)
    phase = _phases(names, chip_v, step, given)
    return Spans(chip_v, start, end, names, kind[idx], ints("layer"), step, phase, label)


def _phases(names: np.ndarray, chip: np.ndarray, step: np.ndarray, given: np.ndarray) -> np.ndarray:
    """The phase of every span (module docstring)."""
    lower = np.char.lower(names.astype(str))
    own = np.where(
        np.char.find(lower, "prefill") >= 0, "prefill", np.where(np.char.find(lower, "decode") >= 0, "decode", "")
    ).astype(object)
    out = np.full(len(names), "unknown", dtype=object)
    if len(names):
        key = chip * (int(step.max()) + 2 if len(step) else 1) + step
        _, inv = np.unique(key, return_inverse=True)
        has_p = np.bincount(inv, weights=(own == "prefill"), minlength=inv.max() + 1) > 0
        has_d = np.bincount(inv, weights=(own == "decode"), minlength=inv.max() + 1) > 0
        step_phase = np.where(has_p & has_d, "mixed", np.where(has_p, "prefill", np.where(has_d, "decode", "unknown")))
        out = step_phase[inv].astype(object)
        out[step < 0] = "unknown"
        out = np.where(own != "", own, out)
    out = np.where(given != "", given, out)
    return out.astype(str)


__all__ = [
    "AttributionError",
    "BY",
    "LEAF_KINDS",
    "NO_LAYER",
    "NO_SPAN",
    "PHASES",
    "Spans",
    "group_order",
    "read_spans",
]
