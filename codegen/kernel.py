"""The fused kernel of the generated evaluator: window rules and formulas in one pass per row.

``kernel_source(graph)`` emits a function ``_kernel_body`` (plain Python in the subset numba compiles)
that, for every window-chip row of a chunk, reads the raw registers of the window's two samples,
applies the window rules (``codegen/runtime_kernel.py``: the rules of ``metrics/windows.py``, as the
NumPy path ``codegen/runtime_stream.py`` applies them) and evaluates the metrics asked for, in
topological order, as scalar code — each metric's value written once into its output buffer and its
bit set in an Arrow validity bitmap (no second pass over the values to find the nulls).

The scalar code keeps the null rules of the reference interpreter (``metrics/interpreter.py``): NaN is
null; division by zero is null; a comparison, ``and``/``or``/``not`` or a condition with a null operand
is null; min/max/clamp propagate null; a metric's inf becomes null before any other metric reads it.
Identifiers are generated (``t3``, ``i2``) and catalog names never appear in the code (the metrics are
numbered), so a catalog cannot inject code. The kernel is compiled with numba when it is installed;
without it the generated evaluator runs its NumPy path (``kernel_differential`` tests hold the two
equal).
"""

from __future__ import annotations

import ast
import math

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph

from .ir_passes import fold
from .plan import Layout

_CMP = {"lt": ast.Lt, "le": ast.LtE, "gt": ast.Gt, "ge": ast.GtE, "eq": ast.Eq, "ne": ast.NotEq}
_BIN = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult}


def _n(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _num(v: float) -> ast.expr:
    v = float(v)
    if math.isnan(v):
        return _n("_NAN")
    if math.isinf(v):
        return _n("_INF") if v > 0 else ast.UnaryOp(ast.USub(), _n("_INF"))
    return ast.Constant(v)


def _call(fn: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_n(fn), args=list(args), keywords=[])


def _sub(arr: str, idx: ast.expr) -> ast.Subscript:
    return ast.Subscript(value=_n(arr), slice=idx, ctx=ast.Load())


def _add(a: ast.expr, b) -> ast.expr:
    if isinstance(b, int):
        return a if b == 0 else ast.BinOp(a, ast.Add(), ast.Constant(b))
    return ast.BinOp(a, ast.Add(), b)


class ScalarEmitter:
    """Typed IR → scalar Python for one row. ``expr(node, idx)``: the value at flat instance index
    ``idx`` (an ast expression, or None for a node without instance axes); rollups become loops
    emitted before the statement that uses them, shared between the metrics of the row."""

    def __init__(self, lay: Layout, metric_off: dict[str, int]):
        self.src = {name: lay.input_src[k] for k, name in enumerate(lay.inputs)}
        self.metric_off = metric_off
        self.stmts: list[ast.stmt] = []
        self.cse: dict[ir.Node, str] = {}
        self.depth = 0  # rollup loops being emitted around the current statement
        self.k = 0

    def fresh(self, p: str) -> str:
        self.k += 1
        return f"{p}{self.k}"

    def assign(self, var: str, e: ast.expr, into: list | None = None) -> None:
        (self.stmts if into is None else into).append(ast.Assign(targets=[ast.Name(id=var, ctx=ast.Store())], value=e))

    def expr(self, n: ir.Node, idx: ast.expr | None) -> ast.expr:
        i = idx if n.axes else None
        if isinstance(n, ir.Const):
            c = _num(n.value)
            if n.chip_power:
                c = ast.BinOp(
                    c,
                    ast.Mult(),
                    _n("chips") if n.chip_power == 1 else ast.BinOp(_n("chips"), ast.Pow(), ast.Constant(n.chip_power)),
                )
            return c
        if isinstance(n, ir.Interval):
            return _sub("iv", _n("q"))
        if isinstance(n, ir.Input):
            src, a, _, _ = self.src[n.signal]
            col = _add(i, a) if i is not None else ast.Constant(a)
            return _sub("f" if src else "v", ast.Tuple(elts=[col, _n("q")], ctx=ast.Load()))
        if isinstance(n, ir.MetricRef):
            off = self.metric_off[n.metric]
            col = _add(i, off) if i is not None else ast.Constant(off)
            return _sub("mv", ast.Tuple(elts=[col, _n("q")], ctx=ast.Load()))
        if isinstance(n, ir.Rollup):
            return _n(self.rollup(n))
        return self.op(n, i)

    def rollup(self, n: ir.Rollup) -> str:
        if n in self.cse:
            return self.cse[n]
        size = 1
        for _, s in n.arg.axes:
            size *= s
        acc, j = self.fresh("t"), self.fresh("i")
        body: list[ast.stmt] = []
        saved, self.stmts = self.stmts, body
        self.depth += 1
        x = self.expr(n.arg, _n(j))
        self.depth -= 1
        self.stmts = saved
        xv = self.fresh("t")
        body.append(ast.Assign(targets=[ast.Name(id=xv, ctx=ast.Store())], value=x))
        if n.func == "sum":
            upd = ast.BinOp(_n(acc), ast.Add(), _n(xv))
            init = ast.Constant(0.0)
        else:
            upd = _call("_kmax" if n.func == "max" else "_kmin", _n(acc), _n(xv))
            init = None
        if init is None:  # max/min: start from the first instance
            first: list[ast.stmt] = []
            saved, self.stmts = self.stmts, first
            x0 = self.expr(n.arg, ast.Constant(0))
            self.stmts = saved
            self.stmts += first
            self.assign(acc, x0)
            rng = _call("range", ast.Constant(1), ast.Constant(size))
        else:
            self.assign(acc, init)
            rng = _call("range", ast.Constant(size))
        body.append(ast.Assign(targets=[ast.Name(id=acc, ctx=ast.Store())], value=upd))
        self.stmts.append(ast.For(target=ast.Name(id=j, ctx=ast.Store()), iter=rng, body=body, orelse=[]))
        if self.depth == 0:  # defined before every later statement of the metric: shared with them
            self.cse[n] = acc
        return acc

    def op(self, n: ir.Op, i) -> ast.expr:
        args = [self.expr(a, i) for a in n.args]
        o = n.op
        if o in _BIN:
            return ast.BinOp(args[0], _BIN[o](), args[1])
        if o == "div":
            return _call("_kdiv", *args)
        if o in _CMP:
            return _call("_kcmp_" + o, *args)
        fn = {
            "pow": "_kpow",
            "neg": None,
            "abs": "abs",
            "min": "_kmin",
            "max": "_kmax",
            "clamp": "_kclamp",
            "and": "_kand",
            "or": "_kor",
            "not": "_knot",
            "where": "_kwhere",
            "default": "_kdefault",
        }.get(o, "?")
        if fn is None:
            return ast.UnaryOp(ast.USub(), args[0])
        if fn == "?":
            raise ValueError(f"no scalar emitter for IR op {o!r}")  # pragma: no cover - the compiler emits only these
        return _call(fn, *args)


def metric_table(graph: MetricGraph) -> list[tuple[str, int, int, tuple[int, ...]]]:
    """(name, offset into the row's metric values, instances, indices of the metrics it reads), in
    topological order."""
    out, off, pos = [], 0, {}
    for k, (name, m) in enumerate(graph.metrics.items()):
        n = 1
        for _, s in m.axes:
            n *= s
        deps = tuple(sorted(pos[d] for d in m.metric_deps if d in pos))
        out.append((name, off, n, deps))
        pos[name] = k
        off += n
    return out


def kernel_source(graph: MetricGraph, lay: Layout) -> str:
    """Source of ``_kernel_body(v, f, iv, n, chips, mv, want)``: the metrics of a block of ``n``
    window-chip rows — window values ``v[:, q]``, fields ``f[:, q]``, intervals ``iv[q]`` — into
    ``mv`` (metric instances, rows): metric k's instance i of row q at ``mv[off_k + i, q]`` (inf
    finished to null), for the metrics with ``want[k]`` (the ones asked for and the metrics they
    read). One loop over the rows per metric, so each reads and writes contiguous rows."""
    table = metric_table(graph)
    em = ScalarEmitter(lay, {name: off for name, off, _, _ in table})
    body: list[ast.stmt] = []
    for k, (name, off, n, _) in enumerate(table):
        m = graph.metrics[name]
        root = fold(m.ir)
        em.stmts = []
        em.cse = {}  # rollups are shared within a metric
        idx = _n("i0") if m.axes else None
        value = em.expr(root, idx)
        x = ast.Name(id="x", ctx=ast.Store())
        slot = ast.Tuple(elts=[ast.Constant(off) if idx is None else _add(idx, off), _n("q")], ctx=ast.Store())
        inner: list[ast.stmt] = [
            ast.Assign(targets=[x], value=value),
            ast.Assign(
                targets=[ast.Subscript(value=_n("mv"), slice=slot, ctx=ast.Store())], value=_call("_kfin", _n("x"))
            ),
        ]
        if idx is not None:
            inner = [
                ast.For(
                    target=ast.Name(id="i0", ctx=ast.Store()),
                    iter=_call("range", ast.Constant(n)),
                    body=inner,
                    orelse=[],
                )
            ]
        rows = ast.For(
            target=ast.Name(id="q", ctx=ast.Store()), iter=_call("range", _n("n")), body=em.stmts + inner, orelse=[]
        )
        body.append(ast.If(test=_sub("want", ast.Constant(k)), body=[rows], orelse=[]))
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(a) for a in ("v", "f", "iv", "n", "chips", "mv", "want")],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    doc = ast.Expr(ast.Constant("The metrics of one block of window-chip rows (generated; see codegen/kernel.py)."))
    fn = ast.FunctionDef(
        name="_kernel_body",
        args=args,
        body=[doc] + (body or [ast.Pass()]),
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    mod = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(mod)
    return ast.unparse(mod)
