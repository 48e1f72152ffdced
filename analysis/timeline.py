"""A correlated timeline of a run for Perfetto's UI: Chrome trace-event JSON or Perfetto protobuf.

Everything is on the host timeline: device events are mapped through each chip's piecewise clock fit
(``perfonto.crosschip.fit_clocks``, ``analysis.clock_run``): every device slice carries the error
bound of its mapped times (``host_err_ns`` in its args) and, when it lies outside its step's submit
bracket, ``outside_submit``; a slice or counter value whose device time cannot be mapped (between a
clock reset and the next sync read) is left out and counted (``unmappable`` in the stats). Layout:

- process ``host`` (pid 1): threads ``runtime`` (the serving runtime's launch calls), ``driver``
  (command submissions) and ``steps`` (one marker per step, from its launch to its sampled tokens);
- process ``chip N`` (pid 10 + N): threads ``stream`` (the forward pass), ``mxu`` and ``vpu`` (the
  ops, by the unit that runs them), ``c2c`` (collectives, with the measured wait for the last chip
  in their args), ``host io`` (the device waiting for host transfers), ``pcie dma`` (the PCIe
  transfers as the driver records them); counter tracks for the selected metrics of
  ``RUN/metrics.parquet`` (one value per sampling window, at the window's start). Work that
  overlaps in time is on separate threads, so slices on one thread nest.
- flows, one chain per step and chip: launch call → submission → host-to-device transfer →
  forward pass. In the JSON, a flow is a start ``s``, steps ``t`` and a finish ``f`` (bound to its
  enclosing slice with ``"bp": "e"``) with one ``id``, each placed strictly inside its slice (at
  its midpoint) on that slice's thread — Perfetto's importer drops a flow endpoint that is not.

Timestamps are microseconds rebased to the first event (``otherData.trace_start_host_ns``), so a
double keeps nanoseconds. ``--format proto`` writes the same content as Perfetto's protobuf trace
format (TrackDescriptor and TrackEvent packets, with ``flow_ids``/``terminating_flow_ids`` and
interned names) through the ``perfetto`` package's ``TraceProtoBuilder``, written in chunks; prefer
it for long runs, where JSON grows past hundreds of MB (a 10 s, 8-chip op-level run: 95 MB of JSON,
44 MB of protobuf).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .clock_run import map_trace
from .crosschip import fit_clocks, instance_waits, text
from .run_files import Run, read_parquet
from .timeline_proto import write_proto
from perfonto.ontology.errors import PerfontoError

DEFAULT_METRICS = ("mxu.utilization", "hbm.bandwidth_utilization", "c2c.bandwidth_utilization", "power.average")
HOST_PID = 1
CHIP_PID0 = 10
HOST_THREADS = {"runtime": 1, "driver": 2, "steps": 3}
CHIP_THREADS = {"stream": 1, "mxu": 2, "vpu": 3, "c2c": 4, "host io": 5, "pcie dma": 6}
#: trace.parquet ``unit`` → thread of the chip's process (host-clock PCIe transfers apart from the device's view)
UNIT_THREAD = {"stream": "stream", "mxu": "mxu", "vpu": "vpu", "c2c": "c2c", "pcie": "host io"}


@dataclass
class Model:
    """Slices (parallel arrays; host ns), counters, flows and track names of a timeline."""

    pid: np.ndarray
    tid: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    args: list
    counters: list[tuple[int, str, np.ndarray, np.ndarray]]  # (pid, metric, ts_ns, values)
    flows: list[list[tuple[int, int, float]]]  # each: [(pid, tid, ts_ns), ...] s → t … → f
    processes: dict[int, str]
    threads: dict[tuple[int, int], str]
    t0: float = 0.0
    stats: dict = field(default_factory=dict)


class TimelineError(PerfontoError, ValueError):
    """A run folder the timeline cannot be built from (no trace, unknown metric)."""


def build(run_dir: str | Path, metrics: tuple[str, ...] | None = None) -> Model:
    """The timeline of a run folder. ``metrics``: counter tracks (default: those of
    ``DEFAULT_METRICS`` present in ``RUN/metrics.parquet``; none when the file is absent).

    Raises:
        TimelineError: no ``trace.parquet``, or a requested metric not in ``metrics.parquet``.
        run_files.RunError: no sync reads or counters.
    """
    run = _open_traced(run_dir)
    fits = fit_clocks(run)
    t = map_trace(run, fits)
    mapped = t.column("unmappable").is_null().to_numpy(zero_copy_only=False)
    t = t.filter(mapped)
    kind, unit, names = text(t, "kind"), text(t, "unit"), text(t, "name")
    chip = t.column("chip").to_numpy().astype(np.int64)
    step = t.column("step").to_numpy()
    hs = t.column("host_start_ns").to_numpy()
    he = t.column("host_end_ns").to_numpy()
    nbytes = t.column("bytes").to_numpy()
    pid = np.where(chip >= 0, CHIP_PID0 + chip, HOST_PID)
    tid = _thread_ids(kind, unit, chip)
    dur = np.maximum(he - hs, 0.0)
    label = np.where(kind == "step", np.char.add("step ", step.astype(str)), names)
    label = np.where(kind == "api", "launch_step", label)
    args = _slice_args(t, kind, chip, step, hs, nbytes)
    bound, outside = _bound_args(t, args)
    chips = sorted(fits)
    by_kind = _flow_ends(kind, names, step, chip, dur)
    flows = _flow_chains(by_kind, chips, pid, tid, hs + dur / 2)
    counters = _counters(run, fits, metrics)
    processes, threads = _track_names(chips)
    return Model(
        pid,
        tid,
        label.astype(object),
        kind.astype(object),
        hs,
        dur,
        args,
        counters,
        flows,
        processes,
        threads,
        _start(hs, counters),
        {
            "slices": int(len(hs)),
            "flows": len(flows),
            "counter_tracks": len(counters),
            "steps": len(by_kind["api"]),
            "chips": len(chips),
            "unmappable": int(len(mapped) - mapped.sum()),
            "outside_submit": outside,
            "bound_ns_max": bound,
        },
    )


def _open_traced(run_dir: str | Path) -> Run:
    """The run folder, which must hold a ``trace.parquet``."""
    run = Run.open(run_dir)
    if not run.file("trace.parquet").exists():
        raise TimelineError(
            f"{run.path}: no trace.parquet; re-run the emulator (it writes the trace beside the counters)"
        )
    return run


def _thread_ids(kind: np.ndarray, unit: np.ndarray, chip: np.ndarray) -> np.ndarray:
    """Each slice's thread: by its unit (``HOST_THREADS`` on the host, ``CHIP_THREADS`` through
    ``UNIT_THREAD`` on a chip; 9 for an unknown unit), and ``pcie dma`` for a chip's DMA."""
    tid = np.full(len(chip), 9, np.int64)
    for u in np.unique(unit):
        sel = unit == u
        host = sel & (chip < 0)
        tid[host] = HOST_THREADS.get(u, 9)
        tid[sel & (chip >= 0)] = CHIP_THREADS.get(UNIT_THREAD.get(u, u), 9)
    tid[(kind == "dma") & (chip >= 0)] = CHIP_THREADS["pcie dma"]
    return tid


def _slice_args(t, kind, chip, step, hs, nbytes) -> list:
    """Each slice's args: a collective's step, layer, bytes, wait and last chip to arrive; the step
    (and a DMA's bytes) of a transfer, forward pass, step, launch call or submission; else None."""
    layer = t.column("layer").to_numpy()
    args: list = [None] * len(kind)
    coll = np.flatnonzero(kind == "collective")
    if len(coll):
        w, last = instance_waits(t.column("instance").to_numpy()[coll], chip[coll], hs[coll])
        for i, wi, li in zip(coll, w, last):
            args[i] = {
                "step": int(step[i]),
                "layer": int(layer[i]),
                "bytes": float(nbytes[i]),
                "wait_us": round(float(wi) / 1e3, 3),
                "last_to_arrive": f"chip {int(li)}",
            }
    for i in np.flatnonzero(
        (kind == "dma") | (kind == "exec") | (kind == "step") | (kind == "api") | (kind == "submit")
    ):
        args[i] = {"step": int(step[i])} if kind[i] != "dma" else {"step": int(step[i]), "bytes": float(nbytes[i])}
    return args


def _bound_args(t, args: list) -> tuple[float, int]:
    """Add to each device slice's args its error bound (``host_err_ns``, the larger of its start's and
    end's, ns) and ``outside_submit`` when flagged; returns the largest bound and the flagged count."""
    es = t.column("host_start_err_ns").to_numpy()
    ee = t.column("host_end_err_ns").to_numpy()
    out = t.column("outside_submit").to_numpy(zero_copy_only=False)
    dev = np.flatnonzero(text(t, "clock") == "device")
    err = np.round(np.maximum(es, ee), 1)
    for i in dev:
        a = args[i] if args[i] is not None else {}
        a["host_err_ns"] = float(err[i])
        if out[i]:
            a["outside_submit"] = True
        args[i] = a
    return (float(err[dev].max()) if len(dev) else 0.0), int(out.sum())


def _flow_ends(kind, names, step, chip, dur) -> dict[str, dict]:
    """The slices a flow can pass through, by kind (launch call, submission, h2d transfer, forward
    pass) and ``(step, chip)`` (chip -1 for the host's): those of positive duration."""
    by_kind: dict[str, dict] = {k: {} for k in ("api", "submit", "dma", "exec")}
    for i in np.flatnonzero(np.isin(kind, list(by_kind))):
        if kind[i] == "dma" and names[i] != "h2d":
            continue
        if dur[i] <= 0:
            continue
        by_kind[kind[i]][(int(step[i]), int(chip[i]) if kind[i] in ("dma", "exec") else -1)] = i
    return by_kind


def _flow_chains(by_kind: dict, chips: list, pid, tid, mid) -> list:
    """The flows: launch call → submission → h2d transfer (chip c) → forward pass (chip c), per step
    and chip with all four slices, each endpoint at its slice's midpoint."""
    flows = []
    for (s, _), ia in sorted(by_kind["api"].items()):
        isub = by_kind["submit"].get((s, -1))
        for c in chips:
            idma, iex = by_kind["dma"].get((s, c)), by_kind["exec"].get((s, c))
            if isub is None or idma is None or iex is None:
                continue
            flows.append([(int(pid[j]), int(tid[j]), float(mid[j])) for j in (ia, isub, idma, iex)])
    return flows


def _start(hs: np.ndarray, counters: list) -> float:
    """The trace's start (``t0``): the first slice or counter value, floored to a whole ns."""
    starts = [hs.min()] if len(hs) else []
    starts += [float(ts.min()) for _, _, ts, _ in counters if len(ts)]
    return float(np.floor(min(starts))) if starts else 0.0


def _track_names(chips: list) -> tuple[dict, dict]:
    """Process names by pid and thread names by (pid, tid)."""
    processes = {HOST_PID: "host", **{CHIP_PID0 + c: f"chip {c}" for c in chips}}
    threads = {(HOST_PID, v): k for k, v in HOST_THREADS.items()}
    for c in chips:
        threads.update({(CHIP_PID0 + c, v): k for k, v in CHIP_THREADS.items()})
    return processes, threads


def _counters(run: Run, fits, metrics) -> list:
    path = run.file("metrics.parquet")
    if not path.exists():
        if metrics:
            raise TimelineError(
                f"{run.path}: no metrics.parquet for the counter tracks {', '.join(metrics)}; "
                f"run `perfonto run` (it evaluates the metrics) or leave --metrics out"
            )
        return []
    cols = read_parquet(path, schema_only=True).names
    if metrics:
        bad = [m for m in metrics if m not in cols]
        if bad:
            avail = [c for c in cols if c not in ("window", "chip", "start_ns", "interval_s")]
            raise TimelineError(
                f"metric(s) {', '.join(bad)} not in {path}; available: {', '.join(avail[:30])}"
                f"{' …' if len(avail) > 30 else ''}"
            )
        chosen = list(metrics)
    else:
        chosen = [m for m in DEFAULT_METRICS if m in cols]
    if not chosen:
        return []
    tab = read_parquet(path, columns=["chip", "start_ns", *chosen])
    chip = tab.column("chip").to_numpy()
    start = tab.column("start_ns").to_numpy()
    out = []
    for c in sorted(fits):
        sel = chip == c
        ts = fits[c].map(start[sel], ordered=True)[0]  # NaN: unmappable (after a clock reset)
        for m in chosen:
            v = tab.column(m).to_numpy(zero_copy_only=False).astype(np.float64)[sel]
            ok = np.isfinite(v) & np.isfinite(ts)
            out.append((CHIP_PID0 + int(c), m, ts[ok], v[ok]))
    return out


def _ns(x: float, t0: float) -> int:
    return int(round(x - t0))


def _ts(ns: int) -> float:
    """Microseconds for a whole-ns timestamp, a quarter ns late: a reader that truncates ``ts ×
    1000`` to ns (Perfetto's JSON importer) and one that rounds both get ``ns`` back."""
    return (ns + 0.25) / 1e3


def _dur(ns: int) -> float:
    """Microseconds for a whole-ns duration, a quarter ns short (so ``ts + dur`` never passes the
    next slice's ``ts`` on the same thread, in doubles or in truncated ns)."""
    return max(ns - 0.25, 0.0) / 1e3


def write_json(model: Model, path: str | Path) -> dict:
    """Write Chrome trace-event JSON (``{"traceEvents": [...], "displayTimeUnit": "ns", ...}``)."""
    t0 = model.t0
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            '{"displayTimeUnit": "ns", "otherData": '
            + json.dumps({"trace_start_host_ns": t0, **model.stats})
            + ', "traceEvents": [\n'
        )
        first = True

        def emit(ev):
            nonlocal first, n
            fh.write(("" if first else ",\n") + json.dumps(ev, separators=(",", ":")))
            first = False
            n += 1

        for pid, name in model.processes.items():
            emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for (pid, tid), name in model.threads.items():
            emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        for i in range(len(model.start)):
            s = _ns(model.start[i], t0)
            e = _ns(model.start[i] + model.dur[i], t0)
            ev = {
                "ph": "X",
                "name": str(model.name[i]),
                "cat": str(model.cat[i]),
                "pid": int(model.pid[i]),
                "tid": int(model.tid[i]),
                "ts": _ts(s),
                "dur": _dur(e - s),
            }
            if model.args[i]:
                ev["args"] = model.args[i]
            emit(ev)
        for fid, chain in enumerate(model.flows, start=1):
            for k, (pid, tid, ts) in enumerate(chain):
                ph = "s" if k == 0 else ("f" if k == len(chain) - 1 else "t")
                ev = {
                    "ph": ph,
                    "id": fid,
                    "name": "launch",
                    "cat": "launch",
                    "pid": pid,
                    "tid": tid,
                    "ts": _ts(_ns(ts, t0)),
                }
                if ph == "f":
                    ev["bp"] = "e"
                emit(ev)
        for pid, metric, ts, vals in model.counters:
            for x, v in zip(ts, vals):
                emit(
                    {
                        "ph": "C",
                        "name": metric,
                        "pid": pid,
                        "tid": 0,
                        "ts": _ts(_ns(x, t0)),
                        "args": {"value": float(v)},
                    }
                )
        fh.write("\n]}\n")
    return {"events": n, **model.stats}


def write(run_dir: str | Path, out: str | Path, fmt: str = "json", metrics: tuple[str, ...] | None = None) -> dict:
    """Build the timeline of ``run_dir`` and write it to ``out`` as ``json`` or ``proto``."""
    if fmt not in ("json", "proto"):
        raise TimelineError(f"unknown format {fmt!r}; use json or proto")
    model = build(run_dir, metrics)
    return (write_json if fmt == "json" else write_proto)(model, out)


__all__ = ["DEFAULT_METRICS", "Model", "TimelineError", "build", "write", "write_json", "write_proto"]
