"""The terminal report's steady-state table (issue 29, point 6): the serving figures over the longest
interval whose concurrency stays at or above a fraction of its peak (``analysis.steady_state``), beside
the full run's."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table


def _cell(v, unit: str) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    return (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}") + f" {unit}"


def render_steady_state(result, console: Console) -> None:
    """A table of ``result.steady_state`` (``report.json``'s ``steady_state``); nothing when absent."""
    doc = getattr(result, "steady_state", None)
    if not doc:
        return
    from perfonto.analysis.steady_state import in_words

    window, span, latencies = in_words(doc)
    t = Table(
        title=f"Steady state: {window}",
        title_justify="left",
        # the server-level rates are over the counters' span, which can differ from the records'
        caption=f"{span} (the server-level rates above are over the counters' span); {latencies}" if span else None,
        caption_justify="left",
    )
    t.add_column("metric")
    t.add_column("steady state", justify="right")
    t.add_column("full run", justify="right")
    for name, row in doc["metrics"].items():
        t.add_row(name, _cell(row["steady_state"], row["unit"]), _cell(row["full_run"], row["unit"]))
    console.print(t)
