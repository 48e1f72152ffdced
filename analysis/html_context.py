"""The HTML report's ``assumptions`` section: an emulated run's modelling assumptions and its comparison
with a public claim, in the words the terminal prints (``analysis.context_words``), from ``report.json``'s
``assumptions``, ``preset_says`` and ``claim``; empty for a capture without them."""

from __future__ import annotations

from .context_words import context_lines
from .html_report import e


_TAGS = {  # how the page sets each kind of line (``analysis.context_words.context_lines``); items are list entries
    "head": ("<h2>", "</h2>"),
    "most": ("<p><strong>", "</strong></p>"),
    "remark": ('<p class="dim">', "</p>"),
}


def context_section(r: dict) -> str:
    """``<section id="assumptions">`` of report.json ``r``; empty when it has no assumptions."""
    if not r.get("assumptions"):
        return ""
    ctx = {k: r.get(k) for k in ("assumptions", "preset", "preset_says", "claim")}
    try:
        lines = context_lines(ctx)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a hand-edited report.json
        exc.section = "assumptions"  # type: ignore[attr-defined]  # the command names it
        raise
    out, items = ['<section id="assumptions">'], []
    for kind, text in lines:
        if kind in ("item", "subitem", "factor"):
            items.append(f"<li>{e(text)}</li>")
            continue
        if items:
            out.append(f"<ul>{''.join(items)}</ul>")
            items = []
        opening, closing = _TAGS.get(kind, ("<p>", "</p>"))
        out.append(f"{opening}{e(text)}{closing}")
    if items:
        out.append(f"<ul>{''.join(items)}</ul>")
    return "".join(out) + "</section>"


__all__ = ["context_section"]
