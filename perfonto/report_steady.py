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


def _caption(doc: dict) -> str | None:
    """What each column is over: the full run is the request records' span (its rates can differ from the
    counters' server-level figures, which are over the counters' span), and the latencies are over the
    requests admitted in the window against every record (a request not yet complete has no TPOT)."""
    if "run_end_s" not in doc:
        return None
    return (
        f"full run: the request records' span, {doc['run_start_s']:.4g} s to {doc['run_end_s']:.4g} s (the "
        "server-level rates above are over the counters' span); latencies: the "
        f"{doc['requests_in_window']:,} requests admitted in the window, against all {doc['requests_total']:,} "
        "records for the full run (one not yet complete has no TPOT)"
    )


def render_steady_state(result, console: Console) -> None:
    """A table of ``result.steady_state`` (``report.json``'s ``steady_state``); nothing when absent."""
    doc = getattr(result, "steady_state", None)
    if not doc:
        return
    whole = doc.get("share_of_run") is not None and doc["share_of_run"] >= 0.999
    t = Table(
        title=(
            f"Steady state: {doc['start_s']:.4g} s to {doc['end_s']:.4g} s ({doc['duration_s']:.4g} s), "
            f"requests in flight ≥ {doc['fraction'] * 100:g} % of the peak of {doc['peak_concurrency']:g} "
            "(--steady-state); "
            + ("the whole run: no ramp-up or drain fell below that level" if whole else "ramp-up and drain left out")
        ),
        title_justify="left",
        caption=_caption(doc),
        caption_justify="left",
    )
    t.add_column("metric")
    t.add_column("steady state", justify="right")
    t.add_column("full run", justify="right")
    for name, row in doc["metrics"].items():
        t.add_row(name, _cell(row["steady_state"], row["unit"]), _cell(row["full_run"], row["unit"]))
    console.print(t)
