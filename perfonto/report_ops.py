"""The top ops of a run by time (``--by op``): each op's share, work, rate, roofline position and bound."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfonto.analysis.capture import Report

from .report_format import finite, number_text, pct, plain, si_text

__all__ = ["TOP_OPS", "render_ops"]


TOP_OPS = 10


def render_ops(result: Report, console: Console) -> None:
    """The top op classes by time with their roofline position (intensity, FLOP/s per chip while the
    op runs, share of the attainable roof) and bound (``analysis.roofline.op_rows``)."""
    ops = result.ops or []
    att = result.attribution
    src = (
        "exact, from op-boundary counter snapshots"
        if att is not None and att.source.startswith("snapshots")
        else "window increases shared by time x fitted per-op rate"
    )
    t = Table(
        title=f"Top ops by time (counters attributed to the trace's op spans: {src}; per chip while the op runs)",
        title_justify="left",
    )
    for col, just in (
        ("op", "left"),
        ("time", "right"),
        ("work", "left"),
        ("FLOP/s", "right"),
        ("intensity", "right"),
        ("of roof", "right"),
        ("roofline side", "left"),
        ("bound (cycles)", "left"),
    ):
        t.add_column(col, justify=just)
    for r in ops[:TOP_OPS]:
        share = pct(r["time_share"])
        inten = f"{number_text(r['intensity'], '.4g')} FLOP/B" if finite(r["intensity"]) is not None else "—"
        eff = pct(r["efficiency"])
        side = f"{r['side']} ({r['ceiling']})" if r["side"] else "—"
        bound = (r["bound"] or "—").removeprefix("topdown.")
        mark = "" if r.get("reliable", True) else "? " if r.get("determined") is False else "≈ "
        name = plain(mark + r["op"])
        t.add_row(name, share, r["work"] or "—", si_text(r["flops_per_s"], "FLOP/s"), inten, eff, side, bound)
    console.print(t)
    same = {"memory": "topdown.memory_bound", "compute": "topdown.compute_bound", "link": "topdown.interconnect_bound"}
    differ = [r for r in ops[:TOP_OPS] if r["side"] and r["bound"] and same.get(r["side"]) != r["bound"]]
    if differ:
        console.print(
            Text(
                f"roofline side and bound differ for {', '.join(r['op'] for r in differ)}: the side is where the op's "
                "intensity lies against the ridge point (the roofs it could reach); the bound is where its cycles "
                "went (top-down), what the chip did. Near the ridge both roofs are close and the cycles decide.",
                style="dim",
            )
        )
    if any(r.get("determined") is False for r in ops[:TOP_OPS]):
        console.print(
            "[dim]?: not determined — the windows cannot tell this op class's work from another's (their time "
            "shares move together); its work, intensity and side are left out: --op-snapshots gives exact "
            "figures (see the note below)[/dim]"
        )
    if any(not r.get("reliable", True) and r.get("determined") is not False for r in ops[:TOP_OPS]):
        console.print(
            "[dim]≈: approximate — part of the work the windows give this op class could be another's (see the "
            "note below)[/dim]"
        )
    if len(ops) > TOP_OPS:
        console.print(f"[dim]… {len(ops) - TOP_OPS} more op classes in report.json (ops.rows)[/dim]")
