"""The parser of the C-like metric expressions of perf, Intel perfmon and Arm telemetry (lark, LALR).

The grammar (``exprparse.lark``, with each flavour's terminals in ``exprparse_perf.lark`` and
``exprparse_c.lark``) is perf's (``tools/perf/util/expr.y``, lexer ``expr.l``), the common ancestor:

    if_expr := expr 'if' expr 'else' if_expr | expr
    expr    := binary operators, loosest first: '|'  '^'  '&'  ('<' '>')  ('+' '-')  ('*' '/' '%')
               then unary '-', numbers, names, '#literals', calls, '(' if_expr ')'

Flavours differ in tokens only: perf symbols may hold ``. : @ ?`` and ``\\,`` ``\\=`` escapes (``@`` stands
for ``/`` in ``pmu@event@``), literals start with ``#``; Intel adds ``>= <= == !=`` (same level as
``<``/``>``, as its thresholds ``a > 10 & b > 15`` need: ``&`` binds looser than comparisons, as in perf,
not as in Python); Arm formulas use only arithmetic. The result is a source syntax tree (``S*``
nodes); each importer gives it its language's meaning. Parsing and the conversion to ``S*`` nodes
are iterative, and a formula may nest at most ``MAX_DEPTH`` levels, so no input reaches Python's
recursion limit in the importers that walk the tree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from lark import Lark, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.exceptions import VisitError
from lark.visitors import Transformer_NonRecursive
from perfonto.ontology.errors import PerfontoError


class ParseError(PerfontoError, ValueError):
    """A formula that does not parse: what was found, where (1-based column) and the formula
    (shortened past 120 characters)."""

    def __init__(self, message: str, text: str, pos: int):
        shown = text if len(text) <= 120 else text[:117] + "..."
        super().__init__(f"{message} at column {pos + 1} of `{shown}`")


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


PERF_FUNCS = {"min", "max", "d_ratio", "source_count", "has_event", "strcmp_cpuid_str", "aggr_nr"}
C_FUNCS = {"min", "max"}
MAX_DEPTH = 100  # nesting levels of one formula; the deepest shipped perf/Intel formula has 14


@functools.lru_cache(maxsize=2)
def _parser(terms: str) -> Lark:
    here = resources.files("perfonto.interop")
    grammar = (
        here.joinpath("exprparse.lark").read_text(encoding="utf-8")
        + "\n"
        + here.joinpath(f"exprparse_{terms}.lark").read_text(encoding="utf-8")
    )
    return Lark(
        grammar, parser="lalr", lexer="basic", maybe_placeholders=False
    )  # keywords are keywords everywhere, as in perf's lexer


class _ToTree(Transformer_NonRecursive):
    """Parse tree → ``S*`` nodes, without recursion (so a formula of any depth converts)."""

    def __init__(self, text: str, flavour: str):
        super().__init__()
        self.text, self.flavour = text, flavour
        self.funcs = PERF_FUNCS if flavour == "perf" else C_FUNCS

    def num(self, items):
        return SNum(float(items[0]))

    def lit(self, items):
        tok = items[0]
        if self.flavour != "perf":
            raise ParseError(f"unexpected character {'#'!r}", self.text, tok.start_pos)
        return SLit(str(tok)[1:])

    def sym(self, items):
        return SId(str(items[0]))

    def call(self, items):
        name, args = items[0], items[1:]
        if str(name) not in self.funcs:
            raise ParseError("unexpected `(`", self.text, name.end_pos)
        return SCall(str(name), tuple(args))

    def binop(self, items):
        left, op, right = items
        return SBin(str(op), left, right)

    def or_kw(self, items):
        return SBin("or", items[0], items[2])

    def and_kw(self, items):
        return SBin("and", items[0], items[2])

    def neg(self, items):
        return SNeg(items[-1])

    def not_(self, items):
        return SCall("not", (items[-1],))

    def ifelse(self, items):
        then, _, cond, _, other = items
        return SIf(then, cond, other)


_NAMES = {
    "SYM": "a name",
    "NUM": "a number",
    "LIT": "a #literal",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "COMMA": "`,`",
    "MINUS": "`-`",
    "PLUS": "`+`",
    "MUL": "`*`",
    "CMP": "a comparison",
    "OR": "`|`",
    "AND": "`&`",
    "XOR": "`^`",
    "KW_IF": "`if`",
    "KW_ELSE": "`else`",
    "KW_NOT": "`not`",
    "KW_OR": "`or`",
    "KW_AND": "`and`",
    "$END": "end",
}


def _expected(exc) -> str:
    names = sorted({_NAMES.get(t, t.lower()) for t in (getattr(exc, "expected", None) or ())})
    return f" (expected {', '.join(names[:6])}{', …' if len(names) > 6 else ''})" if names else ""


def _depth(tree) -> int:
    """Nesting depth of a lark tree (iterative)."""
    best, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in getattr(node, "children", ()) if hasattr(c, "children"))
    return best


def parse(text: str, flavour: str = "perf"):
    """Parse one expression; ``flavour`` is ``perf``, ``intel`` or ``arm``. Raises ``ParseError``
    (the offending character or token and its column; also for a formula nested more than
    ``MAX_DEPTH`` levels deep, which no real catalog comes near)."""
    text = str(text)
    try:
        tree = _parser("perf" if flavour == "perf" else "c").parse(text)
    except UnexpectedCharacters as exc:
        raise ParseError(f"unexpected character {text[exc.pos_in_stream]!r}", text, exc.pos_in_stream) from None
    except UnexpectedEOF:
        raise ParseError("unexpected `end`", text, len(text)) from None
    except UnexpectedToken as exc:
        tok = exc.token
        want = _expected(exc)
        if tok.type == "$END":
            raise ParseError("unexpected `end`" + want, text, len(text)) from None
        raise ParseError(
            f"unexpected `{tok}`" + want, text, tok.start_pos if tok.start_pos is not None else 0
        ) from None
    except UnexpectedInput as exc:  # pragma: no cover - lark has no other subclasses today
        raise ParseError(str(exc).splitlines()[0], text, getattr(exc, "pos_in_stream", 0) or 0) from None
    if _depth(tree) > MAX_DEPTH:
        raise ParseError(
            f"the formula is nested more than {MAX_DEPTH} levels deep (each operator of a chain such as "
            f"`a + b + c` nests one level: a sum of more than {MAX_DEPTH} terms is refused too; split it into "
            "metrics of fewer terms)",
            text,
            0,
        )
    try:
        return _ToTree(text, flavour).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ParseError):
            raise exc.orig_exc from None
        raise


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
