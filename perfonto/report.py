"""Human report of a job (rich): headline metrics at server level, the top-down split, the dominant
bottleneck with its drill-down, thresholds crossed, bound violations, a per-chip table, and the
multi-chip section (``render_multichip``: straggler, collective waits, skew, imbalance, saturation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text

from perfonto.analysis.bottleneck import tree_children
from perfonto.analysis.capture import Report

from .report_claim import render_context

JobResult = Report


NULL = "null"  # how the text report shows a value that is not computable (JSON null), never "nan"


def plain(text: str) -> Text:
    """A name from data (host, chip, op, node) as terminal text: never read as rich markup, and its
    control characters (NUL, ESC, CR, U+2028 …) shown escaped (``\\x00``) rather than sent to the terminal."""
    from perfonto.ontology.diagnostics import escaped

    return Text(escaped(text))


def report_layout(graph, ev):
    """What the server and per-chip tables show (``analysis.report_model``: the catalog's ``report:``,
    or every metric that evaluated, grouped by block); ``report.json`` and the HTML page hold the same."""
    from perfonto.analysis.report_model import report_model

    return report_model(graph, ev)


def headline_metrics(graph, ev) -> list[str]:
    """The metrics of the server table (``report_layout``) of an evaluated graph."""
    return report_layout(graph, ev).headline


def finite(v) -> float | None:
    """``v`` as a float, or None when it is None, NaN, infinite or not a number (a NumPy scalar of
    any width, or a 0-d array, included)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def pct(v, digits: int = 1, scale: float = 100.0) -> str:
    """A share as ``12.3 %`` (``v × scale``); ``—`` when it is null or not finite."""
    f = finite(v)
    return "—" if f is None else f"{f * scale:.{digits}f} %"


def _fmt(v, unit: str = "") -> str:
    """A value with its unit (``12.345 GB/s``, ``1.23e+09 B``); ``null`` when not computable: the one
    formatter of the terminal and HTML reports (``analysis.report_json.format_value``)."""
    from perfonto.analysis.report_json import format_value

    return format_value(finite(v), unit)


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
            if p.get("warning"):
                over += f" [yellow]⚠ capped by the run length: {p['unfinished']:,} unfinished[/yellow]"
            t.add_row(n, _fmt(v, graph.record_metrics[n].unit_text), over)
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
        value = _fmt(ev.server[name], m.unit_text)
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
        td.add_row(name, _fmt(v, "percent"), bar)
        for child in (c for c in kids.get(name, []) if c in ev.server):  # level 2
            cv = float(ev.server[child]) if np.ndim(ev.server[child]) == 0 else float("nan")
            td.add_row(f"  └ {child}", _fmt(cv, "percent"), "█" * int(round((cv if np.isfinite(cv) else 0) / 100 * 40)))
    total = sum(v for v in a.topdown.values() if np.isfinite(v))
    td.add_row("[dim]sum[/dim]", _fmt(total, "percent"), "")
    console.print(td)


def _bottleneck(graph, a, console: Console) -> None:
    """The dominant bottleneck, its children and the drill-down path."""
    if a.bottleneck:
        console.print(
            f"[bold]Dominant bottleneck:[/bold] {a.bottleneck} = {_fmt(a.topdown[a.bottleneck], 'percent')} — "
            f"{a.bottleneck_label}"
        )
        for child, v in a.children.items():
            console.print(f"  └ {child} = {_fmt(v, graph.metrics[child].unit_text)}")
        if a.drilldown and a.drilldown[0][0] != a.bottleneck:  # two rules, two answers: say which is which
            from perfonto.analysis.bottleneck import _crossed

            thr = graph.metrics[a.bottleneck].threshold
            past = thr is not None and _crossed(thr[0], float(a.topdown[a.bottleneck]), thr[1])
            console.print(
                "  (the largest level-1 share; the drill-down follows the nodes past their "
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
        console.print(f"[bold red]Top-down tree:[/bold red] {msg}")
    if a.thresholds:
        console.print("[bold]Thresholds crossed[/bold] (server level):")
        for name, v, msg in a.thresholds:
            console.print(f"  • {name} = {_fmt(v, graph.metrics[name].unit_text)}: {msg}")
    render_guided(result.findings or [], console)
    if a.violation_counts:
        console.print("[bold red]Values outside declared bounds[/bold red]:")
        for v in a.violations:
            console.print(
                f"  • {v.metric} = {_g(v.value)} on chip {v.chip}, window {v.window} (bounds {v.bounds[0]:g} .. "
                f"{v.bounds[1]:g})" + (" — mismeasured" if v.metric in (getattr(ev, "mismeasured", None) or {}) else "")
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
            console.print(f"  • {k}: " + ", ".join(f"{n} {r}" for r, n in reasons.items()), markup=False)
    partial = {k: c for k, c in ev.coverage.items() if c < 0.999999}
    if partial:
        console.print(
            "[bold]Run-level values over part of the run[/bold] (windows with invalid inputs left out of numerator "
            "and denominator):"
        )
        for k, c in sorted(partial.items()):
            console.print(f"  • {k}: {c * 100:.1f} % of the run", markup=False)
    if result.unavailable:
        console.print("[bold]Unavailable metrics[/bold] (on this generation, or not fed by this capture):")
        for k, why in sorted(result.unavailable.items()):
            console.print(f"  • {k}: {why}", markup=False)
    for note in result.notes:
        console.print(Text.assemble(("note: ", "yellow"), note))  # catalog and dump text is never markup


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
        head = f"  • {f['title']}" + (f": about {gain * 100:+.1f} % throughput" if gain is not None else "")
        console.print(Text(head))
        console.print(Text(f"      {f['estimate']}"))
        if f.get("why"):
            console.print(Text(f"      why: {f['why']}"))
        if f.get("overlaps"):
            console.print(Text(f"      holds the share of: {', '.join(f['overlaps'])} (listed above)"))
        within = f.get("within")
        if isinstance(within, dict) and within.get("title"):
            share = within.get("share")
            of = f" ({share * 100:.1f} % of the time)" if isinstance(share, (int, float)) else ""
            who = f"this finding and {', '.join(within['with'])} make" if within.get("with") else "this finding makes"
            console.print(Text(f"      within: {within['title']}{of}; {who} up nearly all of it"))
        units = f.get("evidence_units") or {}  # a report.json from before units were kept: bare numbers
        ev = ", ".join(
            f"{k} = {'null' if v is None else _fmt(v, units[k]) if k in units else _g(v)}"
            for k, v in (f.get("evidence") or {}).items()
        )
        if ev:
            console.print(Text(f"      evidence: {ev}"))
        if f.get("next"):
            console.print(Text(f"      look next at: {', '.join(f['next'])}"))


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
            pc.add_column(header, justify="right")
        if a.topdown:
            pc.add_column("dominant top-down node", justify="left", no_wrap=True)
        for ci in range(len(ev.chips)):
            row = [_chip_label(ev, ci)]
            row += [_mis(ev, name, ci, _bare(ev.per_chip[name][ci], graph.metrics[name].unit_text)) for name in shown]
            if a.topdown:
                shares = {n: finite(ev.per_chip[n][ci]) for n in a.topdown}
                fin = {k: v for k, v in shares.items() if v is not None}
                dom = max(fin, key=fin.get) if fin else "—"
                row.append(f"{dom.removeprefix('topdown.')} {fin[dom]:.1f} %" if fin else "—")
            pc.add_row(*row)
        console.print(pc)
        if any(h != n for n, h in shown.items()):  # a legend only where a header abbreviates a metric's name
            console.print(f"[dim]per-chip columns: {', '.join(f'{h} = {n}' for n, h in shown.items())}[/dim]")
    for title, names in layout.groups.items():
        gt = Table(title=Text(f"Per chip (run level): {title}"), title_justify="left")
        gt.add_column("chip", justify="right")
        for name in names:
            gt.add_column(plain(name), justify="right")
        for ci in range(len(ev.chips)):
            gt.add_row(
                _chip_label(ev, ci),
                *[_mis(ev, n, ci, _fmt(ev.per_chip[n][ci], graph.metrics[n].unit_text)) for n in names],
            )
        console.print(gt)


def _bare(v, unit: str) -> str:
    """A value formatted by its unit's rule (``_fmt``: a percent with two decimals) without the unit, which
    the column's header carries (a per-chip PCIe % printed 0.0009797 beside the server's 0.00 %)."""
    text = _fmt(v, unit)
    shown = " %" if unit in ("percent", "%") else f" {unit}"  # the unit as _fmt writes it after the number
    return text[: -len(shown)] if unit and text.endswith(shown) else text


def _mis(ev, name: str, ci: int, text: str) -> str:
    """A per-chip value marked ``mismeasured`` where chip ``ci`` has a window whose inputs of ``name`` were never
    counted together (``analysis.multiplexed``; a value under ``--multiplexed flag``)."""
    m = (getattr(ev, "mismeasured", None) or {}).get(name)
    return text if m is None or not m[:, ci].any() or text == NULL else f"⚠ {text} mismeasured"


def _chip_label(ev, ci: int):
    """Chip ``ci``'s label in the per-chip tables: ``host/chip`` when the capture has hosts."""
    chip = int(ev.chips[ci])
    return plain(f"{ev.hosts[ci]}/{chip}") if ev.hosts is not None else str(chip)


TOP_OPS = 10


def _g(v, spec: str = ".6g") -> str:
    """A bare number (``1.23457e+09``); ``null`` when not computable."""
    f = finite(v)
    return NULL if f is None else format(f, spec)


def _eng(v, unit: str) -> str:
    """A number with an SI prefix (``1.23 PFLOP/s``); ``—`` for None."""
    v = finite(v)
    if v is None:
        return "—"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{v / factor:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def render_ops(result: JobResult, console: Console) -> None:
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
        inten = f"{_g(r['intensity'], '.4g')} FLOP/B" if finite(r["intensity"]) is not None else "—"
        eff = pct(r["efficiency"])
        side = f"{r['side']} ({r['ceiling']})" if r["side"] else "—"
        bound = (r["bound"] or "—").removeprefix("topdown.")
        name = plain(r["op"] if r.get("reliable", True) else f"≈ {r['op']}")
        t.add_row(name, share, r["work"] or "—", _eng(r["flops_per_s"], "FLOP/s"), inten, eff, side, bound)
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
    if any(not r.get("reliable", True) for r in ops[:TOP_OPS]):
        console.print(
            "[dim]≈: approximate — the per-op rate model does not fit these windows (see the note below)[/dim]"
        )
    if len(ops) > TOP_OPS:
        console.print(f"[dim]… {len(ops) - TOP_OPS} more op classes in report.json (ops.rows)[/dim]")


def _ms(v: float) -> str:
    if finite(v) is None:
        return "—"
    return f"{v * 1e3:,.3f} ms" if abs(v) >= 1e-4 else f"{v * 1e6:,.2f} µs"


def _wait_table(mc: dict, coll: dict, console: Console) -> None:
    t = Table(title="Collective wait per chip (arrival to the last chip's arrival)", title_justify="left")
    t.add_column("chip", justify="right")
    t.add_column("wait", justify="right")
    t.add_column("share of run", justify="right")
    t.add_column("waits mostly for", justify="left")
    dur = mc.get("duration_s", 0) or 1.0
    for c, w in enumerate(coll["wait_s"]):
        wf = coll["waits_for"].get(str(c), {})
        top = max(wf, key=wf.get) if wf else None
        t.add_row(
            str(c), _ms(w), pct(w / dur, 2), f"chip {top} ({pct(wf[top] / w, 0)})" if top is not None and w > 0 else "—"
        )
    console.print(t)


def straggler_wait(st: dict, chips: int, duration_s: float | None) -> str:
    """The wait a straggler causes, as chip time: the sum over the other chips, each one's mean and its share
    of the run (a sum of 735 ms over 7 chips in a 1.1 s run read like wall time)."""
    others = max(chips - 1, 1)
    each = st["blamed_wait_s"] / others
    of_run = f", {pct(each / duration_s, 1)} of the {duration_s:.3f} s run" if duration_s else ""
    return (
        f"the {others} other chip(s) wait for it {_ms(st['blamed_wait_s'])} of chip time in collectives, "
        f"{_ms(each)} each on average{of_run} ({pct(st['share'], 0)} of all collective wait)"
    )


def render_multichip(mc: dict, console: Console) -> None:
    """The multi-chip section, from ``perfonto.crosschip.analyse``: the straggler (or that there is
    none), each chip's collective wait and whom it waits for, the per-step skew, load imbalance
    (1 − mean/max) across and within chips, slow links, and the windows where PCIe or a link
    saturates (host time)."""
    chips = mc.get("chips", 0)
    coll = mc.get("collective")
    console.print(f"[bold]Multi-chip[/bold] ({chips} chips, on the host timeline)")
    al = mc.get("alignment", {})
    if "error_ns" in al:
        e = al["error_ns"]
        console.print(
            f"  clocks aligned from the sync reads: error median {e['median']:.0f} ns, p99 {e['p99']:.0f} ns "
            f"over {al['samples']:,} timestamps"
        )
    if coll:
        st = coll.get("straggler")
        if st:
            wait = straggler_wait(st, chips, coll.get("duration_s"))
            console.print(f"  [bold red]Straggler: chip {st['chip']}[/bold red] — {wait}")
        else:
            console.print(
                f"  no straggler: collective wait is {pct(coll['wait_share_of_time'], 2)} of the chips' time"
                + (" (within the clock-alignment noise)" if coll["wait_share_of_time"] < 1e-3 else "")
            )
        if st or coll["wait_share_of_time"] >= 1e-3:
            _wait_table(mc, coll, console)
        sk = coll["skew"]
        console.print(
            f"  per-step skew (largest arrival spread at a collective): median {_ms(sk['arrival_p50_s'])}, "
            f"max {_ms(sk['arrival_max_s'])} over {sk['steps']} steps that hold a collective in the trace (whole or "
            "in part); forward-pass start skew max "
            f"{_ms(sk['exec_start_max_s'])}"
        )
    imb = mc.get("imbalance", {})
    if imb:
        across = ", ".join(f"{b} {pct(v)}" for b, v in imb.get("across_chips", {}).items())
        within = ", ".join(f"{b} {pct(d['value'])} (chip {d['chip']})" for b, d in imb.get("within_chip", {}).items())
        console.print(f"  load imbalance 1 − mean/max across chips: {across}")
        if within:
            console.print(f"  load imbalance across instances within a chip (worst chip): {within}")
    for sl in mc.get("slow_links", [])[:4]:
        console.print(
            f"  [bold red]Slow link: chip {sl['chip']} link {sl['link']}[/bold red] carries its bytes at "
            f"{pct(sl['rate_ratio'], 0)} of the median link's rate (busy {_ms(sl['busy_s'])} vs "
            f"{_ms(sl['median_busy_s'])})"
        )
    sat = mc.get("saturation", {})
    if sat:
        ivs = sat.get("intervals", [])
        if not ivs:
            console.print(
                f"  no PCIe or link window at or above {sat['threshold'] * 100:.0f} % "
                f"(peaks: PCIe {pct(sat['pcie_util_max'])}, link {pct(sat['link_util_max'])})"
            )
        elif sat.get("per_chip"):  # one line per chip and kind; the merged ranges are in report.json
            console.print(
                f"  {sat['count']} saturated interval(s) (≥ {sat['threshold'] * 100:.0f} % of a window; counted per "
                "link and PCIe port, each a run of windows), merged per chip:"
            )
            for r in sat["per_chip"][:8]:
                what = f"chip {r['chip']} PCIe" if r["kind"] == "pcie" else f"chip {r['chip']} links {r['links']}"
                console.print(
                    f"    {what}: {r['windows']} window(s) in {r['bursts']} burst(s), {r['first_s'] * 1e3:,.1f} – "
                    f"{r['last_s'] * 1e3:,.1f} ms, peak {pct(r['peak_util'])}"
                )
            if len(sat["per_chip"]) > 8:
                console.print(f"    … {len(sat['per_chip']) - 8} more chip/kind(s) in report.json")
        else:
            console.print(f"  {sat['count']} saturated interval(s) (≥ {sat['threshold'] * 100:.0f} % of a window):")
            for iv in ivs[:8]:
                what = f"chip {iv['chip']} PCIe" if iv["kind"] == "pcie" else f"chip {iv['chip']} link {iv['link']}"
                console.print(
                    f"    {what}: {iv['start_s'] * 1e3:,.3f} – {iv['end_s'] * 1e3:,.3f} ms "
                    f"({iv['windows']} window(s), peak {pct(iv['peak_util'])})"
                )
            if len(ivs) > 8:
                console.print(f"    … {sat['count'] - 8} more in report.json")


def render_fleet(result: JobResult, console: Console, max_rows: int = 12) -> None:
    """The fleet section: the report's fleet metrics (``report_layout``) per pod, rack and host (ratios
    of totals; the largest levels cut to ``max_rows`` rows), their spread across chips, the chips that
    stand out, and the racks and pods that stand out as a group."""
    fleet = result.fleet
    graph = result.evaluated
    shown = report_layout(graph, result.evaluation).fleet  # the catalog's `report: fleet`, or its headline's first
    names = [n for n in shown if n in graph.metrics and n in fleet.values.get("fleet", {})]
    for level in ("fleet", "pod", "rack", "host"):
        if level in fleet.nodes:
            console.print(_level_table(fleet, graph, names, level, max_rows))
    console.print(_spread_table(fleet, graph, names))
    _nodes_out(fleet, graph, names, console)


def _level_table(fleet, graph, names: list[str], level: str, max_rows: int) -> Table:
    """One level's fleet table: a row per node (the first ``max_rows``), a column per metric of ``names``;
    a column whose node value is the extreme of its chips' (``metrics.across_chips.chip_extreme``: a
    ``rollup max|min``, or a gauge combined by ``max``) says so, not read as a ratio of totals."""
    from perfonto.metrics.across_chips import chip_extreme

    nodes = fleet.nodes[level]
    extreme = {n: chip_extreme(graph, n) for n in names}
    said = "; (max) and (min) columns: the extreme over those chips" if any(extreme.values()) else ""
    t = Table(
        title=f"Fleet — per {level} ({len(nodes)}; ratios of totals over each node's chips{said})",
        title_justify="left",
    )
    t.add_column(level, overflow="fold")  # a long name wraps whole: names cut alike would read as one node
    places = _host_racks(fleet) if level == "host" else {}
    where = [k for k in ("rack", "pod") if any(p[k] for p in places.values())]
    for k in where:
        t.add_column(k, overflow="fold")
    t.add_column("chips", justify="right")
    for n in names:
        t.add_column(n + (f" ({extreme[n]})" if extreme[n] else ""), justify="right", overflow="fold")
    for i, node in enumerate(nodes[:max_rows]):
        t.add_row(
            plain(node),
            *[plain(places[node][k] or "—") for k in where],
            str(int(fleet.chips[level][i])),
            *[_fmt(fleet.values[level][n][i], graph.metrics[n].unit_text) for n in names],
        )
    if len(nodes) > max_rows:
        t.add_row(
            f"… {len(nodes) - max_rows} more in report.json (fleet.levels.{level})",
            *["" for _ in where],
            "",
            *["" for _ in names],
        )
    return t


def _host_racks(fleet) -> dict[str, dict[str, str | None]]:
    """Each host's rack and pod, for the host table (``analysis.fleet_words.host_places``)."""
    from perfonto.analysis.fleet_words import host_places

    return host_places((h, rack, pod) for h, _, rack, pod in fleet.place)


def _spread_table(fleet, graph, names: list[str]) -> Table:
    """The spread of ``names`` across chips (or hosts, for leader-counted metrics) and the chips that
    stand out on either side (the first three)."""
    from perfonto.analysis.fleet_words import over_hosts, past, who

    t = Table(
        title="Spread across chips, or hosts where marked (one stands out at a modified z-score past 3.5 and "
        "≥ 1 % from p50)",
        title_justify="left",
    )
    hosts = len(fleet.nodes.get("host", []))
    longest = max(
        [
            len(n) + (len(over_hosts(fleet.spread[n], hosts)) if fleet.spread.get(n, {}).get("over") else 0)
            for n in names
        ]
        or [6]
    )
    t.add_column("metric", no_wrap=True, min_width=longest)  # a metric's name whole, on one line
    for col in (
        "p50",
        "p99",
        "max",
        "past threshold",
        "chips that stand out high (host/chip, rack, vs p50)",
        "low",
    ):
        t.add_column(col, overflow="fold")
    hosts = len(fleet.nodes.get("host", []))
    for n in names:
        sp, out = fleet.spread.get(n), fleet.outliers.get(n, {})
        if not sp or sp.get("p50") is None:
            continue
        unit = graph.metrics[n].unit_text
        thr = sp.get("threshold")
        side = {}
        for k in ("high", "low"):
            shown = out.get(k, [])[:3]
            text = ", ".join(who(o) + " " + _versus(graph, n, o["value"], sp["p50"], o.get("relative")) for o in shown)
            more = (sp.get("stand_out") or {}).get(k, len(shown)) - len(shown)
            side[k] = (text + (f", … {more} more" if more > 0 else "")) or "—"
        t.add_row(
            n + (over_hosts(sp, hosts) if sp.get("over") == "hosts" else ""),
            _fmt(sp["p50"], unit),
            _fmt(sp["p99"], unit),
            _fmt(sp["max"], unit),
            past(thr),
            plain(side["high"]),
            plain(side["low"]),
        )
    return t


def _versus(graph, name: str, value: float, reference: float, relative: float | None) -> str:
    """How far ``value`` is from ``reference``, as the reports say it (``analysis.fleet_words.versus``: degC
    differences in degrees, the others a signed percent)."""
    from perfonto.analysis.fleet_words import versus
    from perfonto.ontology.units import is_interval_scale

    m = graph.metrics[name]
    return versus(value, reference, relative, m.unit_text, is_interval_scale(m.unit))


def _nodes_out(fleet, graph, names: list[str], console: Console, most: int = 8) -> None:
    """The racks and pods whose chips stand out as a group (``analysis.fleet_nodes``), for the fleet
    tables' metrics first, then the others; at most ``most`` lines (``report.json`` has them all)."""
    from perfonto.analysis.fleet_words import members

    rows = [
        (m, level, o)
        for m in [*names, *[n for n in fleet.nodes_out if n not in names]]
        for level, found in fleet.nodes_out.get(m, {}).items()
        for o in found
    ]
    if not rows:
        return
    console.print(
        "Racks and pods that stand out (their chips' median, or hosts' where marked, against the typical node's, "
        "or the other one's; "
        "the chip spread above cannot name a node that holds much of the fleet):"
    )
    for m, level, o in rows[:most]:
        unit = graph.metrics[m].unit_text
        vs = _versus(graph, m, o["median"], o["reference"], o.get("relative"))
        console.print(
            Text.assemble(
                f"  {level} ",
                plain(o["node"] if len(o["node"]) <= 80 else o["node"][:79] + "…"),  # report.json has it whole
                f" ({members(o)}): {m} {_fmt(o['median'], unit)} against {_fmt(o['reference'], unit)} ({vs})",
            )
        )
    if len(rows) > most:
        console.print(f"  … {len(rows) - most} more in report.json (fleet.nodes_out)")
