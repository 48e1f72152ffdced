"""The HTML report's ``serving`` section: the request-level metrics (TTFT, TPOT, ITL, E2E, completed
requests — the catalog's record metrics, over ``requests.parquet``) with their populations and warnings,
and the steady-state table beside the full run's figures when the run has one (``analysis.steady_state``).

The terminal report prints both; the page left them out while its notes spoke of ``e2e_latency_p50`` and
``tpot_*`` (a new user's trial). Every number sits in a cell that carries its exact value, as the rest of
the page does (``html_report``).
"""

from __future__ import annotations

from .html_report import _cell, _table, e, fmt
from .steady_state import in_words, offline_queue_note


def serving_section(r: dict) -> str:
    """``<section id="serving">`` of report.json ``r``; empty when it holds no request-level metric and no
    steady state (a capture without request records)."""
    records = {n: m for n, m in (r.get("metrics") or {}).items() if m.get("population")}  # request, token_gap
    ss = r.get("steady_state")
    if not records and not ss:
        return ""
    out = ['<section id="serving"><h2>Serving (request records)</h2>']
    if records:
        rows = []
        for n, m in sorted(records.items()):
            if isinstance(m.get("value"), list) or "of" not in m and m.get("value") is None:
                continue  # a per-request definition (ttft): the page shows its reductions (ttft_p50, …)
            count, value = m.get("count"), m.get("value")
            rows.append(
                f"<tr><td><code>{e(n)}</code></td>{_cell(value, fmt(value, m.get('unit', '')), 'metric', n)}"
                f"<td>{e('' if count is None else f'{count:,}')}</td><td>{e(m.get('warning') or '')}</td></tr>"
            )
        out.append(
            '<p class="dim">Each over the population it could be measured on: requests, or the gaps between '
            "output tokens (ITL).</p>" + _table(["metric", "value", "population", "note"], rows, "serving")
        )
        q = r.get("offline_queued_s")
        if (
            isinstance(q, (int, float)) and not isinstance(q, bool) and q > 0
        ):  # the terminal's note: TTFT is mostly the wait
            out.append(f'<p class="dim" id="offline-queue">{e(offline_queue_note(q))}</p>')
    if ss:
        out.append(_steady(ss))
    return "".join(out) + "</section>"


def _steady(ss: dict) -> str:
    """The steady-state window and its figures beside the full run's (``report_steady``'s table)."""
    rows = [
        f"<tr><td><code>{e(n)}</code></td>"
        f"{_cell(v.get('steady_state'), fmt(v.get('steady_state'), v.get('unit', '')), 'field', 'steady:' + n)}"
        f"{_cell(v.get('full_run'), fmt(v.get('full_run'), v.get('unit', '')), 'field', 'full:' + n)}</tr>"
        for n, v in (ss.get("metrics") or {}).items()
    ]
    window, span, latencies = in_words(ss)
    head = f'<h3>Steady state</h3><p class="dim">{e(window)}' + (f". {e(span)}; {e(latencies)}" if span else "")
    return head + ".</p>" + _table(["metric", "steady state", "full run"], rows, "steady")


__all__ = ["serving_section"]
