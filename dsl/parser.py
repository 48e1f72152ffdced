"""Parse metric files (``*.metrics``) into ``MetricDecl`` lists, with diagnostics for syntax errors.

Grammar: ``dsl/metrics.lark`` (LALR, positions propagated). A syntax error is reported as
``file:line:col`` with the offending token, what was expected, and a caret under the spot; parsing of
other files goes on, so one bad file does not hide the problems of the rest.
"""

from __future__ import annotations

import ast as pyast
import functools
import math
import re
import threading
from importlib import resources
from typing import Any, cast

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from perfonto.ontology.diagnostics import Diagnostic, Span, with_source
from perfonto.ontology.files import FileReadError, newlines, read_text

from . import ast

_TOKEN_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "UNIT_BRACKET": "a unit in brackets like [GB/s]",
    "STRING": "a quoted string",
    "CMP_OP": "a comparison",
    "ADD_OP": "`+`",
    "NEG": "`-`",
    "MUL_OP": "`*` or `/`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "EQUAL": "`=`",
    "COMMA": "`,`",
    "COLON": "`:`",
    "PERCENT": "`%`",
    "$END": "end of file",
}


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    """The LALR parser, without a transformer (for error messages and terminal names)."""
    return Lark(_grammar(), parser="lalr", propagate_positions=True, maybe_placeholders=False)


@functools.lru_cache(maxsize=1)
def _grammar() -> str:
    return resources.files("perfonto.dsl").joinpath("metrics.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _building_parser() -> tuple[Lark, "_ToAst"]:
    """The LALR parser with ``_ToAst`` applied as each rule is reduced: the AST is built directly,
    without a parse tree in between (``keep_all_tokens``: the callbacks see every token, so a node's
    span runs from its first token to its last, brackets and keywords included)."""
    tr = _ToAst()
    return Lark(_grammar(), parser="lalr", transformer=tr, keep_all_tokens=True, maybe_placeholders=False), tr


_LOCK = threading.Lock()


MAX_DEPTH = 128  # nesting levels of one expression: below what every code generator and exporter recurses through


class _TooDeep(Exception):
    pass


def _literal(token, span) -> float:
    """A number as written, as a float: refused when it overflows (``1e400``) or underflows to 0
    (``1e-400``: a factor read as 0, or "division by a literal zero" for a divisor that was not written 0)."""
    value = float(token)
    if not math.isfinite(value):
        raise _ClauseError(f"number {token} is out of range", span)
    if value == 0.0 and any(ch in "123456789" for ch in str(token).lower().split("e")[0]):
        raise _ClauseError(f"number {token} underflows to 0 (below about 1e-308); write 0, or scale the unit", span)
    return value


def _depth(e) -> int:
    """Nesting depth of an expression (iterative: a deep tree must not overflow the stack here)."""
    best, stack = 0, [(e, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack += [(c, d + 1) for c in ast.children(n)]
    return best


class _ClauseError(Exception):
    def __init__(self, msg, span):
        super().__init__(msg)
        self.msg, self.span = msg, span


def _unquote(tok) -> str:
    """The string a quoted token means (Python escapes); a bad escape or a lone surrogate is an error."""
    raw = str(tok)
    try:
        text = raw[1:-1] if "\\" not in raw else pyast.literal_eval(raw)  # no escape: the text between the quotes
        text.encode("utf-8")
    except (ValueError, SyntaxError, UnicodeEncodeError) as exc:
        span = Span("", getattr(tok, "line", 0) or 0, getattr(tok, "column", 0) or 0)
        raise _ClauseError(f"invalid string {raw[:40]}: {str(exc).splitlines()[0]}", span) from None
    return text


class _Paren:
    """A parenthesised expression while it is being reduced: the expression, and the brackets, which
    belong to the span of the node that contains it (not to the expression's own)."""

    __slots__ = ("expr", "first", "last")

    def __init__(self, expr, first, last):
        self.expr, self.first, self.last = expr, first, last


class _UnitTok:
    """A unit after a number (its text, and its token for the span)."""

    __slots__ = ("text", "tok")

    def __init__(self, text, tok):
        self.text, self.tok = text, tok


def _x(v):
    return v.expr if isinstance(v, _Paren) else v


class _ToAst(Transformer):
    """Rule callbacks applied during the LALR parse (``_building_parser``). ``file`` and ``text`` are
    set for each parse (under ``_LOCK``), with ``line0``/``pos0``: where the parsed chunk starts in the
    file (0-based line and offset), added to every token position so that spans point into the whole
    file."""

    def __init__(self, file: str = "<string>", text: str = "", line0: int = 0, pos0: int = 0):
        super().__init__()
        self.file = file
        self.text = text
        self.line0, self.pos0 = line0, pos0

    # -- spans from the first and last token or node of a rule --------------------------------------
    def _start(self, v):
        if isinstance(v, Token):
            return v.line + self.line0, v.column, v.start_pos + self.pos0
        if isinstance(v, (_Paren, _UnitTok)):
            return self._start(v.first if isinstance(v, _Paren) else v.tok)
        sp = v.span
        return sp.line, sp.col, sp.start

    def _end(self, v):
        if isinstance(v, Token):
            return v.end_line + self.line0, v.end_column, v.end_pos + self.pos0
        if isinstance(v, (_Paren, _UnitTok)):
            return self._end(v.last if isinstance(v, _Paren) else v.tok)
        sp = v.span  # a node's span: end_col is 0 when it ends on a later line than it starts
        return (sp.line if sp.end_col else -1), sp.end_col, sp.end

    def _span_of(self, first, last) -> Span:
        line, col, start = self._start(first)
        end_line, end_col, end = self._end(last)
        return Span(self.file, line, col, end_col if end_line == line else 0, start, end)

    def _tspan(self, tok: Token) -> Span:
        assert tok.line is not None and tok.column is not None and tok.end_column is not None, "a lexed token"
        end = tok.end_column if tok.end_line == tok.line else 0
        return Span(self.file, tok.line + self.line0, tok.column, end)

    def start(self, items):
        return list(items)

    def metric(self, items: list) -> ast.MetricDecl:
        _, name, unit_tok, _, expr, *clauses = items
        expr = _x(expr)
        kw: dict[str, Any] = {  # MetricDecl's keyword arguments from the clauses (each its own type)
            "description": "",
            "groups": (),
            "bounds": None,
            "threshold": None,
            "parent": None,
            "parent_span": None,
            "source": "",
            "peak": None,
            "peak_span": None,
            "rollup": None,
            "rollup_span": None,
        }
        seen: dict[str, int] = {}
        for kind, value in clauses:
            if kind != "groups":
                seen[kind] = seen.get(kind, 0) + 1
                if seen[kind] == 2:
                    raise _ClauseError(f"metric `{name}` has two `{kind}` clauses", self._tspan(name))
            if kind == "parent":
                kw["parent"], kw["parent_span"] = value
            elif kind == "peak":
                kw["peak"], kw["peak_span"] = value
            elif kind == "rollup":
                kw["rollup"], kw["rollup_span"] = value
            elif kind == "groups":
                kw["groups"] = kw["groups"] + value
            else:
                kw[kind] = value
        if _depth(expr) > MAX_DEPTH:
            raise _TooDeep()
        return ast.MetricDecl(
            name=str(name),
            unit=unit_tok[1:-1].strip(),
            expr=expr,
            formula=_formula(self.text, expr.span),
            span=self._tspan(name),
            unit_span=self._tspan(unit_tok),
            **kw,
        )

    def description(self, items):
        return ("description", _unquote(items[0]))

    def source(self, items):
        return ("source", _unquote(items[1]))

    def groups(self, items):
        return ("groups", tuple(str(t) for t in items[1::2]))

    def bounds(self, items):
        return ("bounds", (items[1], items[3]))

    def threshold(self, items):
        op, bound, msg = items[1], items[2], items[-1]
        gated = len(items) == 6  # `threshold OP BOUND when parent : "msg"`
        span = self._span_of(items[0], items[-1])
        return ("threshold", ast.Threshold(str(op), bound, _unquote(msg), span, when_parent=gated))

    def when_parent(self, items):
        return True

    def parent(self, items):
        return ("parent", (str(items[1]), self._tspan(items[1])))

    def rollup(self, items):
        return ("rollup", (str(items[1]), self._tspan(items[1])))

    def peak(self, items):
        return ("peak", (str(items[1]), self._tspan(items[1])))

    def bound(self, items):
        span = self._span_of(items[0], items[-1])
        sign = 1.0
        rest = items
        if isinstance(rest[0], Token) and rest[0].type == "NEG":
            sign = -1.0
            rest = rest[1:]
        value = _literal(rest[0], span)
        unit = rest[1].text if len(rest) > 1 else None
        return ast.Bound(sign * value, unit, span)

    def unit(self, items):
        t = str(items[0])
        return _UnitTok(t[1:-1].strip() if t.startswith("[") else t, items[0])

    def number(self, items):
        span = self._span_of(items[0], items[-1])
        value = _literal(items[0], span)
        return ast.Number(value, items[1].text if len(items) > 1 else None, span)

    def name(self, items):
        return ast.Name(str(items[0]), self._span_of(items[0], items[0]))

    def call(self, items):
        args = tuple(_x(a) for a in items[2:-1:2])
        return ast.Call(str(items[0]), args, self._span_of(items[0], items[-1]))

    def atom(self, items):  # "(" expr ")"
        return _Paren(_x(items[1]), items[0], items[2])

    def binary(self, items):
        left, op, right = items
        return ast.Binary(str(op), _x(left), _x(right), self._span_of(left, right))

    compare = binary

    def pow(self, items):
        return ast.Binary("**", _x(items[0]), _x(items[2]), self._span_of(items[0], items[2]))

    def or_(self, items):
        return ast.Binary("or", _x(items[0]), _x(items[2]), self._span_of(items[0], items[2]))

    def and_(self, items):
        return ast.Binary("and", _x(items[0]), _x(items[2]), self._span_of(items[0], items[2]))

    def not_(self, items):
        return ast.Unary("not", _x(items[1]), self._span_of(items[0], items[1]))

    def neg(self, items):
        return ast.Unary("-", _x(items[1]), self._span_of(items[0], items[1]))

    def ifelse(self, items):
        then, _, cond, _, other = items
        return ast.IfElse(_x(then), _x(cond), _x(other), self._span_of(then, other))


def _formula(text: str, span: Span) -> str:
    """The formula's source text (whitespace runs folded to one space), cut out by its span's offsets."""
    if span.start < 0 or span.end < span.start:
        return ""
    return " ".join(text[span.start : span.end].split())


def _token_name(t: str) -> str:
    if t in _TOKEN_NAMES:
        return _TOKEN_NAMES[t]
    try:
        pattern = _parser().get_terminal(t).pattern
        return f"`{pattern.value}`" if pattern.type == "str" else t.lower()
    except KeyError:
        return t.lower()


def _expected(exc: UnexpectedInput) -> str:
    names = sorted({_token_name(t) for t in getattr(exc, "expected", ()) or ()})
    if not names:
        return ""
    if len(names) > 6:
        names = names[:6] + ["…"]
    return "expected " + ", ".join(names)


_DECL_START = re.compile(r"^[ \t]*metric\b", re.M)
MAX_DECL_CHARS = (
    65_536  # one declaration (formula and description); past this it is not a metric, and parsing it costs seconds
)


def _oversized(text: str, file: str, a: int, b: int, line: int) -> Diagnostic:
    name = re.match(r"[ \t]*metric[ \t]+([\w.]+)", text[a : a + 300])
    what = f"metric `{name.group(1)}`" if name else "this declaration"
    return Diagnostic(
        "error",
        "too-large",
        f"{what} is {b - a:,} characters long (at most {MAX_DECL_CHARS:,}); a formula or "
        "description of this size is not a metric and is not parsed",
        Span(file, line + 1, 1),
        hint="split the formula into several metrics; keep long prose in the docs, not the description",
    )


def parse_text(text: str, file: str = "<string>") -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """Parse one metric file's text. Returns the declarations and the syntax diagnostics.

    Line ends CR-LF and CR are read as LF (a file saved with classic Mac OS line ends is not one long
    comment). On a syntax error the file is parsed again one declaration at a time (a declaration
    starts at a line beginning with ``metric``), so every broken declaration is reported — each with
    ``file:line:col``, the offending token and what was expected — and the others are kept. Each
    chunk is parsed on its own with its positions shifted, so recovery stays linear in the file size.
    """
    text = newlines(text)
    starts = [m.start() for m in _DECL_START.finditer(text)]
    bounds = [0] + starts[1:] + [len(text)]
    if all(b - a <= MAX_DECL_CHARS for a, b in zip(bounds, bounds[1:])):
        decls, diags = _parse_one(text, file)
        if not diags or len(starts) <= 1:
            return decls, diags
    decls, diags = [], []
    line = 0
    for a, b in zip(bounds, bounds[1:]):
        if b - a > MAX_DECL_CHARS:  # refused before lark sees it: the time and memory stay linear and small
            diags.append(_oversized(text, file, a, b, line))
            line += text.count("\n", a, b)
            continue
        d, dg = _parse_one(text[a:b], file, text, line0=line, pos0=a)
        decls += d
        diags += dg
        line += text.count("\n", a, b)
    return decls, diags


def _parse_one(
    text: str, file: str, full_text: str | None = None, line0: int = 0, pos0: int = 0
) -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """Parse ``text`` — the whole file, or a chunk of ``full_text`` starting at line ``line0 + 1``
    (offset ``pos0``, at the start of a line)."""
    shown = full_text if full_text is not None else text
    try:
        with _LOCK:
            parser, tr = _building_parser()
            tr.file, tr.text, tr.line0, tr.pos0 = file, shown, line0, pos0
            # lark types parse() as returning a Tree; with the transformer built into the parser it returns
            # the transformer's result, _ToAst.start's list of declarations
            decls = cast("list[ast.MetricDecl]", parser.parse(text))
    except _ClauseError as inner:
        span = (
            Span(file, inner.span.line + (line0 if not inner.span.file else 0), inner.span.col)
            if inner.span.line
            else Span(file, line0 + 1, 1)
        )
        return [], [with_source(Diagnostic("error", "syntax", inner.msg, span), shown)]
    except (RecursionError, _TooDeep):
        return [], [
            Diagnostic(
                "error",
                "too-deep",
                "an expression is nested too deeply to parse",
                Span(file, line0 + 1, 1),
                hint="split it into several metrics",
            )
        ]
    except UnexpectedInput as exc:
        line, col = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
        if isinstance(exc, UnexpectedCharacters):
            assert exc.pos_in_stream is not None, "lark's lexer sets where the character is"
            msg = f"unexpected character {text[exc.pos_in_stream]!r}"
            hint = "metric names and units use letters, digits, `_` and `.`; strings use double quotes"
        elif isinstance(exc, UnexpectedEOF):
            msg = "unexpected end of file"
            line, col = _end_of(text)
            hint = _expected(exc)
        elif isinstance(exc, UnexpectedToken):
            tok = exc.token
            tok_text = "end of file" if tok.type == "$END" else f"`{tok}`"
            msg = f"unexpected {tok_text}"
            hint = _expected(exc)
            if tok.type == "$END":
                line, col = _end_of(text)
        else:  # pragma: no cover - lark has no other subclasses today
            msg, hint = str(exc), ""
        d = Diagnostic("error", "syntax", msg, Span(file, line + line0, col), hint=hint)
        return [], [with_source(d, shown)]
    return decls, []


def _end_of(text: str) -> tuple[int, int]:
    """1-based line and column just past the last character of ``text`` (lines split at LF)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines = lines[:-1]
    return len(lines), len(lines[-1]) + 1


def parse_file(path) -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """Parse a metric file from disk (UTF-8); a path that cannot be read as a file (missing, a folder,
    a device, too large, not UTF-8) gives one diagnostic."""
    try:
        text = read_text(path, "metric file")
    except FileReadError as exc:
        code = "not-utf8" if "UTF-8" in exc.reason else "io"
        return [], [
            Diagnostic(
                "error",
                code,
                f"cannot read file: {exc.reason}",
                Span(str(path), exc.line or 1, exc.col or 1) if code == "not-utf8" else Span(str(path), 0, 0),
                hint=exc.hint,
            )
        ]
    return parse_text(text, str(path))
