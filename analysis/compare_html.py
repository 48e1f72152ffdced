"""The comparison of ``perfonto compare-runs`` as one self-contained HTML page (``--html FILE``).

Offline as the run report is (``analysis.html_report``): pictures inlined as SVG ``data:`` URIs, an inline
style sheet and one inline script that marks the page rendered; every text from the runs (metric and op
names, paths, units) goes through ``html.escape``. Sections (``<section id=…>``): ``summary`` (the runs,
the confidence, the note), ``metrics`` (every metric: baseline, run, change, interval, verdict; each cell
carries ``data-metric`` and the exact ``data-value``), ``topdown`` (the shares as bars side by side),
``ops`` (per-op time shares, and the roofline with each op's baseline point, hollow, joined to its run
point by an arrow) and ``only`` (metrics with a value in one run only). One block per compared run.
"""

from __future__ import annotations

import base64
import math

from .compare_runs import undecided
from .html_report import SCRIPT, STYLE, e

__all__ = ["SECTIONS", "render", "roofline_arrows"]

SECTIONS = ("summary", "metrics", "topdown", "ops", "only")
_EXTRA_STYLE = ".base{background:#9aa9c4}.run{background:#d9822b}.up{color:#0a6b2a}.down{color:#a40000}"


def _num(v, digits: str = ".6g") -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, digits)


def _cell(v, text: str, **attrs) -> str:
    data = "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f' data-value="{e(repr(float(v)))}"'
    extra = "".join(f' data-{k}="{e(str(x))}"' for k, x in attrs.items())
    return f'<td class="num"{data}{extra}>{e(text)}</td>'


def roofline_arrows(base_report: dict, run_report: dict):
    """The run's roofline (``analysis.plots.roofline_picture``) with each op's baseline position added
    (hollow marker) and an arrow from it to the run's; None when the run has no roofline."""
    from .plots import roofline_picture

    pic = roofline_picture(run_report)
    if pic is None:
        return None
    base = {
        r["op"]: r
        for r in (base_report.get("ops") or {}).get("rows", [])
        if r.get("intensity") and r.get("flops_per_s")
    }
    ax = pic.figure.axes[0]
    arrows = []
    for p in pic.data["points"]:
        b = base.get(p["op"])
        if b is None:
            continue
        ax.scatter(
            [b["intensity"]],
            [b["flops_per_s"]],
            s=40,
            facecolors="none",
            edgecolors="#555555",
            linewidths=0.8,
            zorder=2,
        )
        ax.annotate(
            "",
            xy=(p["intensity"], p["flops_per_s"]),
            xytext=(b["intensity"], b["flops_per_s"]),
            arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.8},
            zorder=2,
        )
        arrows.append(
            {"op": p["op"], "from": [b["intensity"], b["flops_per_s"]], "to": [p["intensity"], p["flops_per_s"]]}
        )
    ax.set_title(ax.get_title() + " (hollow: baseline → run)")
    pic.name, pic.data["arrows"] = "roofline-compare", arrows
    return pic


def _metric_rows(res: dict) -> list[str]:
    """One table row per metric compared: baseline, run, unit, change, interval, verdict (changes first)."""
    rows = []
    for name, m in sorted(res["metrics"].items(), key=lambda kv: (kv[1]["verdict"] == "no change", kv[0])):
        lo, hi = m["relative_interval"]
        cls = {"increased": "up", "decreased": "down"}.get(m["verdict"], "dim")
        told = not undecided(m)  # no interval where the windows (or records) cannot tell
        interval = f"[{100 * lo:+.2f} %, {100 * hi:+.2f} %]" if told and lo is not None and hi is not None else "—"
        change = "new" if m["relative"] is None else _num(100 * m["relative"], "+.2f") + " %"
        rows.append(
            f"<tr><td>{e(name)}</td>{_cell(m['baseline'], _num(m['baseline']), metric=name, run='baseline')}"
            f"{_cell(m['value'], _num(m['value']), metric=name, run='run')}<td>{e(m['unit'])}</td>"
            f"{_cell(m['relative'], change, metric=name, field='relative')}"
            f'<td class="num">{e(interval)}</td><td class="{cls}" data-verdict="{e(m["verdict"])}">'
            f"{e(m['verdict'])}</td></tr>"
        )
    return rows


def _block(res: dict, k: int, base_report: dict, run_report: dict) -> str:
    pct = round(100 * res["confidence"])
    rows = _metric_rows(res)
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "metric",
            "baseline",
            "run",
            "unit",
            "change",
            f"{pct} % interval (run-level change; bootstrap over windows, or over request records)",
            "verdict",
        )
    )
    over = [n for n, m in res["metrics"].items() if m.get("over") == "records"]
    said = (
        f'<p class="dim">Request-level metrics ({e(", ".join(over))}) have no window series: their interval is a '
        "block bootstrap over each run's request records (requests, or token gaps for ITL, in time slices), "
        "where the records are at hand.</p>"
        if over
        else ""
    )
    out = [f'<section id="metrics{k}"><h2>Metrics</h2>{said}<table><tr>{head}</tr>{"".join(rows)}</table></section>']
    if res["topdown"]:
        bars = []
        for node, (a, b) in res["topdown"].items():
            wa, wb = (0 if x is None else max(0.0, min(100.0, x)) for x in (a, b))
            bars.append(
                f'<tr><td>{e(node)}</td><td><span class="bar base" style="width:{3 * wa:.1f}px"></span> '
                f'{e(_num(a, ".1f"))} %<br><span class="bar run" style="width:{3 * wb:.1f}px"></span> '
                f"{e(_num(b, '.1f'))} %</td></tr>"
            )
        out.append(
            f'<section id="topdown{k}"><h2>Top-down (baseline above, run below)</h2>'
            f"<table>{''.join(bars)}</table></section>"
        )
    if res["ops"]:
        ops = "".join(
            f"<tr><td>{e(op)}</td>"
            f"{_cell(None if a is None else 100 * a, _num(None if a is None else 100 * a, '.1f'), op=op)}"
            f"{_cell(None if b is None else 100 * b, _num(None if b is None else 100 * b, '.1f'), op=op)}</tr>"
            for op, (a, b) in res["ops"].items()
        )
        pic = roofline_arrows(base_report, run_report)
        fig = ""
        if pic is not None:
            uri = "data:image/svg+xml;base64," + base64.b64encode(pic.svg().encode("utf-8")).decode("ascii")
            fig = (
                f'<figure data-picture="{e(pic.name)}"><img alt="{e(pic.title)}" src="{uri}"><figcaption>'
                "each op: baseline (hollow) → run</figcaption></figure>"
            )
        out.append(
            f'<section id="ops{k}"><h2>Ops: share of time</h2><table><tr><th>op</th><th>baseline %</th>'
            "<th>run %</th></tr>"
            f"{ops}</table>{fig}</section>"
        )
    if res["only_in"]:
        items = "".join(f"<li><code>{e(n)}</code>: {e(w)}</li>" for n, w in res["only_in"].items())
        out.append(f'<section id="only{k}"><h2>A value in one run only</h2><ul>{items}</ul></section>')
    if res.get("units_differ"):
        items = "".join(
            f"<li><code>{e(n)}</code>: {e(a or 'no unit')} → {e(b or 'no unit')}</li>"
            for n, (a, b) in res["units_differ"].items()
        )
        out.append(f'<section id="units{k}"><h2>Not compared: the unit differs</h2><ul>{items}</ul></section>')
    return "".join(out)


def render(results: list[dict], reports: list[dict]) -> str:
    """The page of ``results`` (``analysis.compare_runs.compare``, one per run after the baseline) with
    the runs' ``reports`` (baseline first) for the pictures."""
    parts = []
    for k, res in enumerate(results, start=1):
        note = f'<p class="dim">{e(res["note"])}</p>' if res.get("note") else ""
        parts.append(
            f'<section id="summary{k}" data-baseline="{e(res["baseline"])}" data-run="{e(res["run"])}">'
            f"<h2>{e(res['run'])} against {e(res['baseline'])}</h2><p>generation {e(res['generation'])}; intervals: "
            f"{round(100 * res['confidence'])} % moving-block bootstrap over windows ({res['n_boot']} resamples); "
            f"bottleneck {e(str(res['bottleneck'][0]))} → {e(str(res['bottleneck'][1]))}</p>{note}</section>"
        )
        parts.append(_block(res, k, reports[0], reports[k]))
    title = (
        f"perfonto — {len(results)} run{'s' if len(results) > 1 else ''} compared with {results[0]['baseline']}"
        if results
        else "perfonto — comparison"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><title>{e(title)}</title><style>{STYLE}{_EXTRA_STYLE}</style></head>'
        f"<body><h1>{e(title)}</h1>{''.join(parts)}<script>{SCRIPT}</script></body></html>\n"
    )
