"""One diagnostic type for every layer: severity, code, message, location, hint.

Rendered in the style of rustc and ruff: ``file:line:col: error[code]: message``, the source line,
a caret under the column, and the hint. Lines and columns are 1-based. Lower layers (dsl, metrics,
codegen, perfonto) reuse this type, so a check reports all problems of all files in one list.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal
from .errors import PerfontoError

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Span:
    """A place in a source file: 1-based line and column; ``end_col`` is exclusive (0 = one char).
    ``start``/``end`` are 0-based character offsets into the file's text (-1 when unknown), so a
    node's source text is ``text[start:end]``."""

    file: str
    line: int = 0
    col: int = 0
    end_col: int = 0
    start: int = -1
    end: int = -1

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    """A problem found in a catalog, with where it is and what to do about it: ``severity``, ``code``
    (stable, e.g. ``unknown-generation``), ``message``, ``span`` (file, line, column), ``hint`` (what to do;
    "" when none) and ``source_line`` (the text of the line, shown under the location by ``render``)."""

    severity: Severity
    code: str
    message: str
    span: Span
    hint: str = ""
    source_line: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from .codes import check_code

        check_code(self.code)

    def render(self) -> str:
        """Multi-line human text: location, message, source line with caret, hint."""
        out = [f"{self.span}: {self.severity}[{self.code}]: {self.message}"]
        if self.source_line and self.span.line > 0:
            gutter = " " * len(str(self.span.line))
            out.append(f"{gutter} |")
            line, col = self.source_line.rstrip(), max(1, self.span.col)
            width = max(1, (self.span.end_col - self.span.col) if self.span.end_col > self.span.col else 1)
            if len(line) > SHOWN_LINE:  # a window around the column: a 2 MB formula line is not printed whole
                lo = max(0, col - 1 - SHOWN_LINE // 3)
                hi = lo + SHOWN_LINE
                head, tail = ("…" if lo > 0 else ""), ("…" if hi < len(line) else "")
                line, col = head + line[lo:hi] + tail, col - lo + len(head)
                width = min(width, SHOWN_LINE)
            out.append(f"{self.span.line} | {_visible(line)}")
            out.append(f"{gutter} | {' ' * max(0, col - 1)}{'^' * width}")
        if self.hint:
            out.append(f"  = help: {self.hint}")
        return "\n".join(out)

    def to_json(self) -> dict:
        """The diagnostic as a JSON object: ``severity`` (``error`` or ``warning``), ``code``,
        ``message``, where it is (``file``, ``line``, ``col``: 1-based; 0 where not known) and ``hint``
        (what to do; "" when none). ``source_line`` (the line of the file shown under ``render``'s
        location) is left out."""
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "col": self.span.col,
            "hint": self.hint,
        }


_INVISIBLE = {
    0x09: " ",
    0x0B: "\ufffd",
    0x0C: "\ufffd",
    0x1C: "\ufffd",
    0x1D: "\ufffd",
    0x1E: "\ufffd",
    0x85: "\ufffd",
    0x2028: "\ufffd",
    0x2029: "\ufffd",
    0x0D: "",
}


def _visible(line: str) -> str:
    """A source line as printed under a diagnostic: a tab as one space and every other character a
    terminal would break the line at (FF, VT, NEL, LS, PS, …) as U+FFFD, one column each, so the caret
    below stays under the column the diagnostic names."""
    return line.translate(_INVISIBLE)


@functools.lru_cache(maxsize=16)
def _lines(text: str) -> tuple[str, ...]:
    """``text`` split at LF, cached (a file with thousands of diagnostics is split once)."""
    return tuple(text.split("\n"))


SHOWN_LINE = 160  # characters of a source line shown under a diagnostic


def with_source(diag: Diagnostic, text: str | None) -> Diagnostic:
    """Attach the source line the diagnostic points at, taken from the file's ``text``.

    Lines are split at LF only — as the readers count them (they turn CR-LF and CR into LF first);
    ``str.splitlines`` would also split at form feeds and Unicode separators and show another line
    than the one named."""
    if text is None or diag.span.line <= 0:
        return diag
    lines = _lines(text)
    if diag.span.line - 1 < len(lines):
        return Diagnostic(diag.severity, diag.code, diag.message, diag.span, diag.hint, lines[diag.span.line - 1])
    return diag


def has_errors(diags: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diags)


class CatalogError(PerfontoError):
    """Raised by APIs that need a clean catalog; carries every diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        head = errors[0].render() if errors else "catalog has errors"
        more = f"\n(and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        super().__init__(head + more)


def escaped(text) -> str:
    """``text`` (a name from data: a host, an op, a GPU model) with every character a terminal would act on
    (NUL, ESC, CR, U+2028 …) shown as its escape (``\\x1b``) instead of sent."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))


def did_you_mean(word: str, candidates) -> str:
    """A "did you mean …?" hint for ``word`` among ``candidates``, or "" when nothing is close; where nothing is
    close as written, the names are compared case-insensitively (``Llama3-70B`` → `llama3-70b`, ``SOHU`` →
    `sohu`). A hint only: names still match exactly."""
    import difflib

    names = [str(c) for c in candidates]
    close = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
    if not close:
        lower: dict[str, str] = {}
        for n in names:
            lower.setdefault(n.lower(), n)
        close = [lower[c] for c in difflib.get_close_matches(str(word).lower(), list(lower), n=3, cutoff=0.6)]
    if not close:
        return ""
    return "did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
