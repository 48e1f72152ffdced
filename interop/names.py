"""Identifiers and strings taken from a catalog, made safe for perfonto's files.

Rules (the metric language's own, ``dsl/metrics.lark`` and ``metrics.compiler.METRIC_NAME``):
- a signal, block, spec or metric name part is ``[a-z][a-z0-9_]*``; anything else in a source name
  becomes ``_`` (``CPU_CLK_UNHALTED.THREAD`` → ``cpu_clk_unhalted_thread``, ``UOPS_EXECUTED.CORE:c1``
  → ``uops_executed_core_c1``);
- a name that would be a keyword of the language gets a trailing ``_``;
- strings are written as JSON string literals (``"`` and ``\\`` escaped, control characters and
  non-ASCII as escapes), which the language reads back with ``ast.literal_eval`` unchanged;
- a result that still does not match the rule raises ``ValueError`` — nothing unchecked is written.
"""

from __future__ import annotations

import ast
import json
import re

IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
METRIC = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
GROUP = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYWORDS = {
    "metric",
    "if",
    "else",
    "and",
    "or",
    "not",
    "groups",
    "bounds",
    "threshold",
    "parent",
    "source",
    "peak",
    "rollup",
    "interval",
    "spec",
    "sum",
    "avg",
    "min",
    "max",
    "abs",
    "clamp",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def ident(text: str, camel: bool = False) -> str:
    """A lower-case identifier for ``text``: ``[a-z][a-z0-9_]*``, never a keyword.

    ``camel=True`` first splits CamelCase words (``MeanOccupancyPerCU`` → ``mean_occupancy_per_cu``).
    """
    s = _CAMEL.sub("_", text) if camel else text
    s = re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")
    if not s:
        s = "x"
    if not s[0].isalpha():
        s = "n" + s
    if s in KEYWORDS:
        s += "_"
    if not IDENT.match(s):  # pragma: no cover - the substitutions above make this impossible
        raise ValueError(f"cannot make an identifier of {text!r}")
    return s


def metric_name(text: str, camel: bool = False) -> str:
    """A metric name: dotted identifiers when the source uses dots between valid parts, else one identifier."""
    parts = [p for p in text.split(".")]
    if len(parts) > 1 and all(re.match(r"^[A-Za-z][A-Za-z0-9_]*$", p) for p in parts):
        out = ".".join(ident(p, camel) for p in parts)
    else:
        out = ident(text, camel)
    if not METRIC.match(out):  # pragma: no cover
        raise ValueError(f"cannot make a metric name of {text!r}")
    return out


def group(text: str) -> str:
    """A group name (the grammar's NAME without dots); case is kept (``TmaL1``)."""
    s = re.sub(r"[^A-Za-z0-9_]+", "_", text.strip()).strip("_") or "group"
    if not (s[0].isalpha() or s[0] == "_"):
        s = "g_" + s
    if s.lower() in KEYWORDS:
        s += "_"
    if not GROUP.match(s):  # pragma: no cover
        raise ValueError(f"cannot make a group name of {text!r}")
    return s


def quote(text: str) -> str:
    """``text`` as a string literal of the metric language (and of JSON)."""
    q = json.dumps(text, ensure_ascii=True)
    if ast.literal_eval(q) != text:  # lone surrogates and the like: drop what cannot round-trip
        q = json.dumps(text.encode("utf-8", "replace").decode("utf-8"), ensure_ascii=True)
    return q


class NameTable:
    """Hands out unique perfonto names for source names; a clash after sanitising gets ``_2``, ``_3`` …"""

    def __init__(self, taken: set[str] | None = None):
        self.taken: set[str] = set(taken or ())
        self.by_source: dict[str, str] = {}

    def get(self, source: str, wanted: str) -> str:
        if source in self.by_source:
            return self.by_source[source]
        name, i = wanted, 2
        while name in self.taken:
            name = f"{wanted}_{i}"
            i += 1
        self.taken.add(name)
        self.by_source[source] = name
        return name
