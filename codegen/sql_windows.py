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

from perfonto.metrics.graph import MetricGraph
from perfonto.ontology import kinds

from perfonto.capture.dump import flat_indices

from .plan import max_rate, plan, register_class


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL engines we print for (everything else is sqlglot's job)."""

    name: str
    wide_int: str  # an integer type that holds any difference of two uint64 registers
    round_even: str  # round half to even, (x, digits)
    windows: type | None = None  # the ``Windows`` class that builds its window stages (default ``Windows``)


DUCKDB = Dialect("duckdb", "HUGEINT", "ROUND_EVEN")


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


#: A chip is (host, chip): hosts may both number their chips 0..7, so windows never group by chip alone.
CHIP_KEY = ("host", "chip")


def _window(
    fn: exp.Expression,
    partition: str | tuple[str, ...],
    order: str,
    spec: exp.WindowSpec | None = None,
    table: str | None = None,
) -> exp.Window:
    keys = (partition,) if isinstance(partition, str) else partition
    return exp.Window(
        this=fn,
        partition_by=[_col(k, table) for k in keys],
        order=exp.Order(expressions=[exp.Ordered(this=_col(order, table))]),
        spec=spec,
    )


class Windows:
    """Builds the ``src`` … ``win`` stages: registers per instance, lags, window values. A dialect
    whose engine holds registers differently overrides the hooks below (``codegen.sql_spark``)."""

    def __init__(self, graph: MetricGraph, dialect: Dialect):
        self.gen = graph.generation
        self.d = dialect
        self.plan = plan(graph)
        self.reg_cols: dict[str, list[str]] = {}
        for j, name in enumerate(self.plan.registers):
            n = self.gen.signals[name].instances
            self.reg_cols[name] = [f"r{j}_{k}" for k in range(n)]
        self.input_cols: dict[str, list[str]] = {}
        self.flat: frozenset[str] = frozenset()  # signals held as ``name[i]`` columns (``SqlSource.flat``)
        self.absent: frozenset[str] = frozenset()  # registers the table lacks: NULL (``SqlSource.absent``)

    def src_columns(self) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for name, cols in self.reg_cols.items():
            sig = self.gen.signals[name]
            for k, c in enumerate(cols):
                if name in self.absent:  # a register the dump lacks that a rule still reads (a reset indicator)
                    null = exp.Cast(this=exp.Null(), to=exp.DataType.build("UBIGINT", dialect="duckdb"))
                    out.append(_alias(self._register(null), c))
                    continue
                if name in self.flat:  # the flat layout: instance k is its own column, numbered by its slot
                    out.append(_alias(self._register(_col(f"{name}[{flat_indices(sig)[k]}]")), c))
                    continue
                e = exp.Bracket(this=_col(name), expressions=[_int(k)], offset=0) if sig.axes else _col(name)
                if sig.slots is not None:  # a dump of every slot, or of the present ones only
                    full = exp.EQ(this=exp.ArraySize(this=_col(name)), expression=_int(sig.full_instances))
                    e = _case(full, exp.Bracket(this=_col(name), expressions=[_int(sig.slots[k])], offset=0), e)
                out.append(_alias(self._register(e), c))
        return out

    # -- what a dialect may override (``codegen.sql_spark``): how registers are held and compared ------
    def _register(self, e: exp.Expression) -> exp.Expression:
        """A raw register as the query holds it (DuckDB: the unsigned column as it is)."""
        return e

    def _to_double(self, e: exp.Expression) -> exp.Expression:
        """An unsigned register (or increase) as DOUBLE."""
        return _cast(e, "DOUBLE")

    def _less(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """``a < b`` for unsigned registers."""
        return exp.LT(this=a, expression=b)

    def _literal(self, v: int) -> exp.Expression:
        """An unsigned register value as a literal comparable with the registers."""
        return _int(v)

    def _bits(self, c: str, lo: int, n: int) -> exp.Expression:
        """Bits ``lo .. lo + n - 1`` of a register, as DOUBLE."""
        bits = exp.Mod(
            this=exp.IntDiv(this=_cast(_col(c), self.d.wide_int), expression=_int(1 << lo)), expression=_int(1 << n)
        )
        return _cast(bits, "DOUBLE")

    def _delta_double(self, sig, c: str) -> exp.Expression:
        """The increase column of register ``c`` as DOUBLE (before the scale)."""
        return _cast(_col("d" + c[1:]), "DOUBLE")

    def _over_half(self, sig, c: str) -> exp.Expression:
        """The increase of ``c`` is above half the counter's range (rule 4, no max rate)."""
        return exp.GT(this=_col("d" + c[1:]), expression=_int(modulus(sig) // 2))

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
            diff = exp.Sub(
                this=_cast(exp.Mod(this=cur, expression=m), "BIGINT"),
                expression=_cast(exp.Mod(this=prev, expression=m), "BIGINT"),
            )
        else:
            diff = exp.Sub(this=_cast(cur, self.d.wide_int), expression=_cast(prev, self.d.wide_int))
        return exp.Mod(
            this=exp.Paren(this=exp.Add(this=exp.Mod(this=exp.Paren(this=diff), expression=m), expression=m)),
            expression=m,
        )

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
        bad = [
            _is_null(cur),
            _is_null(prev),
            exp.NEQ(this=bits, expression=_field_bits(prev, f.lo, f.hi, self.d.wide_int)),
        ]
        if reg.sentinel:
            bad.append(self._touching(c, reg.sentinel))
        return scale, bad

    def delta_columns(self) -> list[exp.Expression]:
        """``d<j>_<k>``: the modular increase of every counter and histogram instance the inputs read."""
        out = []
        for name in self.plan.inputs:
            sig = self.gen.signals.get(name)
            if sig is not None and kinds.of(sig).window in ("increase", "bucket_increase"):
                out += [_alias(self._delta(sig, c), "d" + c[1:]) for c in self.reg_cols[name]]
                out += self._delta_extra(sig, self.reg_cols[name])
        return out

    def grid_series(self, n_grid: exp.Expression) -> exp.Expression:
        """The table ``gr(g)`` of grid points 0 … n_grid − 1 (DuckDB: ``GENERATE_SERIES``)."""
        return exp.Table(
            this=exp.GenerateSeries(start=_int(0), end=n_grid, is_end_exclusive=True),
            alias=exp.TableAlias(this=exp.to_identifier("gr"), columns=[exp.to_identifier("g")]),
        )

    def _delta_extra(self, sig, cols: list[str]) -> list[exp.Expression]:
        """Further columns of the ``deltas`` stage a dialect needs (none for DuckDB)."""
        return []

    def _zero(self, c: str) -> exp.Expression:
        """A register as the dump reader sees it: a null register reads as 0 (for reset tests)."""
        return exp.Coalesce(this=_col(c), expressions=[_int(0)])

    def _touching(self, c: str, values: tuple[int, ...]) -> exp.Expression:
        vals = [self._literal(v) for v in values]
        return exp.Paren(
            this=exp.Or(
                this=exp.In(this=_col(c), expressions=vals), expression=exp.In(this=_col("p" + c[1:]), expressions=vals)
            )
        )

    def window_values(self) -> list[exp.Expression]:
        """``interval_s`` and every input column of the ``win`` stage."""
        out: list[exp.Expression] = []
        interval = exp.Mul(
            this=_cast(exp.Sub(this=_col("ts"), expression=_col("p_ts")), "DOUBLE"), expression=_num(1e-9)
        )
        out.append(_alias(interval, "interval_s"))
        for j, name in enumerate(self.plan.inputs):
            cols = []
            for k, e in enumerate(self._input(name, interval)):
                c = f"i{j}_{k}"
                cols.append(c)
                out.append(_alias(e, c))
            self.input_cols[name] = cols
        return out

    def _input(self, name: str, interval: exp.Expression) -> list[exp.Expression]:
        gen = self.gen
        if name in gen.fields:
            f = gen.fields[name]
            reg = gen.signals[f.register]
            out = []
            for c in self.reg_cols[f.register]:
                v = exp.Mul(this=self._bits(c, f.lo, f.hi - f.lo + 1), expression=_num(f.scale))
                if reg.sentinel:  # rule 5 for fields: the end sample only
                    v = _case(exp.In(this=_col(c), expressions=[self._literal(s) for s in reg.sentinel]), exp.Null(), v)
                out.append(v)
            return out
        sig = gen.signals[name]
        rule = kinds.of(sig).window
        handler = {
            "increase": self._increase,
            "bucket_increase": self._increase,
            "mean": self._mean,
            "end": self._end,
        }.get(rule)
        if handler is None:
            raise kinds.UnsupportedKind(f"the {self.d.name} SQL target (codegen.sql)", sig.kind, rule)
        cols = self.reg_cols[name]
        out = []
        for k, c in enumerate(cols):
            v, bad = handler(sig, cols, k, c, interval)
            if sig.sentinel:  # rule 5, for every kind
                bad.append(self._touching(c, sig.sentinel))
            out.append(_case(_or(bad), exp.Null(), v) if bad else v)
        return out

    def _increase(self, sig, cols: list[str], k: int, c: str, interval) -> tuple[exp.Expression, list[exp.Expression]]:
        """Rules 3, 4, 4b, 4c, 4d (the ``increase`` and ``bucket_increase`` rules): the value of instance
        column ``c`` and the conditions that null it."""
        gen = self.gen
        cls = register_class(sig, gen)
        cur, prev = _col(c), _col("p" + c[1:])
        bad: list[exp.Expression] = []
        dd = self._delta_double(sig, c)
        M = modulus(sig)
        scale = _num(sig.scale)
        if sig.scale_field is not None:  # rule 4d
            scale, unit_bad = self._unit_scale(sig, k)
            bad += unit_bad
        v = exp.Mul(this=dd, expression=scale)
        if cls == 0:
            bad.append(self._over_half(sig, c))
        elif cls == 1:
            limit = exp.Add(
                this=exp.Div(this=exp.Mul(this=_num(max_rate(gen, sig)), expression=interval), expression=scale),
                expression=_num(1.0),
            )
            bad.append(exp.GT(this=dd.copy(), expression=limit))
            bad.append(exp.GTE(this=limit, expression=_num(float(M))))  # rule 4b
        elif cls == 2:
            bad.append(self._less(cur, prev))
        else:  # histogram: any bucket of this instance decreased
            nb = len(sig.buckets) + 1
            group = cols[(k // nb) * nb : (k // nb) * nb + nb]
            bad.append(_or([self._less(self._zero(b), self._zero("p" + b[1:])) for b in group]))
        if sig.modulus is not None:  # rule 4c: a raw value at or beyond the range
            bad.append(exp.Not(this=self._less(cur.copy(), self._literal(M))))
            bad.append(exp.Not(this=self._less(prev.copy(), self._literal(M))))
        if sig.reset_indicator is not None:
            ind = self.reg_cols[sig.reset_indicator]
            if sig.reset_kind == "decrease":  # an uptime resets when it goes down
                bad.append(_or([self._less(self._zero(r), self._zero("p" + r[1:])) for r in ind]))
            else:
                bad.append(_or([exp.NEQ(this=self._zero(r), expression=self._zero("p" + r[1:])) for r in ind]))
        return v, bad

    def _mean(self, sig, cols, k, c, interval) -> tuple[exp.Expression, list[exp.Expression]]:
        """Rule 7 (``mean``): the trapezoid of the two end samples."""
        return exp.Mul(
            this=exp.Paren(this=exp.Add(this=self._to_double(_col("p" + c[1:])), expression=self._to_double(_col(c)))),
            expression=_num(0.5 * sig.scale),
        ), []

    def _end(self, sig, cols, k, c, interval) -> tuple[exp.Expression, list[exp.Expression]]:
        """Rule 8 (``end``): the register at the window's end sample."""
        return self._to_double(_col(c)), []


def modulus(sig) -> int:
    """The counter's raw modulus: its declared range, else 2^wrap width (0 for an unknown width)."""
    if sig.modulus is not None:
        return sig.modulus
    return 1 << sig.wrap_width if sig.wrap_width is not None else 0


def _field_bits(c: exp.Expression, lo: int, hi: int, wide: str) -> exp.Expression:
    return exp.Mod(this=exp.IntDiv(this=_cast(c, wide), expression=_int(1 << lo)), expression=_int(1 << (hi - lo + 1)))


def fill_grid(regs: list[str], d: Dialect, wins: Windows) -> list[tuple[str, exp.Select]]:
    """Every grid point of every chip (``host``, ``chip``); absent samples get null registers and a
    timestamp interpolated between the chip's neighbouring samples (clamped to the last sample after
    it), as ``np.interp``."""
    n_grid = exp.Subquery(this=exp.select(exp.Add(this=exp.Max(this=_col("g")), expression=_int(1))).from_("src"))
    series = wins.grid_series(n_grid)
    chips = exp.Subquery(
        this=exp.select(*[_col(k) for k in CHIP_KEY]).distinct(copy=False).from_("src", copy=False),
        alias=exp.TableAlias(this=exp.to_identifier("ch")),
    )
    keys = (
        exp.select(*[_col(k, "ch") for k in CHIP_KEY], _col("g", "gr"))
        .from_(chips, copy=False)
        .join(series, join_type="CROSS", copy=False)
    )
    before = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")
    after = exp.WindowSpec(kind="ROWS", start="CURRENT ROW", end="UNBOUNDED", end_side="FOLLOWING")
    have_g = _case(exp.Not(this=_is_null(_col("ts", "s"))), _col("g", "k"))

    def edge(fn, e, spec):
        return exp.Window(
            this=exp.IgnoreNulls(this=fn(this=e)),
            partition_by=[_col(k, "k") for k in CHIP_KEY],
            order=exp.Order(expressions=[exp.Ordered(this=_col("g", "k"))]),
            spec=spec,
        )

    on = exp.and_(*[exp.EQ(this=_col(k, "s"), expression=_col(k, "k")) for k in CHIP_KEY + ("g",)], copy=False)
    joined = (
        exp.select(
            *[_col(k, "k") for k in CHIP_KEY],
            _col("g", "k"),
            _alias(_col("ts", "s"), "ts0"),
            *[_col(c, "s") for c in regs],
            _alias(edge(exp.LastValue, _col("ts", "s"), before), "lt"),
            _alias(edge(exp.LastValue, have_g, before), "lg"),
            _alias(edge(exp.FirstValue, _col("ts", "s"), after), "nt"),
            _alias(edge(exp.FirstValue, have_g, after), "ng"),
        )
        .from_(exp.Subquery(this=keys, alias=exp.TableAlias(this=exp.to_identifier("k"))), copy=False)
        .join(
            exp.Table(this=exp.to_identifier("src"), alias=exp.TableAlias(this=exp.to_identifier("s"))),
            on=on,
            join_type="LEFT",
            copy=False,
        )
    )
    slope = exp.Div(
        this=_cast(exp.Sub(this=_col("nt"), expression=_col("lt")), "DOUBLE"),
        expression=_cast(exp.Sub(this=_col("ng"), expression=_col("lg")), "DOUBLE"),
    )
    interp = exp.Add(
        this=exp.Mul(this=slope, expression=_cast(exp.Sub(this=_col("g"), expression=_col("lg")), "DOUBLE")),
        expression=_cast(_col("lt"), "DOUBLE"),
    )
    ts = exp.Case(
        ifs=[
            exp.If(this=exp.Not(this=_is_null(_col("ts0"))), true=_col("ts0")),
            exp.If(this=_is_null(_col("nt")), true=_col("lt")),
        ],
        default=_cast(exp.Anonymous(this=d.round_even, expressions=[interp, _int(0)]), "BIGINT"),
    )
    filled = exp.select(*[_col(k) for k in CHIP_KEY], _col("g"), _alias(ts, "ts"), *[_col(c) for c in regs]).from_(
        "joined", copy=False
    )
    return [("joined", joined), ("filled", filled)]
