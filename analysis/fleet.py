"""Fleet rollups: every metric per chip, host, rack, pod and for the fleet, the spread across chips,
and the chips that stand out (racks and pods that stand out as a group: ``analysis.fleet_nodes``).

A rollup is a ratio of totals, never a mean of ratios: a node's value is the metric evaluated over
the summed run-level inputs of its chips (``analysis.level_sums.combine``: counters summed, gauges by
their ``across_chips`` rule, the interval the chips' mean, per-chip constants × the number of chips),
each chip over its own valid windows. The sums are carried, so a rack is exactly the rollup of its
hosts and the fleet of its pods. Spread: p50, p99 and max of the per-chip values and the share of
chips past the metric's threshold (for a ``threshold … when parent``, as ``analysis.bottleneck`` judges it:
on a chip whose parent chain is past its own there too; a chip whose parent has no value is counted
apart, ``unchecked``); a metric that reads a count only each tensor-parallel group's
leader chip keeps (``counted_by: leader``: tokens, steps) is spread over the hosts' rollups instead
(``over: hosts``; its outliers name hosts, chip null), since the other chips count none. Outliers:
per metric, up to ``top`` chips on either side of the fleet's median — ``high`` and ``low`` —
farthest first, with their host and rack (a chip binned slower
computes longer than its peers, which wait for it: it is the highest in ``mxu.utilization`` and
``topdown.compute_bound``). A chip stands out when its modified z-score, 0.6745 · (value − median) / MAD
(median absolute deviation), is beyond ``Z_OUTLIER`` = 3.5 (Iglewicz and Hoaglin, "How to Detect and
Handle Outliers", ASQC 1993) and it is at least ``MIN_RELATIVE`` = 1 % from the median: a fleet whose
chips agree to a few parts in a thousand has a tiny MAD, and every small difference would score high.
Where the MAD is 0 (most chips share one value), the chips that differ (by ≥ 1 %) stand out, their
score null, unless they sit on more than half of the hosts: then they are a role every host gives a
chip (its chip 0 doing the host's I/O), not an odd chip (ECC errors on one) or an odd host. Where
the median is 0 there is no 1 % to be: the score alone decides. Each entry gives the score
(``deviation``) and ``relative``, (value − median) / |median| (null where the median is 0).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import group_inputs, group_scale
from perfonto.capture.topology import UNPLACED, Topology

from .bottleneck import _crossed, crossed_where
from .engine import EngineResult, chip_values, with_nan_inputs
from .level_sums import combine

LEVELS = ("chip", "host", "rack", "pod", "fleet")
Z_SCALE = 0.6745  # the normal distribution's MAD ÷ its standard deviation: a modified z-score is in σ units
Z_OUTLIER = 3.5  # Iglewicz and Hoaglin's cut-off for the modified z-score
TOP_OUTLIERS = 50  # chips listed per metric and side in report.json (the reports name the first; all are counted)
MIN_RELATIVE = 0.01  # a chip within 1 % of the median never stands out, whatever its score


@dataclass
class Fleet:
    """``nodes[level]``: labels of the level's nodes; ``values[level][metric]``: (nodes, …);
    ``chips[level]``: chips per node; ``spread[metric]``: {p50, p99, max, threshold share};
    ``outliers[metric]``: {high: [...], low: [...]} of {host, chip, rack, value, deviation (modified z-score,
    null where the MAD is 0), relative (to the median)}; ``place``: (host, chip,
    rack, pod) per chip; ``nodes_out[metric][level]``: the racks or pods whose chips (hosts, for a
    leader-counted metric) stand out as a group (``analysis.fleet_nodes``)."""

    nodes: dict[str, list[str]] = field(default_factory=dict)
    values: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    chips: dict[str, np.ndarray] = field(default_factory=dict)
    spread: dict[str, dict] = field(default_factory=dict)
    outliers: dict[str, list[dict]] = field(default_factory=dict)
    nodes_out: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    place: list[tuple[str, int, str | None, str | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def value(self, level: str, node: str, metric: str):
        """The value of ``metric`` at node ``node`` of ``level`` (``fleet`` has the one node ``fleet``)."""
        return self.values[level][metric][self.nodes[level].index(node)]


def _places(hosts, chips, topology: Topology | None):
    out = []
    for h, c in zip(hosts, chips):
        rack, pod = topology.of(h, int(c)) if topology is not None else (None, None)
        out.append((h if h is not None else "", int(c), rack, pod))
    return out


def rollups(
    graph: MetricGraph, evaluator, res: EngineResult, topology: Topology | None = None, top: int | None = None
) -> Fleet:
    """The fleet rollups of an evaluated dump (module docstring).

    Raises:
        TopologyError: ``topology`` does not place a chip of the dump.
    """
    top = TOP_OUTLIERS if top is None else top
    ev = res.evaluation
    hosts = list(ev.hosts) if ev.hosts is not None else [None] * len(ev.chips)
    place = _places(hosts, ev.chips, topology)
    f = Fleet(place=place)
    labels = _node_labels(place)
    levels = [lv for lv in LEVELS if lv != "chip" and (topology is not None or lv not in ("rack", "pod"))]
    f.nodes["chip"] = labels["chip"]
    f.values["chip"] = dict(ev.per_chip)
    f.chips["chip"] = np.ones(len(place))
    keys = _metrics_by_inputs(graph, res)
    node_of: dict[str, np.ndarray] = {}  # each chip's node index at each level, in f.nodes[level]'s order
    for level in levels:
        names, idx = np.unique(np.array(labels[level], dtype=object), return_inverse=True)
        node_of[level] = idx
        G = len(names)
        f.nodes[level] = [str(n) for n in names]
        f.values[level] = _summed_values(graph, evaluator, res, keys, idx, G)
        f.values[level].update(_extreme_values(graph, ev, idx, G))
        f.chips[level] = np.bincount(idx, minlength=G).astype(np.float64)
    by_leader = {m for m, meta in graph.metrics.items() if meta.reads_leader} if "host" in f.values else set()
    hosts = f.nodes.get("host", [])
    led = _hosts_with_leader(graph, res, place, hosts) if by_leader else np.ones(len(hosts), bool)
    if by_leader and not led.all():
        idle = [h for h, ok in zip(hosts, led) if not ok]
        f.notes.append(
            f"{len(idle)} host(s) counted no tokens, steps or requests over the run (a stalled host, or groups "
            f"that span hosts, led from another): {', '.join(idle[:8])}{' …' if len(idle) > 8 else ''}; the "
            "spread of the metrics that read those counts is over the other hosts"
        )
    hosts_place = _host_places(place, hosts)
    by_host: dict[str, np.ndarray] = {}  # leader-counted metrics: each host's value (NaN on a host that led none)
    for m, meta in graph.metrics.items():
        v = np.asarray(ev.per_chip[m], dtype=np.float64)
        if v.ndim != 1:
            continue
        if m in by_leader:  # counted by each group's leader chip only: spread over the hosts that hold a leader
            hv = np.where(led, np.asarray(f.values["host"][m], np.float64), np.nan)
            by_host[m] = hv
            gate = _gate(graph, m, f.values["host"], hv.shape)  # its parent's value on each host
            f.spread[m], f.outliers[m] = _spread(meta, hv, hosts_place, top, gate)
            f.spread[m]["over"] = "hosts"
            continue
        f.spread[m], f.outliers[m] = _spread(meta, v, place, top, _gate(graph, m, ev.per_chip, v.shape))
    _nodes_out(f, ev, node_of, by_leader, by_host)
    return f


def _nodes_out(f: Fleet, ev, node_of: dict[str, np.ndarray], by_leader: set[str], by_host: dict) -> None:
    """``f.nodes_out``: per scalar metric, the racks and pods that stand out (``analysis.fleet_nodes``), for
    each of those levels of two nodes or more: over the nodes' chips, or for a leader-counted metric (whose
    other chips count none: ``by_host``, each host's value) over the nodes' hosts — such a finding has
    ``hosts`` (how many had a value) and ``over: hosts`` in place of ``chips``."""
    from .fleet_nodes import nodes_standing_out

    for level in ("rack", "pod"):
        if len(f.nodes.get(level, [])) < 2:
            continue
        idx = node_of[level]
        at = 2 if level == "rack" else 3  # the chips the topology places at this level; the rest have no node
        placed = np.array([p[at] is not None for p in f.place], bool)
        for m, v in ev.per_chip.items():
            v = np.asarray(v, dtype=np.float64)
            if v.ndim != 1 or m in by_leader:
                continue
            found = nodes_standing_out(idx, f.nodes[level], np.where(placed, v, np.nan))
            if found:
                f.nodes_out.setdefault(m, {})[level] = found
        if not by_host:
            continue
        host_node = _host_nodes(node_of["host"], np.where(placed, idx, -1), len(f.nodes["host"]))
        for m, hv in by_host.items():
            found = nodes_standing_out(np.maximum(host_node, 0), f.nodes[level], np.where(host_node >= 0, hv, np.nan))
            for o in found:
                o["hosts"] = o.pop("chips")
                o["over"] = "hosts"
            if found:
                f.nodes_out.setdefault(m, {})[level] = found


def _host_nodes(host_of_chip: np.ndarray, node_of_chip: np.ndarray, hosts: int) -> np.ndarray:
    """(hosts,) int: each host's node at a level (an index; ``node_of_chip`` −1 where a chip has none), or −1
    where its chips have none or lie in more than one node (such a host is left out of that level's
    comparison)."""
    lo = np.full(hosts, np.iinfo(np.int64).max)
    hi = np.full(hosts, -1)
    np.minimum.at(lo, host_of_chip, node_of_chip)
    np.maximum.at(hi, host_of_chip, node_of_chip)
    return np.where((lo == hi) & (lo >= 0), hi, -1)


def _hosts_with_leader(graph: MetricGraph, res: EngineResult, place, hosts: list[str]) -> np.ndarray:
    """(hosts,) bool: the hosts on some chip of which a leader-counted counter advanced over the run
    (``metrics.levels.leaders``); every host when the dump holds no leader-counted counter."""
    from perfonto.metrics.levels import leaders

    lead = leaders(graph.generation, chip_values(res.sums, frozenset())[0]) if res.sums else None
    if lead is None or len(lead) != len(place):
        return np.ones(len(hosts), bool)
    with_leader = {place[i][0] for i in np.flatnonzero(lead)}
    return np.array([h in with_leader for h in hosts], bool)


def _host_places(place, hosts: list[str]) -> list[tuple]:
    """(host, None, rack, pod) of each host node, in ``hosts``' order (its first chip's rack and pod)."""
    first: dict[str, tuple] = {}
    for h, _, rack, pod in place:
        first.setdefault(h, (h, None, rack, pod))
    return [first.get(h, (h, None, None, None)) for h in hosts]


def _node_labels(place) -> dict[str, list[str]]:
    """Each chip's node label at every level (``(no rack)`` / ``(no pod)`` where the topology has none)."""
    return {
        "chip": [f"{h}/{c}" if h else str(c) for h, c, _, _ in place],
        "host": [h for h, *_ in place],
        "rack": [r if r is not None else UNPLACED["rack"] for _, _, r, _ in place],
        "pod": [p if p is not None else UNPLACED["pod"] for *_, p in place],
        "fleet": ["fleet"] * len(place),
    }


def _metrics_by_inputs(graph: MetricGraph, res: EngineResult) -> dict[frozenset, list[str]]:
    """The metrics rolled up from summed inputs (no ``rollup`` rule), grouped by the dirty inputs they depend on."""
    deps = res.sums[0].deps if res.sums else {}
    dirty = frozenset().union(*[s.dirty for s in res.sums]) if res.sums else frozenset()
    keys: dict[frozenset, list[str]] = {}
    for m in graph.metrics:
        if not graph.metrics[m].rollup:
            keys.setdefault(frozenset(deps[m] & dirty), []).append(m)
    return keys


def _summed_values(graph: MetricGraph, evaluator, res: EngineResult, keys: dict, idx, G: int) -> dict:
    """The level's values of the metrics of ``keys``: evaluated over the nodes' summed inputs (group-rule
    metrics over each node's groups); NaN where a node's interval is not positive."""
    gen = graph.generation
    values = {}
    for key, metrics in keys.items():
        vals, dt = chip_values(res.sums, key)
        rolled, interval, n = combine(gen, vals, dt, idx, G)
        out = _evaluate_by_chips(gen, evaluator, rolled, interval, n)
        if any(graph.metrics[m].group_rule for m in metrics):  # per-chip times over leader counts: each node's groups
            grp = _evaluate_by_chips(
                gen, evaluator, group_inputs(gen, rolled, group_scale(gen, vals, idx, G)), interval, n
            )
            out = {m: (grp[m] if graph.metrics[m].group_rule else v) for m, v in out.items()}
        for m in metrics:
            v = out[m]
            v[interval <= 0] = np.nan
            values[m] = v
    return values


def _extreme_values(graph: MetricGraph, ev, idx, G: int) -> dict:
    """The level's values of the metrics with a ``rollup`` rule: the max or min over each node's chips."""
    values = {}
    for m, meta in graph.metrics.items():
        if meta.rollup:
            v = np.asarray(ev.per_chip[m], dtype=np.float64)
            acc = np.full((G,) + v.shape[1:], np.nan)
            for g in range(G):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    acc[g] = (np.nanmax if meta.rollup == "max" else np.nanmin)(v[idx == g], axis=0)
            values[m] = acc
    return values


def _evaluate_by_chips(gen, evaluator, rolled: dict, interval: np.ndarray, n: np.ndarray) -> dict[str, np.ndarray]:
    """Evaluate node rows, grouped by their number of chips (the factor of per-chip constants)."""
    out: dict[str, np.ndarray] = {}
    for k in np.unique(n):
        rows = np.flatnonzero(n == k)
        inputs = with_nan_inputs(gen, evaluator, {name: v[rows][None] for name, v in rolled.items()}, len(rows))
        res = evaluator.evaluate(inputs, interval[rows][None], float(k))
        for name, v in res.items():
            if name not in out:
                out[name] = np.full((len(n),) + v.shape[2:], np.nan)
            out[name][rows] = v[0]
    return out


def _gate(graph: MetricGraph, name: str, values: dict, shape: tuple):
    """``analysis.bottleneck.crossed_where`` of ``name`` per chip (or host) of ``values``, for ``_spread``;
    None where the metric has no threshold."""
    return crossed_where(graph, name, values, shape) if graph.metrics[name].threshold else None


def _spread(meta, v: np.ndarray, place, top: int, gate=None) -> tuple[dict, dict]:
    """The spread of one metric's values ``v`` (one per chip, or per host) and the chips that stand out
    (module docstring). ``gate``: ``crossed_where`` of the metric over the same chips, which the share past
    its threshold counts — for a ``when parent`` threshold only the chips whose parent chain is past its own
    there; a chip past its own bound whose parent has no value there is counted apart (``unchecked``, with
    the ``parents`` not known), not as crossed. Without one, a chip crosses on its own bound."""
    ok = np.isfinite(v)
    if not ok.any():
        return {"p50": None, "p99": None, "max": None, "chips": 0, "stand_out": {"high": 0, "low": 0}}, {
            "high": [],
            "low": [],
        }
    x = v[ok]
    p50 = float(np.percentile(x, 50))
    spread = {"p50": p50, "p99": float(np.percentile(x, 99)), "max": float(x.max()), "chips": int(ok.sum())}
    if meta.threshold:
        op, limit, msg = meta.threshold
        crossed, unchecked, parents = gate if gate is not None else (ok & _own(op, v, limit), ok & False, [])
        spread["threshold"] = {
            "op": op,
            "limit": float(limit),
            "message": msg,
            "share_of_chips": float(np.count_nonzero(crossed & ok) / x.size),
        }
        if getattr(meta, "threshold_when_parent", False):
            spread["threshold"]["when_parent"] = True
        if (unchecked & ok).any():
            spread["threshold"]["unchecked"] = {"count": int(np.count_nonzero(unchecked & ok)), "parents": parents}
    mad = float(np.median(np.abs(x - p50)))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if mad > 0:
            z = np.where(ok, Z_SCALE * (v - p50) / mad, np.nan)
            score_ok = np.abs(z) > Z_OUTLIER
        else:  # most chips share one value: the others stand out unless they are a role the hosts share
            away = ok & (v != p50)
            z = np.where(away, np.sign(v - p50) * np.inf, 0.0)
            score_ok = away & ~_a_role(away, place)
        if p50 != 0:
            rel = np.where(ok, (v - p50) / abs(p50), np.nan)
            score_ok &= ~(np.abs(rel) < MIN_RELATIVE)
        else:  # no median to be 1 % of: the score alone decides
            rel = np.full(v.shape, np.nan)
        stands_out = ok & score_ok
    out: dict[str, list[dict]] = {"high": [], "low": []}
    spread["stand_out"] = {}  # how many stand out on each side; ``out`` lists the farthest ``top``
    for side, sign in (("high", 1.0), ("low", -1.0)):
        cand = np.flatnonzero(stands_out & (sign * (v - p50) > 0))
        spread["stand_out"][side] = int(cand.size)
        for i in cand[np.argsort(-np.abs(v[cand] - p50), kind="stable")][:top]:
            h, c, rack, _ = place[i]
            out[side].append(
                {
                    "host": h,
                    "chip": c,
                    "rack": rack,
                    "value": float(v[i]),
                    "deviation": float(z[i]) if np.isfinite(z[i]) else None,
                    "relative": float(rel[i]) if np.isfinite(rel[i]) else None,
                }
            )
    return spread, out


def _own(op: str, v: np.ndarray, limit: float) -> np.ndarray:
    """Where ``v`` crosses ``limit`` on its own (NaN nowhere)."""
    with np.errstate(invalid="ignore"):
        return _crossed(op, v, limit)


def _a_role(away: np.ndarray, place) -> bool:
    """Whether the chips ``away`` from the shared value sit on more than half of the hosts (of two or
    more): a role every host gives some chip (its chip 0 doing the host's I/O), not an odd chip or host."""
    hosts = {p[0] for p in place}
    if len(hosts) < 2:
        return False
    return len({place[i][0] for i in np.flatnonzero(away)}) > len(hosts) / 2


__all__ = ["Fleet", "LEVELS", "rollups"]
