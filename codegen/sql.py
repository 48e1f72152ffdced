"""SQL target: one query that computes every metric per window and chip from the raw counter table.

The query is built as one sqlglot expression tree and printed by a sqlglot dialect (DuckDB by
default; ``dialect="spark"`` prints Spark SQL), so identifiers from catalogs are quoted and escaped by
the printer, never pasted. Its shape, one CTE per stage:

1. ``src`` — one column per register instance (``r<j>_<k>``) and the sample's grid index ``g``
   (rank within the chip, or ``round_half_even((t − t0) / period)`` when ``sample_period_ns`` is given);
2. ``filled`` (period only) — every grid point of every chip; an absent sample has null registers and
   an interpolated timestamp (as ``np.interp`` in ``metrics.windows.read_counters``);
3. ``lagged`` — the previous sample's registers by ``LAG … OVER (PARTITION BY chip ORDER BY g)``;
   ``deltas`` — the modular increase of every counter instance;
4. ``win`` — one row per window: ``interval_s`` and each input's window value by the rules of
   ``metrics/windows.py`` (modular delta in the effective width, resets by indicator or implausible
   increase, sentinels, missing samples, gauges as endpoint means, packed fields);
5. ``l1 … ln`` — formula layers: shared sub-expressions and raw metric values, then finished metric
   values (inf and NaN → NULL), each layer reading only earlier columns;
6. the final ``SELECT``: ``window``, ``chip``, ``start_ns``, ``interval_s`` and one column per metric
   (a list for metrics with instance axes).

Null rules, as in the reference interpreter (``metrics/interpreter.py``): null is SQL NULL; division
by zero is NULL (``a / NULLIF(b, 0)``); comparisons, ``and``/``or``, ``if`` and ``min``/``max`` with
a NULL operand are NULL (SQL's ``LEAST``/``GREATEST`` skip NULLs and three-valued ``AND`` does not
propagate them, so these are spelled out); a NaN reaching a comparison or ``min``/``max`` is made NULL
first, and a metric's inf or NaN is NULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlglot import exp

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph

from .ir_passes import fold, nonfinite_sensitive
from .sql_spark import SPARK
from .sql_windows import (
    CHIP_KEY,
    DUCKDB,
    Windows,
    _alias,
    _case,
    _cast,
    _col,
    _int,
    _is_null,
    _num,
    _or,
    _window,
    fill_grid,
)

DIALECTS = {"duckdb": DUCKDB, "spark": SPARK}


class SqlEmitter:
    """Typed IR → SQL, per instance: ``expr(node)`` gives one expression per instance of the node
    (one when it has no instance axes) and the formula layer it can be computed in. A table from node
    type (and ``Op`` name) to handler, so another dialect overrides only what differs."""

    def __init__(self, graph: MetricGraph, inputs: dict[str, list[str]]):
        self.graph = graph
        self.inputs = inputs
        self.metric_cols: dict[str, tuple[list[str], int]] = {}
        self.cse: dict[ir.Node, tuple[list[str], int]] = {}
        self.shared: set[ir.Node] = set()
        self.sensitive: set[ir.Node] = set()
        self.layers: dict[int, list[exp.Expression]] = {}
        self.handlers = ir.handlers(self)
        self.ops: dict[str, Callable] = {
            "add": self.binary(exp.Add),
            "sub": self.binary(exp.Sub),
            "mul": self.binary(exp.Mul),
            "div": self.div,
            "pow": self.pow,
            "neg": self.neg,
            "abs": self.abs,
            "min": self.extreme(exp.Least),
            "max": self.extreme(exp.Greatest),
            "clamp": self.clamp,
            "lt": self.cmp(exp.LT),
            "le": self.cmp(exp.LTE),
            "gt": self.cmp(exp.GT),
            "ge": self.cmp(exp.GTE),
            "eq": self.cmp(exp.EQ),
            "ne": self.cmp(exp.NEQ),
            "and": self.logic(exp.And),
            "or": self.logic(exp.Or),
            "not": self.not_,
            "where": self.where,
            "default": self.default,
        }
        self.n_cols = 0

    def emit_metrics(self, roots: dict[str, ir.Node]) -> None:
        """Emit every metric of ``roots`` (name → folded IR), sharing the ``Op``/``Rollup`` nodes that
        occur more than once as one column each."""
        counts: dict[ir.Node, int] = {}

        def visit(n):
            if isinstance(n, (ir.Op, ir.Rollup)):
                counts[n] = counts.get(n, 0) + 1
                if counts[n] > 1:
                    return
            for c in ir.children(n):
                visit(c)

        for r in roots.values():
            visit(r)
        self.shared = {n for n, c in counts.items() if c > 1}
        self.sensitive = nonfinite_sensitive(list(roots.values()))
        for name, root in roots.items():
            self.metric(name, root)

    def add_column(self, level: int, e: exp.Expression, prefix: str) -> str:
        name = f"{prefix}{self.n_cols}"
        self.n_cols += 1
        self.layers.setdefault(level, []).append(_alias(e, name))
        return name

    def expr(self, n: ir.Node) -> tuple[list[exp.Expression], int]:
        if n in self.cse:
            cols, level = self.cse[n]
            return [_col(c) for c in cols], level
        es, level = self.handlers[type(n)](n)
        if n in self.shared and not isinstance(n, (ir.Const, ir.Input, ir.Interval, ir.MetricRef)):
            cols = [self.add_column(level + 1, e, "t") for e in es]
            self.cse[n] = (cols, level + 1)
            return [_col(c) for c in cols], level + 1
        return es, level

    def args(self, n: ir.Op) -> tuple[list[list[exp.Expression]], int]:
        """Operands per instance of ``n`` (an operand without axes repeats for every instance)."""
        size = 1
        for _, s in n.axes:
            size *= s
        out, level = [], 0
        for a in n.args:
            es, lv = self.expr(a)
            level = max(level, lv)
            out.append(es if len(es) == size else es * size)
        return [list(t) for t in zip(*out)], level

    def nan_null(self, e: exp.Expression, node: ir.Node) -> exp.Expression:
        """NaN → NULL where NaN and null would differ (SQL orders NaN above every number)."""
        if isinstance(node, (ir.Const, ir.Input, ir.Interval, ir.MetricRef)) or isinstance(e, exp.Column):
            return e
        return exp.Nullif(this=e, expression=_num(float("nan")))

    # -- leaves -------------------------------------------------------------------------------------
    def const(self, n: ir.Const):
        return [_num(n.value)], 0  # per window and chip: chips = 1

    def input(self, n: ir.Input):
        return [_col(c) for c in self.inputs[n.signal]], 0

    def interval(self, n: ir.Interval):
        return [_col("interval_s")], 0

    def metric_ref(self, n: ir.MetricRef):
        cols, level = self.metric_cols[n.metric]
        return [_col(c) for c in cols], level

    def rollup(self, n: ir.Rollup):
        es, level = self.expr(n.arg)
        if n.func in ("sum", "avg"):
            total = es[0]
            for e in es[1:]:
                total = exp.Add(this=total, expression=e)
            if n.func == "avg":
                total = exp.Div(this=exp.Paren(this=total), expression=_num(len(es)))
            return [exp.Paren(this=total)], level
        es = [self.nan_null(e, n.arg) for e in es]
        fn = exp.Least if n.func == "min" else exp.Greatest
        return [self._null_if_any(es, fn(this=es[0], expressions=es[1:]))], level

    # -- operations ---------------------------------------------------------------------------------
    def op(self, n: ir.Op):
        if n.op not in self.ops:
            raise ValueError(f"no SQL emitter for IR op {n.op!r}")  # an operation added to metrics.ops.Op only
        return self.ops[n.op](n)

    def binary(self, cls):
        def emit(n: ir.Op):
            rows, level = self.args(n)
            return [exp.Paren(this=cls(this=a, expression=b)) for a, b in rows], level

        return emit

    def div(self, n: ir.Op):
        rows, level = self.args(n)
        return [
            exp.Paren(this=exp.Div(this=a, expression=exp.Nullif(this=b, expression=_num(0.0)))) for a, b in rows
        ], level

    def pow(self, n: ir.Op):
        rows, level = self.args(n)
        return [exp.Pow(this=a, expression=b) for a, b in rows], level

    def neg(self, n: ir.Op):
        rows, level = self.args(n)
        return [exp.Paren(this=exp.Neg(this=a)) for (a,) in rows], level

    def abs(self, n: ir.Op):
        rows, level = self.args(n)
        return [exp.Abs(this=a) for (a,) in rows], level

    @staticmethod
    def _null_if_any(es: list[exp.Expression], value: exp.Expression) -> exp.Expression:
        return _case(_or([_is_null(e) for e in es]), exp.Null(), value)

    def extreme(self, cls):
        def emit(n: ir.Op):
            rows, level = self.args(n)
            out = []
            for row in rows:
                row = [self.nan_null(e, a) for e, a in zip(row, n.args)]
                out.append(self._null_if_any(row, cls(this=row[0], expressions=row[1:])))
            return out, level

        return emit

    def default(self, n: ir.Op):
        """``default(x, d)`` of a captured x: x, its nulls kept (``metrics.optional``: an absent x was
        replaced by d in the catalog before the SQL was generated)."""
        rows, level = self.args(n)
        return [x for x, _ in rows], level

    def clamp(self, n: ir.Op):
        rows, level = self.args(n)
        out = []
        for row in rows:
            x, lo, hi = (self.nan_null(e, a) for e, a in zip(row, n.args))
            out.append(
                self._null_if_any([x, lo, hi], exp.Least(this=exp.Greatest(this=x, expressions=[lo]), expressions=[hi]))
            )
        return out, level

    def cmp(self, cls):
        def emit(n: ir.Op):
            rows, level = self.args(n)
            return [
                exp.Paren(this=cls(this=self.nan_null(a, n.args[0]), expression=self.nan_null(b, n.args[1])))
                for a, b in rows
            ], level

        return emit

    def logic(self, cls):
        def emit(n: ir.Op):
            rows, level = self.args(n)
            return [self._null_if_any([a, b], exp.Paren(this=cls(this=a, expression=b))) for a, b in rows], level

        return emit

    def not_(self, n: ir.Op):
        rows, level = self.args(n)
        return [exp.Paren(this=exp.Not(this=a)) for (a,) in rows], level

    def where(self, n: ir.Op):
        rows, level = self.args(n)
        return [
            exp.Case(ifs=[exp.If(this=_is_null(c), true=exp.Null()), exp.If(this=c, true=a)], default=b)
            for c, a, b in rows
        ], level

    # -- metrics ------------------------------------------------------------------------------------
    def metric(self, name: str, root: ir.Node) -> None:
        es, level = self.expr(root)
        raw = [self.add_column(level + 1, e, "v") for e in es]
        fin = []
        for c in raw:  # inf and NaN become NULL: x − x is 0 only for a finite x
            r = _col(c)
            fin.append(
                self.add_column(
                    level + 2, _case(exp.EQ(this=exp.Sub(this=r, expression=r), expression=_num(0.0)), r), "m"
                )
            )
        self.metric_cols[name] = (fin, level + 2)


@dataclass(frozen=True)
class SqlSource:
    """The raw counter table a generated query reads, and how: what ``build_query`` and
    ``build_rollup_query`` share.

    source: a table or view name, or any sqlglot table expression (``read_parquet('…')``), with columns
    ``host``, ``chip``, ``timestamp_ns`` (ns) and one per signal (uint64, or a fixed-size list per
    instance). A chip is (``host``, ``chip``): windows are partitioned by both, so hosts that each
    number their chips 0..7 stay apart.
    sample_period_ns: when given, samples are placed on that grid and gaps give null windows, as
    ``metrics.windows.read_counters`` does with the dump's ``sample_period_ns``; otherwise consecutive
    samples of a chip form the windows.
    dialect: a key of ``DIALECTS`` (``duckdb`` or ``spark``).
    host: False for a table without a ``host`` column (one host, printed as ``''``); None (DuckDB only)
    when that is not known as the query is written: the table's ``host`` if it has one, else ``''``
    (``UNION ALL BY NAME`` with an empty row that has one), so the default query reads a fleet's
    dump and ``perfonto run``'s alike.
    flat: the signals with instances that the table holds as one column per instance, ``name[i]`` (the
    collector format's flat layout), rather than as one list column.
    absent: registers the table lacks that the window rules still read (a reset indicator): read as NULL,
    as the dump reader reads a missing register.
    """

    source: exp.Expression | str = "counters"
    sample_period_ns: int | None = None
    dialect: str = "duckdb"
    host: bool | None = True
    flat: frozenset[str] = frozenset()
    absent: frozenset[str] = frozenset()

    def __post_init__(self):
        if self.dialect not in DIALECTS:
            raise ValueError(f"unknown SQL dialect {self.dialect!r}; choose one of {', '.join(DIALECTS)}")
        if self.host is None and self.dialect != "duckdb":
            raise ValueError("a counter table whose host column is not known is read by DuckDB's SQL only")


def window_stages(graph: MetricGraph, src: SqlSource) -> tuple[list[tuple[str, exp.Select]], Windows]:
    """The ``src`` … ``win`` stages of the metrics query (CTE name → select) and the ``Windows`` that
    built them (``input_cols``: each input's columns in ``win``); see ``build_query``."""
    source, sample_period_ns, dialect, host = src.source, src.sample_period_ns, src.dialect, src.host
    d = DIALECTS[dialect]
    wins = (d.windows or Windows)(graph, d)
    wins.flat, wins.absent = src.flat, src.absent
    src_table = table_name(source) if isinstance(source, str) else source
    regs = wins.all_reg_cols()
    ctes: list[tuple[str, exp.Select]] = []
    if sample_period_ns:
        t0 = _window(exp.Min(this=_col("timestamp_ns")), CHIP_KEY, "timestamp_ns")
        t0.set("order", None)
        grid = _cast(
            exp.Anonymous(
                this=d.round_even,
                expressions=[
                    exp.Div(
                        this=_cast(exp.Sub(this=_col("timestamp_ns"), expression=t0), "DOUBLE"),
                        expression=_num(float(sample_period_ns)),
                    ),
                    _int(0),
                ],
            ),
            "BIGINT",
        )
    else:
        grid = exp.Sub(this=_window(exp.RowNumber(), CHIP_KEY, "timestamp_ns"), expression=_int(1))
    if host is None:  # the table's host if it has one, else ''
        src_table = _host_if_any(src_table)
    elif not host:  # one host: name it '' so that windows are still partitioned by (host, chip)
        src_table = exp.Subquery(
            this=exp.select(_alias(exp.Literal.string(""), "host"), exp.Star()).from_(src_table, copy=False),
            alias=exp.TableAlias(this=exp.to_identifier("c")),
        )
    src = exp.select(
        _col("host"), _col("chip"), _alias(_col("timestamp_ns"), "ts"), _alias(grid, "g"), *wins.src_columns()
    ).from_(src_table, copy=False)
    ctes.append(("src", src))
    base = "src"
    if sample_period_ns:
        ctes += fill_grid(regs, d, wins)
        base = "filled"
    keys = [_col(k) for k in CHIP_KEY]
    lag_cols = [_alias(_window(exp.Lag(this=_col(c)), CHIP_KEY, "g"), "p" + c[1:]) for c in regs]
    lag_cols.insert(0, _alias(_window(exp.Lag(this=_col("ts")), CHIP_KEY, "g"), "p_ts"))
    ctes.append(
        (
            "lagged",
            exp.select(*keys, _col("g"), _col("ts"), *[_col(c) for c in regs], *lag_cols).from_(base, copy=False),
        )
    )
    ctes.append(
        (
            "deltas",
            exp.select(exp.Star(), *wins.delta_columns())
            .from_("lagged", copy=False)
            .where(exp.Not(this=_is_null(_col("p_ts"))), copy=False),
        )
    )
    win = exp.select(
        *[_col(k) for k in CHIP_KEY],
        _alias(exp.Sub(this=_col("g"), expression=_int(1)), "window"),
        _alias(_col("p_ts"), "start_ns"),
        *wins.window_values(),
    ).from_("deltas", copy=False)
    ctes.append(("win", win))

    return ctes, wins


def build_query(graph: MetricGraph, src: SqlSource, order: bool = True) -> exp.Select:
    """The sqlglot tree of the metrics query (see the module docstring) over ``src`` (``SqlSource``);
    order: sort the result by host, chip and window."""
    ctes, wins = window_stages(graph, src)
    em = SqlEmitter(graph, wins.input_cols)
    em.emit_metrics({name: fold(m.ir) for name, m in graph.metrics.items()})
    keys = [_col("window"), _col("host"), _col("chip"), _col("start_ns"), _col("interval_s")]
    query = layered_query(graph, ctes, "win", em.layers, em.metric_cols, keys)
    return query.order_by(_col("host"), _col("chip"), _col("window"), copy=False) if order else query


def layered_query(
    graph: MetricGraph, ctes: list, prev: str, layers: dict, metric_cols: dict, keys: list[exp.Expression]
) -> exp.Select:
    """The query over ``ctes`` (name → select, in order) and the formula layers after them (CTE ``l<level>``
    each over the one before, the first over ``prev``): ``keys``, then each emitted metric of
    ``metric_cols`` under its name (an array of its instances where it has axes)."""
    for lv in sorted(layers):
        ctes.append((f"l{lv}", exp.select(exp.Star(), *layers[lv]).from_(prev, copy=False)))
        prev = f"l{lv}"
    outputs = list(keys)
    for name, m in graph.metrics.items():
        if name in metric_cols:
            cols, _ = metric_cols[name]
            value = exp.Array(expressions=[_col(c) for c in cols]) if m.axes else _col(cols[0])
            outputs.append(_alias(value, exp.to_identifier(name, quoted=True)))
    query = exp.select(*outputs).from_(prev, copy=False)
    for name, sel in ctes:
        query = query.with_(name, as_=sel, copy=False)
    return query


def generate_sql(
    graph: MetricGraph,
    source: exp.Expression | str = "counters",
    *,
    dialect: str = "duckdb",
    pretty: bool = True,
    sample_period_ns: int | None = None,
    host: bool | None = True,
    order: bool = True,
    regenerate: str | None = None,
    flat: frozenset[str] = frozenset(),
    absent: frozenset[str] = frozenset(),
    notes: tuple[str, ...] = (),
) -> str:
    """Text of the metrics query for ``dialect`` (``duckdb`` or ``spark``), with a header comment
    naming the generation and the catalog hash; ``source``, ``sample_period_ns``, ``host``, ``flat``, ``absent``: as
    ``SqlSource`` says; order: sort the result by host, chip and window; ``regenerate``: the options after
    ``perfonto codegen --target sql`` that made it, for the header (default: the dialect's alone);
    ``notes``: header lines (what the query leaves out)."""
    q = build_query(graph, SqlSource(source, sample_period_ns, dialect, host, flat, absent), order=order)
    flags = regenerate if regenerate is not None else ("" if dialect == "duckdb" else f" --dialect {dialect}")
    return generated_text(graph, "metrics query", flags, q, len(graph.metrics), dialect, pretty, notes)


def generated_text(
    graph: MetricGraph,
    what: str,
    flags: str,
    q: exp.Select,
    metrics: int,
    dialect: str,
    pretty: bool,
    notes: tuple[str, ...] = (),
) -> str:
    """A generated query's text: a header comment naming ``what`` it is, the generation, the catalog hash,
    the number of ``metrics`` it computes and the command that regenerates it (``flags``: the options
    after ``--target sql``, shell-quoted, e.g. `` --rollup --dialect spark``; a line break or ``*/`` in them
    is escaped, ``sql_header``), a comment line per note (what the query leaves out; a note that is not one
    printable line is dropped, so no text ends the comment), then the query (``sql_text``)."""
    from .sql_header import comment_note, regenerate_line

    gen = graph.generation
    header = (
        f"-- perfonto generated {what} ({dialect}); generation {gen.name}, catalog hash {graph.content_hash}, "
        f"{metrics} metrics.\n" + regenerate_line(flags)
    )
    header += "".join(f"-- {line}\n" for line in map(comment_note, notes) if line is not None)
    if (
        not gen.name.replace("_", "").isalnum() or not graph.content_hash.isalnum()
    ):  # pragma: no cover - validated names
        header = f"-- perfonto generated {what}\n"
    return sql_text(header, q, dialect, pretty)


def table_name(name: str, alias: str | None = None) -> exp.Table:
    """A table or view named by the user (``--counters`` for Spark, ``--topology-table``) as a sqlglot table:
    ``[catalog.][db.]table``, split on dots, each part a quoted identifier, so ``tôpo``, ``my topo`` or a
    reserved word (``order``) reach Spark back-quoted, and no text of the name is read as SQL (``it's``,
    ``x --y``). DuckDB and Spark match quoted names without regard to case, as unquoted ones.

    Raises:
        ValueError: an empty name or part, more than three parts, or a line break in it.
    """
    parts = name.split(".")
    if not name or any(not p for p in parts) or len(parts) > 3 or not name.isprintable():
        raise ValueError(f"{name!r} is not a table name: give [catalog.][db.]table, each part non-empty, on one line")
    ids = [exp.to_identifier(p, quoted=True) for p in parts]
    table = exp.Table(this=ids[-1], db=ids[-2] if len(ids) > 1 else None, catalog=ids[0] if len(ids) > 2 else None)
    if alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return table


def sql_text(header: str, q: exp.Expression, dialect: str, pretty: bool) -> str:
    """A generated query's text for ``dialect``: ``header`` (comment lines), the query, ``;``."""
    return header + q.sql(dialect=dialect, pretty=pretty, copy=False) + ";\n"  # the tree is ours to consume


def _host_if_any(src_table: exp.Expression) -> exp.Expression:
    """``src_table`` with a ``host`` column whether or not it has one (DuckDB): its own, else ``''``."""
    import sqlglot

    q = sqlglot.parse_one(
        "SELECT COALESCE(CAST(host AS VARCHAR), '') AS host, * EXCLUDE (host) FROM (SELECT CAST(NULL AS VARCHAR) "
        "AS host WHERE FALSE UNION ALL BY NAME SELECT * FROM perfonto_counters) AS u",
        read="duckdb",
    )
    for t in q.find_all(exp.Table):
        if t.name == "perfonto_counters":
            t.replace(src_table.copy())
            break
    return exp.Subquery(this=q, alias=exp.TableAlias(this=exp.to_identifier("c")))


def parquet_source(path: str, hive: bool = False) -> exp.Expression:
    """``read_parquet('<path>')`` (DuckDB) as a table expression; the path is a SQL string literal.
    hive: read ``key=value`` folders as columns (``hive_partitioning = true``)."""
    args: list[exp.Expression] = [exp.Literal.string(path)]
    if hive:
        args.append(exp.EQ(this=exp.column("hive_partitioning"), expression=exp.true()))
    return exp.Table(this=exp.Anonymous(this="read_parquet", expressions=args))


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def _glob_files(pattern: str) -> tuple:
    """(the folder above the pattern's first wildcard, the files it matches, sorted): the Hive partitions
    (``host=…``) of a glob over a partitioned dump lie below that folder, as in a folder given whole."""
    import glob
    from pathlib import Path

    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if _is_glob(part)), len(parts))
    root = Path(*parts[:fixed]) if fixed else Path(".")
    return root, sorted(Path(f) for f in glob.glob(pattern, recursive=True) if f.endswith((".parquet", ".pq")))


def dump_source(path: str) -> tuple[exp.Expression, bool]:
    """A Parquet dump as DuckDB reads it — a file, a glob, or a folder read recursively — with its Hive
    partitions (``host=…/``, in a folder or below a glob's fixed part) as columns, and whether its rows
    name their ``host``."""
    from pathlib import Path

    import pyarrow.parquet as pq

    p = Path(path)
    if p.is_dir() or _is_glob(path):
        root, files = (p, sorted(p.rglob("*.parquet"))) if p.is_dir() else _glob_files(path)
        hive = any("=" in part for f in files[:1] for part in f.relative_to(root).parts[:-1])
        host = any(part.startswith("host=") for f in files[:1] for part in f.relative_to(root).parts[:-1])
        if files and not host:
            host = "host" in pq.read_schema(files[0]).names
        source = parquet_source(str(p / "**" / "*.parquet") if p.is_dir() else path, hive=hive)
        return _own_host(source, root, host)
    try:
        host = p.is_file() and "host" in pq.read_schema(p).names
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(
            f"{p}: not a Parquet file ({' '.join(str(exc).split())[:160]}); --counters takes the dump's Parquet "
            "file or folder"
        ) from None
    return _own_host(parquet_source(str(p)), p.parent, host)


def _own_host(source: exp.Expression, folder, host: bool) -> tuple[exp.Expression, bool]:
    """``(source, host)``, where a dump with no host of its own lies in a ``host=NAME`` folder (one partition
    of a fleet's dump, given alone): its rows get that host, as ``perfonto analyze`` reads them (the query
    named it ``''``)."""
    from perfonto.capture.partitions import folder_keys

    name = None if host else folder_keys(folder).get("host")
    if name is None:
        return source, host
    q = exp.select(_alias(exp.Literal.string(str(name)), "host"), exp.Star()).from_(source, copy=False)
    return exp.Subquery(this=q, alias=exp.TableAlias(this=exp.to_identifier("c"))), True
