"""A small parser for the C-like metric expressions of perf, Intel perfmon and Arm telemetry.

The grammar is perf's (``tools/perf/util/expr.y``, lexer ``expr.l``), the common ancestor:

    if_expr := expr 'if' expr 'else' if_expr | expr
    expr    := binary operators, loosest first: '|'  '^'  '&'  ('<' '>')  ('+' '-')  ('*' '/' '%')
               then unary '-', numbers, names, '#literals', calls, '(' if_expr ')'

Flavours differ in tokens only: perf symbols may hold ``. : @ ?`` and ``\\,`` ``\\=`` escapes (``@`` stands
for ``/`` in ``pmu@event@``), literals start with ``#``; Intel adds ``>= <= == !=`` (same level as
``<``/``>``, as its thresholds ``a > 10 & b > 15`` need: ``&`` binds looser than comparisons, as in perf,
not as in Python); Arm formulas use only arithmetic. The result is a source syntax tree (``S*``
nodes); each importer gives it its language's meaning.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


class ParseError(ValueError):
    def __init__(self, message: str, text: str, pos: int):
        super().__init__(f"{message} at column {pos + 1} of `{text}`")


@dataclass(frozen=True)
class SNum:
    value: float


@dataclass(frozen=True)
class SId:
    name: str


@dataclass(frozen=True)
class SLit:
    name: str  # without '#'


@dataclass(frozen=True)
class SBin:
    op: str
    left: object
    right: object


@dataclass(frozen=True)
class SNeg:
    operand: object


@dataclass(frozen=True)
class SIf:
    then: object
    cond: object
    other: object


@dataclass(frozen=True)
class SCall:
    fn: str
    args: tuple


_PERF_TOKENS = [
    ("lit", r"#[0-9a-zA-Z_.\-]+"),
    ("num", r"(?:[0-9]+\.?[0-9]*|[0-9]*\.?[0-9]+)(?:e-?[0-9]+)?"),
    ("sym", r"(?:\\[-,=]|[0-9a-zA-Z_.:@?])+"),
    ("op", r"[|^&<>\-+*/%(),]"),
]
_C_TOKENS = [
    ("num", r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"),
    ("sym", r"[A-Za-z_][A-Za-z0-9_.:]*"),
    ("op", r">=|<=|==|!=|[|^&<>\-+*/%(),]"),
]
PERF_FUNCS = {"min", "max", "d_ratio", "source_count", "has_event", "strcmp_cpuid_str", "aggr_nr"}
C_FUNCS = {"min", "max"}
PREC = {"|": 1, "or": 1, "^": 2, "&": 3, "and": 3, "<": 4, ">": 4, "<=": 4, ">=": 4, "==": 4, "!=": 4,
        "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def tokenize(text: str, flavour: str) -> list[tuple[str, str, int]]:
    """Tokens ``(kind, text, position)``; perf's lexer takes the longest match, earlier rule on a tie."""
    rules = _PERF_TOKENS if flavour == "perf" else _C_TOKENS
    out, i = [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        best = None
        for kind, pat in rules:
            m = re.compile(pat).match(text, i)
            if m and m.end() > i and (best is None or m.end() > best[2]):
                best = (kind, m.group(0), m.end())
        if best is None:
            raise ParseError(f"unexpected character {text[i]!r}", text, i)
        kind, tok, end = best
        if kind == "sym" and tok in ("if", "else", "and", "or", "not"):
            kind = "kw"
        out.append((kind, tok, i))
        i = end
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str, flavour: str):
        self.text = text
        self.flavour = flavour
        self.toks = tokenize(text, flavour)
        self.i = 0
        self.funcs = PERF_FUNCS if flavour == "perf" else C_FUNCS

    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, tok: str):
        t = self.take()
        if t[1] != tok:
            raise ParseError(f"expected `{tok}`, found `{t[1] or 'end'}`", self.text, t[2])

    def if_expr(self):
        e = self.binary(1)
        if self.peek()[1] == "if":
            self.take()
            c = self.binary(1)
            self.expect("else")
            return SIf(e, c, self.if_expr())
        return e

    def binary(self, min_prec: int):
        left = self.unary()
        while True:
            kind, tok, _ = self.peek()
            prec = PREC.get(tok) if kind in ("op", "kw") else None
            if prec is None or prec < min_prec:
                return left
            self.take()
            left = SBin(tok, left, self.binary(prec + 1))

    def unary(self):
        kind, tok, pos = self.peek()
        if tok == "-" and kind == "op":
            self.take()
            return SNeg(self.unary())
        if tok == "not" and kind == "kw":
            self.take()
            return SCall("not", (self.unary(),))
        return self.primary()

    def primary(self):
        kind, tok, pos = self.take()
        if kind == "num":
            return SNum(float(tok))
        if kind == "lit":
            return SLit(tok[1:])
        if tok == "(":
            e = self.if_expr()
            self.expect(")")
            return e
        if kind == "sym":
            if tok in self.funcs and self.peek()[1] == "(":
                self.take()
                args = [self.if_expr()]
                while self.peek()[1] == ",":
                    self.take()
                    args.append(self.if_expr())
                self.expect(")")
                return SCall(tok, tuple(args))
            return SId(tok)
        raise ParseError(f"unexpected `{tok or 'end'}`", self.text, pos)


def parse(text: str, flavour: str = "perf"):
    """Parse one expression; ``flavour`` is ``perf``, ``intel`` or ``arm``. Raises ``ParseError``."""
    p = _Parser(text, flavour)
    e = p.if_expr()
    kind, tok, pos = p.peek()
    if kind != "end":
        raise ParseError(f"unexpected `{tok}`", text, pos)
    return e


def perf_symbol(name: str) -> str:
    """A perf symbol as perf sees it: ``@`` → ``/``, ``\\x`` → ``x`` (``normalize()`` in expr.l)."""
    out, i = [], 0
    while i < len(name):
        c = name[i]
        if c == "\\" and i + 1 < len(name):
            out.append(name[i + 1])
            i += 2
            continue
        out.append("/" if c == "@" else c)
        i += 1
    return "".join(out)
