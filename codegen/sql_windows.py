"""SQL building blocks and the window stages of the SQL target (``codegen.sql``): raw registers per
instance, the sampling grid, and each input's window value by the rules of ``metrics/windows.py``.

Rules, as ``metrics.windows.prepare`` applies them (numbers as in its docstring):
- 2: ``interval_s = CAST(ts − prev_ts AS DOUBLE) × 1e-9``;
- 3: the increase ``((diff mod 2^w) + 2^w) mod 2^w`` in an integer type that holds it (BIGINT up to 62
  bits, else HUGEINT / DECIMAL(38, 0)), × scale;
- 4, 4b: reset when the indicator changed (a null register reads as 0, as the dump reader fills it),
  when the increase is above half the range or above ``max_rate × interval / scale + 1``, when that
  limit reaches the range, on any decrease for an unknown width, on a decrease in any bucket of a
  histogram instance;
- 4c: a declared range M (``wrap_range``): the increase modulo M, the half-range test at M // 2 and
  the wrap-period test at M; a raw value ≥ M at either end is null;
- 4d: a unit field (``scale_field``): × POWER(base, field at the end sample); null when the field
  differs between the two samples or its register is NULL or a sentinel at either end;
- 5: a sentinel at either end (fields: the end sample);
- 6: a missing sample is a NULL register (absent samples come from ``filled``), and NULL propagates;
- 7, 8: gauges as ``(prev + cur) × scale / 2``; packed fields as ``(cur // 2^lo) mod 2^bits × scale``.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from perfonto.metrics.compiler import MetricGraph
from perfonto.ontology.model import SignalKind

from .plan import max_rate, plan, register_class


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL engines we print for (everything else is sqlglot's job)."""

    name: str
    wide_int: str  # an integer type that holds any difference of two uint64 registers
    round_even: str  # round half to even, (x, digits)


DIALECTS = {
    "duckdb": Dialect("duckdb", "HUGEINT", "ROUND_EVEN"),
    "spark": Dialect("spark", "DECIMAL(38, 0)", "BROUND"),
}


def _alias(e: exp.Expression, name) -> exp.Expression:
    return exp.alias_(e, name, copy=False)


_TYPES: dict[str, exp.DataType] = {}


def _cast(e: exp.Expression, to: str) -> exp.Expression:
    if to not in _TYPES:
        _TYPES[to] = exp.DataType.build(to)
    return exp.Cast(this=e, to=_TYPES[to].copy())


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=not name.isidentifier() or not name.islower())


def _num(v: float) -> exp.Expression:
    """A DOUBLE literal (exponent form, so no engine reads it as a DECIMAL)."""
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")):
        return _cast(exp.Literal.string(str(v)), "DOUBLE")
    text = repr(abs(v))
    if "e" not in text:
        text += "e0"
    lit = exp.Literal.number(text)
    return exp.Paren(this=exp.Neg(this=lit)) if v < 0 or str(v) == "-0.0" else lit


def _int(v: int) -> exp.Literal:
    return exp.Literal.number(str(int(v)))


def _case(cond: exp.Expression, then: exp.Expression, default: exp.Expression | None = None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


def _or(conds: list[exp.Expression]) -> exp.Expression:
    out = conds[0]
    for c in conds[1:]:
        out = exp.Or(this=out, expression=c)
    return exp.Paren(this=out) if len(conds) > 1 else out


def _is_null(e: exp.Expression) -> exp.Expression:
    return exp.Is(this=e, expression=exp.Null())


def _window(fn: exp.Expression, partition: str, order: str, spec: exp.WindowSpec | None = None) -> exp.Window:
    return exp.Window(this=fn, partition_by=[_col(partition)], order=exp.Order(expressions=[exp.Ordered(this=_col(order))]), spec=spec)


class Windows:
    """Builds the ``src`` … ``win`` stages: registers per instance, lags, window values."""

    def __init__(self, graph: MetricGraph, dialect: Dialect):
        self.gen = graph.generation
        self.d = dialect
        self.plan = plan(graph)
        self.reg_cols: dict[str, list[str]] = {}
        for j, name in enumerate(self.plan.registers):
            n = self.gen.signals[name].instances
            self.reg_cols[name] = [f"r{j}_{k}" for k in range(n)]
        self.input_cols: dict[str, list[str]] = {}

    def src_columns(self) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for name, cols in self.reg_cols.items():
            sig = self.gen.signals[name]
            for k, c in enumerate(cols):
                e = exp.Bracket(this=_col(name), expressions=[_int(k)], offset=0) if sig.axes else _col(name)
                if sig.slots is not None:  # a dump of every slot, or of the present ones only
                    full = exp.EQ(this=exp.ArraySize(this=_col(name)), expression=_int(sig.full_instances))
                    e = _case(full, exp.Bracket(this=_col(name), expressions=[_int(sig.slots[k])], offset=0), e)
                out.append(_alias(e, c))
        return out

    def all_reg_cols(self) -> list[str]:
        return [c for cols in self.reg_cols.values() for c in cols]

    # -- rules --------------------------------------------------------------------------------------
    def _int_type(self, width: int | None) -> str:
        return "BIGINT" if width is not None and width <= 62 else self.d.wide_int

    def _delta(self, sig, c: str) -> exp.Expression:
        """(cur − prev) mod 2^w as an integer (rule 3): ((diff mod M) + M) mod M, so that the
        difference appears once; the registers are reduced mod M first when w ≤ 62 so that BIGINT holds
        every value."""
        cur, prev = _col(c), _col("p" + c[1:])
        w = sig.wrap_width
        if w is None:  # unknown width: a decrease is a reset, never a wrap
            return exp.Sub(this=_cast(cur, self.d.wide_int), expression=_cast(prev, self.d.wide_int))
        if sig.modulus is not None:  # rule 4c: values at or beyond the range are nulled in ``_input``
            w = max(sig.modulus - 1, 1).bit_length()
        m = _int(1 << w if sig.modulus is None else sig.modulus)
        if w <= 62:
            diff = exp.Sub(this=_cast(exp.Mod(this=cur, expression=m), "BIGINT"), expression=_cast(exp.Mod(this=prev, expression=m), "BIGINT"))
        else:
            diff = exp.Sub(this=_cast(cur, self.d.wide_int), expression=_cast(prev, self.d.wide_int))
        return exp.Mod(this=exp.Paren(this=exp.Add(this=exp.Mod(this=exp.Paren(this=diff), expression=m), expression=m)), expression=m)

    def delta_columns(self) -> list[exp.Expression]:
        """``d<j>_<k>``: the modular increase of every counter and histogram instance the inputs read."""
        out = []
        for name in self.plan.inputs:
            sig = self.gen.signals.get(name)
            if sig is not None and sig.kind in (SignalKind.counter, SignalKind.histogram):
                out += [_alias(self._delta(sig, c), "d" + c[1:]) for c in self.reg_cols[name]]
        return out

    def _zero(self, c: str) -> exp.Expression:
        """A register as the dump reader sees it: a null register reads as 0 (for reset tests)."""
        return exp.Coalesce(this=_col(c), expressions=[_int(0)])

    def _touching(self, c: str, values: tuple[int, ...]) -> exp.Expression:
        vals = [_int(v) for v in values]
        return exp.Paren(this=exp.Or(this=exp.In(this=_col(c), expressions=vals), expression=exp.In(this=_col("p" + c[1:]), expressions=vals)))

    def window_values(self) -> list[exp.Expression]:
        """``interval_s`` and every input column of the ``win`` stage."""
        out: list[exp.Expression] = []
        interval = exp.Mul(this=_cast(exp.Sub(this=_col("ts"), expression=_col("p_ts")), "DOUBLE"), expression=_num(1e-9))
        out.append(_alias(interval, "interval_s"))
        for j, name in enumerate(self.plan.inputs):
            cols = []
            for k, e in enumerate(self._input(name, interval)):
                c = f"i{j}_{k}"
                cols.append(c)
                out.append(_alias(e, c))
            self.input_cols[name] = cols
        return out

    def _unit_scale(self, sig, k: int) -> tuple[exp.Expression, list[exp.Expression]]:
        """Rule 4d for instance ``k``: scale × POWER(base, field at the end sample), and the null tests
        (the field changed, its register NULL or a sentinel at either end)."""
        fname, base = sig.scale_field
        f = self.gen.fields[fname]
        reg = self.gen.signals[f.register]
        rc = self.reg_cols[f.register]
        c = rc[k] if len(rc) > 1 else rc[0]
        cur, prev = _col(c), _col("p" + c[1:])
        bits = _field_bits(cur, f.lo, f.hi, self.d.wide_int)
        e = exp.Mul(this=_cast(bits, "DOUBLE"), expression=_num(f.scale))
        scale = exp.Paren(this=exp.Mul(this=_num(sig.scale), expression=exp.Pow(this=_num(base), expression=e)))
        bad = [_is_null(cur), _is_null(prev), exp.NEQ(this=bits, expression=_field_bits(prev, f.lo, f.hi, self.d.wide_int))]
        if reg.sentinel:
            bad.append(self._touching(c, reg.sentinel))
        return scale, bad

    def _input(self, name: str, interval: exp.Expression) -> list[exp.Expression]:
        gen = self.gen
        if name in gen.fields:
            f = gen.fields[name]
            reg = gen.signals[f.register]
            out = []
            for c in self.reg_cols[f.register]:
                bits = exp.Mod(this=exp.IntDiv(this=_cast(_col(c), self.d.wide_int), expression=_int(1 << f.lo)),
                               expression=_int(1 << (f.hi - f.lo + 1)))
                v = exp.Mul(this=_cast(bits, "DOUBLE"), expression=_num(f.scale))
                if reg.sentinel:  # rule 5 for fields: the end sample only
                    v = _case(exp.In(this=_col(c), expressions=[_int(s) for s in reg.sentinel]), exp.Null(), v)
                out.append(v)
            return out
        sig = gen.signals[name]
        cols = self.reg_cols[name]
        cls = register_class(sig, gen)
        out = []
        for k, c in enumerate(cols):
            cur, prev = _col(c), _col("p" + c[1:])
            bad: list[exp.Expression] = []
            if sig.kind in (SignalKind.counter, SignalKind.histogram):
                d = _col("d" + c[1:])
                M = sig.modulus if sig.modulus is not None else (1 << sig.wrap_width if sig.wrap_width is not None else 0)
                scale = _num(sig.scale)
                if sig.scale_field is not None:  # rule 4d
                    scale, unit_bad = self._unit_scale(sig, k)
                    bad += unit_bad
                v = exp.Mul(this=_cast(d, "DOUBLE"), expression=scale)
                if cls == 0:
                    bad.append(exp.GT(this=d, expression=_int(M // 2)))
                elif cls == 1:
                    limit = exp.Add(this=exp.Div(this=exp.Mul(this=_num(max_rate(gen, sig)), expression=interval), expression=scale),
                                    expression=_num(1.0))
                    bad.append(exp.GT(this=_cast(d, "DOUBLE"), expression=limit))
                    bad.append(exp.GTE(this=limit, expression=_num(float(M))))  # rule 4b
                elif cls == 2:
                    bad.append(exp.LT(this=cur, expression=prev))
                else:  # histogram: any bucket of this instance decreased
                    nb = len(sig.buckets) + 1
                    group = cols[(k // nb) * nb:(k // nb) * nb + nb]
                    bad.append(_or([exp.LT(this=self._zero(b), expression=self._zero("p" + b[1:])) for b in group]))
                if sig.modulus is not None:  # rule 4c: a raw value at or beyond the range
                    bad.append(exp.GTE(this=cur, expression=_int(M)))
                    bad.append(exp.GTE(this=prev, expression=_int(M)))
                if sig.reset_indicator is not None:
                    test = exp.LT if sig.reset_kind == "decrease" else exp.NEQ  # an uptime resets when it goes down
                    bad.append(_or([test(this=self._zero(r), expression=self._zero("p" + r[1:])) for r in self.reg_cols[sig.reset_indicator]]))
            elif sig.kind is SignalKind.gauge:
                v = exp.Mul(this=exp.Paren(this=exp.Add(this=_cast(prev, "DOUBLE"), expression=_cast(cur, "DOUBLE"))),
                            expression=_num(0.5 * sig.scale))
            else:
                v = _cast(cur, "DOUBLE")
            if sig.sentinel:
                bad.append(self._touching(c, sig.sentinel))
            out.append(_case(_or(bad), exp.Null(), v) if bad else v)
        return out


def _field_bits(c: exp.Expression, lo: int, hi: int, wide: str) -> exp.Expression:
    return exp.Mod(this=exp.IntDiv(this=_cast(c, wide), expression=_int(1 << lo)), expression=_int(1 << (hi - lo + 1)))


def fill_grid(regs: list[str], d: Dialect) -> list[tuple[str, exp.Select]]:
    """Every grid point of every chip; absent samples get null registers and a timestamp interpolated
    between the chip's neighbouring samples (clamped to the last sample after it), as ``np.interp``."""
    n_grid = exp.Subquery(this=exp.select(exp.Add(this=exp.Max(this=_col("g")), expression=_int(1))).from_("src"))
    series = exp.Table(this=exp.GenerateSeries(start=_int(0), end=n_grid, is_end_exclusive=True),
                       alias=exp.TableAlias(this=exp.to_identifier("gr"), columns=[exp.to_identifier("g")]))
    chips = exp.Subquery(this=exp.select(_col("chip")).distinct(copy=False).from_("src", copy=False), alias=exp.TableAlias(this=exp.to_identifier("ch")))
    keys = exp.select(_col("chip", "ch"), _col("g", "gr")).from_(chips, copy=False).join(series, join_type="CROSS", copy=False)
    before = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")
    after = exp.WindowSpec(kind="ROWS", start="CURRENT ROW", end="UNBOUNDED", end_side="FOLLOWING")
    have_g = _case(exp.Not(this=_is_null(_col("ts", "s"))), _col("g", "k"))

    def edge(fn, e, spec):
        w = exp.Window(this=exp.IgnoreNulls(this=fn(this=e)), partition_by=[_col("chip", "k")],
                       order=exp.Order(expressions=[exp.Ordered(this=_col("g", "k"))]), spec=spec)
        return w

    joined = (exp.select(_col("chip", "k"), _col("g", "k"), _alias(_col("ts", "s"), "ts0"), *[_col(c, "s") for c in regs],
                         _alias(edge(exp.LastValue, _col("ts", "s"), before), "lt"), _alias(edge(exp.LastValue, have_g, before), "lg"),
                         _alias(edge(exp.FirstValue, _col("ts", "s"), after), "nt"), _alias(edge(exp.FirstValue, have_g, after), "ng"))
              .from_(exp.Subquery(this=keys, alias=exp.TableAlias(this=exp.to_identifier("k"))), copy=False)
              .join(exp.Table(this=exp.to_identifier("src"), alias=exp.TableAlias(this=exp.to_identifier("s"))),
                    on=exp.and_(exp.EQ(this=_col("chip", "s"), expression=_col("chip", "k")), exp.EQ(this=_col("g", "s"), expression=_col("g", "k")), copy=False),
                    join_type="LEFT", copy=False))
    slope = exp.Div(this=_cast(exp.Sub(this=_col("nt"), expression=_col("lt")), "DOUBLE"),
                    expression=_cast(exp.Sub(this=_col("ng"), expression=_col("lg")), "DOUBLE"))
    interp = exp.Add(this=exp.Mul(this=slope, expression=_cast(exp.Sub(this=_col("g"), expression=_col("lg")), "DOUBLE")),
                     expression=_cast(_col("lt"), "DOUBLE"))
    ts = exp.Case(ifs=[exp.If(this=exp.Not(this=_is_null(_col("ts0"))), true=_col("ts0")),
                       exp.If(this=_is_null(_col("nt")), true=_col("lt"))],
                  default=_cast(exp.Anonymous(this=d.round_even, expressions=[interp, _int(0)]), "BIGINT"))
    filled = exp.select(_col("chip"), _col("g"), _alias(ts, "ts"), *[_col(c) for c in regs]).from_("joined", copy=False)
    return [("joined", joined), ("filled", filled)]
