"""Human report of a job (rich): headline metrics at server level, the top-down split, the dominant
bottleneck with its drill-down, thresholds crossed, bound violations, a per-chip table; then the sections
of their own modules: the top ops (``report_ops``), the multi-chip section (``report_multichip``: straggler,
collective waits, skew, imbalance, saturation) and the fleet section (``report_fleet``). How a value is
written (units, nulls, shares, names from data) is ``report_format``'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfonto.analysis.bottleneck import stall_shares, tree_children
from perfonto.analysis.capture import Report

from perfonto.analysis.findings import GAIN_SHOWN_MAX, gain_text

from .report_claim import render_context
from .report_fleet import render_fleet
from .report_format import NULL, bare_text, finite, number_text, pct, plain, value_text
from .report_multichip import render_multichip
from .report_ops import render_ops

JobResult = Report


def report_layout(graph, ev):
    """What the server and per-chip tables show (``analysis.report_model``: the catalog's ``report:``,
    or every metric that evaluated, grouped by block); ``report.json`` and the HTML page hold the same."""
    from perfonto.analysis.report_model import report_model

    return report_model(graph, ev)


def headline_metrics(graph, ev) -> list[str]:
    """The metrics of the server table (``report_layout``) of an evaluated graph."""
    return report_layout(graph, ev).headline


def bounds_mark(m, server_value, windows_out: int) -> str:
    """The headline table's note for a metric whose values break its declared bounds ("" if none)."""
    if not m.bounds:
        return ""
    lo, hi = m.bounds
    v = float(server_value) if np.ndim(server_value) == 0 else float("nan")
    parts = []
    if np.isfinite(v) and not (lo - 1e-9 * max(abs(lo), abs(hi), 1.0) <= v <= hi + 1e-9 * max(abs(lo), abs(hi), 1.0)):
        parts.append("server value")
    if windows_out:
        parts.append(f"{windows_out} window value(s)")
    return f"outside bounds {lo:g} .. {hi:g}: {' and '.join(parts)}" if parts else ""


SERVING = [
    "ttft_p50",
    "ttft_p99",
    "tpot_p50",
    "tpot_p99",
    "itl_p50",
    "itl_p99",
    "itl_per_token_p50",
    "tokens_per_emission_mean",
    "e2e_latency_p50",
    "requests_completed",
]


def render_serving(result: JobResult, console: Console) -> None:
    """Latencies over request records and the time split from the device trace."""
    graph = result.evaluated
    rec = result.records or {}
    rows = [(n, rec[n]) for n in SERVING if n in rec and np.ndim(rec[n]) == 0]
    if rows:
        t = Table(
            title="Serving latency (percentiles over each metric's own population: requests, or token gaps for ITL)",
            title_justify="left",
        )
        t.add_column("metric")
        t.add_column("value", justify="right")
        t.add_column("over")
        pops = result.populations or {}
        for n, v in rows:
            p = pops.get(n, {})
            over = f"{p['count']:,} {p.get('population') or 'record'}(s)" if "count" in p else ""
            if p.get("before_run"):  # the warm-up's requests: complete before the counters start
                over += f", {p['before_run']:,} of them before the run's start"
            if p.get("warning"):
                over += f" [yellow]⚠ capped by the run length: {p['unfinished']:,} unfinished[/yellow]"
            t.add_row(n, value_text(v, graph.record_metrics[n].unit_text), over)
        console.print(t)
        gt = result.ground_truth or {}
        if gt.get("offline_queued_s"):
            from perfonto.analysis.steady_state import offline_queue_note

            console.print(offline_queue_note(gt["offline_queued_s"]), highlight=False)
    from .report_steady import render_steady_state

    render_steady_state(result, console)
    ts = result.time_split
    if ts and all(finite(v) is not None for v in ts.values()):
        console.print(
            "Time split (device trace, unions of spans, all chips): "
            + ", ".join(f"{k.replace('_', ' ')} {pct(v)}" for k, v in ts.items())
            + f" (sum {sum(ts.values()) * 100:.1f} %; compute: the spans of every compute op, the memory-bound "
            "ones included, which top-down counts as memory)"
        )
    steps = (result.ground_truth or {}).get("steps")
    if isinstance(steps, (int, float)) and 0 < steps < 20 and (result.ground_truth or {}).get("whole_steps"):
        console.print(
            f"[yellow]note:[/yellow] {int(steps)} whole forward passes in the run (it ends where a step ends, so "
            f"run-level token rates count every step's tokens); token counters advance when a step ends, so "
            f"window-level token rates are spiky — run longer for more steps."
        )
    elif isinstance(steps, (int, float)) and 0 < steps < 20:
        console.print(
            f"[yellow]note:[/yellow] only {int(steps)} forward passes finished in the run; token counters advance "
            f"when a step ends, so window-level token rates are spiky and run-level ones uncertain by about "
            f"{100 / steps:.0f} % — run longer for steadier serving figures."
        )


def _null_why(ev, name: str, null_windows: dict) -> str:
    """Why a metric's server-level value is null: every window null, or (some chips with values) no
    window valid on every chip at once — the server level sums only those — or not computable."""
    if name not in null_windows:
        return "not computable"
    per_chip = np.asarray((getattr(ev, "per_chip", None) or {}).get(name, []), dtype=float)
    if np.isfinite(per_chip).any():
        return "no window valid on every chip at once (see Null window values; some chips have values)"
    return "all windows null (see Null window values)"


def render(result: JobResult, console: Console) -> None:
    """Print the text report of ``result`` (module docstring); nulls print as ``null``, a section
    with nothing evaluated as one line or not at all."""
    from perfonto.analysis.report_json import metric_count, metric_count_text

    graph = result.evaluated
    ev, a = result.evaluation, result.analysis
    gen = graph.generation
    W, C = ev.windows.interval.shape
    W = getattr(ev, "n_windows", W)  # evaluated in pieces: the windows were written, the run is kept per chip
    duration = float(ev.windows.interval.sum(axis=0).mean())
    console.print(
        f"[bold]perfonto[/bold] — {result.model or 'capture'} on {result.chips} x {gen.name}, "
        f"{duration:.3f} s, {W} windows x {C} chips, {metric_count_text(metric_count(result))}"
    )

    t = Table(title="Server level (rates are totals over all chips; ratios are ratios of totals)", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_column("note")
    for name in headline_metrics(graph, ev):
        m = graph.metrics[name]
        note = ""
        if name == "hbm.read_bandwidth":
            peak = gen.spec["spec.hbm.peak_bandwidth"]
            note = f"server peak {result.chips * peak.value:g} {peak.unit_text} (read + write)"
        value = value_text(ev.server[name], m.unit_text)
        if value == NULL:
            why = _null_why(ev, name, a.null_windows)
            note = f"null: {why}" + (f"; {note}" if note else "")
        mark = bounds_mark(m, ev.server[name], a.violation_counts.get(name, 0))
        if name in (getattr(ev, "mismeasured", None) or {}):  # --multiplexed flag: inputs never counted together
            mark = "mismeasured (inputs in different multiplex groups)" + (f"; {mark}" if mark else "")
        if mark:
            value = f"[bold red]⚠[/bold red] {value}"
            note = f"[red]{mark}[/red]" + (f"; {note}" if note else "")
        t.add_row(name, value, note)
    console.print(t)

    render_serving(result, console)

    if getattr(result, "headline", None):
        console.print(
            Text.assemble(("Headline: ", "bold"), f"{result.headline['message']} ({result.headline['metric']})")
        )
    if a.topdown:
        _topdown_table(graph, ev, a, console)
    else:
        console.print("Top-down: not evaluated (no top-down metric in this catalog selection or capture)")
    _bottleneck(graph, a, console)
    _findings(result, graph, ev, a, console)
    _per_chip(graph, ev, a, console)
    if result.multichip is not None and result.chips > 1:
        render_multichip(result.multichip, console)
    render_context(getattr(result, "context", None), console)
    if getattr(result, "fleet", None) is not None:
        render_fleet(result, console)
    for what, files in _written_and_read(result.outputs).items():
        if files:
            console.print(Text(f"{what}: " + ", ".join(f"{k}={v}" for k, v in files.items()), style="dim"))


def _written_and_read(outputs: dict) -> dict[str, dict]:
    """``{"outputs": what this command wrote, "read": the capture files it read}``: ``perfonto analyze``'s
    report lists its capture's files beside what it wrote, and only what lies in the report's own folder
    was written (``perfonto run`` writes its emulated capture there)."""
    home = Path(outputs["report"]).parent if outputs.get("report") else None
    wrote = {k: v for k, v in outputs.items() if home is None or home == Path(v) or home in Path(v).parents}
    return {"outputs": wrote, "read": {k: v for k, v in outputs.items() if k not in wrote}}


def _topdown_table(graph, ev, a, console: Console) -> None:
    """Levels 1 and 2 of the top-down tree with their sum (only when some node was evaluated)."""
    td = Table(title="Top-down levels 1 and 2 (share of core cycles)", title_justify="left")
    td.add_column("node")
    td.add_column("share", justify="right")
    td.add_column("")
    kids = tree_children(graph)
    for name, v in a.topdown.items():
        bar = "█" * int(round(finite(v) / 100 * 40)) if finite(v) is not None else ""
        td.add_row(name, value_text(v, "percent"), bar)
        for child in (c for c in kids.get(name, []) if c in ev.server):  # level 2
            cv = float(ev.server[child]) if np.ndim(ev.server[child]) == 0 else float("nan")
            td.add_row(
                f"  └ {child}", value_text(cv, "percent"), "█" * int(round((cv if np.isfinite(cv) else 0) / 100 * 40))
            )
    total = sum(v for v in a.topdown.values() if np.isfinite(v))
    td.add_row("[dim]sum[/dim]", value_text(total, "percent"), "")
    console.print(td)


def _bottleneck(graph, a, console: Console) -> None:
    """The dominant bottleneck, its children and the drill-down path."""
    if a.bottleneck:
        console.print(
            f"[bold]Dominant bottleneck:[/bold] {a.bottleneck} = {value_text(a.topdown[a.bottleneck], 'percent')} — "
            f"{a.bottleneck_label}"
        )
        for child, v in a.children.items():
            console.print(f"  └ {child} = {value_text(v, graph.metrics[child].unit_text)}")
        if a.drilldown and a.drilldown[0][0] != a.bottleneck:  # two rules, two answers: say which is which
            past = a.bottleneck in {n for n, _, _ in a.thresholds}  # as the thresholds list judges it
            console.print(
                "  (the largest level-1 stall; the drill-down follows the nodes past their "
                + ("thresholds instead)" if past else f"thresholds instead, which {a.bottleneck} is not)")
            )
    if a.drilldown:
        console.print(
            "[bold]Drill-down[/bold] (deepest top-down node above its threshold): "
            + " > ".join(f"{n} ({pct(v)} of time)" for n, v in a.drilldown),
            markup=True,
        )


def _findings(result: JobResult, graph, ev, a, console: Console) -> None:
    """Top ops, tree violations, thresholds crossed, bound violations, nulls, partial coverage,
    unavailable metrics and the notes."""
    if result.ops:
        render_ops(result, console)
    for msg in a.tree_violations:
        console.print(Text.assemble(("Top-down tree: ", "bold red"), plain(msg)))
    if a.thresholds:
        console.print("[bold]Thresholds crossed[/bold] (server level):")
        for name, v, msg in a.thresholds:
            console.print(Text.assemble(f"  • {name} = {value_text(v, graph.metrics[name].unit_text)}: ", plain(msg)))
    render_guided(result.findings or [], console)
    if a.violation_counts:
        console.print("[bold red]Values outside declared bounds[/bold red]:")
        for v in a.violations:
            where = plain(f"{v.host}/{v.chip}" if v.host else str(v.chip))
            console.print(
                f"  • {v.metric} = {number_text(v.value)} on chip {where}, window {v.window} "
                f"(bounds {v.bounds[0]:g} .. {v.bounds[1]:g})"
                + (" — mismeasured" if v.metric in (getattr(ev, "mismeasured", None) or {}) else "")
            )
        for name, n in a.violation_counts.items():
            console.print(f"    {name}: {n} window(s) in all")
    if a.null_windows:
        console.print(
            "[bold]Null window values[/bold] (not computable; never NaN or a made-up number; a window with no "
            "event of a denominator, e.g. no step ending in it, is one; the run-level values divide the run's "
            "totals and keep their value):"
        )
        for k, reasons in sorted(a.null_windows.items()):
            console.print(plain(f"  • {k}: " + ", ".join(f"{n} {r}" for r, n in reasons.items())))
    partial = {k: c for k, c in ev.coverage.items() if c < 0.999999}
    if partial:
        console.print(
            "[bold]Run-level values over part of the run[/bold] (windows with invalid inputs left out of numerator "
            "and denominator):"
        )
        for k, c in sorted(partial.items()):
            console.print(plain(f"  • {k}: {c * 100:.1f} % of the run"))
    if result.unavailable:
        console.print("[bold]Unavailable metrics[/bold] (on this generation, or not fed by this capture):")
        for k, why in sorted(result.unavailable.items()):
            console.print(plain(f"  • {k}: {why}"))
    for note in result.notes:
        console.print(Text.assemble(("note: ", "yellow"), plain(note)))  # catalog and dump text is never markup


def render_guided(found: list[dict], console: Console) -> None:
    """The guided findings (``analysis.findings``): each with its estimated gain, evidence and the next
    metric to look at; catalog text printed as plain text, never markup."""
    if not found:
        return
    console.print(
        "[bold]Findings[/bold] (gain estimated if the cause were removed, from its share of time; the gains "
        "overlap, they do not add up):"
    )
    for f in found:
        gain = f.get("estimated_gain")
        head = f"  • {f['title']}" + (
            f": {'about ' if gain <= GAIN_SHOWN_MAX else ''}{gain_text(gain)} throughput" if gain is not None else ""
        )
        console.print(plain(head))
        console.print(plain(f"      {f['estimate']}"))
        if f.get("caveat"):
            console.print(Text.assemble(("      but: ", "yellow"), plain(f["caveat"])))
        if f.get("why"):
            console.print(plain(f"      why: {f['why']}"))
        if f.get("overlaps"):
            console.print(plain(f"      holds the share of: {', '.join(f['overlaps'])} (listed above)"))
        within = f.get("within")
        if isinstance(within, dict) and within.get("title"):
            share = within.get("share")
            of = f" ({share * 100:.1f} % of the time)" if isinstance(share, (int, float)) else ""
            who = f"this finding and {', '.join(within['with'])} make" if within.get("with") else "this finding makes"
            console.print(plain(f"      within: {within['title']}{of}; {who} up nearly all of it"))
        units = f.get("evidence_units") or {}  # a report.json from before units were kept: bare numbers
        unread = f.get("evidence_unread") if isinstance(f.get("evidence_unread"), dict) else {}
        ev = ", ".join(
            f"{k} = {'null' if v is None else value_text(v, units[k]) if k in units else number_text(v)}"
            for k, v in (f.get("evidence") or {}).items()
            if k not in unread
        )
        if ev:
            console.print(plain(f"      evidence: {ev}"))
        if unread:  # the rule fired on the evidence it had
            console.print(plain("      evidence not read: " + "; ".join(f"{k} ({why})" for k, why in unread.items())))
        if f.get("next"):
            console.print(plain(f"      look next at: {', '.join(f['next'])}"))


def _per_chip(graph, ev, a, console: Console) -> None:
    """The per-chip tables (``report_layout``): the catalog's per-chip columns with the dominant
    top-down node when the tree was evaluated, and a legend of exactly the columns shown; then one
    table per group, its metrics with their units."""
    layout = report_layout(graph, ev)
    shown = layout.per_chip
    if shown or a.topdown:
        pc = Table(title="Per chip (run level)", title_justify="left")
        pc.add_column("chip", justify="right")
        for header in shown.values():
            pc.add_column(plain(header), justify="right")  # the catalog's text: never markup
        if a.topdown:
            pc.add_column("dominant top-down node", justify="left", no_wrap=True)  # the largest stall (stall_shares)
        for ci in range(len(ev.chips)):
            row = [_chip_label(ev, ci)]
            row += [
                _mis(ev, name, ci, bare_text(ev.per_chip[name][ci], graph.metrics[name].unit_text)) for name in shown
            ]
            if a.topdown:
                shares = {n: finite(ev.per_chip[n][ci]) for n in a.topdown}
                fin = stall_shares(graph, {k: v for k, v in shares.items() if v is not None})  # useful work is no stall
                dom = max(fin, key=fin.get) if fin else "—"
                row.append(f"{dom.removeprefix('topdown.')} {fin[dom]:.1f} %" if fin else "—")
            pc.add_row(*row)
        console.print(pc)
        if any(h != n for n, h in shown.items()):  # a legend only where a header abbreviates a metric's name
            legend = plain(f"per-chip columns: {', '.join(f'{h} = {n}' for n, h in shown.items())}")
            legend.stylize("dim")
            console.print(legend)
    for title, names in layout.groups.items():
        gt = Table(title=plain(f"Per chip (run level): {title}"), title_justify="left")
        gt.add_column("chip", justify="right")
        for name in names:
            gt.add_column(plain(name), justify="right")
        for ci in range(len(ev.chips)):
            gt.add_row(
                _chip_label(ev, ci),
                *[_mis(ev, n, ci, value_text(ev.per_chip[n][ci], graph.metrics[n].unit_text)) for n in names],
            )
        console.print(gt)


def _mis(ev, name: str, ci: int, text: str) -> str:
    """A per-chip value marked ``mismeasured`` where chip ``ci`` has a window whose inputs of ``name`` were never
    counted together (``analysis.multiplexed``; a value under ``--multiplexed flag``)."""
    m = (getattr(ev, "mismeasured", None) or {}).get(name)
    return text if m is None or not m[:, ci].any() or text == NULL else f"⚠ {text} mismeasured"


def _chip_label(ev, ci: int):
    """Chip ``ci``'s label in the per-chip tables: ``host/chip`` when the capture has hosts."""
    chip = int(ev.chips[ci])
    return plain(f"{ev.hosts[ci]}/{chip}") if ev.hosts is not None else str(chip)
