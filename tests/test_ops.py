"""Issue 32: the IR's operations are one enumeration (``perfonto.metrics.ops.Op``) and every expression
backend evaluates every member: a catalog whose formulas use each operation runs through the reference
interpreter, the generated NumPy evaluator, its streaming kernel, the generated DuckDB SQL and the perf-JSON
export (each MetricExpr evaluated as perf would, ``ref_perf``), and all agree.
A member added to the enumeration without a formula here fails the coverage check."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from perfonto.codegen.python_evaluator import generate, load
from perfonto.metrics import ir
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.ops import ARITY, Op
from perfonto.metrics.windows import prepare, read_counters
from helpers import compile_src
from ref_perf import PerfEval
from ref_windows import same
from test_differential_backends import Sig, _sql_values, _stream, build_generation

A, B = "a.x", "a.y"
SRC = f"""
metric o.add [event] = {A} + {B}
metric o.sub [event] = {A} - {B}
metric o.mul [event] = {A} * 3
metric o.div [1] = {B} / {A}
metric o.pow [1] = ({B} / {A}) ** 2
metric o.neg [event] = -{A}
metric o.abs [event] = abs({B} - {A})
metric o.min [event] = min({A}, {B})
metric o.max [event] = max({A}, {B})
metric o.clamp [event] = clamp({A}, {B}, {A} + {B})
metric o.logic [event] = {A} if ({A} > {B} and not ({A} == {B})) or ({A} <= {B}) or ({A} != {B}) else {B}
metric o.cmp [event] = {A} if ({A} < {B}) or ({A} >= {B}) else {B}
metric o.default [1] = default({B} / ({B} - {A} + abs({B} - {A})), 7)
"""


def _ops(node) -> set[str]:
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Op):
            out.add(n.op)
        stack += list(ir.children(n))
    return out


def test_the_ir_refuses_an_operation_no_backend_knows():
    with pytest.raises(ValueError, match="unknown IR operation 'xor'"):
        ir.Op("xor", (ir.Const(1.0), ir.Const(2.0)))
    with pytest.raises(ValueError, match="takes 3 argument"):
        ir.Op("clamp", (ir.Const(1.0), ir.Const(2.0)))
    assert set(ARITY) == set(Op) and Op.ADD == "add"


def test_every_backend_evaluates_every_operation(tmp_path):
    gen = build_generation([Sig(A, "counter", "event", (), width=48), Sig(B, "counter", "event", (), width=48)])
    graph = compile_src(gen, SRC)
    assert not graph.errors, [d.render() for d in graph.errors]
    used = set().union(*(_ops(m.ir) for m in graph.metrics.values()))
    assert used == {o.value for o in Op}, f"operations no formula here uses: {sorted({o.value for o in Op} - used)}"
    rng = np.random.default_rng(0)
    S, C = 12, 2
    a = np.cumsum(rng.integers(800, 1200, size=(S, C)), axis=0)
    b = np.cumsum(rng.integers(0, 2000, size=(S, C)), axis=0)  # sometimes above, sometimes below a's increments
    table = pa.table(
        {
            "chip": pa.array(np.tile(np.arange(C), S), pa.int64()),
            "timestamp_ns": pa.array(np.repeat(np.arange(S) * 1_000_000, C), pa.int64()),
            A: pa.array(a.ravel().astype(np.uint64)),
            B: pa.array(b.ravel().astype(np.uint64)),
        }
    )
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "d.parquet")
    dump = read_counters(tmp_path / "d.parquet", gen)
    w = prepare(dump, gen)
    want = evaluate(graph, w)
    mod = load(generate(graph))
    got = {"evaluate": mod.evaluate(w.values, w.interval, w.chips)}
    got["Stream.push"], got["Stream.push_block"] = _stream(mod, dump, S // 2)
    got["SQL"] = _sql_values(graph, [table], [w.interval.shape])[0]
    for backend, values in got.items():
        for name in graph.metrics:
            np.testing.assert_allclose(
                np.asarray(values[name], float), want[name], rtol=1e-12, equal_nan=True, err_msg=f"{backend} {name}"
            )
    _check_perf_json(graph, dump, w, want)
    assert np.isfinite(want["o.logic"]).all() and (want["o.min"] <= want["o.max"]).all()
    # a captured x: default keeps x, its null windows (a division by zero inside x) included (metrics.optional)
    assert np.isnan(want["o.default"]).any() and (want["o.default"] < 7).any() and not (want["o.default"] == 7).any()


def test_an_operation_added_to_the_enumeration_is_refused_by_name_by_every_backend(monkeypatch, tmp_path):
    """The coverage check in action: add ``xor`` to the enumeration (and its arity) as a developer would,
    build an IR node with it, and each backend refuses it, naming the operation — none evaluates it silently.
    The coverage test above would then fail on ``used == set(Op)`` until a formula and every backend have it."""
    import enum

    from perfonto.codegen import kernel, python_evaluator, sql
    from perfonto.interop import perf_ir
    from perfonto.metrics import interpreter, ops

    members = {o.name: o.value for o in Op} | {"XOR": "xor"}
    extended = enum.Enum("Op", members, type=str)
    monkeypatch.setattr(ir, "_Op", extended)
    monkeypatch.setattr(ir, "ARITY", {**{extended(k): v for k, v in ARITY.items()}, extended("xor"): 2})
    monkeypatch.setattr(ops, "Op", extended)
    node = ir.Op("xor", (ir.Const(1.0), ir.Const(2.0)))  # the IR now accepts it
    assert {o.value for o in extended} - {o.value for o in Op} == {"xor"}
    gen = build_generation([Sig(A, "counter", "event", (), width=48)])
    graph = compile_src(gen, f"metric o.a [event] = {A}\n")
    w = prepare(_tiny_dump(gen, tmp_path), gen)
    refusals = {
        "interpreter": lambda: interpreter._eval(node, w, {}),
        "NumPy evaluator": lambda: python_evaluator.FormulaEmitter({}).op(node),
        "kernel": lambda: kernel.ScalarEmitter.op(_bare(kernel.ScalarEmitter), node, None),
        "SQL": lambda: sql.SqlEmitter(graph, {}).op(node),
        "perf JSON": lambda: perf_ir.PerfIR(graph).op(node),
        "perf JSON chip degree": lambda: perf_ir._product_degree("xor", [1, 1]),
    }
    for backend, call in refusals.items():
        with pytest.raises(ValueError, match="'xor'"):
            call()


def _check_perf_json(graph, dump, w, want):
    """Every metric is exported to perf JSON (none skipped: an operation without a perf-JSON handler
    raises), and perf's evaluation of each MetricExpr, fed each chip's raw counts, is the interpreter's."""
    from perfonto.interop.perf_export import export

    out = export(graph)
    assert not out.skipped, out.skipped
    exprs = {e["MetricName"]: e["MetricExpr"] for e in out.entries if "MetricName" in e}
    assert set(graph.metrics) <= set(exprs)
    for t in range(w.interval.shape[0]):
        for c in range(w.interval.shape[1]):
            events = {n: float(w.values[n][t, c]) / graph.generation.signals[n].scale for n in (A, B)}
            ref = PerfEval(exprs, events, {}, float(w.interval[t, c]))
            for name in graph.metrics:
                got = want[name][t, c]
                assert same(got, ref.metric(name)), f"perf JSON {name}: {got!r} != {ref.metric(name)!r} ({exprs[name]})"


def _bare(cls):
    """An emitter with no layout: enough to dispatch an operation on constant operands."""
    e = cls.__new__(cls)
    e.stmts, e.cse, e.depth, e.k = [], {}, 0, 0
    return e


def _tiny_dump(gen, folder):
    import pyarrow.parquet as pq

    t = pa.table(
        {
            "chip": pa.array([0, 0], pa.int64()),
            "timestamp_ns": pa.array([0, 1_000_000], pa.int64()),
            A: pa.array([1, 5], pa.uint64()),
        }
    )
    d = folder / "d.parquet"
    pq.write_table(t, d)
    return read_counters(d, gen)
