"""Every artefact perfonto generates from a catalog, in one table: target name → emitter, output files,
options, and the commands that offer it (``perfonto codegen --target NAME``, ``perfonto export NAME``,
``perfonto docs``). The commands look their targets up here; nothing else lists them.

A target's ``emit(cat, options)`` returns :class:`Emitted`: ``{relative path: text or bytes}`` and, for the
commands' summaries, a ``detail`` object (perf JSON's :class:`~perfonto.interop.perf_export.PerfExport`,
semconv's ``Registry``). ``cat`` is the loaded :class:`~perfonto.metrics.catalog.Catalog` (``None`` for a
target that ``needs`` nothing); ``options`` holds the values of the target's ``options`` (the parsed
arguments of those names). The command loads the catalog, reports its errors and writes the files
(atomically); the target only computes them, so the same bytes come out whichever command asks.

Why here and not in ``codegen``: the table spans layers. Besides codegen's own emitters (Python, SQL,
C header, Markdown, JSON Schemas) it holds capture's collector schema, interop's exporters (perf JSON,
OpenTelemetry semantic conventions) and the docs site, which adds perfonto's guides and the emulator's
quantities page. The import contracts (``pyproject.toml``) keep ``perfonto.codegen`` from importing
``perfonto.interop``, the emulator or this top-level package, so a registry inside codegen could list only
part of the targets, or would have to accept registrations made by whoever imports interop — a table that
is complete or not depending on import order. At the top of the package every layer is importable, so the
table is complete by construction. Each emitter imports its module when called: listing the targets (for
``--help`` and argument choices) imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

__all__ = ["Emitted", "Target", "TARGETS", "offered_by", "target", "write_files"]


@dataclass
class Emitted:
    """What a target emits: ``files`` {relative path: text (UTF-8) or bytes}, in writing order, and the
    emitter's own result for the command's summary (``detail``; None when there is nothing more)."""

    files: dict[str, str | bytes]
    detail: Any = None


@dataclass(frozen=True)
class Target:
    """One generated artefact.

        ``needs``: ``"nothing"`` (no catalog: ``cat`` is None), ``"generation"`` (a loaded generation; a catalog
        whose metrics do not compile will do), ``"graph"`` (the compiled catalog) or ``"graphs"`` (the docs site:
        every generation's compiled catalog in ``options["graphs"]``, the name of the one that gives the metric
    details in ``options["primary"]`` and its catalog as ``cat``).
        ``options``: the argument names (argparse ``dest``) the emitter reads from ``options``.
        ``commands``: the CLI commands that offer the target."""

    name: str
    emit: Callable[[Any, Mapping[str, Any]], Emitted]
    files: str
    commands: tuple[str, ...]
    options: tuple[str, ...] = ()
    needs: str = "graph"
    help: str = field(default="", compare=False)

    def options_from(self, args) -> dict[str, Any]:
        """The target's options taken from parsed arguments (an absent one is None)."""
        return {o: getattr(args, o, None) for o in self.options}


# -- emitters -------------------------------------------------------------------------------------------


def _python(cat, options) -> Emitted:
    from perfonto.codegen.python_evaluator import generate

    return Emitted({f"{cat.generation.name}_evaluator.py": generate(cat.graph)})


def _sql(cat, options) -> Emitted:
    from perfonto.codegen.sql import SqlSource, dump_source, generate_sql
    from perfonto.sql_fit import dump_columns, fit

    gen, dialect, counters = cat.generation, options["dialect"], options["counters"]
    host: bool | None = True  # the table names each row's host (a chip is (host, chip)), unless the dump has none
    graph, flat, absent, notes = cat.graph, frozenset[str](), frozenset[str](), ()
    if dialect == "duckdb":  # no dump given: the query reads counters.parquet's host if it has one
        source, found = dump_source(counters or "counters.parquet")
        host = True if found else None if counters is None else False
        names = dump_columns(counters) if counters else None
        if names is not None:  # a dump given: read the columns it has (a subset, the flat layout)
            fitted = fit(cat.graph, names, counters)  # ValueError: it feeds no metric (the command says so)
            graph, flat, absent, notes = fitted.graph, fitted.flat, fitted.absent, fitted.notes
    else:
        source = counters or "counters"
        if counters:  # the default is the table `counters`, whatever folders the working one holds
            _refuse_spark_path(counters)
        notes = SPARK_TABLE_NOTES
    period = None if options["sample_period"] is None else int(round(options["sample_period"] * 1e9))
    name = gen.name + (".rollup" if options["rollup"] else "") + ("" if dialect == "duckdb" else f".{dialect}")
    again = _sql_options(options)
    if options["rollup"]:
        from perfonto.codegen.sql_rollup import generate_rollup_sql

        src = SqlSource(source, period, dialect, host, flat, absent)
        text = generate_rollup_sql(graph, src, topology=options["topology_table"], regenerate=again, notes=notes)
    else:
        text = generate_sql(
            graph,
            source,
            sample_period_ns=period,
            dialect=dialect,
            host=host,
            regenerate=again,
            flat=flat,
            absent=absent,
            notes=notes,
        )
    return Emitted({f"{name}.sql": text})


#: What the Spark query's header says of the table it reads (a data engineer's own session read the registers
#: with Spark's inferred DECIMAL(20,0) for uint64, and a register >= 2^63 failed with CAST_OVERFLOW).
SPARK_TABLE_NOTES = (
    "Spark: the table needs columns host, chip, timestamp_ns and the signals' registers read as LONG (BIGINT), not "
    "the DECIMAL(20,0) Spark infers for a uint64 column;",
    "perfonto.analysis.spark_engine.counters_frame(spark, PATH, generation) reads a Parquet dump so "
    "(.createOrReplaceTempView), and a dump without host takes SELECT '' AS host, * FROM it.",
)


def _refuse_spark_path(counters: str) -> None:
    """``--dialect spark --counters`` names a table or view: a path (``run/counters.parquet`` became the table
    `run/counters`.`parquet`) is refused, saying how to make the view. Told by its text alone — a path
    separator or a dump file's extension — not by what is on disk (a folder named like the table is no path).

    Raises:
        ValueError: ``counters`` reads as a path.
    """
    if "/" in counters or "\\" in counters or counters.endswith((".parquet", ".pq", ".csv", ".arrow")):
        raise ValueError(
            f"--dialect spark --counters takes the name of a table or view, not a path ({counters!r}): read the dump "
            "in Spark with its registers as LONG — perfonto.analysis.spark_engine.counters_frame(spark, path, "
            "generation).createOrReplaceTempView('counters') — and give --counters counters (the default), or run "
            "perfonto analyze DUMP --engine spark"
        )


def _sql_options(options) -> str:
    """The options of ``perfonto codegen --target sql`` that shaped a query, shell-quoted, for its header's
    "regenerate with" line (a catalog option is not among them: the header names the catalog's hash)."""
    import shlex

    given = [
        ("--rollup", None) if options["rollup"] else None,
        ("--dialect", options["dialect"]) if options["dialect"] != "duckdb" else None,
        ("--counters", options["counters"]) if options["counters"] else None,
        ("--sample-period", f"{int(round(options['sample_period'] * 1e9))}ns")
        if options["sample_period"] is not None
        else None,
        ("--topology-table", options["topology_table"])
        if options["rollup"] and options.get("topology_table")
        else None,
    ]
    return "".join(f" {flag}" + ("" if v is None else f" {shlex.quote(str(v))}") for flag, v in filter(None, given))


def _c_header(cat, options) -> Emitted:
    from perfonto.codegen.c_header import generate_header

    return Emitted({f"{cat.generation.name}.h": generate_header(cat.generation)})


def _markdown(cat, options) -> Emitted:
    from perfonto.codegen.docs import generate_markdown

    return Emitted({f"{cat.generation.name}.md": generate_markdown(cat.graph)})


def _schemas(cat, options) -> Emitted:
    from perfonto.codegen.schemas import schemas

    return Emitted(dict(schemas()))


def _collector(cat, options) -> Emitted:
    from perfonto.capture.collector import wide_schema_json

    return Emitted({f"{cat.generation.name}.collector.json": wide_schema_json(cat.generation)})


def _perf_json(cat, options) -> Emitted:
    from perfonto.interop.perf_export import export

    result = export(cat.graph)
    return Emitted({f"{cat.generation.name}.perf.json": result.to_json()}, result)


def _semconv(cat, options) -> Emitted:
    from perfonto.interop.semconv import export

    reg = export(cat.graph)
    return Emitted(dict(reg.files), reg)


def _docs_site(cat, options) -> Emitted:
    from perfonto.codegen.docs_site import generate_site
    from perfonto.emulator.quantities import registry

    from .commands.emulator_quantities import bound_by, markdown
    from .guides import guide_pages

    graphs, chosen = options["graphs"], options["primary"]
    gen = graphs[chosen].generation
    return Emitted(
        generate_site(graphs, chosen)
        | guide_pages()
        | {"emulator-quantities.md": markdown(registry(), bound_by(gen), gen.name)}
    )


_SQL_OPTIONS = ("dialect", "counters", "sample_period", "rollup", "topology_table")

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "python",
            _python,
            "GEN_evaluator.py",
            ("codegen",),
            help="a standalone NumPy evaluator of the catalog's metrics",
        ),
        Target(
            "sql",
            _sql,
            "GEN.sql, GEN.rollup.sql, GEN.spark.sql or GEN.rollup.spark.sql",
            ("codegen",),
            _SQL_OPTIONS,
            help="the metrics query (DuckDB, or Spark SQL with --dialect spark; --rollup: the fleet rollup)",
        ),
        Target(
            "c-header",
            _c_header,
            "GEN.h",
            ("codegen",),
            needs="generation",
            help="a C header of the generation's signals and spec constants",
        ),
        Target(
            "docs",
            _markdown,
            "GEN.md",
            ("codegen",),
            help="one Markdown page of the catalog (`perfonto docs` writes the whole site)",
        ),
        Target(
            "schemas",
            _schemas,
            "generation.schema.json, generation-extension.schema.json, collector.schema.json",
            ("codegen",),
            needs="nothing",
            help="the JSON Schemas of generation files and collector dumps",
        ),
        Target(
            "collector",
            _collector,
            "GEN.collector.json",
            ("codegen",),  # reads the generation only, but asks for a catalog that compiles
            help="the generation's wide-layout dump schema (JSON)",
        ),
        Target(
            "perf-json",
            _perf_json,
            "one JSON file, GEN.perf.json (`perfonto export` writes it to the --out path)",
            ("export",),
            help="Linux perf pmu-events metrics JSON (interop.perf_export)",
        ),
        Target(
            "semconv",
            _semconv,
            "manifest.yaml and registry/*.yaml",
            ("export",),
            help="an OpenTelemetry semantic-conventions registry (Weaver definition/2 YAML, interop.semconv)",
        ),
        Target(
            "docs-site",
            _docs_site,
            "index.md, generations/*.md, groups/*.md, guides/*.md, emulator-quantities.md",
            ("docs",),
            ("graphs", "primary"),
            needs="graphs",
            help="the Markdown docs site (codegen.docs_site, the guides and the emulator's quantities)",
        ),
    )
}


def target(name: str) -> Target:
    """The target called ``name``. Raises KeyError naming the known targets."""
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"no target named {name!r}; the targets are {', '.join(TARGETS)}") from None


def offered_by(command: str) -> tuple[str, ...]:
    """The names of the targets ``command`` (``codegen``, ``export``, ``docs``) offers, in table order."""
    return tuple(t.name for t in TARGETS.values() if command in t.commands)


def write_files(files: Mapping[str, str | bytes], out: str | Path) -> list[Path]:
    """Write ``files`` under the folder ``out`` (creating folders), text as UTF-8; returns the paths written.
    Raises ``OSError`` when a file cannot be written."""
    paths = []
    for rel, content in files.items():
        p = Path(out) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        paths.append(p)
    return paths
