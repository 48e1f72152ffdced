"""The timeline in Perfetto's protobuf trace format (``perfonto timeline --format proto``).

``write_proto`` is re-exported by ``perfonto.analysis.timeline``, which builds the ``Model`` it
writes; the steps here are: intern the strings, describe the tracks, bind each flow endpoint to its
slice, order the events in time, and write one TrackEvent packet per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .timeline import Model

SEQ = 1  # the one packet sequence of the trace


class _Packets:
    """The packet sequence being written: one ``TraceProtoBuilder`` serialised to ``fh`` every
    ``chunk`` packets; the first packet clears the incremental state, every later one needs it."""

    def __init__(self, fh, chunk: int, pb, builder_cls) -> None:
        self.fh, self.chunk, self.pb, self.builder_cls = fh, chunk, pb, builder_cls
        self.builder = builder_cls()
        self.first = True
        self.n = 0

    def new(self):
        """A new packet on the sequence (flushing the builder first when it holds ``chunk``)."""
        if len(self.builder.trace.packet) >= self.chunk:
            self.fh.write(self.builder.serialize())
            self.builder = self.builder_cls()
        p = self.builder.add_packet()
        p.trusted_packet_sequence_id = SEQ
        if self.first:
            p.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            p.first_packet_on_sequence = True
            self.first = False
        else:
            p.sequence_flags = self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        self.n += 1
        return p

    def close(self) -> None:
        """Write the packets not yet written."""
        self.fh.write(self.builder.serialize())


@dataclass
class _Events:
    """What the TrackEvent packets refer to: interned ids, track uuids, flow ids per slice and the
    counter values (in event order after the ``2 m`` slice begins and ends)."""

    pb: Any
    model: Model
    names: dict[str, int]
    cats: dict[str, int]
    arg_iid: dict[str, int]
    counter_uuid: dict[int, int]
    flow_out: dict[int, list[int]]
    flow_end: dict[int, list[int]]
    track: np.ndarray
    cvals: np.ndarray
    m: int


def _interned_ids(model: Model) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Interning ids (from 1, in sorted order) of the event names, categories and annotation names."""
    names = {str(x): k for k, x in enumerate(sorted({str(x) for x in model.name}), start=1)}
    cats = {str(x): k for k, x in enumerate(sorted({str(x) for x in model.cat}), start=1)}
    arg_names = sorted({key for a in model.args if a for key in a})
    arg_iid = {k: i for i, k in enumerate(arg_names, start=1)}
    return names, cats, arg_iid


def _write_interned(p, names: dict, cats: dict, arg_iid: dict) -> None:
    """Fill packet ``p`` with the interned strings, valid for the rest of the sequence."""
    for text_, iid in names.items():
        e = p.interned_data.event_names.add()
        e.iid, e.name = iid, text_
    for text_, iid in cats.items():
        e = p.interned_data.event_categories.add()
        e.iid, e.name = iid, text_
    for text_, iid in arg_iid.items():
        e = p.interned_data.debug_annotation_names.add()
        e.iid, e.name = iid, text_


def _write_tracks(packets: _Packets, model: Model) -> dict[int, int]:
    """TrackDescriptor packets: a process track per process, a thread track per thread, a counter
    track per metric and chip; returns the counter tracks' uuids by index in ``model.counters``."""
    for pid, name in model.processes.items():
        p = packets.new()
        p.track_descriptor.uuid = pid * 1000
        p.track_descriptor.process.pid = pid
        p.track_descriptor.process.process_name = name
    for (pid, tid), name in model.threads.items():
        p = packets.new()
        p.track_descriptor.uuid = pid * 1000 + tid
        p.track_descriptor.parent_uuid = pid * 1000
        p.track_descriptor.thread.pid = pid
        p.track_descriptor.thread.tid = pid * 100 + tid  # tids are global in the proto format
        p.track_descriptor.thread.thread_name = name
    counter_uuid = {}
    for k, (pid, metric, _, _) in enumerate(model.counters):
        p = packets.new()
        u = pid * 1000 + 500 + k
        counter_uuid[k] = u
        p.track_descriptor.uuid = u
        p.track_descriptor.parent_uuid = pid * 1000
        p.track_descriptor.name = metric
        p.track_descriptor.counter.SetInParent()
    return counter_uuid


def _flow_slices(model: Model) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The slice holding each flow endpoint (the innermost one on its thread): flow ids leaving each
    slice, and flow ids ending in each slice (the chain's last endpoint)."""
    flow_out: dict[int, list[int]] = {}
    flow_end: dict[int, list[int]] = {}
    by_thread: dict[tuple, list] = {}
    for i in range(len(model.start)):
        by_thread.setdefault((int(model.pid[i]), int(model.tid[i])), []).append(i)
    slice_at = {k: np.array(v) for k, v in by_thread.items()}
    for fid, chain in enumerate(model.flows, start=1):
        for k, (pid, tid, ts) in enumerate(chain):
            idx = slice_at[(pid, tid)]
            inside = idx[(model.start[idx] < ts) & (model.start[idx] + model.dur[idx] > ts)]
            if len(inside):
                j = int(inside[np.argmax(model.start[inside])])
                (flow_end if k == len(chain) - 1 else flow_out).setdefault(j, []).append(fid)
    return flow_out, flow_end


def _event_order(model: Model):
    """All events in time order: returns ``(ts_all, order, ref, cvals, seq)`` — timestamps (ns from
    ``t0``), kind (0 slice end, 1 slice begin, 2 counter value), slice or counter-track index, the
    counter values, and the permutation that sorts the events."""
    t0 = model.t0
    s_ns = np.rint(model.start - t0).astype(np.int64)
    e_ns = s_ns + np.maximum(np.rint(model.dur).astype(np.int64), 0)
    m = len(s_ns)
    # begins (order 1; outer first: later end first) and ends (order 0, before a begin at the same
    # instant; inner first: later start first), then counters (order 2)
    ts_all = np.concatenate([s_ns, e_ns])
    order = np.concatenate([np.ones(m, np.int64), np.zeros(m, np.int64)])
    tie = np.concatenate([-e_ns, -s_ns])
    ref = np.concatenate([np.arange(m), np.arange(m)])
    cts, cval, cref = [], [], []
    for k, (pid, metric, ts, vals) in enumerate(model.counters):
        cts.append(np.rint(ts - t0).astype(np.int64))
        cval.append(vals)
        cref.append(np.full(len(ts), k))
    if cts:
        ts_all = np.concatenate([ts_all, *cts])
        order = np.concatenate([order, np.full(sum(len(x) for x in cts), 2)])
        tie = np.concatenate([tie, np.zeros(sum(len(x) for x in cts), np.int64)])
        ref = np.concatenate([ref, *cref])
    cvals = np.concatenate(cval) if cval else np.zeros(0)
    seq = np.lexsort((tie, order, ts_all))
    return ts_all, order, ref, cvals, seq


def _counter_event(te, ev: _Events, i: int, q: int) -> None:
    """A counter value on counter track ``i`` (event ``q``)."""
    te.type = ev.pb.TrackEvent.TYPE_COUNTER
    te.track_uuid = ev.counter_uuid[i]
    te.double_counter_value = float(ev.cvals[q - 2 * ev.m])


def _begin_event(te, ev: _Events, i: int, q: int) -> None:
    """The begin of slice ``i``: name, category, flows leaving or ending in it, its args."""
    model = ev.model
    te.type = ev.pb.TrackEvent.TYPE_SLICE_BEGIN
    te.track_uuid = int(ev.track[i])
    te.name_iid = ev.names[str(model.name[i])]
    te.category_iids.append(ev.cats[str(model.cat[i])])
    if i in ev.flow_out:
        te.flow_ids.extend(ev.flow_out[i])
    if i in ev.flow_end:
        te.terminating_flow_ids.extend(ev.flow_end[i])
    for key, val in (model.args[i] or {}).items():
        a = te.debug_annotations.add()
        a.name_iid = ev.arg_iid[key]
        if isinstance(val, str):
            a.string_value = val
        elif isinstance(val, int):
            a.int_value = val
        else:
            a.double_value = float(val)


def _end_event(te, ev: _Events, i: int, q: int) -> None:
    """The end of slice ``i``."""
    te.type = ev.pb.TrackEvent.TYPE_SLICE_END
    te.track_uuid = int(ev.track[i])


#: event kind (``_event_order``'s ``order``) → the step filling its TrackEvent
_EVENT = {0: _end_event, 1: _begin_event, 2: _counter_event}


def write_proto(model: Model, path: str | Path, chunk: int = 20_000) -> dict:
    """Write Perfetto's protobuf trace format: TrackDescriptor packets (a process track per process,
    a thread track per thread, a counter track per metric and chip), then TrackEvent packets in time
    order (slice begin/end with ``flow_ids`` / ``terminating_flow_ids``, counter values), on one
    packet sequence whose first packet interns the event names, categories and annotation names.
    Packets are built with the ``perfetto`` package's ``TraceProtoBuilder`` and written in chunks of
    ``chunk`` packets (a stream of serialised ``Trace`` messages is one ``Trace``)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    names, cats, arg_iid = _interned_ids(model)
    with open(path, "wb") as fh:
        packets = _Packets(fh, chunk, pb, TraceProtoBuilder)
        _write_interned(packets.new(), names, cats, arg_iid)
        counter_uuid = _write_tracks(packets, model)
        flow_out, flow_end = _flow_slices(model)
        ts_all, order, ref, cvals, seq = _event_order(model)
        track = model.pid.astype(np.int64) * 1000 + model.tid.astype(np.int64)
        ev = _Events(pb, model, names, cats, arg_iid, counter_uuid, flow_out, flow_end, track, cvals, len(model.start))
        for q in seq:
            p = packets.new()
            p.timestamp = int(ts_all[q])
            _EVENT[int(order[q])](p.track_event, ev, int(ref[q]), q)
        packets.close()
    return {"events": packets.n, **model.stats}


__all__ = ["write_proto"]
