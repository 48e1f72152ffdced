"""`perfonto report RUN --html FILE` and the pictures (issue 17): the roofline marks each op class at
the values the per-op table prints; the page is self-contained, has every section and prints the
JSON report's numbers; catalog and dump text cannot add markup; pictures are titled, have axes with
units and are deterministic; `--by` groups add up to the run; bad input fails clearly. The browser
tests (headless Chromium loads the page offline, the DOM is checked, a screenshot taken) are in
``test_report_browser.py``."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto.analysis import html_report, plots
from perfonto.analysis.html_report import SECTIONS
from perfonto.cli import main

SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class Page(HTMLParser):
    """Tags with their attributes, the per-op table's cells, and every number cell of the page."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.cells: list[dict] = []
        self.op_rows: dict[str, dict] = {}
        self._row = None
        self._cell = None
        self._section = None
        self._chip = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section":
            self._section = a.get("id")
        if tag == "tr":
            self._chip = a.get("data-chip")
        if tag == "tr" and "data-op" in a:
            self._row = self.op_rows.setdefault(a["data-op"], {})
        if tag == "td" and "data-value" in a:
            self._cell = dict(a, text="", section=self._section, chip=self._chip)
            self.cells.append(self._cell)
            if self._row is not None and "data-field" in a:
                self._row[a["data-field"]] = self._cell

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"] += data


def printed(text: str, si: bool = False) -> tuple[float, float] | None:
    """The number a cell prints and half its last digit's step (the printing's rounding); ``si``:
    the unit carries an SI prefix (``5.18 PFLOP/s``)."""
    m = re.match(r"\s*(-?[\d,]*\.?\d+(?:e[+-]?\d+)?)\s*([kMGTP]?)", text)
    if not m or text.strip() in ("—", "null"):
        return None
    num = m.group(1).replace(",", "")
    mant = num.split("e")[0]
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    exp = int(num.split("e")[1]) if "e" in num else 0
    scale = SI.get(m.group(2), 1.0) if si else 1.0
    if "e" in num:  # %.4g: significant digits
        return float(num) * scale, 0.5 * 10.0 ** (exp - decimals) * scale
    return float(num) * scale, 0.5 * 10.0 ** (-decimals) * scale


def assert_prints(cell: dict, value: float | None, si: bool = False) -> None:
    assert cell["data-value"] == ("" if value is None else repr(float(value)))
    p = printed(cell["text"], si)
    if value is None:
        assert p is None, cell
        return
    shown, half = p
    assert abs(shown - value) <= half * (1 + 1e-9) + 1e-12 * abs(value), (cell, value)


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    run = d / "run"
    assert (
        main(
            [
                "run",
                "--model",
                "llama-3.1-8b",
                "--chips",
                "2",
                "--duration",
                "200ms",
                "--by",
                "op,layer,phase",
                "--out",
                str(run),
                "--json",
            ]
        )
        == 0
    )
    html = d / "page" / "report.html"
    assert main(["report", str(run), "--html", str(html), "--plots", str(d / "plots"), "--json"]) == 0
    return run, html, json.loads((run / "report.json").read_text()), d


def test_roofline_marks_each_op_at_the_values_the_table_prints(reported):
    run, html, doc, _ = reported
    page = Page(html.read_text())
    pic = plots.roofline_picture(doc)
    ax = pic.figure.axes[0]
    marks = {}
    for coll, label in zip(ax.collections, [h.get_label() for h in ax.collections]):
        ((x, y),) = coll.get_offsets()
        marks[label.rsplit(" (", 1)[0]] = (float(x), float(y))
    placed = {r["op"] for r in doc["ops"]["rows"] if r["intensity"] and r["flops_per_s"]}
    assert set(marks) == placed and len(placed) >= 8
    for op, (x, y) in marks.items():
        row = page.op_rows[op]
        assert float(row["intensity"]["data-value"]) == x and float(row["flops_per_s"]["data-value"]) == y
        assert_prints(row["intensity"], x)
        assert_prints(row["flops_per_s"], y, si=True)
    assert [p["op"] for p in pic.data["points"]] == [r["op"] for r in doc["ops"]["rows"] if r["op"] in placed]
    ceilings = {c["name"]: c["value"] for c in pic.data["ceilings"]}
    assert (
        ceilings["FP8"] == 9000e12
        and ceilings["BF16"] == 4500e12
        and ceilings["HBM"] == 7.2e12
        and ceilings["SRAM"] == 48e12
    )


def test_collectives_sit_under_the_link_roof_and_marks_are_sized_by_time(reported):
    """Issue 31, point 3: an all-reduce's time is set by the links, so it is placed at FLOPs per byte sent
    against the chip-to-chip link roof (not HBM), and every op's mark has an area by its share of time."""
    _, _, doc, _ = reported
    rows = doc["ops"]["rows"]
    link = {c["name"]: c["value"] for c in doc["ops"]["ceilings"] if c["kind"] == "link"}
    assert link == {"C2C links": 1.2e12}  # spec.c2c.peak_bandwidth of sohu
    hbm = next(c["value"] for c in doc["ops"]["ceilings"] if c["name"] == "HBM")
    coll = [r for r in rows if r["roof"] == "link"]
    assert coll and all("allreduce" in r["op"] for r in coll), [r["op"] for r in coll]
    for r in coll:
        assert r["intensity"] == pytest.approx(r["flops"] / r["link_bytes"], rel=1e-12)
        assert r["link_bytes"] / 1.2e12 >= r["hbm_bytes"] / hbm  # the link roof is the lower one for it
        assert r["ridge"] == pytest.approx(r["peak"] / 1.2e12)
        assert r["side"] == "link" and 0 < r["link_utilization"] <= 1.0 + 1e-9
        assert r["link_bytes_per_s"] == pytest.approx(r["link_bytes"] / r["time_s"])
    for r in rows:  # a matrix op keeps the HBM roof
        if r["work"] == "matrix":
            assert r["roof"] == "HBM" and r["intensity"] == pytest.approx(r["flops"] / r["hbm_bytes"])
    pic = plots.roofline_picture(doc)
    ax = pic.figure.axes[0]
    sizes = {c.get_label().rsplit(" (", 1)[0]: float(c.get_sizes()[0]) for c in ax.collections}
    for p in pic.data["points"]:
        assert sizes[p["op"]] == pytest.approx(12 + 600 * p["time_share"]) == pytest.approx(p["size"])
    big = max(pic.data["points"], key=lambda p: p["time_share"])
    small = min(pic.data["points"], key=lambda p: p["time_share"])
    assert sizes[big["op"]] > sizes[small["op"]]
    labels = [c.get_label() for c in ax.collections]
    assert any("link roof" in lab for lab in labels)
    assert any(ln.get_linestyle() == "-." for ln in ax.lines)  # the link roof is drawn


def test_the_page_says_what_an_offline_ttft_is(reported):
    """An offline run's TTFT is mostly the wait since its requests were queued: the terminal said so and the
    page did not (a new user read a TTFT of 111 s with no note)."""
    from perfonto.analysis.steady_state import offline_queue_note

    _, html, doc, _ = reported
    assert doc["offline_queued_s"] > 0
    assert html_report.e(offline_queue_note(doc["offline_queued_s"])) in html.read_text()


def test_the_page_states_the_runs_assumptions_and_the_claim_as_the_terminal_does(reported):
    """The page had no modelling assumptions or claim comparison; it prints the terminal's lines
    (``analysis.context_words``), from report.json."""
    from perfonto.analysis.context_words import context_lines

    _, html, doc, _ = reported
    text = html.read_text()
    lines = context_lines({k: doc.get(k) for k in ("assumptions", "preset_says", "claim")})
    assert any(k == "factor" for k, _ in lines) and any("× the claim" in t for _, t in lines)
    section = text[text.index('<section id="assumptions">') :]
    for _, line in lines:
        assert html_report.e(line) in section, line


def test_per_chip_cells_drop_only_the_unit_their_header_carries():
    """The terminal's per-chip table: each value by its unit's rule, without the unit (the header has it)."""
    from perfonto.report_format import bare_text

    assert bare_text(0.0009797, "percent") == "0.00" and bare_text(31.934, "percent") == "31.93"
    assert bare_text(2892.3, "GB/s") == "2,892.3" and bare_text(294.6281, "W") == "294.628"
    assert (
        bare_text(45.0, "request") == "45" and bare_text(float("nan"), "W") == "null" and bare_text(1.5, "1") == "1.500"
    )


def test_an_older_report_json_still_renders(reported):
    """A report.json written before topdown_children, preset_says, preset and offline_queued_s: the page
    shows level 1, one list of assumptions and no offline note, without an error."""
    _, _, doc, _ = reported
    old = {k: v for k, v in doc.items() if k not in ("topdown_children", "preset_says", "preset", "offline_queued_s")}
    page = html_report.render(old)
    assert '<section id="assumptions">' in page and "as the preset" not in page and "offline-queue" not in page
    assert "└ topdown." not in page


def test_roof_labels_are_drawn_over_the_op_marks(reported):
    """Each roof's label (HBM, SRAM, the links, the compute peaks) is drawn above the op marks on a pale
    box, so an op that sits on the label's place (the all-reduces on the link roof's) does not hide it."""
    _, _, doc, _ = reported
    ax = plots.roofline_picture(doc).figure.axes[0]
    marks = max(c.get_zorder() for c in ax.collections)
    labels = [t for t in ax.texts if "B/s" in t.get_text() or "peak" in t.get_text()]
    assert {"C2C links 1.2 TB/s", "HBM 7.2 TB/s"} <= {t.get_text() for t in labels}
    assert all(t.get_zorder() > marks and t.get_bbox_patch() is not None for t in labels)


def test_page_is_self_contained_complete_and_prints_the_report(reported):
    run, html, doc, _ = reported
    text = html.read_text()
    page = Page(text)
    finding = next(a for t, a in page.tags if a.get("id") == "headline-finding")
    assert finding["data-metric"] == doc["headline"]["metric"] and html_report.e(doc["headline"]["message"]) in text
    ids = {a.get("id") for t, a in page.tags if t == "section"}
    assert ids == set(SECTIONS) - {"fleet"}  # a run's page: no fleet section (an analyze of a capture has one)
    _check_self_contained(page, text)
    cells = {}
    for c in page.cells:
        cells.setdefault(c["section"], []).append(c)
    _check_headline_and_topdown(cells, doc)
    _check_per_chip_and_ops(cells, page, doc)
    tl = [a for t, a in page.tags if t == "a" and a.get("id") == "timeline-file"]
    assert tl and (html.parent / tl[0]["href"]).stat().st_size > 1000


def _check_self_contained(page: Page, text: str) -> None:
    """No external resource: no link/iframe/object/embed/base, media inline as data: URLs, the only
    outside link Perfetto's, no CSS import; the four pictures are there."""
    for tag, a in page.tags:
        assert tag not in ("link", "iframe", "object", "embed", "base")
        if tag in ("img", "script", "source", "video", "audio"):
            assert a.get("src", "data:").startswith("data:"), (tag, a)
        if tag == "a" and a.get("href", "").startswith(("http:", "https:")):
            assert a["href"] == html_report.PERFETTO
    assert "url(http" not in text and "@import" not in text
    imgs = [a for t, a in page.tags if t == "img"]
    assert len(imgs) == 4


def _check_headline_and_topdown(cells: dict, doc: dict) -> None:
    """The headline metrics and the level-1 top-down table print the report's values, in its order."""
    headline = {c["data-metric"]: c for c in cells["headline"]}
    assert {"mfu", "tokens_per_second", "hbm.bandwidth_utilization", "arithmetic_intensity"} <= set(headline)
    for name, cell in headline.items():
        assert_prints(cell, doc["metrics"][name]["value"])
    td = {}
    for c in cells["bottleneck"]:  # the level-1 table comes first (thresholds crossed may repeat a node)
        td.setdefault(c["data-metric"], c)
    assert [n for n in td if n in doc["topdown"]] == list(doc["topdown"])
    for name in doc["topdown"]:
        assert_prints(td[name], doc["topdown"][name])
    # level 2 under its level-1 node, as the terminal's tree (the page showed level 1 only)
    level2 = [c for kids in doc["topdown_children"].values() for c in kids]
    assert "topdown.memory.kv_cache" in level2
    for child in level2:
        assert_prints(td[child], doc["metrics"][child]["value"])


def _check_per_chip_and_ops(cells: dict, page: Page, doc: dict) -> None:
    """Every chip's metrics and every op row's time share and efficiency print the report's values."""
    chips = {str(p["chip"]): p["metrics"] for p in doc["per_chip"]}
    assert {c["chip"] for c in cells["per-chip"]} == set(chips)
    for c in cells["per-chip"]:
        assert_prints(c, chips[c["chip"]][c["data-metric"]])
    rows = {r["op"]: r for r in doc["ops"]["rows"]}
    assert set(page.op_rows) == set(rows)
    for op, got in page.op_rows.items():
        assert_prints(got["time_share"], rows[op]["time_share"] * 100)
        if rows[op]["efficiency"] is not None:
            assert_prints(got["efficiency"], rows[op]["efficiency"] * 100)


def test_catalog_and_dump_text_cannot_add_markup(reported):
    _, _, doc, _ = reported
    evil = '<img src=x onerror="alert(1)"><script>alert(2)</script>"\'&'
    bad = json.loads(json.dumps(doc))
    bad["model"] = evil
    bad["bottleneck_label"] = evil
    bad["notes"] = [evil]
    bad["unavailable"] = {"x.y": evil}
    bad["ops"]["rows"][0]["op"] = evil
    bad["thresholds_crossed"] = [{"metric": "mfu", "value": 1.0, "message": evil}]
    bad["by"]["op"]["groups"][0]["group"] = evil
    bad["headline"] = {"metric": evil, "message": evil}
    text = html_report.render(bad, [], headline=["mfu"])
    page = Page(text)
    assert [t for t, _ in page.tags].count("script") == 1 and not any(t == "img" for t, _ in page.tags)
    assert not any(k.startswith("on") for _, a in page.tags for k in a)
    assert text.count(html_report.e(evil)) >= 9 and evil not in text


def test_pictures_are_titled_with_units_and_deterministic(reported):
    run, _, doc, d = reported
    table = pq.read_table(run / "metrics.parquet")
    first = plots.pictures(doc, table)
    again = plots.pictures(doc, table)
    assert [p.name for p in first] == ["roofline", "topdown", "heatmap", "links"]
    for a, b in zip(first, again):
        ax = a.figure.axes[0]
        assert a.title and ax.get_title() == a.title
        assert re.search(r"\[.+\]", ax.get_xlabel()) or a.name in ("heatmap", "links")
        assert re.search(r"\[.+\]", ax.get_ylabel()) or a.name in ("heatmap", "links")
        if a.name in ("heatmap", "links"):  # the colour bar carries the unit
            assert re.search(r"\[%\]", a.figure.axes[1].get_ylabel())
        png, svg = a.png(), a.svg()  # each save costs up to a second: once per drawing and format
        assert png == b.png() and svg == b.svg()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and svg.lstrip().startswith("<?xml")
        assert (d / "plots" / f"{a.name}.png").read_bytes() == png
        assert (d / "plots" / f"{a.name}.svg").read_bytes() == svg.encode()
    td = first[1].data
    assert td["nodes"] == list(doc["topdown"])
    total = sum(np.nan_to_num(td["shares"][n]) for n in td["nodes"])
    assert np.allclose(total, 100.0, atol=1e-6)
    links = next(p for p in first if p.name == "links").data
    assert links["values"].shape == (2, 12) and np.nanmax(links["values"]) <= 100.0


def test_by_groups_add_up_to_the_run(reported):
    run, _, doc, _ = reported
    server = doc["metrics"]["mxu.flops"]["value"]  # TFLOP over the run, every chip
    for by in ("op", "layer", "phase"):
        t = pq.read_table(run / f"metrics_by_{by}.parquet")
        assert set(doc["metrics"]) - {"ttft", "tpot", "itl", "e2e_latency", "e2e_per_output_token"} >= set(
            t.column_names
        ) - {by, "time_s", "time_share", "spans", "out_of_bounds"}
        assert "arithmetic_intensity" in t.column_names and "topdown.memory_bound" in t.column_names
        assert t.column("mxu.flops").to_numpy(zero_copy_only=False).sum() == pytest.approx(server, rel=1e-6)
        assert t.column("time_share").to_numpy().sum() == pytest.approx(1.0, rel=1e-9)
        assert [g["group"] for g in doc["by"][by]["groups"]] == t.column(by).to_pylist()
    phases = doc["by"]["phase"]["groups"]
    assert {g["group"] for g in phases} >= {"prefill", "decode", "mixed"}


def test_bad_input_fails_clearly(reported, tmp_path, capsys):
    run, _, _, _ = reported
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--html", str(tmp_path / "x.html"), "--json"]) == 1
    assert "no report.json" in json.loads(capsys.readouterr().out)["error"]
    assert main(["report", str(run), "--json"]) == 2
    assert "nothing to write" in json.loads(capsys.readouterr().out)["error"]
    assert main(["analyze", str(run), "--by", "opcode", "--out", str(tmp_path / "a"), "--json"]) == 2
    assert "unknown grouping 'opcode'" in json.loads(capsys.readouterr().out)["error"]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "counters.parquet").write_bytes((run / "counters.parquet").read_bytes())
    assert main(["analyze", str(bare), "--by", "layer", "--out", str(tmp_path / "b"), "--json"]) == 1
    err = json.loads(capsys.readouterr().out)["error"]
    assert "--by layer" in err and "trace" in err and not (tmp_path / "b").exists()


def test_short_skews_are_in_microseconds_as_in_the_terminal():
    """The page printed the main job's skew as 0.0003456 ms where the terminal says 0.35 µs."""
    from perfonto.analysis.html_report import _short_time

    assert [_short_time(3.456e-7), _short_time(4.41e-7), _short_time(2.5e-3)] == ["0.346 µs", "0.441 µs", "2.500 ms"]


def test_serving_section_prints_the_request_metrics_and_the_steady_state(reported):
    """The page had no TTFT/TPOT/ITL/E2E table and no steady state, while its notes spoke of them (a new
    user's trial): each request-level reduction is printed at the report's value, with its population."""
    run, html, doc, _ = reported
    page = Page(html.read_text())
    cells = [c for c in page.cells if c["section"] == "serving"]
    printed = {c["data-metric"]: c for c in cells if "data-metric" in c}
    want = {n for n, m in doc["metrics"].items() if m.get("population") == "request" and "of" in m}
    assert want and want <= set(printed)
    for n in want:
        assert_prints(printed[n], doc["metrics"][n]["value"])
    if doc.get("steady_state"):
        steady = {c["data-field"] for c in cells if "data-field" in c}
        assert {f"steady:{n}" for n in doc["steady_state"]["metrics"]} <= steady
