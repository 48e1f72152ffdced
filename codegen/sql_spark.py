"""Spark's window stages: the registers as 64-bit integers with explicit wraps, never decimals.

Spark reads a Parquet ``uint64`` column as ``DECIMAL(20, 0)`` (a Java ``BigDecimal`` per value), and
decimal arithmetic made the generated query ~25× slower than DuckDB's. The Spark query therefore
takes every register as the ``BIGINT`` with the same 64 bits (two's complement: a value ≥ 2^63 reads
as value − 2^64) — what Spark's Parquet reader gives for a ``uint64`` column read with a ``LONG``
schema (``analysis.spark_engine.counters_frame`` reads dumps so; a ``DECIMAL`` column below 2^63 is
cast) — and applies the rules of ``metrics/windows.py`` in ``BIGINT``, without an operation that could
overflow (Spark 4 runs in ANSI mode, where an overflow is an error):

- width w ≤ 62: ``PMOD(PMOD(cur, 2^w) − PMOD(prev, 2^w), 2^w)`` (``PMOD`` is non-negative, and 2^64 is
  a multiple of 2^w, so the two's-complement reading does not change a value mod 2^w);
- width 63, 64 and unknown: the 32-bit halves, ``lo = x & (2^32 − 1)``, ``hi = x >> 32``, are
  differenced apart with the borrow carried: ``a = PMOD(lo_c − lo_p, 2^32)``,
  ``h = PMOD(hi_c − hi_p − borrow, 2^(w − 32))``; the increase is ``h · 2^32 + a`` — a ``BIGINT`` for
  w = 63, and for 64 bits (or an unknown width) a ``DOUBLE`` computed as ``h · 2^32 + a`` (one rounding,
  as NumPy's ``uint64 → float64``) with the half-range test ``h · 2^32 + a > 2^63`` done on the halves;
- unsigned comparisons (a decrease of a counter of unknown width, of a histogram bucket) flip the sign
  bit first; sentinels ≥ 2^63 are printed as their two's-complement ``BIGINT``; gauges and packed
  fields read the unsigned value (``SHIFTRIGHTUNSIGNED`` and a mask for a field's bits).
The sampling grid of ``fill_grid`` is ``EXPLODE(SEQUENCE(0, n − 1))`` in a subquery (Spark has no
table-valued ``GENERATE_SERIES`` with a column alias).
"""

from __future__ import annotations

from sqlglot import exp

from .plan import register_class
from .sql_windows import Dialect, Windows, _alias, _case, _cast, _col, _int, _num

TWO63 = 1 << 63
TWO64 = 1 << 64
MASK32 = (1 << 32) - 1


def _pmod(a: exp.Expression, m: int) -> exp.Expression:
    return exp.Anonymous(this="PMOD", expressions=[a, _int(m)])


def _sub(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.Sub(this=a, expression=b))


def _lo(e: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.BitwiseAnd(this=e, expression=_int(MASK32)))


def _hi(e: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="SHIFTRIGHT", expressions=[e, _int(32)])


class SparkWindows(Windows):
    """``Windows`` for Spark SQL: registers as two's-complement ``BIGINT`` (module docstring)."""

    def _register(self, e: exp.Expression) -> exp.Expression:
        return _cast(e, "BIGINT")  # a no-op on the BIGINT columns the registers should arrive in

    def _to_double(self, e: exp.Expression) -> exp.Expression:
        d = _cast(e, "DOUBLE")
        return _case(
            exp.LT(this=e.copy(), expression=_int(0)), exp.Add(this=d.copy(), expression=_num(float(TWO64))), d
        )

    def _flip(self, e: exp.Expression) -> exp.Expression:
        return exp.Paren(this=exp.BitwiseXor(this=e, expression=exp.Paren(this=exp.Neg(this=_int(TWO63)))))

    def _less(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        return exp.LT(this=self._flip(a), expression=self._flip(b))

    def _literal(self, v: int) -> exp.Expression:
        v = int(v)
        return exp.Paren(this=exp.Neg(this=_int(TWO64 - v))) if v >= TWO63 else _int(v)

    def _bits(self, c: str, lo: int, n: int) -> exp.Expression:
        if n >= 64:
            return self._to_double(_col(c))
        shifted = exp.Anonymous(this="SHIFTRIGHTUNSIGNED", expressions=[_col(c), _int(lo)]) if lo else _col(c)
        return _cast(exp.Paren(this=exp.BitwiseAnd(this=shifted, expression=_int((1 << n) - 1))), "DOUBLE")

    def grid_series(self, n_grid: exp.Expression) -> exp.Expression:
        seq = exp.Anonymous(this="SEQUENCE", expressions=[_int(0), exp.Sub(this=n_grid, expression=_int(1))])
        return exp.Subquery(
            this=exp.select(_alias(exp.Explode(this=seq), "g")), alias=exp.TableAlias(this=exp.to_identifier("gr"))
        )

    # -- increases ------------------------------------------------------------------------------------
    def _halves(self, c: str, w: int | None) -> tuple[exp.Expression, exp.Expression]:
        """(h, a) of the increase ``h · 2^32 + a`` of register ``c``, w ∈ {63, 64, None}."""
        cur, prev = _col(c), _col("p" + c[1:])
        dl = _sub(_lo(cur), _lo(prev.copy()))
        borrow = _case(exp.LT(this=dl.copy(), expression=_int(0)), _int(1), _int(0))
        dh = exp.Sub(this=_sub(_hi(cur.copy()), _hi(prev.copy())), expression=borrow)
        return _pmod(dh, 1 << (31 if w == 63 else 32)), _pmod(dl, 1 << 32)

    def _delta(self, sig, c: str) -> exp.Expression:
        w = sig.wrap_width
        cur, prev = _col(c), _col("p" + c[1:])
        if sig.modulus is not None:  # a declared range: PMOD keeps every operand below it
            if sig.modulus > 1 << 62:
                raise ValueError(
                    f"`{sig.name}`: the Spark target holds registers as BIGINT and cannot take a wrap range "
                    f"above 2^62 ({sig.modulus}); use the DuckDB target or the Python evaluator"
                )
            m = sig.modulus
            return _pmod(exp.Sub(this=_pmod(cur, m), expression=_pmod(prev, m)), m)
        if w is not None and w <= 62:
            m = 1 << w
            return _pmod(exp.Sub(this=_pmod(cur, m), expression=_pmod(prev, m)), m)
        h, a = self._halves(c, w)
        if w == 63:
            return exp.Add(this=exp.Mul(this=h, expression=_int(1 << 32)), expression=a)
        return exp.Add(
            this=exp.Mul(this=_cast(h, "DOUBLE"), expression=_num(4294967296.0)), expression=_cast(a, "DOUBLE")
        )

    def _delta_extra(self, sig, cols: list[str]) -> list[exp.Expression]:
        if (
            sig.modulus is not None
            or sig.wrap_width is None
            or sig.wrap_width <= 63
            or register_class(sig, self.gen) != 0
        ):
            return []  # only the half-range rule (no max rate) reads the comparison
        out = []
        for c in cols:  # h · 2^32 + a > 2^63  ⇔  h > 2^31, or h = 2^31 and a > 0
            h, a = self._halves(c, sig.wrap_width)
            over = exp.Or(
                this=exp.GT(this=h, expression=_int(1 << 31)),
                expression=exp.And(
                    this=exp.EQ(this=h.copy(), expression=_int(1 << 31)), expression=exp.GT(this=a, expression=_int(0))
                ),
            )
            out.append(_alias(exp.Paren(this=over), "x" + c[1:]))
        return out

    def _delta_double(self, sig, c: str) -> exp.Expression:
        return _cast(_col("d" + c[1:]), "DOUBLE")

    def _over_half(self, sig, c: str) -> exp.Expression:
        if sig.modulus is not None or (sig.wrap_width is not None and sig.wrap_width <= 63):
            return super()._over_half(sig, c)
        return _col("x" + c[1:])


SPARK = Dialect("spark", "BIGINT", "BROUND", SparkWindows)
