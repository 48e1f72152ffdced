"""`perfonto timeline`: the structure of the trace-event JSON (the Chrome Trace Event Format as
Perfetto's importer reads it) and of the protobuf trace, with flows from every step's launch call to
its submission, PCIe transfer and forward pass on every chip (issue 8, item 4)."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

from perfonto import emulator
from perfonto.cli import main

PHASES = {"X", "M", "C", "s", "t", "f"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tl")
    assert (
        main(["run", "--json", "--out", str(out), "--duration", "800ms", "--slow-chip", "2:1.2"]) == 0
    )  # ≥ 3 steps: 4 (1.11 s measured: the run ends where the step in progress ends; 1500 ms: 6, twice the time)
    return out


def _ns(us: float) -> set[int]:
    """The whole ns a reader may take a µs timestamp for: truncated (Perfetto) or rounded."""
    return {math.floor(us * 1000), round(us * 1000)}


def check_trace_events(doc: dict) -> dict:
    """Structural checks of a trace-event JSON document; returns the flows {id: [events]} and slices."""
    assert isinstance(doc["traceEvents"], list) and doc.get("displayTimeUnit") in ("ns", "ms")
    names: dict = {}
    threads: set = set()
    slices = defaultdict(list)
    flows = defaultdict(list)
    for ev in doc["traceEvents"]:
        _check_event(ev, names, threads, slices, flows)
    _check_slices_nest(slices, names, threads)
    _check_flow_endpoints(flows, slices)
    return {"flows": flows, "slices": slices, "processes": names}


def _check_event(ev: dict, names: dict, threads: set, slices: dict, flows: dict) -> None:
    """One event's phase and fields; collects process names, named threads, slices and flow events."""
    ph = ev["ph"]
    assert ph in PHASES, ev
    assert isinstance(ev["pid"], int) and isinstance(ev.get("tid", 0), int) and isinstance(ev["name"], str), ev
    if ph == "M":
        assert ev["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), ev
        if ev["name"] == "process_name":
            names[ev["pid"]] = ev["args"]["name"]
        if ev["name"] == "thread_name":
            threads.add((ev["pid"], ev["tid"]))
        return
    assert isinstance(ev["ts"], float | int) and math.isfinite(ev["ts"]) and ev["ts"] >= 0, ev
    if ph == "X":
        assert isinstance(ev["dur"], float | int) and ev["dur"] >= 0 and isinstance(ev.get("cat", ""), str), ev
        slices[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"], ev))
    elif ph == "C":
        assert ev["args"] and all(isinstance(v, float | int) and math.isfinite(v) for v in ev["args"].values()), ev
    else:
        assert "id" in ev and ev.get("cat") and (ph != "f" or ev.get("bp") == "e"), ev
        flows[ev["id"]].append(ev)


def _check_slices_nest(slices: dict, names: dict, threads: set) -> None:
    """Slices are on named processes and threads, and on one thread they nest (sorts each thread's slices)."""
    for key, sl in slices.items():
        assert key[0] in names and key in threads, f"slices on {key} without process/thread names"
        sl.sort(key=lambda x: (x[0], -x[1]))
        # slices on one thread nest: no slice starts inside another and ends after it (in ns, however read)
        stack: list = []
        for s, e, ev in sl:
            s_ns, e_ns = min(_ns(s)), max(_ns(e))
            while stack and stack[-1] <= s_ns:
                stack.pop()
            assert not stack or e_ns <= stack[-1], f"slices overlap on {key}: {ev}"
            stack.append(max(_ns(ev["ts"] + ev["dur"])))


def _check_flow_endpoints(flows: dict, slices: dict) -> None:
    """Each flow is one ``s``, ``t``s and one ``f`` in time order, each strictly inside a slice on its thread."""
    for fid, evs in flows.items():
        phs = [e["ph"] for e in evs]
        assert phs[0] == "s" and phs[-1] == "f" and phs.count("s") == 1 and phs.count("f") == 1, (fid, phs)
        assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs), fid
        for e in evs:  # strictly inside a slice on its own thread
            inside = [
                x
                for x in slices[(e["pid"], e["tid"])]
                if x[0] < e["ts"] < x[1] and min(_ns(x[0])) < min(_ns(e["ts"])) and max(_ns(e["ts"])) < min(_ns(x[1]))
            ]
            assert inside, f"flow {fid} endpoint outside every slice: {e}"


def test_json_timeline_structure(run, tmp_path):
    out = tmp_path / "trace.json"
    assert main(["timeline", str(run), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    got = check_trace_events(doc)
    procs = got["processes"]
    assert sorted(procs.values()) == sorted(["host"] + [f"chip {c}" for c in range(8)])
    # one flow chain per step and chip: launch call → submission → h2d transfer → forward pass
    gt = json.loads((run / "ground_truth.json").read_text())
    steps = gt["trace"]["steps"]
    assert len(got["flows"]) == steps * 8 and steps >= 3
    _check_flow_chains(got, steps)
    _check_tracks_and_rebasing(doc)
    _check_collective_waits(doc)


def _check_flow_chains(got: dict, steps: int) -> None:
    """Every flow runs launch call → submission → h2d transfer → forward pass, the last two on one
    chip; each of the 8 chips has one chain per step."""
    procs = got["processes"]
    by_name = {}
    for (pid, tid), sl in got["slices"].items():
        for s, e, ev in sl:
            by_name[(pid, tid, s)] = ev["cat"]
    chains = defaultdict(set)
    for fid, evs in got["flows"].items():
        cats = []
        for e in evs:
            sl = [x for x in got["slices"][(e["pid"], e["tid"])] if x[0] < e["ts"] < x[1]]
            cats.append(min(sl, key=lambda x: x[1] - x[0])[2]["cat"])
        assert cats == ["api", "submit", "dma", "exec"], cats
        chip = procs[evs[-1]["pid"]]
        assert procs[evs[2]["pid"]] == chip  # the transfer and the execution are the same chip's
        chains[chip].add(fid)
    assert all(len(v) == steps for v in chains.values()) and len(chains) == 8


def _check_tracks_and_rebasing(doc: dict) -> None:
    """Counter tracks for selected metrics; per-unit threads; timestamps rebased, ns kept."""
    counters = {e["name"] for e in doc["traceEvents"] if e["ph"] == "C"}
    assert {"mxu.utilization", "power.average"} <= counters
    tnames = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"stream", "mxu", "vpu", "c2c", "host io", "pcie dma", "runtime", "driver", "steps"} <= tnames
    ts = [e["ts"] for e in doc["traceEvents"] if e["ph"] in ("X", "C")]
    assert min(ts) < 1.0 and doc["otherData"]["trace_start_host_ns"] <= 0


def _check_collective_waits(doc: dict) -> None:
    """Collectives carry their wait; the slow chip 2 arrives last whenever the others wait."""
    colls = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "collective"]
    waits = [e["args"]["wait_us"] for e in colls if e["pid"] != 12]
    assert (
        colls
        and max(waits) > 10
        and all(e["args"]["last_to_arrive"] == "chip 2" for e in colls if e["args"]["wait_us"] > 1)
    )


def test_selected_metrics_and_errors(run, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["timeline", str(run), "--out", str(out), "--metrics", "hbm.bandwidth", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counter_tracks"] == 8
    assert {e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "C"} == {"hbm.bandwidth"}
    assert main(["timeline", str(run), "--out", str(out), "--metrics", "no.such"]) == 1
    assert "no.such" in capsys.readouterr().err
    assert main(["timeline", str(tmp_path), "--out", str(out)]) == 1


def test_emulator_only_run_has_no_counter_tracks(tmp_path):
    emulator.run("sohu", duration_s=0.2, sample_period_s=0.002, warmup_steps=400, out_dir=tmp_path)
    from perfonto.analysis.timeline import build

    m = build(tmp_path)
    assert m.counters == [] and len(m.flows) == m.stats["steps"] * 8


def test_proto_timeline(run, tmp_path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    out = tmp_path / "trace.pftrace"
    assert main(["timeline", str(run), "--out", str(out), "--format", "proto"]) == 0
    trace = pb.Trace.FromString(out.read_bytes())  # a stream of Trace messages is one Trace
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")}
    procs = {t.process.process_name for t in tracks.values() if t.HasField("process")}
    assert procs == {"host"} | {f"chip {c}" for c in range(8)}
    assert any(t.HasField("counter") and t.name == "mxu.utilization" for t in tracks.values())
    events = [p for p in trace.packet if p.HasField("track_event")]
    assert all(p.trusted_packet_sequence_id == 1 for p in trace.packet)
    begins = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
    ends = [p for p in events if p.track_event.type == pb.TrackEvent.TYPE_SLICE_END]
    assert len(begins) == len(ends) > 1000 and all(p.track_event.track_uuid in tracks for p in events)
    interned = {e.iid: e.name for p in trace.packet for e in p.interned_data.event_names}
    assert trace.packet[0].sequence_flags == pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    assert {"forward", "launch_step", "attn_allreduce"} <= {interned[p.track_event.name_iid] for p in begins}
    assert [p.timestamp for p in events] == sorted(p.timestamp for p in events)
    _check_proto_flows(begins, run)
    _check_proto_slices_nest(events, pb)


def _check_proto_flows(begins: list, run) -> None:
    """One terminating flow id per step and chip, each leaving three slices before it ends."""
    out_ids = defaultdict(int)
    for p in begins:
        for f in p.track_event.flow_ids:
            out_ids[f] += 1
    term = [f for p in begins for f in p.track_event.terminating_flow_ids]
    gt = json.loads((run / "ground_truth.json").read_text())
    n = gt["trace"]["steps"] * 8
    assert len(term) == len(set(term)) == n and set(out_ids) == set(term) and set(out_ids.values()) == {3}


def _check_proto_slices_nest(events: list, pb) -> None:
    """Per track, begins and ends pair up in order (slices nest)."""
    depth = defaultdict(int)
    for p in events:
        t = p.track_event
        if t.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            depth[t.track_uuid] += 1
        elif t.type == pb.TrackEvent.TYPE_SLICE_END:
            depth[t.track_uuid] -= 1
            assert depth[t.track_uuid] >= 0
    assert set(depth.values()) == {0}


def test_flows_bind_inside_short_slices():
    """A flow endpoint at a slice's midpoint stays strictly inside it after the µs rebasing, even for
    a 2 ns slice far from the trace start."""
    from perfonto.analysis.timeline import _dur, _ns, _ts

    t0 = -12_345.0
    for start in (0.0, 9_999_999_999.0, 123_456_789.0):
        s, e = _ns(start, t0), _ns(start + 2, t0)
        mid = _ns(start + 1, t0)
        ts, dur, m = _ts(s), _dur(e - s), _ts(mid)
        assert math.floor(ts * 1000) == s and math.floor(dur * 1000) in (e - s - 1, e - s)
        assert ts < m < ts + dur and math.floor(ts * 1000) < math.floor(m * 1000) < math.floor((ts + dur) * 1000) + 1
        assert np.float64(ts) + np.float64(dur) <= _ts(e)
