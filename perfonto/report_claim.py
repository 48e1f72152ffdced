"""The report's modelling assumptions and, for a generation with a public claim (Sohu), the comparison
with it (``emulator.claim.run_context``): the claim's scenario projected under the run's preset, the
run's own figure when it is that scenario, and each assumption moved alone toward the claim preset,
the one that moves the projection most first — in the words of ``analysis.context_words``, which the
HTML page prints too."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

#: How the terminal sets each kind of line (``analysis.context_words.context_lines``): a heading flush left, the rest
#: indented (list items and figure lines one step deeper), bullets on list items, bold or dim where it helps.
_DEEPER = ("subitem", "factor")
_BULLET = {"item": "• ", "subitem": "◦ "}
_STYLE = {"head": "bold", "most": "bold", "remark": "dim"}


def render_context(ctx: dict | None, console: Console) -> None:
    """Print the assumptions and the claim comparison of ``ctx`` (nothing when ``ctx`` is None)."""
    from perfonto.analysis.context_words import context_lines

    for kind, text in context_lines(ctx):
        indent = "" if kind == "head" else "    " if kind in _DEEPER else "  "
        console.print(Text(indent + _BULLET.get(kind, "") + text, style=_STYLE.get(kind, "")), highlight=False)
