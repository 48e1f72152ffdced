"""What one host's pass of the embedded engine leaves, as a small picklable state, and the states of every
host merged on the Spark driver into the one pass (``analysis.engine._Pass``) the embedded engine carries.

An executor (``analysis.spark_kernel``) runs the embedded engine's pass over one host's rows and returns
``host_state``: the host's run-level sums (``ChipSums`` without its graph; missing samples bridged as
``analysis.engine_bridge`` bridges them, with the bridged windows' values), its server-level sums, the
windows with a null per signal, the null reasons, the bound and top-down checks, the extremes of ``rollup
max|min`` metrics, the chips' spans and time, the clean pieces' sums and the dirty pieces (for the server
level's second pass), the pieces' counts, the metric parts written and the window rows. ``merge_state``
places a host's state at its group and chip columns of the whole dump's pass, as ``_Pass.add`` would have
carried it piece by piece; the driver then builds the levels (``engine_levels._levels``) as the embedded
engine does. No rollup code here: the sums are the engine's, combined by its own functions.
"""

from __future__ import annotations

import pickle

import numpy as np

from perfonto.capture.dump_io import DumpError

from .level_sums import ChipSums


def _sums_out(cs: ChipSums | None):
    return None if cs is None else (cs.server, cs.dirty, cs.sums)


def _sums_in(graph, deps: dict, packed) -> ChipSums:
    """A ``ChipSums`` of ``graph`` from ``_sums_out``'s tuple (the graph's signal deps shared, not recomputed)."""
    server, dirty, sums = packed
    cs = ChipSums.__new__(ChipSums)
    cs.graph, cs.server, cs.gen, cs.deps = graph, server, graph.generation, deps
    cs.dirty, cs.sums = dirty, sums
    return cs


def host_state(st, host, files: list[str], rows: int, spans: dict[int, int], notes: list[str]) -> bytes:
    """The pass ``st`` (an ``engine._Pass`` over a plan of one host's rows) as pickled bytes (module
    docstring); ``files``: the metric parts it wrote; ``rows``: its window rows; ``spans``: each piece's
    first window → its windows; ``notes``: the bridge's notes (``engine_bridge.Held.finish``)."""
    plan = st.plan
    state = {
        "host": host,
        "chips": np.asarray(plan.chip_numbers.get(host, np.zeros(0, np.int64))),
        "n_grid": plan.n_grid,
        "sample_base": plan.sample_base,
        "sums": _sums_out(st.sums[0]) if st.sums else None,
        "server": _sums_out(st.server),
        "bad_any": st.bad_any,
        "nulls": st.nulls,
        "checks": (st.checks.counts, st.checks.first, st.checks.tree),
        "extremes": st.extremes,
        "first_start": st.first_start,
        "last_end": st.last_end,
        "chip_time": st.chip_time,
        "clean": {first: v for (_, first), v in st.clean.items()},
        "dirty": sorted((first, spans[first]) for _, first in st.dirty_pieces),
        "stats": st.stats,
        "bridged": st.held.kept.get(0, {}),  # the values of its bridged windows, for the second pass
        "bridged_runs": st.held.runs,  # its bridged spans, left out whole where the fleet's masks cut them
        "notes": notes,
        "files": files,
        "rows": rows,
    }
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def _check_grid(st, state: dict, host) -> None:
    """A host's own plan on the whole dump's grid (same chips, grid points and first sample), else a
    clear error: its window numbers would differ from the embedded engine's."""
    plan = st.plan
    want = np.asarray(plan.chip_numbers[host])
    if not np.array_equal(state["chips"], want):
        raise DumpError(
            f"{plan.label}: host {host!r}: Spark gave chips {state['chips'].tolist()}, the plan {want.tolist()}"
        )
    base = plan.sample_base
    if state["n_grid"] != plan.n_grid or (base is not None and state["sample_base"] != base):
        raise DumpError(
            f"{plan.label}: host {host!r} spans {state['n_grid']} grid points of its own where the dump spans "
            f"{plan.n_grid}: hosts sampled over different spans are analysed by the embedded engine "
            "(--engine embedded)"
        )


def merge_state(st, group: int, data: bytes, deps: dict) -> tuple[list[str], int]:
    """Merge one host's ``host_state`` bytes into the whole dump's pass ``st`` at host group ``group``
    (chip columns ``st.offsets[group]`` …); returns (metric parts written, window rows).

    Raises:
        DumpError: the host's own grid is not the dump's (``_check_grid``).
    """
    s = pickle.loads(data)
    host = list(st.plan.groups)[group]
    _check_grid(st, s, host)
    c0, c1 = int(st.offsets[group]), int(st.offsets[group + 1])
    graph = st.graph
    while len(st.sums) <= group:
        st.sums.append(ChipSums(graph))
    if s["sums"] is not None:
        st.sums[group] = _sums_in(graph, deps, s["sums"])
    if st.server is not None and s["server"] is not None:  # one host: its server-level sums, carried in its pass
        st.server = _sums_in(graph, deps, s["server"])
    for sig, bad in s["bad_any"].items():
        arr = st.bad_any.setdefault(sig, np.zeros(st.W, bool))
        arr |= bad
    for name, counts in s["nulls"].items():
        into = st.nulls.setdefault(name, {})
        for k, v in counts.items():
            into[k] = into.get(k, 0) + v
    _merge_checks(st.checks, s["checks"], c0)
    for n, ext in s["extremes"].items():
        st.extremes[n][c0:c1] = ext
    st.first_start[c0:c1] = s["first_start"]
    st.last_end[c0:c1] = s["last_end"]
    st.chip_time[c0:c1] = s["chip_time"]
    for first, v in s["clean"].items():
        st.clean[(group, first)] = v
    _dirty_pieces(st, group, s["dirty"])
    if s["bridged"]:
        st.held.kept[group] = s["bridged"]
    for name, runs in s.get("bridged_runs", {}).items():
        st.held.runs.setdefault(name, []).extend(runs)
    st.plan.notes += [n for n in s["notes"] if n not in st.plan.notes]
    for k, v in s["stats"].items():
        st.stats[k] = st.stats.get(k, 0) + v
    return s["files"], int(s["rows"])


def _dirty_pieces(st, group: int, dirty: list[tuple[int, int]]) -> None:
    """The host's pieces with a null as the whole dump's pieces (``engine_levels._piece_windows``: the
    pieces the second pass reads again): every piece of the plan that overlaps one (the executor read
    the host with the driver's plan: its pieces are the plan's)."""
    C = int(st.offsets[group + 1] - st.offsets[group])
    step = max(1, st.chunk_rows // max(C, 1))
    for first, n in dirty:
        for a in range(first - first % step, first + max(n, 1), step):
            if a < max(st.W, 1):
                st.dirty_pieces.add((group, a))


def _merge_checks(checks, packed, col0: int) -> None:
    """One host's ``WindowChecks`` (counts, first violations, top-down worst) at chip columns ``col0`` …,
    kept as ``WindowChecks.add`` keeps them (the first ``max_listed`` by window, then chip column)."""
    counts, first, tree = packed
    for name, n in counts.items():
        checks.counts[name] = checks.counts.get(name, 0) + n
    for name, rows in first.items():
        listed = checks.first.setdefault(name, [])
        listed += [(w, col0 + c, bv) for w, c, bv in rows]
        if len(listed) > 2 * checks.max_listed:
            listed.sort(key=lambda r: (r[0], r[1]))
            del listed[checks.max_listed :]
    for parent, (n, err, w, chip, col) in tree.items():
        rec = checks.tree.setdefault(parent, [0, -1.0, 0, 0, 0])
        rec[0] += n
        if (err, -w, -(col0 + col)) > (rec[1], -rec[2], -rec[4]):
            rec[1:] = [err, w, chip, col0 + col]


__all__ = ["host_state", "merge_state"]
