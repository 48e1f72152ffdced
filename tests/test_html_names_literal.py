"""Names from the data are drawn literally in the pictures (``analysis.plots``, the compare page's
roofline): matplotlib reads a ``$…$`` pair as TeX math, so an op named ``gemm$\\badcmd{x}$`` aborted
``report --html/--plots`` and ``compare-runs --html`` with mathtext's ParseFatalException, and
``norm_$x^2$`` was drawn as italic math instead of its name. Every text artist built from the data
must show the name as it is in the data.

The page's other texts from a run, as a performance engineer read them (findings 8–10): the link to the timeline
is percent-encoded (a file name with `#`, `?` or `%` is a path, not a fragment or query), a value that is not
computable reads "—" as in the terminal, never JSON's "null", and the terminal's cautions are on the page too
(null window values, few forward passes, the time split, the clock-alignment error, the imbalance within a chip,
the op classes whose roofline side and bound differ)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pytest

from perfonto.analysis import compare_html, plots
from perfonto.cli import main

BAD = "gemm$\\badcmd{x}$"  # an unknown TeX command: a parse error before the fix
MATH = "norm_$x^2$"  # a valid pair: drawn as math before the fix
DOLLAR = "$__internal_7_helper"  # one `$`, as CUDA's helpers are named
HOST = "node$\\badhost$"
METRIC = "util$\\oops$"  # a user catalog's metric name (heat-map column)
NODE = "topdown.$\\bad$"  # a top-down node name (legend of the time series)

CEILINGS = [
    {"name": "FP8", "kind": "compute", "value": 9e15},
    {"name": "vec$\\tor$", "kind": "compute", "value": 1.5e14},
    {"name": "HBM$x$", "kind": "memory", "value": 7.2e12},
]


def _report(model: str = "m$\\odel$") -> dict:
    rows = [
        {"op": n, "intensity": i, "flops_per_s": f, "work": "matrix", "time_share": 0.2}
        for n, i, f in ((BAD, 500.0, 3e15), (MATH, 20.0, 1e14), (DOLLAR, 2.0, 1e13))
    ]
    per_chip = [
        {"host": HOST, "chip": c, "metrics": {"mxu.utilization": 10.0 * (c + 1), METRIC: 5.0}} for c in range(2)
    ]
    return {
        "model": model,
        "generation": "gen$\\x$",
        "ops": {"rows": rows, "ceilings": CEILINGS},
        "per_chip": per_chip,
        "metrics": {"mxu.utilization": {"unit": "percent"}, METRIC: {"unit": "percent"}},
        "topdown": {NODE: 60.0, "topdown.idle": 40.0},
        "links": {"chips": [0, 1], "links": 2, "utilization": [[10.0, 20.0], [30.0, 40.0]]},
    }


def _shown(fig) -> list[str]:
    """Every text the figure draws, as matplotlib renders it (math parsed or not): a text parsed as math
    is returned with a ``MATH:`` prefix, so a name drawn as math never equals the name."""
    from matplotlib.text import Text

    out = []
    for t in fig.findobj(Text):
        s, ismath = t._preprocess_math(t.get_text())  # what the renderer gets: (text, parsed as math?)
        if ismath and s.startswith("$\\mathdefault{"):
            continue  # a log axis's tick label (10^3): math by design, not from the data
        out.append(("MATH:" if ismath else "") + s)
    return out


def test_roofline_draws_op_ceiling_and_model_names_literally():
    pic = plots.roofline_picture(_report())  # drew (and raised) at construction before the fix
    shown = _shown(pic.figure)
    for name in (BAD, MATH, DOLLAR):
        assert f"{name} (matrix)" in shown, (name, shown)
    assert "vec$\\tor$ peak 150 TFLOP/s" in shown
    assert "HBM$x$ 7.2 TB/s" in shown
    assert "Roofline — m$\\odel$ on gen$\\x$" in shown
    assert not [s for s in shown if s.startswith("MATH:")]
    assert pic.title == "Roofline — m$\\odel$ on gen$\\x$"  # the page's alt text: the name as it is
    assert pic.svg().startswith("<?xml")  # it saves


def test_heatmap_and_links_draw_host_and_metric_names_literally():
    rep = _report()
    heat = plots.heatmap_picture(rep)
    shown = _shown(heat.figure)
    assert f"{HOST}/0" in shown and f"{HOST}/1" in shown and METRIC in shown, shown
    assert not [s for s in shown if s.startswith("MATH:")]
    assert heat.png()[:4] == b"\x89PNG"
    links = plots.links_picture(rep)
    assert "0" in _shown(links.figure)


def test_topdown_legend_draws_node_names_literally():
    rep = _report()
    table = pa.table(
        {
            "window": np.array([0, 0, 1, 1]),
            "interval_s": np.array([0.1, 0.1, 0.1, 0.1]),
            NODE: np.array([50.0, 70.0, 60.0, 60.0]),
            "topdown.idle": np.array([50.0, 30.0, 40.0, 40.0]),
        }
    )
    pic = plots.topdown_picture(rep, table)
    shown = _shown(pic.figure)
    assert "$\\bad$" in shown and "idle" in shown, shown
    assert not [s for s in shown if s.startswith("MATH:")]


def test_compare_page_roofline_with_dollar_names_renders():
    base, run = _report("a"), _report("b")
    page = compare_html.render([_result()], [base, run])  # the roofline with arrows: raised before the fix
    assert 'data-picture="roofline-compare"' in page
    pic = compare_html.roofline_arrows(base, run)
    shown = _shown(pic.figure)
    assert f"{BAD} (matrix)" in shown and not [s for s in shown if s.startswith("MATH:")]


def _result() -> dict:
    return {
        "baseline": "base",
        "run": "run",
        "generation": "gen",
        "note": None,
        "confidence": 0.95,
        "n_boot": 10,
        "metrics": {},
        "only_in": {},
        "units_differ": {},
        "topdown": {},
        "ops": {BAD: [0.2, 0.2]},
        "bottleneck": [None, None],
    }


@pytest.mark.parametrize("name", ["plain", "a\\$b", "$", "$$", "x$y$z$"])
def test_literal_round_trips_through_matplotlib(name):
    from matplotlib.text import Text

    t = Text(0, 0, plots.literal(name))
    assert t._preprocess_math(t.get_text()) == (name, False)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("page")
    run = d / "run"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "--duration", "0.3s", "--throttled-link", "2:5:4", "--by", "op", "--out", str(run)]) == 0
        html = d / "names" / "run#1 50%?.html"
        assert main(["report", str(run), "--html", str(html)]) == 0
    return json.loads((run / "report.json").read_text()), html, html.read_text()


def test_the_timeline_link_is_percent_encoded(page):
    _, html, text = page
    (href,) = re.findall(r'id="timeline-file" href="([^"]*)"', text)
    assert href == "run%231%2050%25%3F.pftrace"  # was: href="run#1 50%?.pftrace" (a link to `run`)
    assert (html.parent / unquote(href)).is_file()


def test_a_value_that_is_not_computable_reads_a_dash_not_null(page):
    _, _, text = page
    empty = re.findall(r'<td class="num"[^>]*data-value="">([^<]*)</td>', text)
    assert empty and set(empty) == {"—"}, set(empty)  # the steady-state table's tpot of an offline run: was "null"
    assert ">null<" not in text


def test_the_terminal_cautions_are_on_the_page(page):
    doc, _, text = page
    steps = doc["forward_passes"]["steps"]
    assert 0 < steps < 20 and doc["forward_passes"]["whole"]
    assert f'id="forward-passes">{steps} whole forward passes in the run' in text
    for name, reasons in doc["null_windows"].items():
        for why, n in reasons.items():
            assert f"<li><code>{name}</code>: {n} {why}</li>" in text
    ts = doc["time_split"]
    assert f"communication only {ts['communication_only'] * 100:.1f} %" in text
    err = doc["multichip"]["alignment"]["error_ns"]
    assert f"error median {err['median']:.0f} ns, p99 {err['p99']:.0f} ns" in text
    c2c = doc["multichip"]["imbalance"]["within_chip"]["c2c"]
    assert f"c2c busy {c2c['value'] * 100:.2f} % (chip {c2c['chip']})" in text  # the throttled link's chip 2
    assert c2c["chip"] == 2
    differ = [r["op"] for r in doc["ops"]["rows"] if r["side"] == "memory" and r["bound"] == "topdown.compute_bound"]
    if differ:
        assert "Roofline side and bound differ for " in text and differ[0] in text


def test_whatif_series_names_are_drawn_literally():
    """A what-if sweep's series is named by its knobs' values (a model, a generation's file): a `$…$` in one
    crashed the figure in matplotlib's mathtext as in the reports' pictures."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfonto.whatif.plots import _plot_lines

    fig, axes = plt.subplots(3)
    rows = [{"tokens_per_second": 1.0, "ttft_p50_s": 0.1, "itl_p50_s": 0.01, "mfu": 0.5}] * 2
    _plot_lines(axes, [1, 2], rows, r"generation=gen$\badcmd{x}$")
    axes[0].legend()
    axes[1].legend()
    fig.savefig(io.BytesIO(), format="png")  # drew the name as math: ParseFatalException
    assert axes[0].get_legend().get_texts()[0].get_text() == r"generation=gen\$\badcmd{x}\$"
    plt.close(fig)


def test_whatif_categorical_ticks_are_drawn_literally():
    """A sweep with no numeric knob has its values as x ticks: a `$…$` in one still crashed the figure."""
    import io
    from types import SimpleNamespace

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from perfonto.whatif.plots import _x_axis

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 2])
    _x_axis(ax, SimpleNamespace(values=["gen$\\badcmd{x}$", "b200"], name="generation", unit=""), numeric=False)
    fig.savefig(io.BytesIO(), format="png")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gen\\$\\badcmd{x}\\$", "b200"]
    plt.close(fig)


def test_a_glyph_the_font_lacks_prints_no_matplotlib_warning(recwarn):
    """A host name with a tab or CJK characters drew boxes and printed matplotlib's "Glyph … missing from
    font" UserWarning, with its source path, on stderr."""
    from perfonto.analysis.plots import Picture, _figure

    fig, ax = _figure(3, 2)
    ax.set_title("host\twith tab 主机")
    Picture("x", "t", fig).png()
    assert not [w for w in recwarn if "missing from font" in str(w.message)]
