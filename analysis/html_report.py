"""The run report as one self-contained HTML file (``perfonto report RUN --html FILE``).

Offline by construction: the pictures are inlined as ``data:`` URIs (SVG, glyphs as paths), the
style sheet is inline, the only script is inline (it marks the page as rendered), and no element
loads anything from elsewhere; the only external address is a link the reader may follow to open
the timeline in Perfetto's UI (https://ui.perfetto.dev). Every text that comes from the catalog,
the dump or the trace (metric names, threshold messages, notes, op names, the model) goes through
``html.escape``, so it can never add markup.

Sections (each a ``<section id=…>``): ``summary``, ``headline`` (server-level metrics), ``serving``
(request-level metrics and the steady state, ``html_serving``; when the run has request records),
``bottleneck`` (top-down split, dominant bottleneck, drill-down, thresholds, the split over time),
``ops`` (per-op table and roofline), ``groups`` (``--by`` groupings, when present), ``per-chip``
(table and heat map), ``multichip`` (straggler, waits, skew, imbalance, link matrix, saturation),
``timeline`` (the Perfetto link) and ``notes``. Every number is printed in a cell that carries its
exact value (``data-value``, the JSON report's number) and what it is (``data-metric`` or
``data-field``), so a test can compare the page with ``report.json``.
"""

from __future__ import annotations

import base64
import html
import json
import math

from .findings import gain_text
from .report_json import format_value, metric_count_text

PERFETTO = "https://ui.perfetto.dev/"
SECTIONS = (
    "summary",
    "headline",
    "serving",
    "bottleneck",
    "ops",
    "groups",
    "per-chip",
    "multichip",
    "fleet",
    "assumptions",
    "timeline",
    "notes",
)
GROUP_METRICS = (
    "mxu.utilization",
    "mxu.achieved_flops",
    "hbm.bandwidth_utilization",
    "arithmetic_intensity",
    "c2c.bandwidth_utilization",
)

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;
color:#222}
h1{font-size:1.5em;margin-bottom:.2em}
h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ddd;padding:.25em .6em}
th{background:#f3f3f3;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.node{max-width:24em;overflow-wrap:anywhere}.wide{overflow-x:auto}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:.85em;color:#555}
.bar{display:inline-block;height:.8em;background:#4c72b0;vertical-align:middle}.dim{color:#666;font-size:.9em}
.warn{color:#a40000;font-weight:600}nav a{margin-right:1em}code{background:#f6f6f6;padding:0 .2em}
"""
SCRIPT = (
    "window.addEventListener('load',function(){var im=document.images,n=0;for(var i=0;i<im.length;i++)"
    "{if(im[i].complete&&im[i].naturalWidth>0)n++;}document.body.setAttribute('data-images-loaded',String(n));"
    "document.body.setAttribute('data-ready','yes');});"
)


# control characters and the bidirectional overrides, shown as their escapes: a NUL is not HTML, and a
# right-to-left override in a rack name would reorder what the page shows after it
_UNSEEN = {
    c: f"\\u{c:04x}" for c in (*range(32), 127, *range(0x202A, 0x202F), *range(0x2066, 0x206A)) if c not in (9, 10, 13)
}


def e(text) -> str:
    """``text`` escaped for HTML text and attribute values (control characters and bidirectional overrides
    shown as ``\\u…`` escapes)."""
    return html.escape(("" if text is None else str(text)).translate(_UNSEEN), quote=True)


def _short_time(seconds: float) -> str:
    """A short interval in ms, or in µs below 0.1 ms (as the terminal report prints skew)."""
    return fmt(seconds * 1e3, "ms") if abs(seconds) >= 1e-4 else fmt(seconds * 1e6, "µs")


def fmt(v, unit: str = "") -> str:
    """A value as the report prints it (``report_json.format_value``, the terminal report's formatter too),
    HTML-escaped; ``—`` where it is not computable (JSON's ``null`` is not a word for the page)."""
    text = format_value(v, unit)
    return "—" if text == "null" else e(text)


def si(v, unit: str) -> str:
    """A value with an SI prefix and three significant digits (``5.18 PFLOP/s``)."""
    if v is None or not math.isfinite(float(v)):
        return "—"
    for f, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}{e(unit)}"
    return f"{v:.3g} {e(unit)}"


def _cell(v, text: str, key: str, name: str) -> str:
    val = "" if v is None else repr(float(v))
    return f'<td class="num" data-{key}="{e(name)}" data-value="{e(val)}">{text}</td>'


def _img(pic, caption: str) -> str:
    uri = "data:image/svg+xml;base64," + base64.b64encode(pic.svg().encode("utf-8")).decode("ascii")
    return (
        f'<figure id="fig-{e(pic.name)}" data-picture="{e(pic.name)}"><img alt="{e(pic.title)}" src="{uri}">'
        f"<figcaption>{e(caption)}</figcaption></figure>"
    )


def _table(head: list[str], rows: list[str], cls: str = "") -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return f'<table class="{e(cls)}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _summary(r: dict, sections: list[str]) -> str:
    mc = r.get("multichip") or {}
    dur = mc.get("duration_s")
    att = r.get("attribution") or {}
    items = [
        ("generation", r.get("generation")),
        ("model", r.get("model") or "capture"),
        ("chips", r.get("chips")),
        ("duration", f"{dur:.3f} s" if isinstance(dur, (int, float)) else None),
        (
            "metrics",
            metric_count_text(r["metric_count"])
            if r.get("metric_count")
            else sum(1 for m in (r.get("metrics") or {}).values() if m.get("value") is not None),
        ),
        ("attribution", att.get("rule")),
    ]
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in items if v is not None)
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in sections if s != "summary")
    hl = r.get("headline") or {}
    head = (
        f'<p id="headline-finding" data-metric="{e(hl.get("metric"))}"><strong>Read first:</strong> '
        f"{e(hl.get('message'))}</p>"
        if hl.get("message")
        else ""
    )
    return f'<section id="summary"><nav>{nav}</nav>{head}<table>{rows}</table></section>'


def _headline(r: dict, names) -> str:
    ms = r.get("metrics") or {}
    rows = []
    for n in names:
        m = ms.get(n)
        if not m or isinstance(m.get("value"), list):
            continue
        value = m.get("value")
        rows.append(f"<tr><td><code>{e(n)}</code></td>{_cell(value, fmt(value, m.get('unit', '')), 'metric', n)}</tr>")
    return (
        '<section id="headline"><h2>Server level</h2><p class="dim">Rates are totals over all chips; ratios are '
        f"ratios of totals.</p>{_table(['metric', 'value'], rows)}</section>"
    )


def _bottleneck(r: dict, pics: dict) -> str:
    td = r.get("topdown") or {}
    kids = r.get("topdown_children") if isinstance(r.get("topdown_children"), dict) else {}  # older: level 1 only
    ms = r.get("metrics") or {}
    rows = []
    for n, v in td.items():
        rows.append(_topdown_row(n, v, n))
        for c in kids.get(n) or []:  # level 2, as the terminal's tree
            cv = (ms.get(c) or {}).get("value")
            rows.append(_topdown_row(c, cv if isinstance(cv, (int, float)) else None, f"└ {c}"))
    out = [
        '<section id="bottleneck"><h2>Bottleneck</h2>',
        _table(["top-down levels 1 and 2", "share of core cycles", ""], rows)
        if rows
        else '<p class="dim">Top-down not evaluated: no top-down metric in this catalog or capture.</p>',
    ]
    b = r.get("bottleneck")
    if b:
        out.append(
            f'<p><strong>Dominant bottleneck:</strong> <code data-bottleneck="{e(b)}">{e(b)}</code> — '
            f"{e(r.get('bottleneck_label'))}</p>"
        )
    dd = r.get("drilldown") or []
    if dd:
        items = "".join(
            f'<li data-drill="{e(d["metric"])}"><code>{e(d["metric"])}</code>: '
            f"{fmt(None if d['share_of_time'] is None else d['share_of_time'] * 100, 'percent')} of time</li>"
            for d in dd
        )
        out.append(f'<p>Drill-down (deepest top-down node above its threshold):</p><ol id="drilldown">{items}</ol>')
    th = r.get("thresholds_crossed") or []
    if th:
        units = {n: m.get("unit", "") for n, m in (r.get("metrics") or {}).items()}
        trs = [
            f"<tr><td><code>{e(t['metric'])}</code></td>"
            f"{_cell(t['value'], fmt(t['value'], units.get(t['metric'], '')), 'metric', t['metric'])}"
            f"<td>{e(t['message'])}</td></tr>"
            for t in th
        ]
        out.append("<p>Thresholds crossed (server level):</p>" + _table(["metric", "value", "message"], trs))
    out.append(_findings(r.get("findings") or []))
    for msg in r.get("topdown_tree_violations") or []:
        out.append(f'<p class="warn">Top-down tree: {e(msg)}</p>')
    if "topdown" in pics:
        out.append(_img(pics["topdown"], "Level-1 top-down shares per sampling window (mean over chips), stacked."))
    return "".join(out) + "</section>"


def _topdown_row(name: str, v, label: str) -> str:
    """A row of the top-down table: the node (``label``: its name, indented for level 2), its share, a bar."""
    width = 0 if v is None else max(0.0, min(100.0, v)) * 3
    return (
        f"<tr><td><code>{e(label)}</code></td>{_cell(v, fmt(v, 'percent'), 'metric', name)}"
        f'<td><span class="bar" style="width:{width:.1f}px"></span></td></tr>'
    )


def _findings(found: list[dict]) -> str:
    """The guided findings (``analysis.findings``): title, estimated gain, evidence, where to look next."""
    if not found or not isinstance(found, list):
        return ""
    trs = []
    for f in found:
        if not isinstance(f, dict) or not isinstance(f.get("metric"), str):
            continue  # a hand-edited report's malformed entry: shown by `perfonto findings`' check, not here
        gain = f.get("estimated_gain")
        gain = gain if isinstance(gain, (int, float)) and math.isfinite(gain) else None
        units = f.get("evidence_units") if isinstance(f.get("evidence_units"), dict) else {}  # older: bare numbers
        unread = f.get("evidence_unread") if isinstance(f.get("evidence_unread"), dict) else {}
        ev = ", ".join(
            f"{k}: not read ({unread[k]})" if k in unread else f"{k} = {format_value(v, units.get(k, ''))}"
            for k, v in (f.get("evidence") or {}).items()
        )
        trs.append(
            f'<tr data-finding="{e(f["metric"])}"><td>{e(f["title"])}</td>'
            f"<td>{'' if gain is None else e(gain_text(gain))}</td><td>{e(f.get('estimate') or '')}"
            + (f"<br>but: {e(f['caveat'])}" if isinstance(f.get("caveat"), str) else "")
            + "</td>"
            f"<td>{e(f.get('why') or '')}</td>"
            f"<td>{e(ev)}</td><td>{e(', '.join(f.get('next') or []))}</td></tr>"
        )
    return (
        "<p>Findings (gain estimated if the cause were removed, from its share of time; the gains overlap, "
        "they do not add up):</p>"
        + _table(["finding", "gain", "estimate", "why", "evidence", "look next at"], trs, "findings")
    )


def _ops(r: dict, pics: dict) -> str:
    from .html_cautions import side_bound_note

    ops = r.get("ops")
    if not ops:
        engine = r.get("engine")
        why = (
            f"the {e(engine)} engine (a dump analysed in pieces) does not attribute the counters to the trace's op "
            "spans; analyse the capture again with <code>--engine memory</code> for the per-op table and roofline"
            if engine in ("embedded", "spark")
            else "the capture has no trace with device op spans"
        )
        return f'<section id="ops"><h2>Per op</h2><p class="dim">No per-op attribution: {why}.</p></section>'
    rows = []
    for row in ops.get("rows", []):
        err = ((row.get("error") or {}).get("matrix_flops" if row.get("work") == "matrix" else "hbm_bytes") or {}).get(
            "estimate"
        )
        share = None if row.get("time_share") is None else row["time_share"] * 100
        eff = None if row.get("efficiency") is None else row["efficiency"] * 100
        intensity = row.get("intensity")
        intensity_text = fmt(intensity, "FLOP/B") if intensity is not None else "—"
        rows.append(
            f'<tr data-op="{e(row["op"])}"><td><code>{e(row["op"])}</code></td>'
            f"{_cell(share, fmt(share, 'percent'), 'field', 'time_share')}<td>{e(row.get('work') or '—')}</td>"
            f"{_cell(row.get('flops_per_s'), si(row.get('flops_per_s'), 'FLOP/s'), 'field', 'flops_per_s')}"
            f"{_cell(intensity, intensity_text, 'field', 'intensity')}"
            f"{_cell(eff, fmt(eff, 'percent') if eff is not None else '—', 'field', 'efficiency')}"
            f"<td>{e(row.get('side') or '—')}{' (' + e(row['ceiling']) + ')' if row.get('side') else ''}</td>"
            f"<td>{e((row.get('bound') or '—').removeprefix('topdown.'))}</td>"
            f"{_cell(err, _err_text(err, row), 'field', 'error_estimate')}</tr>"
        )
    no_span = ops.get("no_span_share")
    src = (r.get("attribution") or {}).get("source", "windows")
    out = [
        '<section id="ops"><h2>Per op (top op classes by time)</h2>',
        f'<p class="dim">Counters attributed to the trace\'s op spans ({e(src)}); FLOP/s of one chip while the op '
        "runs; intensity: FLOPs per HBM byte (a collective's: per byte sent on the chip-to-chip links); roof: the "
        "attainable min(peak, intensity × HBM bandwidth, or × the link bandwidth for a collective); "
        "roofline side: where the intensity lies against the ridge point; bound (cycles): where the op's cycles "
        "went (top-down), what the chip did — near the ridge the two may differ and the cycles decide; "
        "error: split-half estimate of the attributed work. Time outside every span: "
        f"{fmt(None if no_span is None else no_span * 100, 'percent')}.</p>",
        _table(
            ["op", "time", "work", "FLOP/s", "intensity", "of roof", "roofline side", "bound (cycles)", "error"],
            rows,
            "ops",
        ),
        side_bound_note(ops.get("rows", [])),
    ]
    if "roofline" in pics:
        out.append(
            _img(
                pics["roofline"],
                "Each op class at its measured arithmetic intensity and FLOP/s, under the "
                "compute ceilings per dtype and the HBM and SRAM ceilings (Williams et al., CACM 2009); "
                "collectives (diamonds) at FLOPs per byte sent, under the chip-to-chip link roof; a mark's area is "
                "its op's share of time.",
            )
        )
    return "".join(out) + "</section>"


def _err_text(err, row: dict) -> str:
    if row.get("determined") is False:  # the windows cannot tell its work from another op class's
        return '<span class="warn">not determined</span>'
    if row.get("reliable") is False:
        return '<span class="warn">approximate</span>'
    if err is None:
        return "—"
    return fmt(err * 100, "percent") if err <= 1.0 else "&gt; 100 %"


def _groups(r: dict) -> str:
    by = r.get("by") or {}
    if not by:
        return ""
    out = [
        '<section id="groups"><h2>Per group</h2><p class="dim">Every metric per group is in report.json '
        "(<code>by</code>) and metrics_by_&lt;group&gt;.parquet; a selection here, per chip while the group runs.</p>"
    ]
    for g, sec in by.items():
        units = sec.get("units", {})
        names = [n for n in GROUP_METRICS if n in units]
        rows = []
        for row in sec.get("groups", []):
            share = None if row.get("time_share") is None else row["time_share"] * 100
            cells = "".join(
                _cell(row["metrics"].get(n), fmt(row["metrics"].get(n), units[n]), "metric", n) for n in names
            )
            rows.append(
                f'<tr data-group="{e(row["group"])}"><td>{e(row["group"])}</td>'
                f"{_cell(share, fmt(share, 'percent'), 'field', 'time_share')}"
                f"<td>{e((row.get('bound') or '—').removeprefix('topdown.'))}</td>{cells}</tr>"
            )
        out.append(f'<h3 id="by-{e(g)}">by {e(g)}</h3>' + _table([g, "time", "bound"] + names, rows, f"by-{g}"))
    return "".join(out) + "</section>"


def _per_chip(r: dict, pics: dict, columns: dict, groups: dict) -> str:
    """The per-chip section: the table of the report's per-chip columns (when it has any), one table
    per group (``id="per-chip-<n>"``, ``data-group`` its title) and the heat map."""
    chips = r.get("per_chip") or []
    have = set(chips[0]["metrics"]) if chips else set()
    out = ['<section id="per-chip"><h2>Per chip (run level)</h2>']
    present = [n for n in columns if n in have]
    if present:
        head = ["chip"] + [columns[n] if columns[n] == n else f"{columns[n]} ({n})" for n in present]
        out.append(_table(head, _chip_rows(r, present), "per-chip"))
    for i, (title, names) in enumerate(groups.items()):
        shown = [n for n in names if n in have]
        if shown:
            out.append(
                f'<h3 id="per-chip-{i}" data-group="{e(title)}">{e(title)}</h3>'
                + _table(["chip"] + shown, _chip_rows(r, shown), "per-chip-group")
            )
    if len(out) == 1:
        out.append('<p class="dim">No per-chip columns in this report.</p>')
    if "heatmap" in pics:
        out.append(_img(pics["heatmap"], "Run-level value of every percent metric per chip."))
    return "".join(out) + "</section>"


def _chip_rows(r: dict, names: list[str]) -> list[str]:
    """One table row per chip (``data-chip``: ``host/chip`` or ``chip``) with the values of ``names``."""
    units = {n: m.get("unit", "") for n, m in (r.get("metrics") or {}).items()}
    rows = []
    for p in r.get("per_chip") or []:
        label = f"{p['host']}/{p['chip']}" if "host" in p else str(p["chip"])
        cells = "".join(
            _cell(p["metrics"].get(n), fmt(p["metrics"].get(n), units.get(n, "")), "metric", n) for n in names
        )
        rows.append(f'<tr data-chip="{e(label)}"><td>{e(label)}</td>{cells}</tr>')
    return rows


def _multichip(r: dict, pics: dict) -> str:
    from .html_cautions import multichip_cautions

    mc = r.get("multichip")
    out = ['<section id="multichip"><h2>Multi-chip</h2>']
    if not mc:
        out.append('<p class="dim">No multi-chip analysis: the capture has no sync reads (or one chip).</p>')
    else:
        st = mc.get("straggler")
        out.append(
            f'<p class="warn" data-straggler="{e(st["chip"])}">Straggler: chip {e(st["chip"])} — the other chips wait '
            f"for it {fmt(st['blamed_wait_s'] * 1e3, 'ms')} of chip time in collectives, summed over them "
            f"({fmt(st['share'] * 100, 'percent')} of all collective wait)</p>"
            if st
            else '<p data-straggler="">No straggler.</p>'
        )
        waits = mc.get("collective_wait_s") or []
        rows = [
            f"<tr><td>{c}</td>{_cell(w, fmt(w * 1e3, 'ms'), 'field', 'collective_wait_s')}</tr>"
            for c, w in enumerate(waits)
        ]
        if rows:
            out.append(_table(["chip", "collective wait"], rows, "waits"))
        sk = mc.get("skew") or {}
        if sk:
            out.append(
                f"<p>Per-step skew: median {_short_time(sk.get('arrival_p50_s', 0))}, max "
                f"{_short_time(sk.get('arrival_max_s', 0))} over {e(sk.get('steps'))} steps that hold a collective "
                "in the trace (whole or in part).</p>"
            )
        from .chip_load import IMBALANCE_LABEL, imbalance_note

        imb = (mc.get("imbalance") or {}).get("across_chips") or {}
        if imb:
            out.append(
                "<p>Imbalance across chips (1 − mean/max of busy time or work): "
                + ", ".join(f"{e(IMBALANCE_LABEL.get(b, b))} {fmt(v * 100, 'percent')}" for b, v in imb.items())
                + (f" — {e(imbalance_note(imb))}" if imbalance_note(imb) else "")
                + "</p>"
            )
        out.append(multichip_cautions(mc))
        for sl in mc.get("slow_links") or []:
            out.append(
                f'<p class="warn">Slow link: chip {e(sl["chip"])} link {e(sl["link"])} at '
                f"{fmt(sl['rate_ratio'] * 100, 'percent')} of the median link rate</p>"
            )
        sat = mc.get("saturation") or {}
        if sat:
            out.append(
                f"<p>{e(sat.get('count', 0))} saturated PCIe/link interval(s) at or above "
                f"{fmt(sat.get('threshold', 0) * 100, 'percent')} of a window.</p>"
            )
            rows = [
                f"<tr><td>{e(r['chip'])}</td>"
                f"<td>{e('PCIe' if r['kind'] == 'pcie' else 'links ' + str(r['links']))}</td>"
                f'<td class="num">{e(r["windows"])}</td><td class="num">{e(r["bursts"])}</td>'
                f'<td class="num">{e(format(r["first_s"] * 1e3, ",.1f"))} – '
                f"{e(format(r['last_s'] * 1e3, ',.1f'))} ms</td>"
                f'<td class="num">{fmt(r["peak_util"] * 100, "percent")}</td></tr>'
                for r in (sat.get("per_chip") or [])[:16]
            ]
            if rows:
                out.append(_table(["chip", "saturated", "windows", "bursts", "from – to", "peak"], rows))
    if "links" in pics:
        out.append(_img(pics["links"], "Share of each chip-to-chip link's cycles spent transmitting, over the run."))
    return "".join(out) + "</section>"


def _timeline(timeline: str | None) -> str:
    from urllib.parse import quote  # a file name with `#`, `?` or `%` is a path, not a fragment or a query

    if timeline is None:
        body = (
            '<p class="dim">No timeline was written beside this report (the run has no trace and sync reads, or '
            "--no-timeline). <code>perfonto timeline RUN --out trace.pftrace --format proto</code> writes one.</p>"
        )
    else:
        body = (
            f"<p>The correlated timeline (host calls, submissions, PCIe transfers, every chip's ops and collectives, "
            f'metric counter tracks) is <a id="timeline-file" href="{e(quote(timeline))}">{e(timeline)}</a>, next to '
            f'this file. Open <a id="perfetto" href="{PERFETTO}" target="_blank" rel="noopener '
            'noreferrer">ui.perfetto.dev</a> and '
            "choose <em>Open trace file</em> (the trace stays on your machine: Perfetto's UI loads it in the "
            "browser).</p>"
        )
    return f'<section id="timeline"><h2>Timeline</h2>{body}</section>'


def _notes(r: dict) -> str:
    from .html_cautions import run_cautions

    items = [f"<li><code>{e(k)}</code>: {e(v)}</li>" for k, v in sorted((r.get("unavailable") or {}).items())]
    notes = [f"<li>{e(n)}</li>" for n in r.get("notes") or []]
    cautions = run_cautions(r)
    out = f'<section id="notes"><h2>Notes</h2>{cautions}'
    if items:
        out += f"<p>Unavailable metrics:</p><ul>{''.join(items)}</ul>"
    if notes:
        out += f"<ul>{''.join(notes)}</ul>"
    if not items and not notes and not cautions:
        out += '<p class="dim">None.</p>'
    return out + "</section>"


def render(
    report: dict,
    pictures=(),
    *,
    headline=None,
    per_chip: dict | None = None,
    groups: dict | None = None,
    timeline: str | None = None,
) -> str:
    """The HTML page of a JSON report (``report.json``), with ``pictures`` (``analysis.plots``) inlined.

    The tables show what the report's ``report`` section says (``analysis.report_model.page_model``,
    the model the terminal report renders too); ``headline`` (the server table's metric names),
    ``per_chip`` ({metric: column header}) and ``groups`` ({title: [metric, ...]}, per-chip tables)
    replace its parts. ``timeline``: the relative path of the Perfetto trace written beside the page
    (None: none)."""
    from .html_context import context_section
    from .html_fleet import fleet_section
    from .html_serving import serving_section
    from .report_model import page_model

    model = page_model(report)
    headline = model.headline if headline is None else headline
    per_chip = model.per_chip if per_chip is None else per_chip
    groups = model.groups if groups is None else groups
    pics = {p.name: p for p in pictures}
    title = f"perfonto — {report.get('model') or 'capture'} on {report.get('chips')} × {report.get('generation')}"
    parts = [
        _headline(report, headline),
        serving_section(report),
        _bottleneck(report, pics),
        _ops(report, pics),
        _groups(report),
        _per_chip(report, pics, per_chip, groups),
        _multichip(report, pics),
        fleet_section(report, model.fleet),
        context_section(report),
        _timeline(timeline),
        _notes(report),
    ]
    present = ["summary"] + [s for s in SECTIONS[1:] if any(p.startswith(f'<section id="{s}"') for p in parts)]
    body = _summary(report, present) + "".join(parts)
    meta = e(
        json.dumps({"generation": report.get("generation"), "model": report.get("model"), "chips": report.get("chips")})
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><meta name="perfonto-run" content="{meta}">'
        f"<title>{e(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{e(title)}</h1>{body}<script>{SCRIPT}</script></body></html>\n"
    )


__all__ = ["PERFETTO", "SECTIONS", "e", "fmt", "render", "si"]
