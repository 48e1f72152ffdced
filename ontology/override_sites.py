"""Errors in an inherited value that a child generation's override made wrong, moved to the child's line.

A child that changes a signal's ``kind`` (``ecc_corrected: {kind: gauge}``) keeps every other key its
parent wrote for the counter: the ``width``, the ``emulator`` binding. Those values are then wrong, and
their errors are found at their positions, in the parent's file — which the user of a shipped parent
cannot edit, and which does not say that the child is the cause. So does a child that renames a
signal into another block (a ``split`` over instances the new block lacks). ``at_override`` reports
such an error at the child's ``kind`` (or ``renamed:`` entry) instead, naming the parent's line, and
says which key to override there.
"""

from __future__ import annotations

from .diagnostics import Diagnostic, Span
from .yaml_source import YamlSource


def at_override(diags: list[Diagnostic], src: YamlSource) -> list[Diagnostic]:
    """``diags`` with each one located at a value of a signal that this file (``src.path``, the merged
    generation's own file) does not write, of a signal whose ``kind`` it writes or that it renames,
    moved to that ``kind`` or ``renamed:`` entry (module docstring); the others unchanged."""
    if not any(d.span.file != src.path for d in diags):
        return diags
    anchors = _anchors(src)
    if not anchors:
        return diags
    inherited: dict[Span, tuple[tuple, str]] = {}  # a parent's value's place -> (the signal's loc, its key)
    for loc, span in src.positions.items():
        if len(loc) >= 5 and loc[:4] in anchors and span.file != src.path and loc[4] != "<key>":
            inherited.setdefault(span, (loc[:4], str(loc[4])))
    out = []
    for d in diags:
        hit = inherited.get(d.span)
        if hit is None:
            out.append(d)
            continue
        sloc, key = hit
        at, why = anchors[sloc]
        name = f"{sloc[1]}.{sloc[3]}"
        out.append(
            Diagnostic(
                d.severity,
                d.code,
                f"{d.message} (`{key}` is inherited from {d.span}; {why})",
                at,
                hint=f"override `{key}` in this file's entry for `{name}` (`{key}: null` drops it)"
                + (f"; {d.hint}" if d.hint else ""),
            )
        )
    return out


def _anchors(src: YamlSource) -> dict[tuple, tuple[Span, str]]:
    """Signal loc (``("blocks", b, "signals", s)``) → where this file changes what its inherited values
    mean, and how: its ``kind`` written here, else its ``renamed:`` entry here."""
    out: dict[tuple, tuple[Span, str]] = {}
    renamed = _written(src.data, ("renamed",))
    for old, new in renamed.items() if isinstance(renamed, dict) else ():
        at = src.positions.get(("renamed", old))
        parts = str(new).split(".", 1)
        if at is not None and at.file == src.path and len(parts) == 2:
            out[("blocks", parts[0], "signals", parts[1])] = (at, f"this file renames `{old}` to `{new}`")
    for loc, span in src.positions.items():
        if len(loc) == 5 and loc[0] == "blocks" and loc[2] == "signals" and loc[4] == "kind" and span.file == src.path:
            kind = _written(src.data, loc)
            out[loc[:4]] = (span, f"this file makes `{loc[1]}.{loc[3]}` a {kind}")
    return out


def _written(data, loc: tuple):
    """The value at ``loc`` in the merged ``data``, or None."""
    for k in loc:
        if not isinstance(data, dict):
            return None
        data = data.get(k)
    return data
