"""Emit a standalone Python/NumPy evaluator module from a ``MetricGraph``.

The module is built as Python ``ast`` nodes and printed with ``ast.unparse``: metric and signal names
from catalogs only ever appear as string constants, and generated identifiers are indices (``s3``,
``t7``, ``m12``), so a catalog cannot inject code. What the generator does:

- metrics in topological order, fused into one function ``_metrics`` that writes every metric into an
  output block (a second, ``_metrics_one``, for a single window: rollups by ``reduceat`` over all
  signals at once instead of element-wise unrolled sums); a metric read by later metrics where inf and
  null differ is finished (inf → null) once and reused;
- common subexpressions (the same typed IR node anywhere in the catalog) computed once into ``t<i>``,
  and each distinct denominator made null-safe once (``z<i> = _nz(b)``, then ``a / z<i>``);
- unit conversions folded into constants (``codegen.ir_passes.fold``): constant sub-trees become one
  number and chains of constant factors one factor;
- a division whose result cannot turn an inf into a finite metric value needs no zero test (x / 0
  is ±inf or NaN and the metric's finishing step makes it null: ``nonfinite_sensitive``);
- per-chip spec constants multiplied by ``chips`` (1 per chip, N at server level);
- no Python loop over samples: ``evaluate`` and ``Stream.push_block`` run whole chunks of windows
  through NumPy, chunk by chunk, so temporaries stay bounded (``_CHUNK_ROWS`` window-chip rows).

The module's only import is NumPy. Its drivers (``evaluate``, ``Stream``, the window rules) are copied
from ``codegen/runtime.py`` and ``codegen/runtime_stream.py``; the rule tables come from
``codegen.plan.layout``. Public contract: ``evaluate(inputs, interval, chips=1.0) -> {metric: ndarray}``,
``METRICS``, ``SIGNALS``, ``INPUTS``, ``Stream``.
"""

from __future__ import annotations

import ast
import functools
import gc
from collections import Counter
from importlib import resources

from perfonto.metrics import ir
from perfonto.metrics.graph import MetricGraph

from .ir_passes import fold, is_array, nonfinite_sensitive
from .kernel import kernel_source, metric_table
from .plan import layout

_CMP_FN = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}
_BINOP = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult}
_REDUCE = {"sum": "add", "avg": "add", "min": "minimum", "max": "maximum"}


def _name(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Load())


def _store(id_: str) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store())


def _call(fn: ast.expr | str, *args: ast.expr, **kw: ast.expr) -> ast.Call:
    f = _name(fn) if isinstance(fn, str) else fn
    return ast.Call(func=f, args=list(args), keywords=[ast.keyword(arg=k, value=v) for k, v in kw.items()])


def _np(*attrs: str) -> ast.expr:
    e: ast.expr = _name("np")
    for a in attrs:
        e = ast.Attribute(value=e, attr=a, ctx=ast.Load())
    return e


def literal(value) -> ast.expr:
    """A Python value (numbers, strings, None, tuples, lists, dicts) as an ast expression; strings are
    ``ast.Constant`` nodes, so any text is escaped by ``ast.unparse``."""
    if isinstance(value, tuple):
        return ast.Tuple(elts=[literal(v) for v in value], ctx=ast.Load())
    if isinstance(value, list):
        return ast.List(elts=[literal(v) for v in value], ctx=ast.Load())
    if isinstance(value, dict):
        return ast.Dict(keys=[literal(k) for k in value], values=[literal(v) for v in value.values()])
    if isinstance(value, (bool, int, float, str)) or value is None:
        return ast.Constant(value)
    raise TypeError(f"no literal for {type(value).__name__}")  # pragma: no cover


def _array(values: list, dtype: str) -> ast.expr:
    return _call(_np("array"), literal(list(values)), dtype=_np(dtype))


def _sentinels(entries) -> ast.expr:
    return ast.Tuple(
        elts=[
            ast.Tuple(elts=[ast.Constant(a), ast.Constant(b), _array(list(v), "uint64")], ctx=ast.Load())
            for a, b, v in entries
        ],
        ctx=ast.Load(),
    )


def unrolled_reduce(x: ast.expr, n: int, func: str) -> ast.expr:
    """``np.add.reduce(x, axis=-1)`` (or ``maximum``/``minimum``) over a last axis of size ``n`` as
    element-wise operations on ``x[..., j]``, in the order NumPy's pairwise summation adds them (for
    ``n`` ≤ 12: sequentially below 8; eight partial sums then sequentially above), so the result is the
    same to the last bit; maximum and minimum are exact in any order and keep NaN."""

    def item(j: int) -> ast.expr:
        idx = ast.Tuple(elts=[ast.Constant(Ellipsis), ast.Constant(j)], ctx=ast.Load())
        return ast.Subscript(value=x, slice=idx, ctx=ast.Load())

    if func != "sum":
        e = item(0)
        for j in range(1, n):
            e = _call(_np("maximum" if func == "max" else "minimum"), e, item(j))
        return e

    def add(a: ast.expr, b: ast.expr) -> ast.expr:
        return ast.BinOp(a, ast.Add(), b)

    if n < 8:
        e = item(0)
        for j in range(1, n):
            e = add(e, item(j))
        return e
    r = [item(j) for j in range(8)]
    e = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))
    for j in range(8, n):
        e = add(e, item(j))
    return e


class FormulaEmitter:
    """Typed IR → Python expressions, one handler per node type (and per ``Op`` name), statements
    collected in ``self.stmts``. Shared nodes are assigned once to ``t<i>``."""

    def __init__(self, inputs: dict[str, str], unroll: bool = True, pre: dict | None = None):
        self.unroll = unroll  # unrolled rollups: faster on chunks of windows, slower on one window
        self.pre = pre or {}  # (func, signal) -> index into ``pre``, rollups the caller computed in one go
        self.used: set[str] = set()  # inputs the emitted code reads
        self.stmts: list[ast.stmt] = []
        self.inputs = inputs  # signal/field -> variable
        self.metric_var: dict[str, str] = {}
        self.cse: dict[object, str] = {}
        self.shared: set[ir.Node] = set()
        self.sensitive: set[ir.Node] = set()
        self.n_vars = 0
        self.handlers = ir.handlers(self)
        self.ops = {
            "div": self.div,
            "pow": self.pow,
            "neg": self.neg,
            "abs": self.np1("abs"),
            "min": self.np2("minimum"),
            "max": self.np2("maximum"),
            "clamp": self.clamp,
            "and": self.helper("_and"),
            "or": self.helper("_or"),
            "not": self.helper("_not"),
            "where": self.helper("_where"),
            "default": self.helper("_default"),
        }

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
        self.sensitive = nonfinite_sensitive(roots)

    def fresh(self, prefix: str) -> str:
        """A new variable name (names are never reused, even when an operand emits variables first)."""
        self.n_vars += 1
        return f"{prefix}{self.n_vars}"

    def assign(self, var: str, value: ast.expr) -> None:
        self.stmts.append(ast.Assign(targets=[_store(var)], value=value))

    def expr(self, n: ir.Node) -> ast.expr:
        if n in self.cse:
            return _name(self.cse[n])
        e = self.handlers[type(n)](n)
        if n in self.shared:
            var = self.fresh("t")
            self.cse[n] = var
            self.assign(var, e)
            return _name(var)
        return e

    def arg(self, a: ir.Node, parent: ir.Node) -> ast.expr:
        """An operand, given trailing unit axes when it has no instance axes but its parent has."""
        e = self.expr(a)
        if parent.axes and not a.axes and is_array(a):
            idx = ast.Tuple(elts=[ast.Constant(Ellipsis)] + [ast.Constant(None)] * len(parent.axes), ctx=ast.Load())
            return ast.Subscript(value=e, slice=idx, ctx=ast.Load())
        return e

    # -- leaves ------------------------------------------------------------------------------
    def const(self, n: ir.Const) -> ast.expr:
        c = ast.Constant(float(n.value))
        if n.chip_power == 0:
            return c
        scale = (
            _name("chips") if n.chip_power == 1 else ast.BinOp(_name("chips"), ast.Pow(), ast.Constant(n.chip_power))
        )
        return ast.BinOp(c, ast.Mult(), scale)

    def input(self, n: ir.Input) -> ast.expr:
        self.used.add(n.signal)
        return _name(self.inputs[n.signal])

    def interval(self, n: ir.Interval) -> ast.expr:
        return _name("interval")

    def metric_ref(self, n: ir.MetricRef) -> ast.expr:
        return _name(self.metric_var[n.metric])

    def rollup(self, n: ir.Rollup) -> ast.expr:
        if isinstance(n.arg, ir.Input) and (n.func, n.arg.signal) in self.pre:
            return ast.Subscript(
                value=_name("pre"), slice=ast.Constant(self.pre[(n.func, n.arg.signal)]), ctx=ast.Load()
            )
        k = len(n.arg.axes)
        size = n.arg.axes[0][1] if k == 1 else 0
        x = self.expr(n.arg)
        if self.unroll and 2 <= size <= (
            12 if n.func == "sum" else 32
        ):  # NumPy's own order, without a reduction's per-row cost
            if not isinstance(x, ast.Name):
                var = self.fresh("r")
                self.assign(var, x)
                x = _name(var)
            return unrolled_reduce(x, size, n.func)
        axis = ast.Constant(-1) if k == 1 else literal(tuple(range(-k, 0)))
        return _call(_np(_REDUCE[n.func], "reduce"), x, axis=axis)

    # -- operations ----------------------------------------------------------------------------
    def op(self, n: ir.Op) -> ast.expr:
        if n.op in _BINOP:
            a, b = (self.arg(x, n) for x in n.args)
            return ast.BinOp(a, _BINOP[n.op](), b)
        if n.op in _CMP_FN:
            return _call("_cmp", _np(_CMP_FN[n.op]), *(self.arg(x, n) for x in n.args))
        if n.op not in self.ops:
            raise ValueError(f"no emitter for IR op {n.op!r}")  # pragma: no cover - the compiler emits only these
        return self.ops[n.op](n)

    def div(self, n: ir.Op) -> ast.expr:
        num, den = n.args
        a = self.arg(num, n)
        if isinstance(den, ir.Const) and den.chip_power == 0 and den.value != 0:
            return ast.BinOp(a, ast.Div(), ast.Constant(float(den.value)))
        if n not in self.sensitive and is_array(den):  # x / 0 is ±inf or NaN, finished into null
            return ast.BinOp(a, ast.Div(), self.arg(den, n))
        key = ("nz", den, n.axes)
        if key not in self.cse:
            value = _call("_nz", self.arg(den, n))
            var = self.fresh("z")
            self.assign(var, value)
            self.cse[key] = var
        return ast.BinOp(a, ast.Div(), _name(self.cse[key]))

    def pow(self, n: ir.Op) -> ast.expr:
        return _call(_np("power"), *(self.arg(x, n) for x in n.args))

    def neg(self, n: ir.Op) -> ast.expr:
        return ast.UnaryOp(ast.USub(), self.arg(n.args[0], n))

    def clamp(self, n: ir.Op) -> ast.expr:
        x, lo, hi = (self.arg(a, n) for a in n.args)
        return _call(_np("minimum"), _call(_np("maximum"), x, lo), hi)

    def np1(self, fn: str):
        return lambda n: _call(_np(fn), self.arg(n.args[0], n))

    def np2(self, fn: str):
        return lambda n: _call(_np(fn), *(self.arg(a, n) for a in n.args))

    def helper(self, fn: str):
        return lambda n: _call(fn, *(self.arg(a, n) for a in n.args))


_BIN_UFUNC = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide"}
_OUT_UFUNCS = {"add", "subtract", "multiply", "divide", "negative", "abs", "minimum", "maximum", "power"}


def _with_out(e: ast.expr, target: ast.expr) -> ast.stmt:
    """``target[...] = e`` written as ``ufunc(..., out=target)`` when ``e`` is one NumPy operation
    (saves a temporary and a copy per metric)."""
    out = ast.keyword(arg="out", value=target)
    if isinstance(e, ast.BinOp) and type(e.op) in _BIN_UFUNC:
        return ast.Expr(ast.Call(func=_np(_BIN_UFUNC[type(e.op)]), args=[e.left, e.right], keywords=[out]))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return ast.Expr(ast.Call(func=_np("negative"), args=[e.operand], keywords=[out]))
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        f = e.func
        is_np = isinstance(f.value, ast.Name) and f.value.id == "np" and f.attr in _OUT_UFUNCS
        is_reduce = (
            f.attr == "reduce"
            and isinstance(f.value, ast.Attribute)
            and isinstance(f.value.value, ast.Name)
            and f.value.value.id == "np"
        )
        if is_np or is_reduce:
            return ast.Expr(ast.Call(func=f, args=e.args, keywords=e.keywords + [out]))
    slot = ast.Subscript(value=target, slice=ast.Constant(Ellipsis), ctx=ast.Store())
    return ast.Assign(targets=[slot], value=e)


def input_rollups(graph: MetricGraph, inputs: tuple[str, ...]) -> list[tuple[str, int]]:
    """(func, input index) of every sum/max/min over all instances of a signal the catalog takes: the
    one-window evaluator reads them from ``pre``, computed for all signals by one ``reduceat`` each."""
    gen = graph.generation
    position = {name: i for i, name in enumerate(inputs)}
    found: dict[tuple[str, int], None] = {}
    for m in graph.metrics.values():
        stack = [fold(m.ir)]
        while stack:
            n = stack.pop()
            if (
                isinstance(n, ir.Rollup)
                and isinstance(n.arg, ir.Input)
                and n.func in _REDUCE
                and n.arg.signal in gen.signals
            ):
                found.setdefault((n.func, position[n.arg.signal]))
            stack.extend(ir.children(n))
    return list(found)


def _pre_segments(pre: list[tuple[str, int]], lay) -> ast.expr:
    """For each reduction function: the ``reduceat`` indices over the flat window values and where each
    rollup of ``pre`` lands in its result."""
    out = []
    for func in ("sum", "max", "min"):
        idx, where = [], []
        for k, (f, i) in enumerate(pre):
            if f == func:
                _, a, b, _ = lay.input_src[i]
                where.append((k, len(idx)))
                idx += [a, b]
        if idx:
            out.append(ast.Tuple(elts=[ast.Constant(func), _array(idx, "intp"), literal(tuple(where))], ctx=ast.Load()))
    return ast.Tuple(elts=out, ctx=ast.Load())


def _metrics_function(
    graph: MetricGraph,
    inputs: tuple[str, ...],
    fn_name: str = "_metrics",
    unroll: bool = True,
    pre: list[tuple[str, int]] | None = None,
    used_inputs: list[int] | None = None,
) -> ast.FunctionDef:
    """``_metrics(inp, interval, chips, O, A, pre)``: writes metric k without instance axes into
    ``O[k]`` and metric j with them into ``A[j]``. ``unroll``: rollups over up to 12 (sums) or 32
    instances as element-wise operations (chunks of windows); otherwise one NumPy reduction each (one
    window), or an entry of ``pre`` for the rollups listed in ``pre`` (see ``input_rollups``)."""
    in_vars = {name: f"s{i}" for i, name in enumerate(inputs)}
    used_inputs = [] if used_inputs is None else used_inputs
    em = FormulaEmitter(in_vars, unroll, {(f, inputs[i]): k for k, (f, i) in enumerate(pre or [])})
    roots = {name: fold(m.ir) for name, m in graph.metrics.items()}
    em.count_shared(list(roots.values()))
    refs = [n for n in em.sensitive if isinstance(n, ir.MetricRef)]
    referenced = {r.metric for r in refs}  # metrics read where inf and null differ: finish them first
    ref_any = {d for m in graph.metrics.values() for d in m.metric_deps}
    k_scalar = k_axes = 0
    for name, m in graph.metrics.items():
        value = em.expr(roots[name])
        if m.axes:
            slot = ast.Subscript(
                value=ast.Subscript(value=_name("A"), slice=ast.Constant(k_axes), ctx=ast.Load()),
                slice=ast.Constant(Ellipsis),
                ctx=ast.Load(),
            )
            k_axes += 1
        else:
            slot = ast.Subscript(value=_name("O"), slice=ast.Constant(k_scalar), ctx=ast.Load())
            k_scalar += 1
        dst = slot.value if m.axes else slot
        if is_array(roots[name]):
            em.stmts.append(_with_out(value, dst))
        else:  # a constant metric: fill
            em.stmts.append(
                ast.Assign(
                    targets=[ast.Subscript(value=dst, slice=ast.Constant(Ellipsis), ctx=ast.Store())], value=value
                )
            )
        if name in ref_any:
            var = em.fresh("m")
            em.metric_var[name] = var
            src = slot.value if m.axes else slot
            em.assign(var, _call("_fin", src) if name in referenced else src)
    reads = [
        ast.Assign(
            targets=[_store(in_vars[n])], value=ast.Subscript(value=_name("inp"), slice=ast.Constant(i), ctx=ast.Load())
        )
        for i, n in enumerate(inputs)
        if n in em.used
    ]
    em.stmts[:0] = reads
    used_inputs.extend(i for i, n in enumerate(inputs) if n in em.used)
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(a) for a in ("inp", "interval", "chips", "O", "A", "pre")],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    doc = ast.Expr(
        ast.Constant(
            "All metrics of one chunk of windows: inputs in the order of INPUTS, each (S, C, *sizes); "
            "writes O[k] (S, C) and A[j] (S, C, *sizes); the caller finishes inf to null."
        )
    )
    return ast.FunctionDef(
        name=fn_name,
        args=args,
        body=[doc] + (em.stmts or [ast.Pass()]),
        decorator_list=[],
        returns=None,
        type_params=[],
    )


@functools.lru_cache(maxsize=None)
def _runtime(module: str) -> str:
    """The functions and classes of a runtime module, as source text (copied verbatim)."""
    src = resources.files("perfonto.codegen").joinpath(module).read_text(encoding="utf-8")
    parts = [
        ast.get_source_segment(src, s)
        for s in ast.parse(src).body
        if isinstance(s, (ast.FunctionDef, ast.ClassDef)) and s.name not in ("_metrics", "_metrics_one", "_kernel_body")
    ]
    return "\n\n\n".join(parts) + "\n"


def generate(graph: MetricGraph, chunk_rows: int = 1024) -> str:
    """Source text of the evaluator module for ``graph`` (see the module docstring for what it holds).

    The module exposes ``METRICS`` (name → unit, axes, description), ``SIGNALS`` (every signal of the
    generation), ``INPUTS`` (the signals and fields the metrics read),
    ``evaluate(inputs, interval, chips=1.0) -> dict[str, ndarray]`` over prepared windows, and
    ``Stream`` (raw registers in, metrics of each new window out, by the rules of metrics/windows.py).
    """
    gc_was_on = gc.isenabled()
    gc.disable()  # millions of short-lived ast nodes, no cycles: the cyclic collector only costs time here
    try:
        return _generate(graph, chunk_rows)
    finally:
        if gc_was_on:
            gc.enable()


def _generate(graph: MetricGraph, chunk_rows: int) -> str:
    lay = layout(graph)
    pre = input_rollups(graph, lay.inputs)
    used_one: list[int] = []
    one = _metrics_function(graph, lay.inputs, "_metrics_one", unroll=False, pre=pre, used_inputs=used_one)
    gen = graph.generation
    header = (
        f"perfonto generated evaluator.\n\nGeneration: {gen.name} (ontology hash {gen.content_hash}); "
        f"catalog hash {graph.content_hash}; {len(graph.metrics)} metrics.\nDo not edit: regenerate with perfonto.\n"
    )
    metrics_table = {
        name: {"unit": m.unit_text, "axes": tuple((a, s) for a, s in m.axes), "description": m.description}
        for name, m in graph.metrics.items()
    }
    scalar = tuple(n for n, m in graph.metrics.items() if not m.axes)
    with_axes = tuple((n, tuple(s for _, s in m.axes)) for n, m in graph.metrics.items() if m.axes)

    def const(name: str, value: ast.expr) -> ast.Assign:
        return ast.Assign(targets=[_store(name)], value=value)

    body: list[ast.stmt] = [
        ast.Expr(ast.Constant(header)),
        ast.Import(names=[ast.alias(name="numpy", asname="np")]),
        const("GENERATION", ast.Constant(gen.name)),
        const("CATALOG_HASH", ast.Constant(graph.content_hash)),
        const("SIGNALS", literal(tuple(gen.signals))),
        const("METRICS", literal(metrics_table)),
        const("INPUTS", literal(lay.inputs)),
        const("_INPUT_SRC", literal(tuple(lay.input_src))),
        const("_SCALAR_METRICS", literal(scalar)),
        const("_AXIS_METRICS", literal(with_axes)),
        const("_REGS", literal(tuple(lay.regs))),
        const("FLAT_COLUMNS", literal(_flat_columns(gen, lay))),
        *(const(n, ast.Constant(v)) for n, v in zip(("_K1", "_K2", "_K3", "_K", "_G", "_N"), lay.bounds)),
        const("_NF", ast.Constant(lay.nf)),
        const("_MASK", _array(lay.mask, "uint64")),
        const("_HALF", _array(lay.half, "uint64")),
        const("_SCALE", _array(lay.scale, "float64")),
        const("_RATE", _array(lay.rate, "float64")),
        const("_WRAP", _array(lay.wrap, "float64")),
        const("_GSCALE", _array(lay.gscale, "float64")),
        const("_HIST", literal(tuple(lay.hist))),
        const("_RESET", literal(tuple(lay.reset))),
        const("_MODC", literal(tuple(lay.modc))),
        const("_USCALE", literal(tuple(lay.uscale))),
        const("_SENT", _sentinels(lay.sent)),
        const("_FIELD_SRC", _array(lay.field_src, "intp")),
        const("_FIELD_LO", _array(lay.field_lo, "uint64")),
        const("_FIELD_MASK", _array(lay.field_mask, "uint64")),
        const("_FIELD_SCALE", _array(lay.field_scale, "float64")),
        const("_FIELD_SENT", _sentinels(lay.field_sent)),
        const("_CHUNK_ROWS", ast.Constant(int(chunk_rows))),
        const("_PRE", literal(tuple(pre))),
        const("_PRE_SEGS", _pre_segments(pre, lay)),
        _metrics_function(graph, lay.inputs),
        one,
        const("_INPUTS_ONE", literal(tuple(used_one))),
        const("_METRIC_REGS", literal(metric_registers(graph, lay))),
        *_kernel_constants(graph, lay),
    ]
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    return (
        ast.unparse(module)
        + "\n\n\n"
        + _runtime("runtime.py")
        + "\n\n"
        + _runtime("runtime_stream.py")
        + "\n\n"
        + _runtime("runtime_inputs.py")
        + "\n\n"
        + _runtime("runtime_kernel.py")
        + "\n\n"
        + _runtime("runtime_kernel_rules.py")
        + "\n\n"
        + _runtime("runtime_kernel_drive.py")
    )


def metric_registers(graph: MetricGraph, lay) -> tuple[tuple[int, ...], ...]:
    """Per metric (in ``graph.metrics`` order), the indices into ``lay.regs`` of the registers its own
    formula reads: its signals, the packed registers of its fields, and (as ``codegen.plan.plan``
    closes them) their reset indicators and unit-field registers. With the metrics it reads
    (``_MDEPS``) this is what a ``Stream`` of chosen metrics needs fed (``_stream_regs``)."""
    from perfonto.ontology import kinds

    gen = graph.generation
    index = {name: k for k, (name, _, _) in enumerate(lay.regs)}
    out = []
    for m in graph.metrics.values():
        found = [n.signal for n in ir.walk(m.ir) if isinstance(n, ir.Input)]
        todo = [gen.fields[s].register if s in gen.fields else s for s in found]
        need: set[str] = set()
        while todo:
            name = todo.pop()
            if name in need:
                continue
            need.add(name)
            sig = gen.signals[name]
            if sig.reset_indicator is not None and kinds.of(sig).counts:
                todo.append(sig.reset_indicator)
            if sig.scale_field is not None:
                todo.append(gen.fields[sig.scale_field[0]].register)
        out.append(tuple(sorted(index[n] for n in need)))
    return tuple(out)


def _flat_columns(gen, lay) -> tuple[str, ...]:
    """The collector format's flat column (``name``, or ``name[i]`` with ``i`` the instance's flat slot
    index) of every register column of the layout, in layout order."""
    out: list[str] = []
    for name, a, b in lay.regs:
        sig = gen.signals[name]
        if not sig.axes:
            out.append(name)
        else:
            out += [f"{name}[{sig.slots[k] if sig.slots is not None else k}]" for k in range(b - a)]
    return tuple(out)


def _kernel_constants(graph: MetricGraph, lay) -> list[ast.stmt]:
    """The fused kernel (``codegen/kernel.py``): its generated row body and the tables its runtime
    (``codegen/runtime_kernel.py``) reads."""
    table = metric_table(graph)
    deps_off = [0]
    deps: list[int] = []
    for _, _, _, d in table:
        deps += list(d)
        deps_off.append(len(deps))
    _, knames, runtime_names, inlined = _runtime_kernel_names()
    body = [
        ast.Assign(targets=[_store("_NAN")], value=_np("nan")),
        ast.Assign(targets=[_store("_INF")], value=_np("inf")),
        ast.Assign(targets=[_store("_KT")], value=ast.Constant(None)),
        ast.Assign(targets=[_store("_KFN")], value=ast.Constant(None)),
        ast.Assign(targets=[_store("_KCACHE")], value=ast.Constant(False)),
        ast.Assign(targets=[_store("_JITTED")], value=literal(runtime_names)),
        ast.Assign(targets=[_store("_KINLINE")], value=literal(inlined)),
        ast.Assign(targets=[_store("_KNAMES")], value=literal(knames)),
        ast.Assign(targets=[_store("_NV")], value=ast.Constant(sum(n for _, _, n, _ in table))),
        ast.Assign(targets=[_store("_MOFF")], value=_array([o for _, o, _, _ in table], "int64")),
        ast.Assign(targets=[_store("_MN")], value=_array([n for _, _, n, _ in table], "int64")),
        ast.Assign(targets=[_store("_MDEPS_OFF")], value=_array(deps_off, "int64")),
        ast.Assign(targets=[_store("_MDEPS")], value=_array(deps, "int64")),
    ]
    return body + ast.parse(kernel_source(graph, lay)).body


@functools.lru_cache(maxsize=1)
def _runtime_kernel_names() -> tuple:
    from . import runtime_kernel

    return None, tuple(runtime_kernel._KNAMES), tuple(runtime_kernel._JITTED), tuple(runtime_kernel._KINLINE)


def load(source: str, name: str = "perfonto_evaluator"):
    """Execute generated source as a fresh module object (for tests and the CLI)."""
    import types

    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)  # noqa: S102 - our own generated code
    return mod
