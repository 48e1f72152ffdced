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
from importlib import resources

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, v_args
from lark.exceptions import VisitError

from perfonto.ontology.diagnostics import Diagnostic, Span, with_source
from perfonto.ontology.files import FileReadError, newlines, read_text

from . import ast

_TOKEN_NAMES = {
    "NAME": "a name", "NUMBER": "a number", "UNIT_BRACKET": "a unit in brackets like [GB/s]",
    "STRING": "a quoted string", "CMP_OP": "a comparison", "ADD_OP": "`+`", "NEG": "`-`", "MUL_OP": "`*` or `/`",
    "LPAR": "`(`", "RPAR": "`)`", "EQUAL": "`=`", "COMMA": "`,`", "COLON": "`:`", "PERCENT": "`%`",
    "$END": "end of file",
}


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = resources.files("perfonto.dsl").joinpath("metrics.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


class _ClauseError(Exception):
    def __init__(self, msg, span):
        super().__init__(msg)
        self.msg, self.span = msg, span


def _unquote(tok) -> str:
    """The string a quoted token means (Python escapes); a bad escape or a lone surrogate is an error."""
    try:
        text = pyast.literal_eval(str(tok))
        text.encode("utf-8")
    except (ValueError, SyntaxError, UnicodeEncodeError) as exc:
        span = Span("", getattr(tok, "line", 0) or 0, getattr(tok, "column", 0) or 0)
        raise _ClauseError(f"invalid string {str(tok)[:40]}: {str(exc).splitlines()[0]}", span) from None
    return text


class _ToAst(Transformer):
    """Parse tree → AST. ``line0``/``pos0``: where the parsed chunk starts in the file (0-based line
    and offset), added to every position so that spans point into the whole file."""

    def __init__(self, file: str, text: str, line0: int = 0, pos0: int = 0):
        super().__init__()
        self.file = file
        self.text = text
        self.line0, self.pos0 = line0, pos0

    def _span(self, meta) -> Span:
        if getattr(meta, "empty", False):
            return Span(self.file)
        end = meta.end_column if meta.end_line == meta.line else 0
        return Span(self.file, meta.line + self.line0, meta.column, end, meta.start_pos + self.pos0, meta.end_pos + self.pos0)

    def _tspan(self, tok: Token) -> Span:
        end = tok.end_column if tok.end_line == tok.line else 0
        return Span(self.file, tok.line + self.line0, tok.column, end)

    @v_args(meta=True)
    def start(self, meta, items):
        return list(items)

    @v_args(meta=True)
    def metric(self, meta, items):
        name, unit_tok, expr, *clauses = items
        kw = {"description": "", "groups": (), "bounds": None, "threshold": None, "parent": None,
              "parent_span": None, "source": "", "peak": None, "peak_span": None, "rollup": None, "rollup_span": None}
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
        return ast.MetricDecl(
            name=str(name), unit=unit_tok[1:-1].strip(), expr=expr, formula=_formula(self.text, expr.span),
            span=self._tspan(name), unit_span=self._tspan(unit_tok), **kw)

    def description(self, items):
        return ("description", _unquote(items[0]))

    def source(self, items):
        return ("source", _unquote(items[0]))

    def groups(self, items):
        return ("groups", tuple(str(t) for t in items))

    def bounds(self, items):
        return ("bounds", (items[0], items[1]))

    @v_args(meta=True)
    def threshold(self, meta, items):
        op, bound, msg = items
        return ("threshold", ast.Threshold(str(op), bound, _unquote(msg), self._span(meta)))

    def parent(self, items):
        return ("parent", (str(items[0]), self._tspan(items[0])))

    def rollup(self, items):
        return ("rollup", (str(items[0]), self._tspan(items[0])))

    def peak(self, items):
        return ("peak", (str(items[0]), self._tspan(items[0])))

    @v_args(meta=True)
    def bound(self, meta, items):
        sign = 1.0
        if items and isinstance(items[0], Token) and items[0].type == "NEG":
            sign = -1.0
            items = items[1:]
        value = float(items[0])
        if not math.isfinite(value):
            raise _ClauseError(f"number {items[0]} is out of range", self._span(meta))
        unit = items[1] if len(items) > 1 else None
        return ast.Bound(sign * value, unit, self._span(meta))

    def unit(self, items):
        t = str(items[0])
        return t[1:-1].strip() if t.startswith("[") else t

    @v_args(meta=True)
    def number(self, meta, items):
        unit = items[1] if len(items) > 1 else None
        value = float(items[0])
        if not math.isfinite(value):
            raise _ClauseError(f"number {items[0]} is out of range", self._span(meta))
        return ast.Number(value, unit, self._span(meta))

    @v_args(meta=True)
    def name(self, meta, items):
        return ast.Name(str(items[0]), self._span(meta))

    @v_args(meta=True)
    def call(self, meta, items):
        return ast.Call(str(items[0]), tuple(items[1:]), self._span(meta))

    @v_args(meta=True)
    def binary(self, meta, items):
        left, op, right = items
        return ast.Binary(str(op), left, right, self._span(meta))

    @v_args(meta=True)
    def compare(self, meta, items):
        return self.binary(meta, items)

    @v_args(meta=True)
    def pow(self, meta, items):
        return ast.Binary("**", items[0], items[1], self._span(meta))

    @v_args(meta=True)
    def or_(self, meta, items):
        return ast.Binary("or", items[0], items[1], self._span(meta))

    @v_args(meta=True)
    def and_(self, meta, items):
        return ast.Binary("and", items[0], items[1], self._span(meta))

    @v_args(meta=True)
    def not_(self, meta, items):
        return ast.Unary("not", items[0], self._span(meta))

    @v_args(meta=True)
    def neg(self, meta, items):
        return ast.Unary("-", items[1], self._span(meta))

    @v_args(meta=True)
    def ifelse(self, meta, items):
        then, cond, other = items
        return ast.IfElse(then, cond, other, self._span(meta))


def _formula(text: str, span: Span) -> str:
    """The formula's source text (whitespace runs folded to one space), cut out by its span's offsets."""
    if span.start < 0 or span.end < span.start:
        return ""
    return " ".join(text[span.start:span.end].split())


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


def parse_text(text: str, file: str = "<string>") -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """Parse one metric file's text. Returns the declarations and the syntax diagnostics.

    Line ends CR-LF and CR are read as LF (a file saved with classic Mac OS line ends is not one long
    comment). On a syntax error the file is parsed again one declaration at a time (a declaration
    starts at a line beginning with ``metric``), so every broken declaration is reported — each with
    ``file:line:col``, the offending token and what was expected — and the others are kept. Each
    chunk is parsed on its own with its positions shifted, so recovery stays linear in the file size.
    """
    text = newlines(text)
    decls, diags = _parse_one(text, file)
    if not diags:
        return decls, diags
    starts = [m.start() for m in _DECL_START.finditer(text)]
    if len(starts) <= 1:
        return decls, diags
    decls, diags = [], []
    bounds = [0] + starts[1:] + [len(text)]
    line = 0
    for a, b in zip(bounds, bounds[1:]):
        d, dg = _parse_one(text[a:b], file, text, line0=line, pos0=a)
        decls += d
        diags += dg
        line += text.count("\n", a, b)
    return decls, diags


def _parse_one(text: str, file: str, full_text: str | None = None, line0: int = 0,
               pos0: int = 0) -> tuple[list[ast.MetricDecl], list[Diagnostic]]:
    """Parse ``text`` — the whole file, or a chunk of ``full_text`` starting at line ``line0 + 1``
    (offset ``pos0``, at the start of a line)."""
    shown = full_text if full_text is not None else text
    try:
        tree = _parser().parse(text)
    except RecursionError:
        return [], [Diagnostic("error", "too-deep", "an expression is nested too deeply to parse", Span(file, line0 + 1, 1),
                               hint="split it into several metrics")]
    except UnexpectedInput as exc:
        line, col = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
        if isinstance(exc, UnexpectedCharacters):
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
    try:
        decls = _ToAst(file, shown, line0, pos0).transform(tree)
    except VisitError as exc:
        inner = exc.orig_exc
        if isinstance(inner, _ClauseError):
            span = Span(file, inner.span.line + (line0 if not inner.span.file else 0), inner.span.col) if inner.span.line \
                else Span(file, line0 + 1, 1)
            return [], [with_source(Diagnostic("error", "syntax", inner.msg, span), shown)]
        if isinstance(inner, RecursionError):
            return [], [Diagnostic("error", "too-deep", "an expression is nested too deeply to compile", Span(file, line0 + 1, 1),
                                   hint="split it into several metrics")]
        raise
    except RecursionError:
        return [], [Diagnostic("error", "too-deep", "an expression is nested too deeply to compile", Span(file, line0 + 1, 1),
                               hint="split it into several metrics")]
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
        return [], [Diagnostic("error", code, f"cannot read file: {exc.reason}", Span(str(path), 1 if code == "not-utf8" else 0, 1 if code == "not-utf8" else 0),
                               hint=exc.hint)]
    return parse_text(text, str(path))
