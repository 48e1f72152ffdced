"""The JSON document of an analysed capture (``analysis.capture.Report``): the same for
``perfonto run`` and ``perfonto analyze``."""

from __future__ import annotations

import math

import numpy as np

from .report_model import report_model


# units that count whole things (ontology/units.txt's base counts): a whole number of them prints without decimals
COUNT_UNITS = frozenset(
    {"token", "output_token", "request", "op", "instruction", "transaction", "event", "byte", "B", "tok", "req"}
)


def format_value(v, unit: str = "") -> str:
    """A value as every report prints it (terminal and HTML): ``null`` when not computable (None, NaN,
    infinite), percent with two decimals, a whole number of a counted unit (``COUNT_UNITS``) without
    decimals, else three decimals (one at 1000 and above) or four significant digits for very large or
    very small values, then the unit (none for a ratio of like quantities, unit ``1``)."""
    try:
        v = None if v is None else float(v)
    except (TypeError, ValueError):
        v = None
    if v is None or not math.isfinite(v):
        return "null"
    if unit in ("percent", "%"):
        return f"{v:.2f} %"
    if unit in COUNT_UNITS and v.is_integer() and abs(v) < 1e6:  # a count of whole things: 45 request
        return f"{v:,.0f} {unit}"
    a = abs(v)
    s = f"{v:.4g}" if a != 0 and (a >= 1e6 or a < 1e-3) else (f"{v:,.3f}" if a < 1000 else f"{v:,.1f}")
    return f"{s} {'' if unit in ('1', 'dimensionless') else unit}".strip()


def metric_count(report) -> dict:
    """How many metrics a report holds, the one count the terminal, HTML and JSON reports print:
    ``evaluated`` (catalog metrics evaluated on the capture), ``with_value`` (those with a server-level
    value: not null everywhere), ``request`` (request-level metrics from the request records),
    ``unavailable`` (catalog metrics the capture or generation cannot feed)."""
    graph = report.evaluated
    with_value = 0
    for name in graph.metrics:
        v = np.asarray(report.evaluation.server[name], dtype=np.float64)
        with_value += bool(np.isfinite(v).any())
    request = sum(1 for n in graph.record_metrics if (report.records or {}).get(n) is not None)
    return {
        "evaluated": len(graph.metrics),
        "with_value": with_value,
        "request": request,
        "unavailable": len(report.unavailable),
    }


def metric_count_text(c: dict) -> str:
    """``metric_count`` as the reports print it: ``86 window metrics evaluated (82 with a value), 1
    unavailable and 19 request-level`` — the kinds side by side, none read as a part of another (``86 …
    (86 with a value, 1 unavailable)`` read as 87; ``print(catalog)`` counts both kinds: 106 metrics)."""
    return (
        f"{c['evaluated']} window metrics evaluated ({c['with_value']} with a value), {c['unavailable']} "
        f"unavailable and {c['request']} request-level"
    )


def report_json(report) -> dict:
    """The JSON document of a ``Report`` (``analysis.capture``): ``generation`` (and its ``lineage``), ``model``,
    ``chips``, ``metric_count`` (``metric_count``), ``report`` (what the reports show: ``analysis.report_model``),
    ``metrics`` {name: {value, unit}} (record metrics with their
    population; unavailable ones with the reason), ``bottleneck``, ``topdown``, ``drilldown``, thresholds, bounds
    violations, null windows, coverage, ``unavailable``, ``per_chip``, ``outputs``, ``timings_s``, ``multichip``,
    ``time_split``, ``forward_passes`` (an emulated run's), ``headline`` (``analysis.headline``), the attribution
    sections (``per_group_json``), ``notes`` when a reader ignored something, and for an emulated run its
    ``assumptions`` and ``claim`` (``Report.context``)."""
    graph = report.evaluated
    metrics = _metrics_json(report)
    per_chip = _per_chip_json(report)
    a = report.analysis
    return (
        {
            "generation": graph.generation.name,
            "lineage": list(graph.generation.lineage),
            "model": report.model,
            "chips": report.chips,
            "metrics": metrics,
            "constants": constants_json(graph, metrics),
            "metric_count": metric_count(report),
            "report": report_model(graph, report.evaluation).to_json(),
            "headline": getattr(report, "headline", None),
            "findings": getattr(report, "findings", None) or [],
            "bottleneck": a.bottleneck,
            "bottleneck_label": a.bottleneck_label,
            "topdown": {k: _num(v) for k, v in a.topdown.items()},
            "topdown_children": _level2(graph, a.topdown, metrics),
            "drilldown": [{"metric": n, "share_of_time": _num(v)} for n, v in a.drilldown],
            "topdown_tree_violations": a.tree_violations,
            "thresholds_crossed": [{"metric": n, "value": _num(v), "message": msg} for n, v, msg in a.thresholds],
            "bounds_violations": {
                "counts": a.violation_counts,
                "first": [vars(v) | {"bounds": list(v.bounds)} for v in a.violations],
            },
            "null_windows": a.null_windows,
            "coverage": {k: round(v, 6) for k, v in report.evaluation.coverage.items() if v < 0.999999},
            "unavailable": report.unavailable,
            "per_chip": per_chip,
            "outputs": report.outputs,
            "timings_s": {k: round(v, 3) for k, v in report.timings.items()},
            "multichip": multichip_json(report.multichip),
            "time_split": report.time_split,
        }
        | per_group_json(report)
        | ({"notes": report.notes} if report.notes else {})
        | _forward_passes(getattr(report, "ground_truth", None))
        | ({"energy_checks": report.energy} if getattr(report, "energy", None) else {})
        | ({"steady_state": report.steady_state} if getattr(report, "steady_state", None) else {})
        | (  # a multiplexed capture: per metric, the window values whose inputs were never counted together
            {"mismeasured": {k: int(m.sum()) for k, m in report.evaluation.mismeasured.items()}}
            if getattr(report.evaluation, "mismeasured", None) is not None
            else {}
        )
        | _context(getattr(report, "context", None))
        | (
            {"fleet": fleet_json(report.fleet, graph), "engine": report.engine}
            if getattr(report, "fleet", None) is not None
            else {}
        )
    )


def _level2(graph, level1: dict, metrics: dict) -> dict[str, list[str]]:
    """``topdown_children`` {level-1 node: its level-2 nodes that have a value in ``metrics``} (the tree the
    catalog declares: ``analysis.bottleneck.tree_children``), so a page drawn from the JSON shows level 2."""
    from .bottleneck import tree_children

    kids = tree_children(graph)
    return {n: [c for c in kids.get(n, []) if c in metrics] for n in level1}


def constants_json(graph, metrics: dict) -> dict:
    """``constants`` {spec name: its record (``ontology.spec_constants.constant_record``: value, unit,
    provenance, source, scope, where)} for every spec constant an evaluated metric read, directly or
    through the metrics it reads; each such entry of ``metrics`` gets ``constants``, the sorted names
    (so a value in the report names the figures it rests on and how sure each is)."""
    import networkx as nx

    from perfonto.ontology.spec_constants import constant_record

    spec = graph.generation.spec
    used: set[str] = set()
    for name in graph.all_metrics:
        if name in metrics and name in graph.graph:
            names = sorted(a for a in nx.ancestors(graph.graph, name) if a in spec)
            if names:
                metrics[name]["constants"] = names
                used.update(names)
    return {n: constant_record(spec[n]) for n in sorted(used)}


def _metrics_json(report) -> dict:
    """``metrics`` {name: {value, unit, …}}: the evaluated metrics (array values flattened with their
    axes), then the record metrics with a value (their population), then the unavailable ones (the reason)."""
    graph = report.evaluated
    metrics = {}
    for name, m in graph.metrics.items():
        v = report.evaluation.server[name]
        if np.ndim(v) == 0:
            metrics[name] = {"value": _num(v), "unit": m.unit_text}
        else:
            metrics[name] = {
                "value": [_num(x) for x in np.ravel(v)],
                "unit": m.unit_text,
                "axes": [list(a) for a in m.axes],
            } | _instances_json(graph.generation, m.axes)
    for name, m in graph.record_metrics.items():
        v = (report.records or {}).get(name)
        if v is not None:
            metrics[name] = _record_metric_json(report, name, m, v)
    decls = graph.declarations
    for name, why in report.unavailable.items():
        metrics[name] = {"value": None, "unit": decls[name].unit if name in decls else "", "unavailable": why}
    return metrics


def _instances_json(gen, axes) -> dict:
    """``instances`` {axis: labels} for the axes a capture sized (``from_data``: the CPUs it held, in the
    order of the values), when the metric has any."""
    out = {}
    for axis, _ in axes:
        block, _, name = axis.partition(".")
        labels = gen.blocks.get(block, {}).get("labels", {}).get(name)
        if labels is not None:
            out[axis] = list(labels)
    return {"instances": out} if out else {}


def _record_metric_json(report, name: str, m, v) -> dict:
    """A record metric's entry: a run-level value with its population's description, or for
    per-record values only how many have a value and how many are null."""
    if np.ndim(v) == 0:
        pop = (report.populations or {}).get(name, {})
        return {
            "value": _num(v),
            "unit": m.unit_text,
            "population": pop.get("population") or "run (over records)",
        } | {k: pop[k] for k in ("of", "count", "without_value", "unfinished", "before_run", "warning") if k in pop}
    arr = np.asarray(v, dtype=np.float64)
    return {
        "value": None,
        "unit": m.unit_text,
        "population": m.population,
        "count": int(np.isfinite(arr).sum()),
        "nulls": int(np.isnan(arr).sum()),
    }


def _per_chip_json(report) -> list[dict]:
    """``per_chip``: each chip's (host,) chip and scalar metric values."""
    graph = report.evaluated
    per_chip = []
    for ci, chip in enumerate(report.evaluation.chips):
        per_chip.append(
            ({"host": str(report.evaluation.hosts[ci])} if report.evaluation.hosts is not None else {})
            | {
                "chip": int(chip),
                "metrics": {n: _num(report.evaluation.per_chip[n][ci]) for n, m in graph.metrics.items() if not m.axes},
            }
        )
    return per_chip


def per_group_json(report) -> dict:
    """The attribution sections: ``attribution`` (source and rule), ``ops`` (roofline ceilings and
    the op classes by time, ``analysis.groups.ops_json``), ``by`` {grouping: every metric per group}
    for the groupings asked for, and ``links`` (chip × link utilisation); each only when present."""
    from .groups import attribution_json, group_json, ops_json

    out: dict = {}
    att = getattr(report, "attribution", None)
    gen = report.evaluated.generation
    if att is not None:
        out["attribution"] = attribution_json(att)
        out["ops"] = ops_json(gen, report.ops or [], att.groupings.get("op"))
    if getattr(report, "groups", None):
        out["by"] = {
            g: group_json(gm, report.evaluated, att.groupings.get(g) if att is not None else None)
            for g, gm in report.groups.items()
        }
    if getattr(report, "links", None) is not None:
        out["links"] = report.links
    return out


def _forward_passes(gt: dict | None) -> dict:
    """``forward_passes`` {steps, whole} of an emulated run (its ground truth's ``steps`` and ``whole_steps``): a
    run of few passes has spiky window-level token rates, which the terminal and HTML reports say."""
    steps = (gt or {}).get("steps")
    if not isinstance(steps, (int, float)) or isinstance(steps, bool):
        return {}
    return {"forward_passes": {"steps": int(steps), "whole": bool((gt or {}).get("whole_steps"))}}


def _context(ctx: dict | None) -> dict:
    """``assumptions`` (the run's, then its preset's), ``preset_says`` (the preset's alone) and ``claim`` of an
    emulated run (``emulator.claim.run_context``), when known."""
    if not ctx:
        return {}
    out = {k: ctx.get(k) for k in ("assumptions", "preset", "preset_says", "claim")}
    return out | ({"offline_queued_s": ctx["offline_queued_s"]} if ctx.get("offline_queued_s") else {})


def fleet_json(fleet, graph) -> dict:
    """The fleet section: ``levels`` {host|rack|pod|fleet: [{node, chips, metrics {name: value}}]} (scalar
    metrics; rollups are ratios of totals), ``spread`` {metric: {p50, p99, max, chips, threshold, stand_out
    {high, low}: how many chips stand out}}
    across chips, ``outliers`` {metric: {high, low: [{host, chip, rack, value, deviation, relative}]}},
    ``nodes_out`` {metric: {rack|pod: [{node, chips, median, reference, relative, deviation}]}} (racks and
    pods whose chips stand out as a group: ``analysis.fleet_nodes``; for a leader-counted metric, tokens/s,
    over the nodes' hosts: ``hosts`` and ``over: hosts`` in place of ``chips``), ``chips`` [{host, chip, rack, pod}],
    ``extreme`` {metric: max|min} (a node's value is the extreme over its chips, not a ratio of totals:
    ``metrics.across_chips.chip_extreme``), ``mean`` [metric] (the mean over its chips: a gauge combined by
    ``avg``, ``chip_mean``) and ``interval_scale`` [metric] (a unit whose zero is not its
    base unit's, degC: a difference is said in the unit, never as a percent)."""
    from perfonto.metrics.across_chips import chip_extreme, chip_mean
    from perfonto.ontology.units import is_interval_scale

    scalar = [n for n, m in graph.metrics.items() if not m.axes]
    levels = {}
    for level, nodes in fleet.nodes.items():
        if level == "chip":
            continue
        levels[level] = [
            {
                "node": node,
                "chips": int(fleet.chips[level][i]),
                "metrics": {n: _num(fleet.values[level][n][i]) for n in scalar if n in fleet.values[level]},
            }
            for i, node in enumerate(nodes)
        ]
    return {
        "levels": levels,
        "spread": fleet.spread,
        "outliers": fleet.outliers,
        "nodes_out": fleet.nodes_out,
        "chips": [{"host": h, "chip": c, "rack": r, "pod": p} for h, c, r, p in fleet.place],
        "extreme": {n: x for n in scalar if (x := chip_extreme(graph, n))},
        "mean": [n for n in scalar if chip_mean(graph, n)],
        "interval_scale": [n for n in scalar if is_interval_scale(graph.metrics[n].unit)],
    }


def multichip_json(mc: dict | None) -> dict | None:
    """The multi-chip section of the JSON report: ``straggler`` (or None), ``collective_wait_s`` per
    chip, ``waits_for``, ``skew`` (per-step arrival skew, forward-pass start skew), ``imbalance``
    (across chips and within chips, 1 − mean/max), ``saturation`` (PCIe and link windows at or above
    the threshold), ``slow_links``, and ``alignment`` (clock-fit error against the ground truth)."""
    if mc is None:
        return None
    coll = mc.get("collective", {})
    return {
        "straggler": coll.get("straggler"),
        "collective_wait_s": coll.get("wait_s"),
        "waits_for": coll.get("waits_for"),
        "collective_wait_share": coll.get("wait_share_of_time"),
        "skew": coll.get("skew"),
        "imbalance": mc.get("imbalance"),
        "saturation": mc.get("saturation"),
        "slow_links": mc.get("slow_links"),
        "alignment": {k: v for k, v in mc.get("alignment", {}).items() if k in ("error_ns", "samples")},
    }


def _num(v) -> float | None:
    f = float(v)
    return f if np.isfinite(f) else None
