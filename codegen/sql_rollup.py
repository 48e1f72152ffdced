"""SQL target, fleet rollups: one query that gives every metric per chip, host, rack, pod and for the
fleet, as ratios of totals — the rollups of ``analysis.fleet``, in SQL (DuckDB, Spark).

Stages after the window stages of ``codegen.sql`` (``window_stages``):

1. ``chip_tot`` — per (host, chip), for each *class* of metrics (the metrics that read the same
   signals): the sums over the windows where every one of those signals is valid — counters summed,
   gauges and packed fields as Σ value × interval, and Σ interval — as ``metrics.levels`` sums them;
2. ``chip_run`` — the chip's run-level inputs: counters as summed, gauges ÷ Σ interval;
3. ``placed`` — each chip with its ``rack`` and ``pod`` from the ``topology`` table (``host``,
   ``chip``, ``rack``, ``pod``; a NULL ``chip`` places every chip of its host, as ``perfonto emulate
   --fleet``'s ``topology.csv`` does; NULL rack and pod without a topology);
4. ``nodes`` — one row per node of every level (``level``, ``node``, ``chips``): the chips' run-level
   inputs combined as ``metrics.windows.server_level`` combines them (counters summed, gauges by
   their ``across_chips`` rule — SUM, AVG or MAX —, packed fields by MAX, the interval the chips'
   mean; a leader-counted counter as the sum of its leaders' rates × that interval, ``chip_run`` carrying
   the rate). The carried columns are sums (and maxima), so a rack's row is the rollup of its hosts' rows;
   Classes with ``group_rule`` metrics (a per-chip time over a leader-counted count) also carry
   each chip's leader flag and the node's number of groups; ``nodes_g`` adds their chip-measured
   times scaled by groups / chips, over which those metrics are evaluated (``metrics.levels``);
5. formula layers per class (per-chip constants × ``chips``), then ``level``, ``node``, ``chips`` and
   one column per metric (metrics with instance axes as lists; ``rollup max|min`` metrics are left out:
   their values are extremes of window values, not ratios of sums).
"""

from __future__ import annotations

import shlex

from sqlglot import exp

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph
from perfonto.metrics.levels import is_chip_time
from perfonto.ontology import kinds

from .ir_passes import fold
from .sql import SqlEmitter, SqlSource, generated_text, layered_query, table_name, window_stages
from .sql_windows import _alias, _case, _cast, _col, _int, _is_null, _num

LEVELS = (("chip", ("host", "chip")), ("host", ("host",)), ("rack", ("rack",)), ("pod", ("pod",)), ("fleet", ()))


def _deps(graph: MetricGraph) -> dict[str, frozenset]:
    import networkx as nx

    gen = graph.generation
    inputs = set(gen.signals) | set(gen.fields)
    return {m: frozenset(n for n in nx.ancestors(graph.graph, m) if n in inputs) for m in graph.metrics}


def _summed(gen, name: str) -> bool:
    """Whether ``name``'s window values add up over a run (its kinds-table row's ``run``), else they
    are time-weighted."""
    return kinds.row_of(gen, name).run == "sum"


def _refs(graph: MetricGraph, names: list[str]) -> list[str]:
    """``names`` and the metrics they reference, in the graph's order."""
    need, todo = set(names), list(names)
    while todo:
        for n in ir.walk(graph.metrics[todo.pop()].ir):
            if isinstance(n, ir.MetricRef) and n.metric not in need:
                need.add(n.metric)
                todo.append(n.metric)
    return [m for m in graph.metrics if m in need]


class RollupEmitter(SqlEmitter):
    """``SqlEmitter`` over one class's rolled-up inputs: the interval is the class's, per-chip
    constants scale with the node's chips, column names carry the class's tag."""

    def __init__(self, graph, inputs, tag: str, interval: str):
        super().__init__(graph, inputs)
        self.tag = tag
        self.interval_col = interval

    def add_column(self, level: int, e: exp.Expression, prefix: str) -> str:
        name = f"{prefix}{self.tag}_{self.n_cols}"
        self.n_cols += 1
        self.layers.setdefault(level, []).append(_alias(e, name))
        return name

    def interval(self, n: ir.Interval):
        return [_col(self.interval_col)], 0

    def const(self, n: ir.Const):
        if not n.chip_power:
            return [_num(n.value)], 0
        scale = (
            _cast(_col("chips"), "DOUBLE")
            if n.chip_power == 1
            else exp.Pow(this=_cast(_col("chips"), "DOUBLE"), expression=_int(n.chip_power))
        )
        return [exp.Paren(this=exp.Mul(this=_num(n.value), expression=scale))], 0


def _groups(gen, k: int, key, mapping: dict[str, list[str]], run: list, agg: dict, scaled: list) -> None:
    """Class ``k`` holds ``group_rule`` metrics (a per-chip time over a leader-counted count): add its
    chips' leader flag (``chip_run``: a leader-counted counter advanced), the node's number of groups
    (``nodes``: leaders, at least 1) and, in ``nodes_g``, each chip-measured time scaled by groups /
    chips (``metrics.levels.group_inputs``)."""
    lead = [c for s in sorted(key) if kinds.leader_counted(gen, s) for c in mapping[s]]
    if lead:
        total = exp.Coalesce(this=_col(lead[0]), expressions=[_num(0.0)])
        for c in lead[1:]:
            total = exp.Add(this=total, expression=exp.Coalesce(this=_col(c), expressions=[_num(0.0)]))
        run.append(_alias(_case(exp.GT(this=total, expression=_num(0.0)), _num(1.0), _num(0.0)), f"k{k}_lead"))
        agg[f"k{k}_groups"] = exp.Greatest(this=exp.Sum(this=_col(f"k{k}_lead")), expressions=[_num(1.0)])
        share = exp.Div(this=_col(f"k{k}_groups"), expression=_cast(_col("chips"), "DOUBLE"))
    else:
        share = _num(1.0)
    for s in sorted(key):
        if is_chip_time(gen, s):
            for c in mapping[s]:
                scaled.append(
                    _alias(
                        exp.Mul(this=_col(c), expression=exp.Paren(this=share.copy())), f"k{k}g_{c.split('_', 1)[1]}"
                    )
                )


def _classes(graph: MetricGraph) -> dict[frozenset, list[str]]:
    """The metrics (not ``rollup max|min``) by class: the set of signals they read."""
    deps = _deps(graph)
    classes: dict[frozenset, list[str]] = {}
    for m, meta in graph.metrics.items():
        if not meta.rollup:
            classes.setdefault(deps[m], []).append(m)
    return classes


def _class_columns(gen, k: int, key: frozenset, wins, tot: list, run: list, agg: dict) -> dict[str, list[str]]:
    """Class ``k``'s columns of ``chip_tot`` (sums over the windows where all its inputs are valid),
    ``chip_run`` (counters as summed, gauges ÷ Σ interval) and of the nodes (by each signal's
    ``across_chips`` rule) appended to ``tot``, ``run`` and ``agg``; returns signal → its columns."""
    cols = [c for s in sorted(key) for c in wins.input_cols.get(s, [])]
    valid = exp.and_(*[exp.Not(this=_is_null(_col(c))) for c in cols]) if cols else exp.true()
    dt = f"k{k}_dt"
    tot.append(_alias(exp.Sum(this=_case(valid, _col("interval_s"))), dt))
    run.append(_col(dt))
    agg[dt] = exp.Avg(this=exp.Coalesce(this=_col(dt), expressions=[_num(0.0)]))
    mapping: dict[str, list[str]] = {}
    for s in sorted(key):
        summed, rule = _summed(gen, s), kinds.across_rule(gen, s)
        leader = kinds.leader_counted(gen, s)
        mapping[s] = []
        for c in wins.input_cols.get(s, []):
            name = f"k{k}_{c}"
            mapping[s].append(name)
            if summed and leader:  # a leader's rate, summed over the node's leaders × its interval (``combine``)
                tot.append(_alias(exp.Sum(this=_case(valid, _col(c))), name))
                run.append(
                    _alias(exp.Div(this=_col(name), expression=exp.Nullif(this=_col(dt), expression=_num(0.0))), name)
                )
                agg[name] = exp.Mul(this=exp.Sum(this=_col(name)), expression=agg[dt].copy())
                continue
            if summed:
                tot.append(_alias(exp.Sum(this=_case(valid, _col(c))), name))
                run.append(_col(name))
            else:
                tot.append(
                    _alias(exp.Sum(this=_case(valid, exp.Mul(this=_col(c), expression=_col("interval_s")))), name)
                )
                run.append(
                    _alias(exp.Div(this=_col(name), expression=exp.Nullif(this=_col(dt), expression=_num(0.0))), name)
                )
            fn = {"sum": exp.Sum, "max": exp.Max}.get(rule, exp.Avg)
            agg[name] = fn(this=_col(name))
    return mapping


def _topo(topology: str, dialect: str) -> exp.Select:
    """The ``topo`` stage: the topology table as (host, chip, rack, pod), ``chip`` NULL where a row places
    every chip of its host (no value, or an empty text: a CSV's empty column) — and, in DuckDB, where the
    table has no ``chip`` or ``pod`` column at all (``UNION ALL BY NAME`` with an empty row that has them),
    as ``capture.topology`` reads it."""
    import sqlglot

    text = "VARCHAR" if dialect == "duckdb" else "STRING"
    inner = (
        "(SELECT CAST(NULL AS VARCHAR) AS chip, CAST(NULL AS VARCHAR) AS pod WHERE FALSE "
        "UNION ALL BY NAME SELECT * FROM perfonto_topology) AS u"
        if dialect == "duckdb"
        else "perfonto_topology"
    )
    q = sqlglot.parse_one(
        f"SELECT host, NULLIF(TRIM(CAST(chip AS {text})), '') AS chip, rack, pod FROM {inner}", read="duckdb"
    )
    for t in q.find_all(exp.Table):
        if t.name == "perfonto_topology":
            t.replace(table_name(topology))
            break
    return q


def _placed(topology: str | None) -> exp.Select:
    """The ``placed`` stage: each chip's run-level row with its ``rack`` and ``pod`` from the ``topo``
    stage — the row for that chip, else its host's row without a chip (as ``capture.topology``: a chip's
    own row wins, so no chip is placed twice) — or NULL ones without a topology."""
    if not topology:
        return exp.select(
            exp.Star(), _alias(_cast(exp.Null(), "VARCHAR"), "rack"), _alias(_cast(exp.Null(), "VARCHAR"), "pod")
        ).from_("chip_run")
    import sqlglot

    return sqlglot.parse_one(
        "SELECT r.*, "
        "CASE WHEN t1.host IS NOT NULL THEN t1.rack ELSE t2.rack END AS rack, "
        "CASE WHEN t1.host IS NOT NULL THEN t1.pod ELSE t2.pod END AS pod "
        "FROM chip_run AS r "
        "LEFT JOIN topo AS t1 ON t1.host = r.host AND TRY_CAST(t1.chip AS BIGINT) = CAST(r.chip AS BIGINT) "
        "LEFT JOIN topo AS t2 ON t2.host = r.host AND t2.chip IS NULL",
        read="duckdb",
    )


def _nodes(agg: dict, topology: str | None) -> exp.Select:
    """The ``nodes`` stage: one row per node of every level (rack and pod only with a topology), the
    union of one grouped select per level."""
    parts = []
    for level, keys in LEVELS:
        if level in ("rack", "pod") and not topology:
            continue
        if level == "chip":
            node = exp.Concat(expressions=[_col("host"), exp.Literal.string("/"), _cast(_col("chip"), "VARCHAR")])
        elif keys:
            node = _cast(_col(keys[0]), "VARCHAR")
        else:
            node = exp.Literal.string("fleet")
        sel = exp.select(
            _alias(exp.Literal.string(level), "level"),
            _alias(node, "node"),
            _alias(exp.Count(this=exp.Star()), "chips"),
            *[_alias(e.copy(), n) for n, e in agg.items()],
        ).from_("placed", copy=False)
        if keys:
            sel = sel.group_by(*[_col(k) for k in keys], copy=False)
        parts.append(sel)
    union = parts[0]
    for p in parts[1:]:
        union = exp.union(union, p, distinct=False, copy=False)
    return exp.select(exp.Star()).from_(
        exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier("u"))), copy=False
    )


def _metric_jobs(graph: MetricGraph, classes: dict, inputs_of: list[dict]) -> list[tuple]:
    """What to emit, per class: (metrics, signal → input columns, tag, class number), the plain metrics
    over the class's columns and the ``group_rule`` ones over the groups' times."""
    gen = graph.generation
    jobs = []
    for k, (key, names) in enumerate(classes.items()):
        plain = [n for n in names if not graph.metrics[n].group_rule]
        grouped = [n for n in names if graph.metrics[n].group_rule]
        if plain:
            jobs.append((plain, inputs_of[k], f"c{k}", k))
        if grouped:  # evaluated over the groups' times, as metrics.levels evaluates them
            mapping = {
                s: [f"k{k}g_{c.split('_', 1)[1]}" if is_chip_time(gen, s) else c for c in cols]
                for s, cols in inputs_of[k].items()
            }
            jobs.append((grouped, mapping, f"c{k}g", k))
    return jobs


def _emit(graph: MetricGraph, jobs: list[tuple]) -> tuple[dict[int, list[exp.Expression]], dict]:
    """The formula layers (layer → its columns, every job's merged) and each metric's columns."""
    layers: dict[int, list[exp.Expression]] = {}
    metric_cols: dict[str, tuple[list[str], int]] = {}
    for names, inputs, tag, k in jobs:
        em = RollupEmitter(graph, inputs, tag, f"k{k}_dt")
        todo = _refs(graph, names)
        em.emit_metrics({n: fold(graph.metrics[n].ir) for n in todo})
        for lv, es in em.layers.items():
            layers.setdefault(lv, []).extend(es)
        for n in names:
            metric_cols[n] = em.metric_cols[n]
    return layers, metric_cols


def build_rollup_query(graph: MetricGraph, src: SqlSource, topology: str | None = None) -> exp.Select:
    """The sqlglot tree of the rollup query (module docstring) over ``src`` (``SqlSource``); ``topology``:
    a table or view with ``host``, ``chip``, ``rack``, ``pod`` (one row per chip), or None (no rack or
    pod level)."""
    gen = graph.generation
    ctes, wins = window_stages(graph, src)
    classes = _classes(graph)
    tot, run, agg = [_col("host"), _col("chip")], [_col("host"), _col("chip")], {}
    inputs_of: list[dict[str, list[str]]] = []
    scaled: list[exp.Expression] = []  # columns of ``nodes_g``: chip-measured times as the groups' (group_rule)
    for k, key in enumerate(classes):
        mapping = _class_columns(gen, k, key, wins, tot, run, agg)
        inputs_of.append(mapping)
        if any(graph.metrics[m].group_rule for m in classes[key]):
            _groups(gen, k, key, mapping, run, agg, scaled)
    ctes.append(
        ("chip_tot", exp.select(*tot).from_("win", copy=False).group_by(_col("host"), _col("chip"), copy=False))
    )
    ctes.append(("chip_run", exp.select(*run).from_("chip_tot", copy=False)))
    if topology:
        ctes.append(("topo", _topo(topology, src.dialect)))
    ctes.append(("placed", _placed(topology)))
    ctes.append(("nodes", _nodes(agg, topology)))
    prev = "nodes"
    if scaled:
        ctes.append(("nodes_g", exp.select(exp.Star(), *scaled).from_("nodes", copy=False)))
        prev = "nodes_g"
    layers, metric_cols = _emit(graph, _metric_jobs(graph, classes, inputs_of))
    return layered_query(graph, ctes, prev, layers, metric_cols, [_col("level"), _col("node"), _col("chips")])


def generate_rollup_sql(
    graph: MetricGraph,
    src: SqlSource = SqlSource(),
    *,
    topology: str | None = None,
    pretty: bool = True,
    regenerate: str | None = None,
    notes: tuple[str, ...] = (),
) -> str:
    """Text of the rollup query over ``src`` (``SqlSource``: the counter table, its sampling period,
    dialect and whether it has ``host``), with a header comment: every metric per chip, host, rack, pod
    and fleet as ratios of totals; ``topology``: as ``build_rollup_query`` says; ``regenerate``: the
    options after ``perfonto codegen --target sql`` that made it, for the header; ``notes``: more header
    lines (what the query leaves out)."""
    if not isinstance(src, SqlSource):
        raise TypeError(
            f"generate_rollup_sql takes the counter table as a codegen.sql.SqlSource, not {type(src).__name__}: "
            "e.g. generate_rollup_sql(graph, SqlSource('counters', sample_period_ns, 'spark'))"
        )
    q = build_rollup_query(graph, src, topology)
    keys = 3  # level, node, chips; then a column per metric (a max/min rollup metric is not in this query)
    flags = regenerate
    if flags is None:  # the options this function knows of (``regenerate``: the command's, all of them)
        flags = " --rollup" + ("" if src.dialect == "duckdb" else f" --dialect {src.dialect}")
        flags += f" --topology-table {shlex.quote(topology)}" if topology else ""
    notes = list(notes)
    extremes = [m for m, c in graph.metrics.items() if c.rollup in ("max", "min")]
    if extremes:
        notes.append(
            f"Not here: {', '.join(extremes)} (rollup max/min: a node's value is the extreme of its chips' "
            "values, not a ratio of totals; perfonto analyze --topology reports them per node)."
        )
    if not topology:
        notes.append("No --topology-table: rack and pod are NULL, so there is no rack or pod level.")
    notes.append(
        "Gaps: a window null from a missing sample is left out of the run totals; perfonto analyze bridges a "
        "counter's gap from the running totals on either side, so over a dump with gaps the totals differ (lower) "
        "and so do the rates (over the windows left, either way)."
    )
    count = len(q.expressions) - keys
    return generated_text(graph, "fleet rollup query", flags, q, count, src.dialect, pretty, tuple(notes))
