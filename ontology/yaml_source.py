"""Read a YAML file into plain data while remembering where every value came from.

PyYAML's safe loader silently keeps the last of two duplicate keys and forgets positions. This reader
composes the node tree itself, so that it can (a) report duplicate keys, (b) refuse alias expansion
past a sane size (billion-laughs), and (c) give every value's 1-based line and column by its path
(``("blocks", "hbm", "signals", "read_bytes", "width")``) for later error messages.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .diagnostics import Diagnostic, Span
from .files import FileReadError, read_bytes

MAX_NODES = 200_000  # after alias expansion; a real catalog has a few thousand
#: A document of more values than this many per byte of its text expands aliases (a YAML bomb); a
#: value takes at least two characters written out, so a large plain file never reaches it.
VALUES_PER_BYTE = 1


@dataclass
class YamlSource:
    """Plain data of one YAML document plus the position of every mapping key and value."""

    path: str
    text: str | None
    data: object = None
    positions: dict[tuple, Span] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def span(self, loc: tuple) -> Span:
        """Position of the value at ``loc``, or of its nearest enclosing value."""
        loc = tuple(loc)
        while loc:
            if loc in self.positions:
                return self.positions[loc]
            loc = loc[:-1]
        return self.positions.get((), Span(self.path, 1, 1))


def _span(path: str, mark) -> Span:
    return Span(path, mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, src: YamlSource, limit: int = MAX_NODES):
        self.src = src
        self.count = 0
        self.limit = limit  # values after alias expansion: MAX_NODES, or more for a larger text
        self.ctor = _Constructor()  # one per read: a constructor remembers every node it built

    def build(self, node, loc: tuple):
        self.count += 1
        if self.count > self.limit:
            raise _TooBig(node)
        if len(loc) > 64:
            raise _Unsupported(node, "the document is nested more than 64 levels deep (or an alias refers to itself)")
        self.src.positions.setdefault(loc, _span(self.src.path, node.start_mark))
        if isinstance(node, yaml.MappingNode):
            out: dict = {}
            keypos: dict = {}
            for knode, vnode in node.value:
                if knode.tag == "tag:yaml.org,2002:merge":
                    raise _Unsupported(
                        knode, "YAML merge keys (`<<`) are not supported in catalogs; write the keys out"
                    )
                key = self.build(knode, loc + ("<key>",))
                if not isinstance(key, (str, int, float, bool)):
                    raise _Unsupported(knode, "mapping keys must be plain scalars")
                if key in out:
                    first = keypos[key]
                    self.src.diagnostics.append(
                        Diagnostic(
                            "error",
                            "yaml-duplicate-key",
                            f"duplicate key `{key}` (first defined at line {first.line})",
                            _span(self.src.path, knode.start_mark),
                            hint="YAML keeps only the last value of a duplicated key; remove or rename one of them",
                        )
                    )
                keypos[key] = _span(self.src.path, knode.start_mark)
                self.src.positions[loc + (key,)] = _span(self.src.path, vnode.start_mark)
                self.src.positions[loc + (key, "<key>")] = keypos[key]
                out[key] = self.build(vnode, loc + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.build(v, loc + (i,)) for i, v in enumerate(node.value)]
        # scalar: let the safe constructor resolve the tag (int, float, bool, null, str)
        try:
            return yaml.SafeLoader.construct_object(self.ctor, node, deep=True)
        except ValueError:  # an integer past Python's digit limit (int("9" * 5000) refuses)
            raise _Unsupported(
                node,
                f"the number `{str(node.value)[:20]}…` has {len(str(node.value))} digits; "
                "a catalog number has at most a few dozen",
            ) from None


class _TooBig(Exception):
    def __init__(self, node):
        self.node = node


class _Unsupported(Exception):
    def __init__(self, node, msg):
        self.node, self.msg = node, msg


class _Constructor(yaml.SafeLoader):
    def __init__(self):
        super().__init__("")


def yaml_newlines(text: str) -> str:
    """Every character YAML reads as a line break (CR-LF, CR, NEL U+0085, LS U+2028, PS U+2029) as LF."""
    if not any(c in text for c in "\r\x85\u2028\u2029"):
        return text
    return text.replace("\r\n", "\n").translate({0x0D: "\n", 0x85: "\n", 0x2028: "\n", 0x2029: "\n"})


_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C parser when PyYAML was built with it


@functools.lru_cache(maxsize=64)
def _compose(text: str) -> list:
    """The node trees of ``text``'s documents, composed once per process and text (node trees are only
    read, never changed); libyaml's parser where PyYAML has it (about 10 x faster, the same 0-based line
    and column marks). Text libyaml refuses is parsed again by PyYAML's Python parser, whose verdict and
    messages (the offending character, the alias's name) are the ones reported. Raises what
    ``yaml.compose_all`` raises (errors are not cached)."""
    try:
        return list(yaml.compose_all(text, Loader=_COMPOSER))
    except yaml.YAMLError:
        return list(yaml.compose_all(text, Loader=yaml.SafeLoader))


def _syntax_message(exc) -> str:
    """PyYAML's syntax error in words, with where the structure it was reading began when that is another
    line (an unclosed ``{`` is found only on a later line: "while parsing a flow mapping at 18:20")."""
    msg = f"malformed YAML: {exc.problem or exc.context}"
    opened = exc.context_mark if exc.problem_mark is not None else None
    if opened is not None and exc.context and opened.line != exc.problem_mark.line:
        msg += f" ({exc.context} at {opened.line + 1}:{opened.column + 1})"
    return msg


def read_yaml(path: str | Path, text: str | None = None) -> YamlSource:
    """Parse one YAML file. Never raises for bad input: problems are in ``.diagnostics``.

    Detects: unreadable paths (a folder, a device, a name too long), undecodable bytes (not UTF-8),
    YAML syntax errors, duplicate keys, merge keys, alias expansion past ``MAX_NODES`` values, more
    than one document, numbers past Python's integer digit limit. Line ends are normalised as YAML
    reads them (CR-LF, CR, NEL, LS, PS all end a line), so diagnostics name the line an editor shows.
    """
    spath = str(path)
    if text is None:
        try:
            raw = read_bytes(path, "YAML file")
        except FileReadError as exc:
            src = YamlSource(spath, None)
            src.diagnostics.append(
                Diagnostic("error", "io", f"cannot read file: {exc.reason}", Span(spath), hint=exc.hint)
            )
            return src
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
            src = YamlSource(spath, None)
            src.diagnostics.append(
                Diagnostic(
                    "error",
                    "not-utf8",
                    f"file is not UTF-8 (byte 0x{raw[exc.start]:02x})",
                    Span(spath, line, col),
                    hint="save the file as UTF-8",
                )
            )
            return src
    text = yaml_newlines(text)
    src = YamlSource(spath, text)
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        col = nul - (text.rfind("\n", 0, nul) + 1) + 1
        src.diagnostics.append(
            Diagnostic(
                "error",
                "yaml-syntax",
                "the file holds a NUL character",
                Span(spath, line, col),
                hint="remove the NUL byte; catalogs are plain text",
            )
        )
        return src
    try:
        nodes = _compose(text)
    except RecursionError:
        src.diagnostics.append(
            Diagnostic(
                "error",
                "yaml-too-deep",
                "the document is nested too deeply to read",
                Span(spath, 1, 1),
                hint="flatten the structure; catalogs need only a few levels",
            )
        )
        return src
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        span = _span(spath, mark) if mark else Span(spath, 1, 1)
        msg = _syntax_message(exc)
        lines = text.splitlines() or [""]
        if mark and mark.line >= len(lines):  # the end of the stream: the last line, not one past it
            span = Span(spath, len(lines), len(lines[-1]) + 1)
            msg += " (at the end of the file)"
        src.diagnostics.append(
            Diagnostic("error", "yaml-syntax", msg, span, hint="check indentation and quoting near this position")
        )
        return src
    except yaml.YAMLError as exc:
        src.diagnostics.append(Diagnostic("error", "yaml-syntax", f"malformed YAML: {exc}", Span(spath, 1, 1)))
        return src
    if not nodes or nodes[0] is None:
        src.diagnostics.append(Diagnostic("error", "yaml-empty", "the file holds no YAML document", Span(spath, 1, 1)))
        return src
    if len(nodes) > 1:
        src.diagnostics.append(
            Diagnostic(
                "error",
                "yaml-multi-doc",
                "a catalog file holds exactly one YAML document",
                _span(spath, nodes[1].start_mark),
                hint="split it into one file per generation",
            )
        )
    builder = _Builder(src, max(MAX_NODES, VALUES_PER_BYTE * len(text)))
    try:
        src.data = builder.build(nodes[0], ())
    except _TooBig as exc:
        src.diagnostics.append(
            Diagnostic(
                "error",
                "yaml-too-large",
                f"the document expands to more than {builder.limit} values, more than its {len(text)} characters "
                "could write out: alias/anchor expansion",
                _span(spath, exc.node.start_mark),
                hint="remove the recursive or repeated aliases",
            )
        )
        src.data = None
    except RecursionError:
        src.diagnostics.append(
            Diagnostic(
                "error",
                "yaml-too-deep",
                "the document is nested too deeply or an alias refers to itself",
                Span(spath, 1, 1),
                hint="remove recursive anchors/aliases",
            )
        )
        src.data = None
    except _Unsupported as exc:
        src.diagnostics.append(Diagnostic("error", "yaml-unsupported", exc.msg, _span(spath, exc.node.start_mark)))
        src.data = None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        src.diagnostics.append(
            Diagnostic(
                "error", "yaml-syntax", f"malformed YAML: {exc}", _span(spath, mark) if mark else Span(spath, 1, 1)
            )
        )
        src.data = None
    return src
