"""Optional inputs: ``default(x, d)`` in the metric language.

``default(x, d)`` is d where the capture does not have x, and x where it does, in x's unit:

- **captured**: the IR operation ``default`` (``metrics.ops.Op.DEFAULT``) is x on every backend, a null
  window of x included: a reset, a sentinel or a missing sample is not a zero, and filling it with d
  would be a silently wrong value (a window whose FP4 counter reset would read no FP4 work);
- **absent from the capture** (the dump has no column for a signal x reads): ``fill_defaults`` rewrites
  the catalog for that capture, each such ``default(x, d)`` becoming d, so the metric stays available
  instead of being reported "not in the dump". The reference interpreter does the same by itself when
  the windows lack one of x's signals.

Typing (``type_default``, called by ``metrics.infer``): two arguments, both quantities; d is converted
to x's unit by an explicit factor, and a unit d cannot be converted to is an error at d's file:line:col.
A bare ``0`` fits every unit (zero bytes, zero seconds and zero events are all 0). A literal d takes x's
chip degree (``default(ok, 0)`` is 0 per chip), also where this generation lacks x's signal: the degree x
has on the nearest generation that declares it (``absent_degree``), so that
``default(sum(c2c.retries), 0 event) / seq.elapsed_cycles`` stays a ratio; a measured d must have x's degree.

Run and server levels keep their rule (``metrics.levels``): the totals of a metric are summed over the
windows where every input it reads is valid, the optional ones included; only an absent input is
replaced for the whole run.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfonto.dsl import ast
from perfonto.ontology.diagnostics import Diagnostic

from . import ir

if TYPE_CHECKING:  # the graph imports the compiler's stages; only for annotations here
    from .graph import MetricGraph
    from .infer import Typer
    from .infer_typed import _T

__all__ = [
    "absent_degree",
    "fill_defaults",
    "missing_names",
    "optional_names",
    "optional_signals",
    "optional_unknown",
    "resolve_defaults",
    "type_default",
]


def type_default(typer: "Typer", e: ast.Call, operands: list) -> "_T":
    """Type ``default(x, d)`` (module docstring): the IR ``Op("default", (x, d))`` in x's unit, or d
    alone where x reads a signal this generation does not have (``missing_names``: the metric is
    compiled with the default, not made unavailable); d then needs its own unit (``0 FLOP``).

    Raises ``infer_typed.Fail`` (code ``arity``, ``type``, ``unit-mismatch`` or ``chip-degree``) pointing at the
    call or at d."""
    from .infer_typed import _T

    if len(e.args) != 2:
        raise typer.fail(
            "arity",
            f"`default` takes two arguments (x, value), got {len(e.args)}",
            e.span,
            hint="e.g. `default(seq.ok_requests, 0)`: the value to use where x is absent or null",
        )
    bare_zero = isinstance(e.args[1], ast.Number) and e.args[1].value == 0 and e.args[1].unit is None
    missing = missing_names(typer, e.args[0])
    if missing:
        d = typer.expr(e.args[1])
        operands.append(d)
        typer._need_number(d, e.args[1].span, "`default`")
        if bare_zero:
            raise typer.fail(
                "unit-mismatch",
                f"`{missing[0]}` is not a signal of `{typer.gen.name}`, so the default is the value: give it x's unit",
                e.args[1].span,
                hint="e.g. `default(mxu.flops_fp4, 0 FLOP)`",
            )
        node = d.node
        if d.literal:  # it stands for x: x's chip degree (`default(sum(x), 0 B) / seq.elapsed_cycles` is a ratio)
            deg = absent_degree(typer, e.args[0], missing)
            if deg is not None and deg != node.degree:
                from .infer_typed import _scale_literal

                node = _scale_literal(node, deg)
        return _T(node, d.unit, d.literal, d.inst, d.total, d.sparsity)
    x, d = typer.expr(e.args[0]), typer.expr(e.args[1])
    operands += [x, d]
    for t, sub in ((x, e.args[0]), (d, e.args[1])):
        typer._need_number(t, sub.span, "`default`")
    if not bare_zero:
        f = typer.factor(
            d.qty,
            x.qty,
            e.args[1].span,
            f"the default of `default({_text(e.args[0])}, …)` must be in a unit of x ({x.qty:~})",
        )
        if f != 1.0:
            d = _T(typer._mul_const(d.node, f), x.unit, d.literal, d.inst, d.total, d.sparsity)
    deg = typer._same_degree(x, d, e.span, "default")
    axes = typer._join(x.node.axes, d.node.axes, e.span)
    return _T(ir.Op("default", (x.node, d.node), axes, deg), x.unit, sparsity=x.sparsity)


def absent_degree(typer: "Typer", x: ast.Expr, missing: list[str]) -> int | None:
    """The chip degree ``x`` has where it is captured, though this generation lacks the names ``missing``
    it reads: x typed with each of them declared as the nearest generation that declares it does (its
    lineage, this one first, then the other shipped generations; ``_declaring``), its unit read in this
    generation's units. None where one is declared nowhere known here (a metric, a typo) or x does not
    type so: the default then keeps its own degree."""
    from .infer_typed import Fail

    gen = typer.gen
    tables: dict[str, dict[str, Any]] = {
        "signals": dict(gen.signals),
        "spec": dict(gen.spec),
        "fields": dict(gen.fields),
    }
    for name in missing:
        here = gen.aliases.get(name, name)
        if here in gen.signals:
            continue  # listed but known not to count: typed as declared
        found = next((f for g in _declaring(gen) if (f := _declared(g, gen.registry, name, here))), None)
        if found is None:
            return None
        tables[found[0]][here] = found[1]
    saved = typer.gen, typer.trace, typer.warnings
    borrowed = dataclasses.replace(gen, signals=tables["signals"], spec=tables["spec"], fields=tables["fields"])
    typer.gen, typer.trace, typer.warnings = borrowed, None, []
    try:
        return typer.expr(x).node.degree
    except Fail:
        return None
    finally:
        typer.gen, typer.trace, typer.warnings = saved


def _declared(other, registry, name: str, here: str) -> tuple[str, Any] | None:
    """``(table, declaration)`` of ``name`` (``here`` after this generation's renames) in generation
    ``other``, its unit re-read in ``registry``; None where ``other`` has no such signal, field or constant."""
    from perfonto.ontology.units import UnitError, parse_unit

    for key in dict.fromkeys((here, name, other.aliases.get(here, here), other.aliases.get(name, name))):
        for table in ("signals", "fields", "spec"):
            decl = getattr(other, table).get(key)
            if decl is None or getattr(decl, "broken", False):
                continue
            try:
                unit = parse_unit(registry, decl.unit_text) if decl.unit_text else registry.dimensionless
            except UnitError:
                return None
            return table, dataclasses.replace(decl, unit=unit)
    return None


def _declaring(gen) -> Iterator:
    """The generations that may declare what ``gen`` lacks, nearest first: its lineage (``gen``'s own
    file's generation, then its parents, from the files beside it or the shipped ones), then the other
    shipped generations. Those that do not load are left out."""
    from perfonto.ontology.loader import shipped_generations

    folder = Path(gen.source_file).parent if gen.source_file else None
    folder = folder if folder is not None and folder.is_dir() else None
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in _yamls(folder)) if folder else ()
    for name in dict.fromkeys((*reversed(gen.lineage or (gen.name,)), *shipped_generations())):
        other = _load(str(folder or ""), name, stamp)
        if other is not None:
            yield other


def _yamls(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.y*ml") if p.is_file())


@functools.lru_cache(maxsize=16)
def _load(folder: str, name: str, stamp: tuple):
    """Generation ``name`` as the YAML files of ``folder`` declare it, else the shipped one (``stamp``: the
    folder's files and their modification times, so an edited file is read again)."""
    from perfonto.ontology.loader import catalog_dir, load_generation, load_generation_files

    if folder:
        gen, _ = load_generation_files(_yamls(Path(folder)), name)
        if gen is not None:
            return gen
    shipped = catalog_dir() / f"{name}.yaml"
    return load_generation(shipped)[0] if shipped.is_file() else None


def missing_names(typer: "Typer", x: ast.Expr) -> list[str]:
    """The signal names ``x`` reads that this generation does not provide (absent here, or listed but
    known not to count): the resolve pass left them out of the graph (``optional_names``)."""
    return [n.name for n in ast.walk(x) if isinstance(n, ast.Name) and not _provided(typer.gen, typer.compiled, n.name)]


def _provided(gen, compiled, name: str) -> bool:
    name = gen.aliases.get(name, name)
    sig = gen.signals.get(name)
    if sig is not None:
        return not sig.broken
    return name in gen.fields or name in gen.record_fields or name in gen.spec or name in compiled or name == "interval"


def resolve_defaults(expr: ast.Expr, gen, compiled) -> ast.Expr:
    """``expr`` with each ``default(x, d)`` replaced by x where this generation provides every name x
    reads, else by d (and ``a + 0``, a zero default, by a): for exporters whose target has no per-window
    null (perf's metric expressions read an event or fail). ``compiled``: the catalog's metrics."""
    if isinstance(expr, ast.Call) and expr.func == "default" and len(expr.args) == 2:
        x, d = expr.args
        keep = all(_provided(gen, compiled, n.name) for n in ast.walk(x) if isinstance(n, ast.Name))
        return resolve_defaults(x if keep else d, gen, compiled)
    fields = ast.CHILD_FIELDS[type(expr)]
    if not fields:
        return expr
    changes: dict[str, Any] = {}
    for f in fields:
        v = getattr(expr, f)
        new = (
            tuple(resolve_defaults(a, gen, compiled) for a in v)
            if isinstance(v, tuple)
            else resolve_defaults(v, gen, compiled)
        )
        changes[f] = new
    out = dataclasses.replace(expr, **changes)
    if isinstance(out, ast.Binary) and out.op in ("+", "-"):  # `a + 0 FLOP` (a default of zero) is a
        if isinstance(out.right, ast.Number) and out.right.value == 0:
            return out.left
        if out.op == "+" and isinstance(out.left, ast.Number) and out.left.value == 0:
            return out.right
    return out


def optional_unknown(name: str, metric: str, gen: str, near: str | None, span) -> Diagnostic:
    """The warning for a name read only as x of ``default(x, d)`` that neither this generation nor any
    other known to the compiler has (a typo would otherwise silently read d)."""
    return Diagnostic(
        "warning",
        "unknown-name",
        f"`{name}` in metric `{metric}` is not a name of `{gen}` or of another generation known here: "
        "`default` uses its value",
        span,
        hint=near or "check the spelling; compile with the other generations to silence this for their names",
    )


def optional_names(expr: ast.Expr) -> set[str]:
    """Names ``expr`` reads only inside the first argument of a ``default`` call: one this generation
    cannot provide (defined on another generation, removed, broken) does not make the metric
    unavailable (``metrics.passes.resolve_names``)."""
    return _only_defaulted(
        expr,
        lambda n: n.name if isinstance(n, ast.Name) else None,
        lambda n: isinstance(n, ast.Call) and n.func == "default" and len(n.args) == 2,
        ast.children,
    )


def _only_defaulted(root, name_of: Callable, is_default: Callable, children: Callable) -> set[str]:
    """The names (``name_of`` a leaf, None for other nodes) under ``root`` that stand only inside the first
    argument of a ``default`` call (``is_default``), for the syntax tree and the IR alike (iterative)."""
    inside: set[str] = set()
    outside: set[str] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        n, opt = stack.pop()
        name = name_of(n)
        if name is not None:
            (inside if opt else outside).add(name)
        elif is_default(n):
            stack += [(n.args[0], True), (n.args[1], opt)]
        else:
            stack += [(c, opt) for c in children(n)]
    return inside - outside


def _text(e: ast.Expr) -> str:
    return e.name if isinstance(e, ast.Name) else "x"


def optional_signals(node: ir.Node) -> set[str]:
    """The signals and fields read only as the first argument of a ``default`` (an absent one is
    replaced by the default rather than making the metric unavailable)."""
    return _only_defaulted(
        node,
        lambda n: n.signal if isinstance(n, ir.Input) else None,
        lambda n: isinstance(n, ir.Op) and n.op == "default",
        ir.children,
    )


def fill_defaults(graph: "MetricGraph", absent: set[str]) -> "MetricGraph":
    """The catalog as a capture lacking ``absent`` (signal and field names) evaluates it: every
    ``default(x, d)`` whose x reads an absent signal (or a metric that itself cannot be computed
    without one) becomes d, and the dependency edges from what no longer is read are dropped, so
    ``dump_unavailable`` keeps the metric. ``graph`` itself is unchanged; when nothing is replaced it
    is returned as is. The new catalog's content hash names the replaced inputs (generated evaluators
    are cached by it)."""
    if not absent or not any(_has_default(m.ir) for m in graph.all_metrics.values()):
        return graph
    gone: set[str] = set()  # metrics that read an absent signal outside any default
    replaced: set[str] = set()
    new: dict[str, dict] = {"metrics": {}, "record_metrics": {}}
    dag = None
    for kind in ("metrics", "record_metrics"):
        for name, m in getattr(graph, kind).items():
            node = _rewrite(m.ir, absent, gone, replaced) if _has_default(m.ir) else m.ir
            if node is not m.ir:
                dag = graph.graph.copy() if dag is None else dag
                sigs = ir.signals_of(node)
                refs = {n.metric for n in ir.walk(node) if isinstance(n, ir.MetricRef)}
                read = set(m.signal_deps) | set(m.metric_deps) | absent  # a field is in no signal_deps
                for dep in [u for u in dag.predecessors(name) if u in read]:
                    if dep not in sigs and dep not in refs:
                        dag.remove_edge(dep, name)
                m = dataclasses.replace(
                    m,
                    ir=node,
                    signal_deps=tuple(s for s in m.signal_deps if s in sigs),
                    metric_deps=tuple(r for r in m.metric_deps if r in refs),
                )
            if _reads(m.ir, absent, gone):
                gone.add(name)
            new[kind][name] = m
    if dag is None:
        return graph
    h = hashlib.sha256(f"{graph.content_hash}|defaults:{','.join(sorted(replaced))}".encode()).hexdigest()[:16]
    return dataclasses.replace(
        graph, metrics=new["metrics"], record_metrics=new["record_metrics"], graph=dag, content_hash=h
    )


def _has_default(node: ir.Node) -> bool:
    return any(isinstance(n, ir.Op) and n.op == "default" for n in ir.walk(node))


def _reads(node: ir.Node, absent: set[str], gone: set[str]) -> bool:
    """Whether ``node`` reads an absent signal or a metric that cannot be computed."""
    return any(
        (isinstance(n, ir.Input) and n.signal in absent) or (isinstance(n, ir.MetricRef) and n.metric in gone)
        for n in ir.walk(node)
    )


def _rewrite(node: ir.Node, absent: set[str], gone: set[str], replaced: set[str]) -> ir.Node:
    """``node`` with each ``default(x, d)`` whose x reads something absent replaced by (the rewritten) d;
    the same object when nothing changed."""
    if isinstance(node, ir.Op) and node.op == "default" and _reads(node.args[0], absent, gone):
        x = node.args[0]
        replaced |= {n.signal for n in ir.walk(x) if isinstance(n, ir.Input) and n.signal in absent}
        replaced |= {n.metric for n in ir.walk(x) if isinstance(n, ir.MetricRef) and n.metric in gone}
        return _rewrite(node.args[1], absent, gone, replaced)
    if isinstance(node, ir.Op):
        args = tuple(_rewrite(a, absent, gone, replaced) for a in node.args)
        if all(a is b for a, b in zip(args, node.args)):
            return node
        return ir.Op(node.op, args, node.axes, node.degree)
    if isinstance(node, ir.Rollup):
        arg = _rewrite(node.arg, absent, gone, replaced)
        if arg is node.arg:
            return node
        if node.func in ("sum", "avg", "min", "max") and not any(
            isinstance(n, (ir.Input, ir.Interval, ir.MetricRef)) for n in ir.walk(arg)
        ):  # the default over every instance: as the compiler rolls up a per-instance constant
            count = 1
            for _, size in node.arg.axes:
                count *= size
            n = ir.Const(float(count) if node.func == "sum" else 1.0, origin="count")
            return ir.Op("mul", (arg, n), (), node.degree)
        return ir.Rollup(node.func, arg, node.axes, node.degree)
    return node
