"""Pictures of a run (matplotlib, Agg, PNG and SVG), drawn from its JSON report (``report.json``)
and, for the time series, its ``metrics.parquet``:

- ``roofline``: the compute ceilings per dtype (and the vector unit) and the memory ceilings (HBM,
  SRAM) from the generation's spec constants, each op class at its measured arithmetic intensity
  and FLOP/s (``analysis.roofline``; Williams, Waterman & Patterson, CACM 2009);
- ``topdown``: the level-1 top-down split (share of core cycles) stacked over time, the chips'
  mean per window;
- ``heatmap``: per chip × metric, the run-level value of every percent metric;
- ``links``: chip × link utilisation (share of link cycles spent transmitting).

Every ``Picture`` keeps the numbers it plots in ``data`` (the test checks them against the report's
tables). Every text taken from the data (op, host, metric, ceiling and model names) is drawn literally
(``literal``): matplotlib reads a ``$…$`` pair as TeX math, and ``$`` is in real kernel names. Figures are
built without pyplot (no global state); output is deterministic: fixed SVG ids (``svg.hashsalt``), text as
paths, no dates in the metadata.
"""

from __future__ import annotations

import io
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

RC = {
    "svg.hashsalt": "perfonto",
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.titlesize": 11,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "path.simplify": False,
}
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
MAX_BINS = 400


@dataclass
class Picture:
    """One figure: ``name`` (file stem), ``title``, the matplotlib ``figure`` and the ``data`` it plots."""

    name: str
    title: str
    figure: object
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        import matplotlib

        with matplotlib.rc_context(RC), _no_glyph_warnings():  # lay out once, then freeze: same bytes each save
            self.figure.canvas.draw()
            self.figure.set_layout_engine("none")

    def _save(self, fmt: str) -> bytes:
        import matplotlib

        buf = io.BytesIO()
        meta = {"Date": None} if fmt == "svg" else {"Software": "perfonto (matplotlib)"}
        with matplotlib.rc_context(RC), _no_glyph_warnings():
            self.figure.savefig(buf, format=fmt, metadata=meta)
        return buf.getvalue()

    def png(self) -> bytes:
        """The figure as PNG bytes."""
        return self._save("png")

    def svg(self) -> str:
        """The figure as SVG text (self-contained: glyphs as paths)."""
        return self._save("svg").decode("utf-8")


@contextmanager
def _no_glyph_warnings():
    """matplotlib's "Glyph … missing from font" warning left unprinted: a name from the data with a tab or a
    CJK character drew a box and printed the UserWarning, with matplotlib's source path, on stderr four
    times (the page's tables show the name as it is)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        yield


def literal(text) -> str:
    """``text`` as matplotlib draws it literally: each ``$`` escaped (``\\$``), so a ``$…$`` pair in a name from
    the data (CUDA's ``$__internal_…`` helpers, compiler symbols) is neither parsed as math — an unknown command
    would abort the whole page — nor drawn as italic math instead of the name."""
    return str(text).replace("$", r"\$")


def _figure(w: float, h: float):
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(w, h), layout="constrained")
        FigureCanvasAgg(fig)
        return fig, fig.add_subplot(1, 1, 1)


def _palette(n: int) -> list:
    """``n`` distinct colours (tab20, then repeated with other markers' help)."""
    from matplotlib import colormaps

    base = list(colormaps["tab20"].colors)
    return [base[(2 * i) % 20 + (2 * i) // 20 % 2] for i in range(n)]


def _si(v: float, unit: str) -> str:
    for f, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def roofline_picture(report: dict) -> Picture | None:
    """The roofline of the report's ``ops`` section (None without one, or without an op that has a
    position). ``data``: ``points`` [{op, intensity (FLOP/B), flops_per_s (FLOP/s), work}],
    ``ceilings`` (as in the report)."""
    ops = report.get("ops") or {}
    rows = [r for r in ops.get("rows", []) if r.get("intensity") and r.get("flops_per_s")]
    cs = ops.get("ceilings", [])
    compute = [c for c in cs if c["kind"] == "compute"]
    memory = [c for c in cs if c["kind"] == "memory"]
    link = [c for c in cs if c["kind"] == "link"] if any(r.get("roof") == "link" for r in rows) else []
    if not rows or not compute or not memory:
        return None
    with __import__("matplotlib").rc_context(RC):
        fig, ax = _figure(9.0, 5.4)
        ai = np.array([r["intensity"] for r in rows])
        perf = np.array([r["flops_per_s"] for r in rows])
        peak = max(c["value"] for c in compute)
        ridges = [c["value"] / m["value"] for c in compute for m in memory + link]
        x0 = min(ai.min(), min(ridges)) / 4
        x1 = max(ai.max(), max(ridges)) * 4
        y0 = min(perf.min(), min(c["value"] for c in compute) * 1e-2) / 3
        y1 = peak * 3
        _memory_roofs(ax, memory, x0, peak)
        _memory_roofs(ax, link, x0, peak, color="#1f5fa8", style="-.")  # collectives' roof: FLOP per link byte
        _compute_roofs(ax, compute, memory, x1)
        _op_marks(ax, rows)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_xlabel(
            "arithmetic intensity [FLOP/B] (FLOPs per byte of HBM traffic; collectives: per byte sent on the links)"
        )
        ax.set_ylabel("performance [FLOP/s] (one chip while the op runs)")
        title = f"Roofline — {report.get('model') or 'capture'} on {report.get('generation')}"
        ax.set_title(literal(title))
        ax.grid(True, which="major", lw=0.3, alpha=0.5)
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7,
            title="op class (work); area: share of time",
            title_fontsize=7,
            frameon=False,
        )
    points = [
        {
            "op": r["op"],
            "intensity": r["intensity"],
            "flops_per_s": r["flops_per_s"],
            "work": r["work"],
            "roof": r.get("roof") or "HBM",
            "time_share": r.get("time_share"),
            "size": _mark_size(r),
        }
        for r in rows
    ]
    return Picture("roofline", title, fig, {"points": points, "ceilings": cs})


LABEL_BOX = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.75}


def _memory_roofs(ax, memory: list, x0: float, peak: float, color: str = "#333333", style: str = "") -> None:
    """Draw the memory roofs (intensity × bandwidth, up to the highest compute ceiling), each labelled
    near the left edge (``style``: one line style for all, else solid then dashed)."""
    for i, m in enumerate(memory):  # memory roofs: I x B up to the highest compute ceiling
        xr = peak / m["value"]
        ls = style or ("-" if i == 0 else "--")
        ax.plot([x0, xr], [x0 * m["value"], peak], color=color, lw=1.3, ls=ls)
        xl = x0 * 2.0
        ax.annotate(
            literal(f"{m['name']} {_si(m['value'], 'B/s')}"),
            (xl, xl * m["value"]),
            xytext=(2, 6),
            textcoords="offset points",
            fontsize=7,
            rotation=0,
            color=color,
            zorder=4,  # over the op marks (zorder 3): a roof's label stays readable where an op sits on it
            bbox=LABEL_BOX,
        )


def _compute_roofs(ax, compute: list, memory: list, x1: float) -> None:
    """Draw the compute roofs, from the first memory roof to the right edge, each labelled at the right."""
    for i, c in enumerate(compute):  # compute roofs, from the HBM roof to the right
        start = c["value"] / memory[0]["value"]
        ax.plot(
            [start, x1],
            [c["value"], c["value"]],
            color="#333333",
            lw=1.3 if i == 0 else 1.0,
            ls="-" if i == 0 else ":",
        )
        ax.annotate(
            literal(f"{c['name']} peak {_si(c['value'], 'FLOP/s')}"),
            (x1, c["value"]),
            xytext=(-4, 3),
            textcoords="offset points",
            ha="right",
            fontsize=7,
            color="#333333",
            zorder=4,
            bbox=LABEL_BOX,
        )


def _mark_size(r: dict) -> float:
    """A mark's area (points²) by the op's share of time: 12 for a negligible op, up to 612 for all of it."""
    share = r.get("time_share")
    return 12.0 + 600.0 * (min(max(float(share), 0.0), 1.0) if share is not None else 0.0)


def _op_marks(ax, rows: list) -> None:
    """Mark each op class at its intensity and performance, its area by its share of time (shape by its
    work: matrix, vector; a diamond for a collective placed against the link roof)."""
    shapes = {"matrix": "o", "vector": "^"}
    palette = _palette(len(rows))
    for i, r in enumerate(rows):
        ax.scatter(
            [r["intensity"]],
            [r["flops_per_s"]],
            s=_mark_size(r),
            marker="D" if r.get("roof") == "link" else shapes.get(r["work"], "s"),
            color=palette[i],
            edgecolor="black",
            linewidth=0.5,
            alpha=0.85,
            zorder=3,
            label=literal(f"{r['op']} ({r['work']}{', link roof' if r.get('roof') == 'link' else ''})"),
        )


def topdown_series(report: dict, table) -> dict | None:
    """The level-1 top-down shares per window, mean over chips (weighted by the window's interval),
    binned to at most ``MAX_BINS`` points: ``{"time_s": (n,), "nodes": [...], "shares": {node:
    (n,) percent}}``; None without the columns."""
    nodes = [n for n in (report.get("topdown") or {}) if table is not None and n in table.column_names]
    if not nodes or "interval_s" not in table.column_names or "window" not in table.column_names:
        return None
    win = table.column("window").to_numpy()
    W = int(win.max()) + 1
    dt = table.column("interval_s").to_numpy(zero_copy_only=False).astype(np.float64)
    wsum = np.bincount(win, weights=dt, minlength=W)
    shares = {}
    for n in nodes:
        v = table.column(n).to_numpy(zero_copy_only=False).astype(np.float64)
        ok = np.isfinite(v)
        num = np.bincount(win[ok], weights=(v * dt)[ok], minlength=W)
        den = np.bincount(win[ok], weights=dt[ok], minlength=W)
        shares[n] = np.divide(num, den, out=np.full(W, np.nan), where=den > 0)
    t_mid = np.cumsum(wsum / np.maximum(np.bincount(win, minlength=W), 1)) if W else np.zeros(0)
    bins = max(1, int(np.ceil(W / MAX_BINS)))
    if bins > 1:
        edges = np.arange(0, W, bins)
        shares = {
            n: np.array([np.nanmean(v[i : i + bins]) if np.isfinite(v[i : i + bins]).any() else np.nan for i in edges])
            for n, v in shares.items()
        }
        t_mid = t_mid[np.minimum(edges + bins - 1, W - 1)]
    return {"time_s": t_mid, "nodes": nodes, "shares": shares}


def topdown_picture(report: dict, table) -> Picture | None:
    """The top-down split stacked over time (``topdown_series``); None without the data."""
    s = topdown_series(report, table)
    if s is None or not len(s["time_s"]):
        return None
    with __import__("matplotlib").rc_context(RC):
        fig, ax = _figure(8.0, 3.6)
        ys = [np.nan_to_num(s["shares"][n], nan=0.0) for n in s["nodes"]]
        ax.stackplot(
            s["time_s"],
            ys,
            labels=[literal(n.removeprefix("topdown.")) for n in s["nodes"]],
            colors=COLORS[: len(ys)],
            linewidth=0,
        )
        ax.set_xlim(float(s["time_s"][0]), float(s["time_s"][-1]))
        ax.set_ylim(0, 100)
        ax.set_xlabel("time [s] (window end, from the first sample)")
        ax.set_ylabel("share of core cycles [%]")
        title = "Top-down level 1 over time (mean over chips)"
        ax.set_title(title)  # a fixed title: no text from the data
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    return Picture("topdown", title, fig, s)


def heatmap_data(report: dict, limit: int = 24) -> dict | None:
    """Per chip × metric run-level values of the percent metrics (catalog order, at most ``limit``):
    ``{"chips": [...], "metrics": [...], "values": (chips, metrics) percent}``."""
    per_chip = report.get("per_chip") or []
    units = {n: m.get("unit") for n, m in (report.get("metrics") or {}).items()}
    if not per_chip:
        return None
    names = [
        n
        for n in per_chip[0]["metrics"]
        if units.get(n) in ("percent", "%")
        and not n.endswith(".pct_of_peak")
        and any(p["metrics"].get(n) is not None for p in per_chip)
    ][:limit]
    if not names:
        return None
    labels = [f"{p['host']}/{p['chip']}" if "host" in p else str(p["chip"]) for p in per_chip]
    vals = np.array(
        [[np.nan if p["metrics"].get(n) is None else p["metrics"][n] for n in names] for p in per_chip], float
    )
    return {"chips": labels, "metrics": names, "values": vals}


def _matrix(data: dict, name: str, title: str, xlabel: str, ylabel: str, cbar: str, xt: list, yt: list) -> Picture:
    vals = data["values"]
    with __import__("matplotlib").rc_context(RC):
        fig, ax = _figure(max(5.0, 0.45 * len(xt) + 2.5), max(2.6, 0.38 * len(yt) + 1.8))
        im = ax.imshow(
            np.ma.masked_invalid(vals), aspect="auto", cmap="viridis", vmin=0.0, vmax=100.0, interpolation="nearest"
        )
        ax.set_xticks(
            range(len(xt)),
            labels=[literal(x) for x in xt],
            rotation=60 if len(max(map(str, xt), key=len)) > 3 else 0,
            ha="right" if len(max(map(str, xt), key=len)) > 3 else "center",
            fontsize=7,
        )
        ax.set_yticks(range(len(yt)), labels=[literal(y) for y in yt], fontsize=7)
        if vals.size <= 400:
            for (i, j), v in np.ndenumerate(vals):
                if np.isfinite(v):
                    ax.text(
                        j, i, f"{v:.0f}", ha="center", va="center", fontsize=6, color="white" if v < 60 else "black"
                    )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        fig.colorbar(im, ax=ax, label=cbar)
    return Picture(name, title, fig, data)


def heatmap_picture(report: dict) -> Picture | None:
    """Per chip × metric heat map of the percent metrics (``heatmap_data``)."""
    d = heatmap_data(report)
    if d is None:
        return None
    return _matrix(
        d,
        "heatmap",
        "Per chip × metric (run level, percent metrics)",
        "metric",
        "chip",
        "value [%]",
        d["metrics"],
        d["chips"],
    )


def links_picture(report: dict) -> Picture | None:
    """Chip × link utilisation from the report's ``links`` section."""
    lk = report.get("links")
    if not lk:
        return None
    vals = np.array([[np.nan if x is None else x for x in row] for row in lk["utilization"]], float)
    d = {"chips": [str(c) for c in lk["chips"]], "links": list(range(lk["links"])), "values": vals}
    return _matrix(
        d,
        "links",
        "Chip × link utilisation (share of link cycles transmitting)",
        "link",
        "chip",
        "busy [%]",
        d["links"],
        d["chips"],
    )


def pictures(report: dict, table=None) -> list[Picture]:
    """Every picture the report has data for, in report order: roofline, top-down over time, heat
    map, links. ``table``: ``metrics.parquet`` as a ``pa.Table`` (for the time series)."""
    out = [roofline_picture(report), topdown_picture(report, table), heatmap_picture(report), links_picture(report)]
    return [p for p in out if p is not None]


def write_pictures(pics: list[Picture], folder: str | Path) -> dict[str, list[str]]:
    """Write every picture as ``NAME.png`` and ``NAME.svg`` into ``folder`` (atomically per file);
    returns {name: [paths]}.

    Raises:
        OSError: the folder cannot be written.
    """
    import os
    import uuid

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for p in pics:
        paths = []
        for ext, blob in (("png", p.png()), ("svg", p.svg().encode("utf-8"))):
            final = d / f"{p.name}.{ext}"
            tmp = d / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"
            tmp.write_bytes(blob)
            os.replace(tmp, final)
            paths.append(str(final))
        out[p.name] = paths
    return out


__all__ = [
    "Picture",
    "heatmap_data",
    "heatmap_picture",
    "literal",
    "links_picture",
    "pictures",
    "roofline_picture",
    "topdown_picture",
    "topdown_series",
    "write_pictures",
]
