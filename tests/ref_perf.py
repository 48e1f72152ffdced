"""Test-only reference evaluator of Linux perf's metric expressions.

Written from perf's grammar and actions (``tools/perf/util/expr.y``, lexer ``expr.l``), evaluation
mode (``compute_ids`` false), independently of perfonto's importer:

- precedence, loosest first: ``if/else``, ``|``, ``^``, ``&``, ``< >``, ``+ -``, ``* / %``, unary minus;
- ``a / b``: NaN when b is zero; ``d_ratio(a, b)``: 0 when b is zero;
- ``x if c else y``: y when c is exactly 0 (a NaN condition is not zero: x);
- ``min``/``max``: C's ``a < b ? a : b`` / ``a > b ? a : b``;
- ``< >``: 1.0 or 0.0, NaN if an operand is NaN; ``|``/``&``/``^``: truthiness of finite operands, NaN otherwise;
- identifiers: metrics of the file (by lower-case name, evaluated unscaled) before events;
  ``duration_time`` is the duration in seconds; ``#literal`` from the literal table.
"""

from __future__ import annotations

import math
import re

NAN = float("nan")
_TOKEN = re.compile(
    r"\s*(?:(?P<lit>#[0-9a-zA-Z_.\-]+)|(?P<num>(?:[0-9]+\.?[0-9]*|[0-9]*\.?[0-9]+)(?:e-?[0-9]+)?)(?![0-9a-zA-Z_.:@?])"
    r"|(?P<sym>(?:\\[-,=]|[0-9a-zA-Z_.:@?])+)|(?P<op>[|^&<>\-+*/%(),]))"
)
_BIN = {"|": 1, "^": 2, "&": 3, "<": 4, ">": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def _tokens(text: str):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SyntaxError(f"bad character at {pos} in {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    out.append(("end", ""))
    return out


def _unescape(sym: str) -> str:
    return re.sub(r"\\(.)", r"\1", sym).replace("@", "/")


class PerfEval:
    """Evaluate the metrics of one perf file. ``metrics``: name → MetricExpr; ``events``: lower-case
    event name → value; ``literals``: name without ``#`` → value; ``duration``: seconds."""

    def __init__(
        self,
        metrics: dict[str, str],
        events: dict[str, float],
        literals: dict[str, float],
        duration: float,
        source_counts: dict[str, int] | None = None,
    ):
        self.metrics = {k.lower(): v for k, v in metrics.items()}
        self.events, self.literals, self.duration = events, literals, duration
        self.source_counts = source_counts or {}
        self.cache: dict[str, float] = {}

    def metric(self, name: str) -> float:
        """The metric's unscaled value."""
        key = name.lower()
        if key not in self.cache:
            self.cache[key] = self.eval(self.metrics[key])
        return self.cache[key]

    def eval(self, text: str) -> float:
        saved = getattr(self, "toks", None), getattr(self, "i", 0)  # a metric reference evaluates mid-parse
        self.toks, self.i = _tokens(text), 0
        try:
            v = self._if()
            if self.toks[self.i][0] != "end":
                raise SyntaxError(f"trailing input in {text!r}")
            return v
        finally:
            self.toks, self.i = saved

    # parser-evaluator ------------------------------------------------------------------------
    def _peek(self):
        return self.toks[self.i]

    def _take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def _if(self) -> float:
        then = self._bin(1)
        if self._peek() == ("sym", "if"):
            self._take()
            cond = self._bin(1)
            assert self._take() == ("sym", "else")
            other = self._if()
            return other if cond == 0.0 else then  # fpclassify(cond) == FP_ZERO
        return then

    def _bin(self, min_prec: int) -> float:
        left = self._unary()
        while True:
            kind, tok = self._peek()
            prec = _BIN.get(tok) if kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self._take()
            left = self._apply(tok, left, self._bin(prec + 1))

    @staticmethod
    def _apply(op: str, a: float, b: float) -> float:
        if op in "|&^":
            if not (math.isfinite(a) and math.isfinite(b)):
                return NAN
            za, zb = a == 0.0, b == 0.0
            return float({"|": not (za and zb), "&": not za and not zb, "^": za != zb}[op])
        if op == "/":
            return NAN if b == 0.0 else a / b
        if op == "%":
            return float(int(a) % int(b))
        if math.isnan(a) or math.isnan(b):
            return NAN
        return {"+": a + b, "-": a - b, "*": a * b, "<": float(a < b), ">": float(a > b)}[op]

    def _unary(self) -> float:
        if self._peek() == ("op", "-"):
            self._take()
            return -self._unary()
        return self._primary()

    def _args(self) -> list[float]:
        assert self._take() == ("op", "(")
        args = [self._if()]
        while self._peek() == ("op", ","):
            self._take()
            args.append(self._if())
        assert self._take() == ("op", ")")
        return args

    def _primary(self) -> float:
        kind, tok = self._take()
        if kind == "num":
            return float(tok)
        if kind == "lit":
            return self.literals[tok[1:].lower()]
        if tok == "(":
            v = self._if()
            assert self._take() == ("op", ")")
            return v
        if kind == "sym":
            if tok in ("min", "max", "d_ratio") and self._peek() == ("op", "("):
                a, b = self._args()
                if tok == "min":
                    return a if a < b else b
                if tok == "max":
                    return a if a > b else b
                return 0.0 if b == 0.0 else a / b
            if tok == "source_count" and self._peek() == ("op", "("):
                self._take()
                name = _unescape(self._take()[1]).lower()
                assert self._take() == ("op", ")")
                return float(self.source_counts.get(name, 1))  # PMU instances aggregated into the event
            name = _unescape(tok).lower()
            if name == "duration_time":
                return self.duration
            if name in self.metrics:
                return self.metric(name)
            return self.events.get(name, NAN)  # an unknown id evaluates to NaN (expr.y handle_id)
        raise SyntaxError(f"unexpected {tok!r}")
