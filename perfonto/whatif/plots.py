"""Figures of the what-if commands (matplotlib, Agg backend: no display needed), PNG or SVG by the
file's extension.

``sweep_figure``: tokens/s, TTFT and ITL (p50), MFU and the bottleneck of every point against the
first numeric knob (one line per combination of the other knobs), each bottleneck crossing a
dashed vertical line labelled with its value. ``compare_figure``: tokens/s and ITL of both
generations per workload, with the ratio and the assumption that drives it.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from perfonto.analysis.plots import literal  # names drawn as written: a `$…$` in one is no math

from .knobs import KnobError

COLOURS = {"compute": "#1f77b4", "memory": "#d62728", "interconnect": "#2ca02c", "host": "#9467bd", "idle": "#7f7f7f"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _check(path) -> Path:
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg"):
        raise KnobError(f"{p}: plots are written as .png or .svg, not {p.suffix or 'a file without extension'}")
    return p


@contextmanager
def _figure(p: Path, panels: int, figsize: tuple, **kw):
    """A figure of ``panels`` panels, one above the other (its axes are what ``with`` gives); once
    drawn, laid out, written to ``p`` and closed."""
    plt = _pyplot()
    fig, axes = plt.subplots(panels, 1, figsize=figsize, **kw)
    yield axes
    fig.tight_layout()
    fig.savefig(p)
    plt.close(fig)


def _text(v) -> str:
    """A knob's value as text (a float to 4 significant digits)."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _plot_lines(axes, xs: list, rows: list[dict], name: str | None) -> None:
    """One series' lines: tokens/s, TTFT and ITL p50, MFU in percent."""
    shown = None if name is None else literal(name)
    axes[0].plot(xs, [r.get("tokens_per_second") for r in rows], marker="o", label=shown)
    axes[1].plot(
        xs, [r.get("ttft_p50_s") for r in rows], marker="o", linestyle="--", label=f"TTFT p50 {shown or ''}".strip()
    )
    axes[1].plot(xs, [r.get("itl_p50_s") for r in rows], marker="s", label=f"ITL p50 {shown or ''}".strip())
    axes[2].plot(xs, [(r.get("mfu") or 0) * 100 if r.get("mfu") is not None else None for r in rows], marker="o")


def _bottleneck_bands(ax, xs: list, rows: list[dict], at: dict, numeric: bool) -> None:
    """One series' bottleneck bands: each point's colour from the edge with the previous point to the
    edge with the next (the crossing where one is known, else halfway)."""

    def edge(i, j):  # where the band of point i meets that of point j: the crossing, else halfway
        if not numeric:
            return (xs[i] + xs[j]) / 2
        return at.get((xs[min(i, j)], xs[max(i, j)]), _mid(xs[i], xs[j], numeric))

    for i, r in enumerate(rows):
        b = r.get("bottleneck")
        if b:
            lo = edge(i, i - 1) if i else xs[i]
            hi = edge(i, i + 1) if i + 1 < len(xs) else xs[i]
            ax.axvspan(lo, hi, ymin=0.1, ymax=0.9, color=COLOURS.get(b, "#bbbbbb"), alpha=0.6, linewidth=0)


def _plot_series(axes, result, x, numeric: bool, others: list) -> None:
    """One line per combination of the knobs other than ``x`` (its points in ``x``'s order), and its
    bottleneck bands."""
    pos = {v: i for i, v in enumerate(x.values)}
    series: dict[tuple, list[dict]] = {}
    for r in result.rows:
        series.setdefault(tuple(r.get(k.name) for k in others), []).append(r)
    for key, rows in series.items():
        rows = sorted(rows, key=lambda r: r[x.name] if numeric else pos.get(r[x.name], 0))
        xs = [r[x.name] if numeric else pos.get(r[x.name], 0) for r in rows]
        name = ", ".join(f"{k.name}={_text(v)}" for k, v in zip(others, key)) or None
        _plot_lines(axes, xs, rows, name)
        fixed = dict(zip((k.name for k in others), key))
        at = {tuple(c["grid"]): c["at"] for c in result.crossings if c["series"] == fixed and c["at"] is not None}
        _bottleneck_bands(axes[3], xs, rows, at, numeric)


def _mark_crossings(axes, crossings: list[dict], x, numeric: bool) -> None:
    """A dotted vertical line on every panel at each bottleneck crossing, labelled on the top one."""
    for c in crossings:
        at = c["at"] if numeric else None
        if at is None:
            continue
        for ax in axes:
            ax.axvline(at, color="black", linestyle=":", linewidth=1)
        axes[0].annotate(
            literal(f"{c['from']} → {c['to']}\n{at:.4g} {x.unit}".rstrip()),
            (at, 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, -4),
            textcoords="offset points",
            va="top",
            fontsize=8,
        )


def _label_panels(axes, rows: list[dict]) -> None:
    """The panels' y labels and legends (the bottlenecks seen, under the last panel)."""
    axes[0].set_ylabel("tokens/s (steady)")
    axes[1].set_ylabel("latency, s")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("MFU, %")
    axes[3].set_yticks([])
    axes[3].set_ylabel("bottleneck")
    from matplotlib.patches import Patch

    seen = sorted({r.get("bottleneck") for r in rows if r.get("bottleneck")})
    axes[3].legend(
        handles=[Patch(color=COLOURS.get(b, "#bbbbbb"), label=literal(b)) for b in seen],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.6),
        ncol=max(len(seen), 1),
        fontsize=8,
        frameon=False,
    )
    if any(ax.get_legend_handles_labels()[1] for ax in axes[:1]):
        axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=7)


def _x_axis(ax, x, numeric: bool) -> None:
    """The x axis: logarithmic when the numeric knob's positive values span a factor of 10 or more, the
    values as ticks when it is not numeric; labelled with the knob's name and unit."""
    if numeric:
        vals = [v for v in x.values if v > 0]
        if len(vals) == len(x.values) and max(vals) / min(vals) >= 10:
            from matplotlib.ticker import ScalarFormatter

            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(ScalarFormatter())
    else:
        ax.set_xticks(range(len(x.values)), [literal(_text(v)) for v in x.values])
    ax.set_xlabel(f"{x.name}" + (f" [{x.unit}]" if x.unit else ""))


def _shown(result):
    """``result`` with each knob's values in its unit (a clock's GHz, not cycles/s), as the table shows them."""
    import dataclasses

    from .sweep import SweepResult

    if all(k.scale == 1.0 for k in result.knobs):
        return result
    doc = result.to_json()
    knobs = [dataclasses.replace(k, values=tuple(k.shown(v) for v in k.values), scale=1.0) for k in result.knobs]
    return SweepResult(knobs, doc["points"], doc["crossings"])


def sweep_figure(result, path) -> Path:
    """Write the figure of a ``sweep.SweepResult`` to ``path`` (.png or .svg); returns the path.

    Raises:
        KnobError: another extension.
        OSError: the file cannot be written.
    """
    p = _check(path)
    result = _shown(result)
    knobs = result.knobs
    xi = next((i for i, k in enumerate(knobs) if all(isinstance(v, (int, float)) for v in k.values)), 0)
    x = knobs[xi]
    numeric = all(isinstance(v, (int, float)) for v in x.values)
    others = [k for i, k in enumerate(knobs) if i != xi]
    with _figure(p, 4, (8, 10), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2, 1]}) as axes:
        _plot_series(axes, result, x, numeric, others)
        _mark_crossings(axes, result.crossings, x, numeric)
        _label_panels(axes, result.rows)
        _x_axis(axes[3], x, numeric)
    return p


def _mid(a, b, numeric):
    if a == b:
        return a
    if numeric and a > 0 and b > 0:
        return (a * b) ** 0.5
    return (a + b) / 2


def compare_figure(cmp, path) -> Path:
    """Write the figure of a ``compare.Comparison`` to ``path`` (.png or .svg); returns the path.

    Raises:
        KnobError: another extension.
        OSError: the file cannot be written.
    """
    p = _check(path)
    n = len(cmp.entries)
    with _figure(p, 2, (max(6, 2.2 * n + 2), 7)) as axes:
        _draw_comparison(axes, cmp, n)
    return p


def _draw_comparison(axes, cmp, n: int) -> None:
    """Tokens/s and ITL p50 of both generations, side by side per workload, with the ratio and the
    assumption that moves it most above each pair."""
    labels = [
        "\n".join(f"{k}={_text(v)}" for k, v in sorted(e["workload"].items()) if k not in ("requests",))
        for e in cmp.entries
    ]
    idx = list(range(n))
    w = 0.38
    for ax, fig_name, title in (
        (axes[0], "benchmark_tokens_per_second", "tokens/s (benchmark)"),
        (axes[1], "itl_p50_s", "ITL p50, s"),
    ):
        a = [e["a"].get(fig_name) or 0 for e in cmp.entries]
        b = [e["b"].get(fig_name) or 0 for e in cmp.entries]
        ax.bar([i - w / 2 for i in idx], a, w, label=literal(cmp.a))
        ax.bar([i + w / 2 for i in idx], b, w, label=literal(cmp.b))
        ax.set_ylabel(title)
        ax.set_xticks(idx, [literal(t) for t in labels], fontsize=7)
        ax.legend(fontsize=8)
    for i, e in enumerate(cmp.entries):
        r = e["ratio"]["benchmark_tokens_per_second"]
        if r is not None:
            drv = (e["drives"] or "").split(":")[0]
            top = max(e["a"].get("benchmark_tokens_per_second") or 0, e["b"].get("benchmark_tokens_per_second") or 0)
            axes[0].annotate(
                literal(f"×{r:.2f}\n{drv}"),
                (i, top),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    axes[0].set_title(literal(f"{cmp.b} vs {cmp.a}: ratio and the assumption that moves it most"), fontsize=9)
    axes[0].margins(y=0.25)


__all__ = ["compare_figure", "sweep_figure"]
