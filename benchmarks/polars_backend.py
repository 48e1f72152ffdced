"""Polars expressions of the same formulas and window rules, for ``bench_eval.py`` only.

A third backend over the typed IR (``metrics.ir``), written the way the SQL target is (one handler per
node type, one expression per instance), so that the benchmark compares engines on the same work:
modular deltas in the effective width, resets by indicator or implausible increase, sentinels,
gauges as endpoint means, packed fields, the interpreter's null rules. Needs ``polars``
(``pip install -e '.[bench]'``).
"""
from __future__ import annotations

import polars as pl

from perfonto.codegen.plan import max_rate, plan, register_class
from perfonto.codegen.ir_passes import fold
from perfonto.metrics import ir
from perfonto.metrics.compiler import MetricGraph
from perfonto.ontology.model import SignalKind

U64 = pl.UInt64


def _any_null(es):
    out = es[0].is_null()
    for e in es[1:]:
        out = out | e.is_null()
    return out


class PolarsBackend:
    def __init__(self, graph: MetricGraph):
        self.graph = graph
        self.gen = graph.generation
        self.plan = plan(graph)
        self.reg_cols = {name: [f"r{j}_{k}" for k in range(self.gen.signals[name].instances)] for j, name in enumerate(self.plan.registers)}
        self.inputs: dict[str, list[str]] = {}

    # -- window rules --------------------------------------------------------------------------------
    def registers(self) -> list[pl.Expr]:
        out = []
        for name, cols in self.reg_cols.items():
            sig = self.gen.signals[name]
            for k, c in enumerate(cols):
                out.append((pl.col(name).arr.get(k) if sig.axes else pl.col(name)).alias(c))
        return out

    def lags(self) -> list[pl.Expr]:
        cols = ["timestamp_ns"] + [c for cs in self.reg_cols.values() for c in cs]
        return [pl.col(c).shift(1).over("chip", order_by="timestamp_ns").alias("p_" + c) for c in cols]

    def window_inputs(self) -> list[pl.Expr]:
        interval = (pl.col("timestamp_ns") - pl.col("p_timestamp_ns")).cast(pl.Float64) * 1e-9
        out = [interval.alias("interval_s")]
        for j, name in enumerate(self.plan.inputs):
            cols = []
            for k, e in enumerate(self._input(name, interval)):
                cols.append(f"i{j}_{k}")
                out.append(e.alias(cols[-1]))
            self.inputs[name] = cols
        return out

    def _input(self, name: str, interval: pl.Expr) -> list[pl.Expr]:
        gen = self.gen
        if name in gen.fields:
            f = gen.fields[name]
            reg = gen.signals[f.register]
            out = []
            for c in self.reg_cols[f.register]:
                v = ((pl.col(c) // (1 << f.lo)) % (1 << (f.hi - f.lo + 1))).cast(pl.Float64) * f.scale
                if reg.sentinel:
                    v = pl.when(pl.col(c).is_in(list(reg.sentinel))).then(None).otherwise(v)
                out.append(v)
            return out
        sig = gen.signals[name]
        cls = register_class(sig, gen)
        cols = self.reg_cols[name]
        out = []
        for k, c in enumerate(cols):
            cur, prev = pl.col(c), pl.col("p_" + c)
            bad = []
            if sig.kind in (SignalKind.counter, SignalKind.histogram):
                d = cur - prev
                if sig.wrap_width is not None and sig.wrap_width < 64:
                    d = d & pl.lit((1 << sig.wrap_width) - 1, dtype=U64)
                v = d.cast(pl.Float64) * sig.scale
                if cls == 0:
                    bad.append(d > pl.lit(1 << (sig.wrap_width - 1), dtype=U64))
                elif cls == 1:
                    limit = max_rate(gen, sig) * interval / sig.scale + 1.0
                    bad.append(d.cast(pl.Float64) > limit)
                    bad.append(limit >= float(1 << sig.wrap_width))
                elif cls == 2:
                    bad.append(cur < prev)
                else:
                    nb = len(sig.buckets) + 1
                    group = cols[(k // nb) * nb:(k // nb) * nb + nb]
                    bad.append(pl.any_horizontal([pl.col(b).fill_null(0) < pl.col("p_" + b).fill_null(0) for b in group]))
                if sig.reset_indicator is not None:
                    bad.append(pl.any_horizontal([pl.col(r).fill_null(0) != pl.col("p_" + r).fill_null(0) for r in self.reg_cols[sig.reset_indicator]]))
            elif sig.kind is SignalKind.gauge:
                v = (prev.cast(pl.Float64) + cur.cast(pl.Float64)) * (0.5 * sig.scale)
            else:
                v = cur.cast(pl.Float64)
            if sig.sentinel:
                bad.append(cur.is_in(list(sig.sentinel)) | prev.is_in(list(sig.sentinel)))
            if bad:
                cond = bad[0]
                for b in bad[1:]:
                    cond = cond | b
                v = pl.when(cond).then(None).otherwise(v)
            out.append(v)
        return out

    # -- formulas ------------------------------------------------------------------------------------
    def expr(self, n: ir.Node) -> list[pl.Expr]:
        if isinstance(n, ir.Const):
            return [pl.lit(float(n.value))]
        if isinstance(n, ir.Input):
            return [pl.col(c) for c in self.inputs[n.signal]]
        if isinstance(n, ir.Interval):
            return [pl.col("interval_s")]
        if isinstance(n, ir.MetricRef):
            m = self.graph.metrics[n.metric]
            size = 1
            for _, s in m.axes:
                size *= s
            return [pl.col(n.metric)] if size == 1 else [pl.col(n.metric).list.get(k) for k in range(size)]
        if isinstance(n, ir.Rollup):
            es = self.expr(n.arg)
            if n.func in ("sum", "avg"):
                total = es[0]
                for e in es[1:]:
                    total = total + e
                return [total / len(es) if n.func == "avg" else total]
            fn = pl.min_horizontal if n.func == "min" else pl.max_horizontal
            return [pl.when(_any_null(es)).then(None).otherwise(fn(es))]
        size = 1
        for _, s in n.axes:
            size *= s
        args = [a if len(a) == size else a * size for a in (self.expr(x) for x in n.args)]
        return [self.op(n.op, list(row)) for row in zip(*args)]

    @staticmethod
    def op(op: str, a: list[pl.Expr]) -> pl.Expr:
        if op == "add":
            return a[0] + a[1]
        if op == "sub":
            return a[0] - a[1]
        if op == "mul":
            return a[0] * a[1]
        if op == "div":
            return pl.when(a[1] == 0).then(None).otherwise(a[0] / a[1])
        if op == "pow":
            return a[0].pow(a[1])
        if op == "neg":
            return -a[0]
        if op == "abs":
            return a[0].abs()
        if op in ("min", "max"):
            fn = pl.min_horizontal if op == "min" else pl.max_horizontal
            return pl.when(_any_null(a)).then(None).otherwise(fn(a))
        if op == "clamp":
            return pl.when(_any_null(a)).then(None).otherwise(pl.min_horizontal(pl.max_horizontal(a[0], a[1]), a[2]))
        cmp = {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__", "eq": "__eq__", "ne": "__ne__"}
        if op in cmp:
            return getattr(a[0], cmp[op])(a[1])
        if op in ("and", "or"):
            v = (a[0] & a[1]) if op == "and" else (a[0] | a[1])
            return pl.when(_any_null(a)).then(None).otherwise(v)
        if op == "not":
            return ~a[0]
        if op == "where":
            return pl.when(a[0].is_null()).then(None).when(a[0]).then(a[1]).otherwise(a[2])
        raise ValueError(op)

    def query(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """Raw counters (``chip``, ``timestamp_ns``, one column per signal) → one row per window and
        chip with ``chip``, ``start_ns``, ``interval_s`` and every metric (null where null)."""
        need = sorted(set(self.plan.registers))
        lf = lf.select("chip", "timestamp_ns", *need).with_columns(self.registers()).drop(need)
        lf = lf.with_columns(self.lags()).filter(pl.col("p_timestamp_ns").is_not_null())
        lf = lf.select("chip", pl.col("p_timestamp_ns").alias("start_ns"), *self.window_inputs())
        names = list(self.graph.metrics)
        done: set[str] = set()
        while len(done) < len(names):  # one layer per depth of the metric graph
            layer = [n for n in names if n not in done and all(d in done for d in self.graph.metrics[n].metric_deps)]
            exprs = []
            for n in layer:
                es = [pl.when(e.is_finite()).then(e).otherwise(None) for e in self.expr(fold(self.graph.metrics[n].ir))]
                exprs.append((pl.concat_list(es) if self.graph.metrics[n].axes else es[0]).alias(n))
            lf = lf.with_columns(exprs)
            done |= set(layer)
        return lf.select("chip", "start_ns", "interval_s", *names)
