"""Emit a standalone Python/NumPy evaluator module from a ``MetricGraph``.

The module is built as Python ``ast`` nodes and printed with ``ast.unparse``: metric and signal names
from catalogs only ever appear as string constants, and generated identifiers are indices (``m12``,
``s3``, ``t7``), so a catalog cannot inject code. What the generator does:
- metrics in topological order; every metric is a local variable that later metrics reuse;
- common subexpressions (the same typed IR node in several places) computed once into ``t<i>``;
- unit conversions are constants: chains of constant factors are folded at generation time;
- per-chip spec constants are multiplied by ``chips`` (1 per chip, N at server level).
The module's only import is NumPy; its helpers are copied from ``codegen.runtime``.
"""
from __future__ import annotations

import ast
from collections import Counter
from importlib import resources

from metrics import ir
from metrics.compiler import MetricGraph

_NP_FN = {"sum": "sum", "avg": "mean", "min": "min", "max": "max"}
_CMP_FN = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}
_BINOP = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult, "pow": ast.Pow}


def _name(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Load())


def _call(fn: ast.expr | str, *args: ast.expr) -> ast.Call:
    f = _name(fn) if isinstance(fn, str) else fn
    return ast.Call(func=f, args=list(args), keywords=[])


def _np(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name("np"), attr=attr, ctx=ast.Load())


def fold(n: ir.Node) -> ir.Node:
    """Constant folding: Ops whose arguments are all chip-independent constants become one Const, and
    ``(x * c1) * c2`` becomes ``x * (c1 * c2)``."""
    if isinstance(n, ir.Rollup):
        return ir.Rollup(n.func, fold(n.arg), n.axes, n.degree)
    if not isinstance(n, ir.Op):
        return n
    args = tuple(fold(a) for a in n.args)
    if all(isinstance(a, ir.Const) and a.chip_power == 0 for a in args) and n.op in ("add", "sub", "mul", "div", "neg", "pow"):
        v = [a.value for a in args]
        if n.op == "div" and v[1] == 0:
            return ir.Op(n.op, args, n.axes, n.degree)
        r = {"add": lambda: v[0] + v[1], "sub": lambda: v[0] - v[1], "mul": lambda: v[0] * v[1],
             "div": lambda: v[0] / v[1], "neg": lambda: -v[0], "pow": lambda: v[0] ** v[1]}[n.op]()
        return ir.Const(float(r), 0, n.axes, n.degree)
    if n.op == "mul" and isinstance(args[1], ir.Const) and args[1].chip_power == 0:
        inner = args[0]
        if args[1].value == 1.0:
            return inner
        if isinstance(inner, ir.Op) and inner.op == "mul" and isinstance(inner.args[1], ir.Const) and inner.args[1].chip_power == 0:
            return ir.Op("mul", (inner.args[0], ir.Const(inner.args[1].value * args[1].value)), n.axes, n.degree)
    return ir.Op(n.op, args, n.axes, n.degree)


class _Emitter:
    def __init__(self, graph: MetricGraph):
        self.graph = graph
        self.stmts: list[ast.stmt] = []
        self.signal_var: dict[str, str] = {}
        self.metric_var: dict[str, str] = {}
        self.cse: dict[ir.Node, str] = {}
        self.shared: set[ir.Node] = set()

    def count_shared(self, roots: list[ir.Node]) -> None:
        counts: Counter = Counter()

        def visit(n):
            if isinstance(n, (ir.Op, ir.Rollup)):
                counts[n] += 1
                if counts[n] > 1:
                    return  # children already counted through the first occurrence
            for c in ir.children(n):
                visit(c)

        for r in roots:
            visit(r)
        self.shared = {n for n, c in counts.items() if c > 1}

    def assign(self, var: str, value: ast.expr) -> None:
        self.stmts.append(ast.Assign(targets=[ast.Name(id=var, ctx=ast.Store())], value=value))

    def expr(self, n: ir.Node) -> ast.expr:
        if n in self.cse:
            return _name(self.cse[n])
        e = self._expr(n)
        if n in self.shared:
            var = f"t{len(self.cse)}"
            self.cse[n] = var
            self.assign(var, e)
            return _name(var)
        return e

    def _arg(self, a: ir.Node, parent: ir.Node) -> ast.expr:
        e = self.expr(a)
        if parent.axes and not a.axes and not isinstance(a, ir.Const):
            return _call("_lift", e, ast.Constant(len(parent.axes)))
        return e

    def _expr(self, n: ir.Node) -> ast.expr:
        if isinstance(n, ir.Const):
            c = ast.Constant(float(n.value))
            if n.chip_power == 0:
                return c
            scale = _name("chips") if n.chip_power == 1 else ast.BinOp(_name("chips"), ast.Pow(), ast.Constant(n.chip_power))
            return ast.BinOp(c, ast.Mult(), scale)
        if isinstance(n, ir.Input):
            if n.signal not in self.signal_var:
                var = f"s{len(self.signal_var)}"
                self.signal_var[n.signal] = var
                self.stmts.insert(0, ast.Assign(targets=[ast.Name(id=var, ctx=ast.Store())],
                                                value=_call(_np("asarray"), ast.Subscript(value=_name("inputs"), slice=ast.Constant(n.signal), ctx=ast.Load()),
                                                            ast.Constant(None))))
                self.stmts[0].value.args[1] = _np("float64")
            return _name(self.signal_var[n.signal])
        if isinstance(n, ir.Interval):
            return _name("interval")
        if isinstance(n, ir.MetricRef):
            return _name(self.metric_var[n.metric])
        if isinstance(n, ir.Rollup):
            return _call("_rollup", _np(_NP_FN[n.func]), self.expr(n.arg), ast.Constant(len(n.arg.axes)))
        args = [self._arg(a, n) for a in n.args]
        op = n.op
        if op in _BINOP:
            return ast.BinOp(args[0], _BINOP[op](), args[1])
        if op == "div":
            return _call("_div", *args)
        if op == "neg":
            return ast.UnaryOp(ast.USub(), args[0])
        if op == "abs":
            return _call(_np("abs"), args[0])
        if op == "min":
            return _call(_np("minimum"), *args)
        if op == "max":
            return _call(_np("maximum"), *args)
        if op == "clamp":
            return _call(_np("minimum"), _call(_np("maximum"), args[0], args[1]), args[2])
        if op in _CMP_FN:
            return _call("_cmp", _np(_CMP_FN[op]), *args)
        if op in ("and", "or", "not", "where"):
            return _call(f"_{op}", *args)
        raise ValueError(f"no emitter for IR op {op!r}")  # pragma: no cover


def generate(graph: MetricGraph) -> str:
    """Source text of the evaluator module for ``graph``.

    The module exposes ``METRICS`` (name → unit, axes, description), ``SIGNALS`` and
    ``evaluate(inputs, interval, chips=1.0) -> dict[str, ndarray]``.
    """
    em = _Emitter(graph)
    roots = {name: fold(m.ir) for name, m in graph.metrics.items()}
    em.count_shared(list(roots.values()))
    body_metrics: list[ast.stmt] = []
    for i, (name, m) in enumerate(graph.metrics.items()):
        start = len(em.stmts)
        value = em.expr(roots[name])
        var = f"m{i}"
        em.metric_var[name] = var
        shape = ast.BinOp(_name("base"), ast.Add(), ast.Tuple(elts=[ast.Constant(s) for _, s in m.axes], ctx=ast.Load()))
        em.assign(var, _call("_finish", value, shape))
        em.stmts.append(ast.Assign(targets=[ast.Subscript(value=_name("out"), slice=ast.Constant(name), ctx=ast.Store())],
                                   value=_name(var)))
        del start
    body_metrics = em.stmts

    header = (f"perfonto generated evaluator.\n\nGeneration: {graph.generation.name} (ontology hash {graph.generation.content_hash}); "
              f"catalog hash {graph.content_hash}; {len(graph.metrics)} metrics.\nDo not edit: regenerate with perfonto.\n")
    runtime_src = resources.files("codegen").joinpath("runtime.py").read_text(encoding="utf-8")
    runtime = ast.parse(runtime_src)
    helpers = [s for s in runtime.body if isinstance(s, ast.FunctionDef)]

    metrics_table = ast.Dict(keys=[], values=[])
    for name, m in graph.metrics.items():
        metrics_table.keys.append(ast.Constant(name))
        metrics_table.values.append(ast.Dict(
            keys=[ast.Constant("unit"), ast.Constant("axes"), ast.Constant("description")],
            values=[ast.Constant(m.unit_text), ast.Tuple(elts=[ast.Tuple(elts=[ast.Constant(a), ast.Constant(s)], ctx=ast.Load()) for a, s in m.axes], ctx=ast.Load()),
                    ast.Constant(m.description)]))
    signals = ast.Tuple(elts=[ast.Constant(s) for s in graph.generation.signals], ctx=ast.Load())

    doc = ("Evaluate every metric over prepared windows.\n\n"
           "inputs: {signal name: float64 array (W, C, *instance sizes)} — counter increases (scaled) or gauge means.\n"
           "interval: float64 array (W, C), window durations in seconds.\n"
           "chips: factor applied to per-chip spec constants (1 per chip; N for a server-level window).\n"
           "Returns {metric name: float64 array (W, C, *instance sizes)} in each metric's declared unit; NaN is null.\n")
    fn_body: list[ast.stmt] = [
        ast.Expr(ast.Constant(doc)),
        ast.Assign(targets=[ast.Name(id="interval", ctx=ast.Store())], value=_call(_np("asarray"), _name("interval"), _np("float64"))),
        ast.Assign(targets=[ast.Name(id="base", ctx=ast.Store())], value=ast.Attribute(value=_name("interval"), attr="shape", ctx=ast.Load())),
        ast.Assign(targets=[ast.Name(id="out", ctx=ast.Store())], value=ast.Dict(keys=[], values=[])),
        ast.With(items=[ast.withitem(context_expr=ast.Call(func=_np("errstate"), args=[], keywords=[ast.keyword(arg="all", value=ast.Constant("ignore"))]))],
                 body=body_metrics or [ast.Pass()]),
        ast.Return(_name("out")),
    ]
    fn = ast.FunctionDef(name="evaluate", args=ast.arguments(
        posonlyargs=[], args=[ast.arg("inputs"), ast.arg("interval"), ast.arg("chips")], kwonlyargs=[], kw_defaults=[],
        defaults=[ast.Constant(1.0)]), body=fn_body, decorator_list=[], returns=None, type_params=[])
    module = ast.Module(body=[
        ast.Expr(ast.Constant(header)),
        ast.Import(names=[ast.alias(name="numpy", asname="np")]),
        ast.Assign(targets=[ast.Name(id="GENERATION", ctx=ast.Store())], value=ast.Constant(graph.generation.name)),
        ast.Assign(targets=[ast.Name(id="CATALOG_HASH", ctx=ast.Store())], value=ast.Constant(graph.content_hash)),
        ast.Assign(targets=[ast.Name(id="SIGNALS", ctx=ast.Store())], value=signals),
        ast.Assign(targets=[ast.Name(id="METRICS", ctx=ast.Store())], value=metrics_table),
        *helpers,
        fn,
    ], type_ignores=[])
    ast.fix_missing_locations(module)
    return ast.unparse(module) + "\n"


def load(source: str, name: str = "perfonto_evaluator"):
    """Execute generated source as a fresh module object (for tests and the CLI)."""
    import types

    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)  # noqa: S102 - our own generated code
    return mod
