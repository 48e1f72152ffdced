"""Every metric per group (layer, op class, phase) from attributed counters (``analysis.attribution``).

A group's metrics are evaluated with the generated evaluator on the group's inputs: counters are
the increases attributed to the group's spans, summed over chips; gauges and packed fields their
time-weighted means over the group's spans; ``interval`` the group's span time summed over chips;
spec constants those of one chip. So a group's value is *per chip while the group runs*: a rate is
the chips' mean rate during the group's spans (``mxu.achieved_flops`` of ``ffn_gate_up`` is the FLOP/s
of one chip while it runs ``ffn_gate_up``), a ratio is a ratio of the group's totals. Record metrics
(latencies) have no per-span meaning and are left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from perfonto.metrics.graph import MetricGraph

from .attribution import Attribution, GroupTotals
from .bottleneck import stall_shares, topdown_level1


@dataclass
class GroupMetrics:
    """``values[metric]``: (K, *instances) per group, in the metric's unit (NaN = null); ``groups``,
    ``time_s`` (K,) and ``spans`` (K,) as in ``GroupTotals``; ``source``: how the counters were
    attributed (``windows`` or ``snapshots``)."""

    by: str
    groups: list[str]
    time_s: np.ndarray
    spans: np.ndarray
    values: dict[str, np.ndarray]
    source: str = "windows"

    def dominant(self, graph: MetricGraph) -> list[str | None]:
        """The level-1 top-down stall with the largest share in each group (``bottleneck.stall_shares``: useful
        work, an imported tree's Retiring, is no bound); None where all are null."""
        level1 = [n for n in topdown_level1(graph) if n in self.values]
        out: list[str | None] = []
        for k in range(len(self.groups)):
            v = stall_shares(graph, {n: float(self.values[n][k]) for n in level1})
            out.append(max(v, key=v.get) if v else None)
        return out


def group_metrics(graph: MetricGraph, evaluator, totals: GroupTotals, source: str = "windows") -> GroupMetrics:
    """Evaluate every window metric of ``graph`` on the groups of ``totals`` (module docstring)."""
    K = len(totals.groups)
    inputs = {}
    for name in getattr(evaluator, "INPUTS", ()):
        v = totals.sums.get(name, totals.means.get(name))
        if v is None:
            shape = (
                (K,) + tuple(s for _, s in graph.generation.signals[name].axes)
                if name in graph.generation.signals
                else (K,)
            )
            v = np.full(shape, np.nan)
        inputs[name] = np.asarray(v, np.float64)[None]
    interval = np.asarray(totals.time_s, np.float64)[None]
    out = evaluator.evaluate(inputs, interval, 1.0)
    values = {n: np.asarray(out[n][0], np.float64) for n in graph.metrics if n in out}
    return GroupMetrics(
        totals.by, list(totals.groups), np.asarray(totals.time_s), np.asarray(totals.spans), values, source
    )


def group_table(gm: GroupMetrics, graph: MetricGraph) -> pa.Table:
    """One row per group: ``group``, ``time_s`` (span time summed over chips), ``time_share``,
    ``spans``, and one column per metric (null where not computable; per-instance metrics as
    fixed-size lists)."""
    total = float(gm.time_s.sum())
    cols = {
        gm.by: pa.array(gm.groups, pa.string()),
        "time_s": pa.array(gm.time_s),
        "time_share": pa.array(gm.time_s / total if total > 0 else np.zeros(len(gm.groups))),
        "spans": pa.array(gm.spans.astype(np.int64)),
    }
    for name, m in graph.metrics.items():
        if name not in gm.values:
            continue
        v = gm.values[name]
        if m.axes:
            k = int(np.prod([s for _, s in m.axes]))
            flat = v.reshape(-1)
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(flat, mask=np.isnan(flat)), k)
        else:
            cols[name] = pa.array(v, mask=np.isnan(v))
    bad = out_of_bounds(gm, graph)
    cols["out_of_bounds"] = pa.array([bad.get(k, []) for k in range(len(gm.groups))], pa.list_(pa.string()))
    return pa.table(cols)


def out_of_bounds(gm: GroupMetrics, graph: MetricGraph) -> dict[int, list[str]]:
    """{group index: the metrics whose value (any instance) lies outside their declared bounds}: a group
    whose counters the attribution could not tell from its neighbours' (a short op sharing its windows
    with a GEMM: a PCIe copy given 5.1 TFLOP, 2,215 % MFU) reads impossible values; they are kept, and
    named (``metrics_by_<by>.parquet``'s ``out_of_bounds``, a report note)."""
    out: dict[int, list[str]] = {}
    for name, m in graph.metrics.items():
        if not m.bounds or name not in gm.values:
            continue
        lo, hi = m.bounds
        tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
        v = np.asarray(gm.values[name], np.float64).reshape(len(gm.groups), -1)
        with np.errstate(invalid="ignore"):
            hit = ((v < lo - tol) | (v > hi + tol)).any(axis=1)
        for k in np.flatnonzero(hit).tolist():
            out.setdefault(k, []).append(name)
    return out


def bounds_note(gm: GroupMetrics, graph: MetricGraph) -> list[str]:
    """The report note of ``out_of_bounds`` for one grouping (none when every group is within bounds)."""
    bad = out_of_bounds(gm, graph)
    if not bad:
        return []
    named = ", ".join(
        f"{gm.groups[k]} ({', '.join(bad[k][:3])}{' …' if len(bad[k]) > 3 else ''})" for k in list(bad)[:4]
    )
    return [
        f"by {gm.by}: {len(bad)} of {len(gm.groups)} group(s) hold values outside their metrics' declared bounds — "
        f"{named}{' …' if len(bad) > 4 else ''}: the windows could not tell their counts from their neighbours' "
        f"(short spans sharing windows with longer ones); read them as unreliable (metrics_by_{gm.by}.parquet's "
        "out_of_bounds, report.json's ops.rows[].reliable)"
    ]


def write_group_parquet(gm: GroupMetrics, graph: MetricGraph, path: str | Path) -> None:
    """``group_table`` as Parquet (``metrics_by_<by>.parquet``), with the grouping, the attribution's
    source and the catalog hash in the metadata."""
    meta = {
        b"perfonto": json.dumps(
            {"by": gm.by, "source": gm.source, "generation": graph.generation.name, "catalog_hash": graph.content_hash}
        ).encode()
    }
    pq.write_table(group_table(gm, graph).replace_schema_metadata(meta), str(path))


def group_json(gm: GroupMetrics, graph: MetricGraph, totals: GroupTotals | None = None) -> dict:
    """The JSON section of one grouping: ``by``, ``source``, ``units`` {metric: unit}, and per group
    its ``time_s``, ``time_share``, ``spans``, dominant top-down node (``bound``), ``metrics``
    {name: value} (scalar metrics) and, with ``totals``, the attribution error ``bound`` and
    ``estimate`` of the matrix FLOPs and HBM bytes relative to their attributed values."""
    total = float(gm.time_s.sum())
    scalar = [n for n, m in graph.metrics.items() if n in gm.values and not m.axes]
    dom = gm.dominant(graph)
    rows = []
    for k, label in enumerate(gm.groups):
        row = {
            "group": label,
            "time_s": float(gm.time_s[k]),
            "time_share": float(gm.time_s[k] / total) if total > 0 else None,
            "spans": int(gm.spans[k]),
            "bound": dom[k],
            "metrics": {n: _num(gm.values[n][k]) for n in scalar},
        }
        if totals is not None:
            row["error"] = error_shares(graph.generation, totals, k)
        rows.append(row)
    return {"by": gm.by, "source": gm.source, "units": {n: graph.metrics[n].unit_text for n in scalar}, "groups": rows}


def error_shares(gen, totals: GroupTotals, k: int) -> dict:
    """Attribution error bound and estimate of group ``k``'s matrix FLOPs and HBM bytes, as
    fractions of the attributed amounts (None where nothing was attributed)."""
    from .roofline import signal_sets

    out = {}
    for what, names in signal_sets(gen).items():
        if what not in ("matrix_flops", "hbm_bytes"):
            continue
        names = [n for n in names if n in totals.sums]
        amount = sum(float(np.sum(totals.sums[n][k])) for n in names)
        b = sum(float(totals.bound[n][k]) for n in names)
        e = sum(float(totals.estimate[n][k]) for n in names)
        out[what] = {"bound": b / amount if amount > 0 else None, "estimate": e / amount if amount > 0 else None}
    return out


def attribution_json(att: Attribution) -> dict:
    """How the counters were attributed: ``source``, the rule, and ``fit`` {counter: {residual,
    model}} (``Attribution.fit``), for the report."""
    rule = (
        "exact: counter snapshots at op boundaries"
        if att.source.startswith("snapshots")
        else "window increases shared among overlapping spans by time x fitted per-op-class rate (analysis.attribution)"
    )
    return {"source": att.source, "rule": rule, "fit": att.fit} | ({"notes": att.notes} if att.notes else {})


def analyse_groups(graph: MetricGraph, evaluator, dump, w, trace, by=(), snapshots=None) -> dict:
    """Attribution and per-group metrics of a capture (``analysis.capture``): ``{"attribution":
    Attribution | None, "groups": {by: GroupMetrics} for the groupings asked for, "ops": op rows
    (``analysis.roofline.op_rows``) | None, "notes": [...]}``. The ``op`` grouping is always
    attributed when the trace has op spans (it feeds the report's per-op table and the roofline).

    Raises:
        AttributionError: ``by`` asks for groups but there is no trace, the trace has no op spans
            or cannot be read, or the snapshots do not fit the dump.
        DumpError: the snapshot dump cannot be read.
    """
    from .attribution import attribute
    from .op_notes import undetermined_notes
    from .roofline import op_rows, signal_sets
    from .snapshots import merged_windows, read_snapshots
    from .spans import AttributionError, read_spans

    gen = graph.generation
    result = {"attribution": None, "groups": {}, "ops": None, "notes": []}
    asked = ", ".join(f"--by {b}" for b in by)

    def skip(why: str) -> dict:
        if by:
            raise AttributionError(f"{asked}: {why}")
        result["notes"].append(f"per-op attribution skipped: {why}")
        return result

    if trace is None:
        return skip(
            "no trace given; attribution needs the device trace (--trace, or a run folder that holds trace.parquet)"
        )
    if dump.hosts is not None and len(set(dump.hosts)) > 1:
        return skip("the dump spans several hosts and the trace names chips only")
    try:
        spans = read_spans(trace, dump.chips)
    except AttributionError as exc:
        return skip(str(exc))
    if not len(spans):
        return skip(
            f"{trace}: the trace holds no device op spans for the dump's chips (a step-detail trace?); "
            "write the trace at op detail"
        )
    merged = merged_windows(read_snapshots(snapshots, gen), dump, gen) if snapshots is not None else None
    groupings = tuple(dict.fromkeys(("op",) + tuple(by)))
    att = attribute(gen, dump, w, spans, groupings, merged)
    gms = {g: group_metrics(graph, evaluator, att.groupings[g], att.source) for g in groupings}
    result["attribution"] = att
    result["groups"] = {g: gms[g] for g in by}
    rows = op_rows(gen, att.groupings["op"], gms["op"].dominant(graph))
    sets = signal_sets(gen)
    work_sets = (sets["hbm_bytes"], sets["matrix_flops"] + sets["vector_flops"])
    for r in rows:
        names = sets["hbm_bytes"] + sets["matrix_flops" if r["work"] == "matrix" else "vector_flops"]
        r["reliable"] = (
            r["determined"]
            and att.reliable(names)
            and all(_separable(att.groupings["op"], r["op"], w) for w in work_sets)
        )
    result["ops"] = rows
    result["notes"] += att.notes + _fit_notes(att, sets) + undetermined_notes(gen, att.groupings["op"], rows)
    for g in groupings:
        result["notes"] += bounds_note(gms[g], graph)
    return result


#: An op class whose error estimate of a work counter (``analysis.attribution``: the larger of the split-half
#: difference and the spread of the rates the windows allow) exceeds this share of what it was given cannot be
#: told apart from its neighbours by the windows, and is marked approximate (≈). Stricter than the roofline's
#: ``PINNED`` (half), past which its work and side are left out altogether.
SPLIT_HALF_TOL = 0.25


def _separable(totals, op: str, names) -> bool:
    """Whether the windows told op class ``op``'s work of one kind (``names``: its HBM byte counters, or its FLOP
    counters) apart from its neighbours': the error estimate of the set's total (split-half difference or spread
    of the rates, ``analysis.separability``) is within ``SPLIT_HALF_TOL`` of what the op was given, and an op
    given none of it has an estimate below that share of its kind's largest op. A what-if audit's decode run
    gave RMSNorm 1.48 TFLOP of matrix work (truth: none), marked reliable, because the rate model fit the
    windows while the norm always ran beside its GEMMs; a review found the LM head given 0 FLOP (truth 4 TFLOP)
    still reliable, and a GEMM marked ≈ for a stray 1e5 FLOP of a precision it does not run."""
    if op not in totals.groups:
        return True
    k = totals.groups.index(op)
    have = [n for n in names if n in totals.sums and n in totals.estimate]
    if not have:
        return True
    given = sum(float(np.sum(totals.sums[n][k])) for n in have)
    est = sum(float(totals.estimate[n][k]) for n in have)
    if given > 0:
        return est <= SPLIT_HALF_TOL * given
    per_op = sum(np.asarray(totals.sums[n], np.float64).reshape(len(totals.groups), -1).sum(axis=1) for n in have)
    return est <= SPLIT_HALF_TOL * float(np.max(per_op))


def _fit_notes(att: Attribution, sets: dict) -> list[str]:
    """A note when the rate model does not fit the work counters behind the per-op table."""
    names = sets["matrix_flops"] + sets["vector_flops"] + sets["hbm_bytes"]
    loose = {n: att.fit[n] for n in names if n in att.fit and att.fit[n]["model"] in ("approximate", "time-weighted")}
    if not loose:
        return []
    worst = max(loose, key=lambda n: loose[n]["residual"])
    return [
        f"per-op attribution is approximate for {', '.join(sorted(loose))}: one rate per op class explains the "
        f"windows only to {loose[worst]['residual'] * 100:.2g} % ({worst}"
        f"{'; plain time weighting used' if loose[worst]['model'] == 'time-weighted' else ''}) — the ops are shorter "
        "than a window and change rate from step to step; sample faster, or take op-boundary snapshots "
        "(perfonto run --op-snapshots, perfonto analyze --snapshots)"
    ]


def ops_json(gen, rows: list[dict], totals: GroupTotals | None = None, top: int | None = None) -> dict:
    """The report's ``ops`` section: the roofline ``ceilings`` and the op rows by time (``top``
    first), each with its attribution error bound and estimate when ``totals`` is given."""
    from .roofline import ceilings

    out_rows = []
    for r in rows[:top] if top else rows:
        row = dict(r)
        if totals is not None and r["op"] in totals.groups:
            row["error"] = error_shares(gen, totals, totals.groups.index(r["op"]))
        out_rows.append(row)
    no_span = None
    if totals is not None and float(np.sum(totals.time_s)) > 0:
        no_span = float(totals.time_s[-1] / np.sum(totals.time_s))
    return {
        "ceilings": ceilings(gen),
        "units": {
            "time_s": "s (summed over chips)",
            "flops": "FLOP",
            "hbm_bytes": "B",
            "intensity": "FLOP/B",
            "flops_per_s": "FLOP/s per chip",
            "peak": "FLOP/s",
            "attainable": "FLOP/s",
            "ridge": "FLOP/B",
        },
        "no_span_share": no_span,
        "rows": out_rows,
    }


def _num(v) -> float | None:
    f = float(v)
    return f if np.isfinite(f) else None


__all__ = [
    "GroupMetrics",
    "analyse_groups",
    "attribution_json",
    "ops_json",
    "error_shares",
    "group_json",
    "group_metrics",
    "group_table",
    "write_group_parquet",
]
