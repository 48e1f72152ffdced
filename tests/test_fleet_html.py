"""The HTML report's fleet section (``analysis/html_fleet.py``): a fleet capture's page shows the rollups per
pod, rack and host, the spread across chips and the racks that stand out, each number the one
``report.json``'s fleet section holds (which the terminal report prints too); a run's page has none."""

from __future__ import annotations

import html
import json
import re

import pytest

from perfonto.analysis.html_fleet import fleet_section
from perfonto.analysis.html_report import SECTIONS
from perfonto.cli import main
from perfonto.emulator.fleet import FleetSpec, generate_fleet
from test_report_html import Page, assert_prints


@pytest.fixture(scope="module")
def page(tmp_path_factory, sohu):
    """8 hosts × 2 chips in two racks (the second runs 15 degC hot; two slow chips), analysed with its
    topology, and the page of that output."""
    d = tmp_path_factory.mktemp("fleet-html")
    generate_fleet(sohu, FleetSpec(8, 2), d / "data", duration_s=0.2, sample_period_s=2e-3, warmup_steps=100)
    assert main(["analyze", str(d / "data"), "--out", str(d / "run"), "--json"]) == 0
    html = d / "page" / "report.html"
    assert main(["report", str(d / "run"), "--html", str(html), "--no-timeline"]) == 0
    text = html.read_text()
    return Page(text), text, json.loads((d / "run" / "report.json").read_text())


def test_each_level_table_prints_the_reports_rollups(page):
    p, text, doc = page
    f, names = doc["fleet"], doc["report"]["fleet"]
    sections = [a.get("id") for t, a in p.tags if t == "section"]
    assert "fleet" in sections and sections == [s for s in SECTIONS if s in sections]  # in the nav's order
    checked = 0
    for level in ("fleet", "pod", "rack", "host"):
        assert f'id="fleet-{level}"' in text
        want = {r["node"]: r["metrics"] for r in f["levels"][level]}
        rows = re.findall(rf'<tr data-{level}="([^"]*)">(.*?)</tr>', text)
        assert [html.unescape(node) for node, _ in rows] == list(want)  # every node (8 hosts: under the cut)
        for node, body in rows:
            cells = re.findall(r'data-metric="([^"]+)" data-value="([^"]*)">([^<]*)<', body)
            assert [m for m, _, _ in cells] == names
            for m, value, shown in cells:
                assert_prints({"data-value": value, "text": html.unescape(shown)}, want[html.unescape(node)].get(m))
                checked += 1
    assert checked == len(names) * sum(len(v) for v in f["levels"].values())
    assert f["extreme"].get("power.temperature_mean") == "max"
    assert "<th>power.temperature_mean (max)</th>" in text  # the hottest chip's, not a ratio of totals
    for node, body in re.findall(r'<tr data-host="([^"]*)">(.*?)</tr>', text):  # each host with its rack and pod
        c = next(c for c in f["chips"] if c["host"] == node)
        assert body.startswith(f'<td class="node">{node}</td><td>{c["rack"]}</td><td>{c["pod"]}</td>')


def test_spread_and_the_hot_rack_are_named_as_the_report_names_them(page):
    p, text, doc = page
    f = doc["fleet"]
    spread = [c for c in p.cells if c["section"] == "fleet" and "data-p50" in c]
    assert spread and all(float(c["data-value"]) == f["spread"][c["data-p50"]]["p50"] for c in spread)
    slow = [o for o in f["outliers"]["mfu"]["low"]]
    assert slow and all(f"{o['host']}/{o['chip']} ({o['rack']}) {o['relative'] * 100:+.1f} %" in text for o in slow[:5])
    tok = f["spread"]["tokens_per_second"]  # over the hosts that led a group: how many, said in the row
    over = "(over hosts)" if tok["chips"] == 8 else f"(over {tok['chips']} of 8 hosts)"
    assert f"<code>tokens_per_second</code> {over}</td>" in text
    thr = f["spread"]["mxu.utilization"]["threshold"]  # the share past the threshold, and the threshold
    assert f"<td>{thr['share_of_chips'] * 100:.1f} % ({html.escape(thr['op'])} {thr['limit']:g})</td>" in text
    hot = [o for o in f["nodes_out"]["power.temperature_mean"]["rack"]]
    assert [o["node"] for o in hot] == ["r01"]
    # degC on an interval scale: the difference in degrees, never a percent of a Celsius reading
    assert "<code>power.temperature_mean</code> 52." in text and "(+15.000 degC)</li>" in text


def test_a_report_without_a_fleet_section_has_no_fleet_html():
    assert fleet_section({"metrics": {}}, ["mfu"]) == ""
    doc = {
        "metrics": {"t": {"unit": "degC"}},
        "fleet": {
            "levels": {"rack": [{"node": "<r&1>", "chips": 2, "metrics": {"t": 40.0}}]},
            "spread": {},
            "outliers": {},
            "nodes_out": {
                "t": {"rack": [{"node": "<r&1>", "chips": 2, "median": 50.0, "reference": 40.0, "relative": 0.25}]}
            },
            "interval_scale": ["t"],
        },
    }
    html = fleet_section(doc, ["t"])
    assert "<r&1>" not in html and "&lt;r&amp;1&gt;" in html  # a node name from data is escaped
    assert "(+10.000 degC)" in html and "25.0 %" not in html
    odd = {"levels": {"rack": [{"node": "r\u202e1\x00", "chips": 1, "metrics": {}}]}}  # an override, a NUL
    shown = fleet_section(doc | {"fleet": doc["fleet"] | odd}, ["t"])
    assert "\u202e" not in shown and "\x00" not in shown and "r\\u202e1\\u0000" in shown
    del doc["fleet"]["interval_scale"]  # a report.json written before the key: the unit decides
    assert "(+10.000 degC)" in fleet_section(doc, ["t"])


def test_a_rack_that_serves_fewer_tokens_is_named_over_its_hosts(tmp_path, sohu):
    """tokens/s is counted by each group's leader chip only (the other chips count 0), so the chip rule
    cannot judge a rack on it; over the hosts' rollups it can: the hosts of rack r01 (of three) serving
    20 % fewer tokens name r01, over its hosts, in report.json and the page."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    generate_fleet(sohu, FleetSpec(12, 2), data, duration_s=0.2, sample_period_s=2e-3, warmup_steps=100)
    for h in range(4, 8):  # rack r01: hosts h004 … h007 (4 hosts a rack)
        part = data / "counters" / f"host=h{h:03d}" / "part-0.parquet"
        t = pq.read_table(part)
        for name in ("seq.input_tokens", "seq.output_tokens"):
            v = t.column(name).to_numpy()
            t = t.set_column(t.column_names.index(name), name, pa.array(v - (v - v.min()) // 5, pa.uint64()))
        pq.write_table(t, part)
    assert main(["analyze", str(data), "--out", str(tmp_path / "run"), "--json"]) == 0
    doc = json.loads((tmp_path / "run" / "report.json").read_text())
    found = doc["fleet"]["nodes_out"]["tokens_per_second"]["rack"]
    counted = [r["node"] for r in doc["fleet"]["levels"]["host"] if r["metrics"]["tokens_per_second"]]
    r01 = [h for h in counted if h in ("h004", "h005", "h006", "h007")]  # a host that led no group: left out
    assert [o["node"] for o in found] == ["r01"] and found[0]["over"] == "hosts" and found[0]["hosts"] == len(r01) >= 2
    assert found[0]["relative"] == pytest.approx(-0.2, abs=0.01)
    assert "chips" not in found[0]
    html = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "run"), "--html", str(html), "--no-timeline"]) == 0
    assert f"rack <code>r01</code> ({len(r01)} hosts): <code>tokens_per_second</code>" in html.read_text()
    assert np.isfinite(found[0]["median"])


@pytest.mark.parametrize(
    "edit",
    [
        lambda f: f["levels"]["rack"][0].pop("chips"),
        lambda f: f.update(levels="abc"),
        lambda f: f["spread"]["mfu"].update(p50="abc"),
        lambda f: f.update(interval_scale=3),
        lambda f: f["outliers"]["mfu"]["low"][0].pop("value"),
    ],
)
def test_a_hand_edited_fleet_section_is_named_not_an_internal_error(page, tmp_path, capsys, edit):
    """A breaker's report.json edits (a key gone, a string for a number or a list) made ``perfonto report
    --html`` an internal error; it names the file and the section, and says how to write it again."""
    _, _, doc = page
    doc = json.loads(json.dumps(doc))
    edit(doc["fleet"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(run), "--html", str(tmp_path / "p.html"), "--no-timeline"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{run / 'report.json'}: its `fleet` section is not as perfonto writes it" in err and "internal" not in err
    assert not (tmp_path / "p.html").exists()


def test_a_host_split_across_racks_says_both():
    """A topology may place a host's chips in two racks: its row names both, not its first chip's alone."""
    doc = {
        "metrics": {},
        "fleet": {
            "levels": {"host": [{"node": "h0", "chips": 2, "metrics": {}}]},
            "chips": [
                {"host": "h0", "chip": 0, "rack": "r0", "pod": "p0"},
                {"host": "h0", "chip": 1, "rack": "r9", "pod": "p0"},
            ],
        },
    }
    assert '<td class="node">h0</td><td>r0, r9</td><td>p0</td>' in fleet_section(doc, [])
