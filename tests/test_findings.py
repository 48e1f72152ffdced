"""Issue 31, part 2: guided findings — rules as catalog data, a gain bound by the share of time, and a
re-projection on the emulator that checks the bound.

The slow-chip acceptance: chip 3 runs every op 1.3 × as long; the other chips wait for it at every
collective. The finding "waiting for a slower chip" estimates the gain of removing that wait from the
largest per-chip wait share ``s`` as ``s / (1 − s)`` (Amdahl's law); repeating the run without the slow
chip must land within 10 % of that estimate.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from perfonto.analysis.findings import estimated_gain
from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.findings import load_findings


def test_the_gain_bound_is_amdahls_law():
    # a cause taking 20 % of the time: the rest runs in 80 %, 1 / 0.8 = 1.25 × the throughput
    assert estimated_gain(0.2) == pytest.approx(0.25)
    assert estimated_gain(0.5) == pytest.approx(1.0)
    assert estimated_gain(0.0) == 0.0
    for bad in (1.0, 1.5, -0.1, float("nan"), float("inf")):
        assert estimated_gain(bad) is None


def test_the_shipped_rules_load_clean():
    cat = load_catalog(cache=False)
    rules = {r.metric: r for r in cat.graph.findings}
    assert "topdown.interconnect.peer_wait" in rules and len(rules) >= 10
    assert not [d for d in cat.diagnostics if d.code.startswith("finding")]
    peer = rules["topdown.interconnect.peer_wait"]
    assert peer.over == "chip_max" and peer.remove == {"slow_chip": None}
    # a throttle is not the whole link share; collectives overlapped with compute leave only their latency
    assert rules["topdown.interconnect.link_transfer"].remove == {"overlap_collectives": True}
    for r in rules.values():  # every rule's share is itself a share of time
        assert cat.graph.all_metrics[r.share].unit_text == "percent"


@pytest.fixture(scope="module")
def graph():
    return load_catalog(cache=False).graph


@pytest.mark.parametrize(
    "text, code, where",
    [
        ("findings:\n  - metric: no.such\n    title: x\n", "finding-unknown-metric", (2, 13)),
        (
            "findings:\n  - metric: mxu.utilization\n    title: x\n    next: [mfu, nope]\n",
            "finding-unknown-metric",
            (4, 11),
        ),
        ("findings:\n  - metric: mxu.utilization\n    title: x\n    remove: {clock: none}\n", "finding-knob", (4, 21)),
        ("findings:\n  - metric: mxu.utilization\n    title: x\n    remove: {slow_chip: 3}\n", "finding-knob", (4, 25)),
        ("findings:\n  - metric: mxu.utilization\n    title: x\n    over: worst\n", "finding-field", (4, 11)),
        ("findings:\n  - metric: mxu.utilization\n    title: x\n    colour: red\n", "finding-field", (4, 13)),
        ("findings:\n  - metric: mxu.utilization\n", "finding-field", (2, 5)),
        (
            "findings:\n  - metric: mxu.utilization\n    title: x\n    share: hbm.bandwidth\n",
            "finding-share-unit",
            (4, 12),
        ),
        (
            "findings:\n  - metric: mxu.utilization\n    title: x\n    busy: hbm.bandwidth\n",
            "finding-share-unit",
            (4, 11),
        ),
        ("rules: []\n", "finding-file", (1, 1)),
        ("findings: [\n", "yaml-syntax", None),
    ],
)
def test_a_bad_rule_names_file_line_and_column(tmp_path, graph, text, code, where):
    f = tmp_path / "mine.findings.yaml"
    f.write_text(text)
    rules, diags, _ = load_findings([f], graph)
    assert rules == [] and [d.code for d in diags] == [code], [d.render() for d in diags]
    d = diags[0]
    assert d.span.file == str(f)
    if where:
        assert (d.span.line, d.span.col) == where, d.render()


def _catalog_with_rule(tmp_path: Path) -> Path:
    """A catalog folder (the shipped generation and library) whose own rule replaces the library's
    peer-wait rule and adds one for a metric the library has no rule for."""
    d = tmp_path / "cat"
    d.mkdir()
    (d / "extra.metrics").write_text(
        'metric my.busy [percent] = mxu.utilization\n  "The matrix engines\' busy share, again."\n'
        '  threshold > 1 %: "my busy"\n'
    )
    (d / "team.findings.yaml").write_text(
        "findings:\n"
        "  - metric: topdown.interconnect.peer_wait\n"
        "    title: our straggler rule\n"
        "    share: topdown.interconnect.peer_wait\n"
        "    next: [mfu]\n"
        "  - metric: my.busy\n"
        "    title: our own finding\n"
        "    evidence: [mfu]\n"
    )
    return d


def test_a_catalog_adds_and_overrides_rules(tmp_path, capsys):
    d = _catalog_with_rule(tmp_path)
    cat = load_catalog(d, cache=False)
    assert not cat.errors, [x.render() for x in cat.errors]
    rules = {r.metric: r for r in cat.graph.findings}
    assert rules["topdown.interconnect.peer_wait"].title == "our straggler rule"
    assert rules["topdown.interconnect.peer_wait"].over == "server"  # the folder's rule replaced the library's
    assert rules["my.busy"].share is None and "topdown.memory_bound" in rules  # the library's others stay
    out = tmp_path / "run"
    assert main(["run", "--duration", "0.2s", "--catalog", str(d), "--out", str(out)]) == 0
    capsys.readouterr()
    found = json.loads((out / "report.json").read_text())["findings"]
    mine = [f for f in found if f["metric"] == "my.busy"]
    assert len(mine) == 1 and mine[0]["title"] == "our own finding"
    assert mine[0]["estimated_gain"] is None and mine[0]["evidence"]["mfu"] is not None
    assert mine[0]["evidence_units"] == {"mfu": "percent"}  # the text prints `mfu = 12.34 %`, not a bare number
    from rich.console import Console

    from perfonto.report import render_guided

    console = Console(width=200, color_system=None, record=True)
    render_guided(mine, console)
    assert f"mfu = {mine[0]['evidence']['mfu']:.2f} %" in console.export_text()
    render_guided([{k: v for k, v in mine[0].items() if k != "evidence_units"}], console)  # an older report.json
    assert "mfu = " in console.export_text()
    from perfonto.analysis.html_report import _findings  # the page as the terminal (it printed bare numbers)

    assert f"mfu = {mine[0]['evidence']['mfu']:.2f} %" in _findings(mine)
    assert "mfu = " in _findings([{k: v for k, v in mine[0].items() if k != "evidence_units"}])


SLOW = ["--duration", "600ms", "--isl", "128", "--osl", "128", "--sample-period", "10ms"]


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("slow") / "run"
    assert main(["run", *SLOW, "--slow-chip", "3:1.3", "--out", str(out)]) == 0
    return out


def test_slow_chip_finding_estimate_lands_within_10_percent_of_the_reprojection(slow_run, tmp_path, capsys):
    capsys.readouterr()
    report = json.loads((slow_run / "report.json").read_text())
    first = report["findings"][0]
    assert first["metric"] == "topdown.interconnect.peer_wait"
    assert "chip 3" in first["message"]
    # the estimate by hand from the per-chip wait shares in the same report: the largest one, s / (1 - s)
    waits = [c["metrics"]["topdown.interconnect.peer_wait"] / 100 for c in report["per_chip"]]
    s = max(waits)
    assert min(waits) < 1e-6 < s  # chip 3 itself does not wait; the others do
    assert first["share"] == pytest.approx(s, rel=1e-12)
    assert first["estimated_gain"] == pytest.approx(s / (1 - s), rel=1e-12)
    out = tmp_path / "findings"
    assert main(["findings", str(slow_run), "--reproject", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    peer = doc["findings"][0]["reprojection"]
    assert peer["knobs"] == {"slow_chip": None}
    assert peer["steps"] >= 5
    # without the slow chip every op of chip 3 is 1.3 × shorter; the step shrinks by the others' wait
    assert peer["step_period_s"][0] > peer["step_period_s"][1]
    assert abs(peer["gain"] - first["estimated_gain"]) <= 0.10 * first["estimated_gain"], (peer, first)
    assert abs(peer["estimate_error"]) <= 0.10
    # link transfer: re-projected with collectives overlapped with compute (an assumption, not a workload knob: a new
    # user found --reproject did nothing where the report itself moved that assumption); its gain is measured
    (link,) = [f for f in doc["findings"] if f["metric"] == "topdown.interconnect.link_transfer"]
    r = link["reprojection"]
    assert r["knobs"] == {"overlap_collectives": True} and r["step_period_s"][1] < r["step_period_s"][0]
    assert abs(r["gain"] - link["estimated_gain"]) <= 0.25 * link["estimated_gain"], (r, link["estimated_gain"])
    assert (out / "reproject").is_dir()
    # a finding whose rule names no knob is not re-projected, and says why
    bound = [f for f in doc["findings"] if f["metric"] == "topdown.interconnect_bound"]
    assert not bound or "skipped" in bound[0]["reprojection"]
    saved = json.loads((out / "findings.json").read_text())
    assert saved[0]["reprojection"]["gain"] == peer["gain"]


def test_findings_bad_input_is_a_clear_error(tmp_path, capsys, slow_run):
    assert main(["findings", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "no report.json" in err and "Traceback" not in err
    analyzed = tmp_path / "an"
    assert main(["analyze", str(slow_run / "counters.parquet"), "--out", str(analyzed)]) == 0
    capsys.readouterr()
    assert main(["findings", str(analyzed)]) == 0  # the findings are in any report
    assert main(["findings", str(analyzed), "--reproject", "--out", str(tmp_path / "f")]) == 1
    err = capsys.readouterr().err
    assert "ground_truth.json" in err and "Traceback" not in err
    assert not (tmp_path / "f").exists()  # nothing left behind by a refused re-projection


def test_the_terminal_report_prints_the_findings(slow_run, capsys):
    assert main(["findings", str(slow_run)]) == 0
    out = capsys.readouterr().out
    assert "waiting for a slower chip at collectives: about +" in out
    assert "look next at:" in out and "why: chips in lock step" in out
    assert math.isfinite(float(out.split("about +")[1].split(" %")[0]))


def test_all_of_a_rules_errors_at_once_and_rules_that_cannot_work(tmp_path, graph):
    f = tmp_path / "x.findings.yaml"
    f.write_text(
        "findings:\n"
        "  - metric: mfu\n    title: a\n    over: true\n    next: 7\n    why: [1]\n"
        "  - metric: ttft_p99\n    title: never\n"
        "  - metric: mxu.utilization\n    title: one\n"
        "  - metric: mxu.utilization\n    title: two\n"
    )
    rules, diags, _ = load_findings([f], graph)
    codes = [(d.code, d.span.line) for d in diags]
    assert ("finding-field", 4) in codes and ("finding-field", 5) in codes and ("finding-field", 6) in codes
    assert ("finding-never-fires", 7) in codes  # ttft_p99 declares no threshold
    assert ("finding-field", 11) in codes  # a second rule for the same metric in one file
    assert [r.title for r in rules] == ["never", "one"]
    assert {d.severity for d in diags if d.code == "finding-never-fires"} == {"warning"}


def test_the_headline_is_a_finding_below_its_threshold_and_parents_come_after_children(graph):
    from types import SimpleNamespace

    import numpy as np

    from perfonto.analysis.findings import findings

    server = {n: np.float64(0.0) for n in graph.metrics}
    server |= {"topdown.memory_bound": np.float64(45.0), "topdown.compute_bound": np.float64(30.0)}
    ev = SimpleNamespace(server=server, per_chip={}, chips=np.arange(1))
    none = SimpleNamespace(thresholds=[])
    head = {"metric": "topdown.memory_bound", "message": "memory bound: 45.0 % of the chips' cycles"}
    found = findings(graph, ev, none, head)
    assert [f["metric"] for f in found] == ["topdown.memory_bound"]  # 45 % is under its 50 % threshold
    assert found[0]["estimated_gain"] == pytest.approx(0.45 / 0.55)
    server |= {"topdown.interconnect_bound": np.float64(52.0), "topdown.interconnect.link_transfer": np.float64(40.0)}
    crossed = SimpleNamespace(
        thresholds=[
            ("topdown.interconnect_bound", 52.0, "interconnect bound"),
            ("topdown.interconnect.link_transfer", 40.0, "bound by link transfer"),
        ]
    )
    found = findings(graph, ev, crossed, None)
    assert [f["metric"] for f in found] == ["topdown.interconnect.link_transfer", "topdown.interconnect_bound"]
    assert found[1]["overlaps"] == ["topdown.interconnect.link_transfer"] and found[0]["overlaps"] == []
    # a parent whose children that are findings hold ≥ 95 % of its share is one cause said twice: folded into them
    # (the default run listed interconnect bound +91.6 % beside bound by link transfer +91.6 %)
    server |= {"topdown.interconnect.link_transfer": np.float64(50.0)}
    crossed.thresholds[1] = ("topdown.interconnect.link_transfer", 50.0, "bound by link transfer")
    found = findings(graph, ev, crossed, None)
    assert [f["metric"] for f in found] == ["topdown.interconnect.link_transfer"]
    assert found[0]["within"] == {
        "metric": "topdown.interconnect_bound",
        "title": "interconnect bound",
        "share": pytest.approx(0.52),
        "with": [],
    }
    head = {"metric": "topdown.interconnect_bound", "message": "interconnect bound: 52.0 % of the chips' cycles"}
    assert [f["metric"] for f in findings(graph, ev, crossed, head)][0] == "topdown.interconnect_bound"  # the headline


def _hand_edited_is_a_clear_error(slow_run, tmp_path, capsys, name: str, edit, want: str) -> Path:
    """A copy of ``slow_run`` whose JSON file ``name`` ``edit`` changed: ``findings --reproject`` over it
    exits 1 with ``want`` in its message and no internal error. Returns the copy."""
    import shutil

    run = tmp_path / "r"
    shutil.copytree(slow_run, run)
    doc = json.loads((run / name).read_text())
    edit(doc)
    (run / name).write_text(json.dumps(doc))
    assert main(["findings", str(run), "--reproject", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert want in err and "internal error" not in err, err
    return run


@pytest.fixture(scope="module")
def slow_run_pictures(slow_run):
    """The report's pictures of ``slow_run``, drawn once (matplotlib, ~5 s): they are drawn from the report's
    counters and tables, never from its findings, so a copy whose findings were hand-edited has the same ones."""
    import pyarrow.parquet as pq

    from perfonto.analysis import plots

    class Drawn:
        """A picture with its SVG saved once (the page embeds ``svg()``; saving it costs ~1 s)."""

        def __init__(self, pic):
            self.name, self.title, self.data, self._svg = pic.name, pic.title, pic.data, pic.svg()

        def svg(self) -> str:
            return self._svg

    doc = json.loads((slow_run / "report.json").read_text())
    return doc, [Drawn(p) for p in plots.pictures(doc, pq.read_table(slow_run / "metrics.parquet"))]


def _same_pictures(monkeypatch, slow_run_pictures) -> None:
    """``report`` draws ``slow_run``'s pictures from the cache when the report differs only in its findings."""
    from perfonto.analysis import plots

    original, pics = slow_run_pictures
    drawn = plots.pictures

    def pictures(doc, table=None):
        rest = {k: v for k, v in doc.items() if k != "findings"}
        if rest == {k: v for k, v in original.items() if k != "findings"}:
            return pics
        return drawn(doc, table)

    monkeypatch.setattr(plots, "pictures", pictures)


@pytest.mark.parametrize(
    "edit, want",
    [
        (lambda r: r.update(findings=[1]), "findings[0] is not an object"),
        (lambda r: r.update(findings=[{}]), "has no `metric` and `title`"),
        (lambda r: r["findings"][0].update(estimated_gain="big"), "estimated_gain is 'big'"),
        (lambda r: r["findings"][0].update(value=float("nan")), "value is nan"),
        (lambda r: r["findings"][0].update(remove="slow_chip"), "remove is not a dict"),
        (lambda r: r["findings"][0].update(remove={"slow_chip": [0, 3.0]}), "is not an emulator knob"),
        (lambda r: r.update(findings="oops"), "`findings` is not a list"),
    ],
)
def test_a_hand_edited_report_is_a_clear_error(slow_run, slow_run_pictures, monkeypatch, tmp_path, capsys, edit, want):
    run = _hand_edited_is_a_clear_error(slow_run, tmp_path, capsys, "report.json", edit, want)
    # the page shows the findings; its pictures and the timeline beside it never read them (drawn once)
    _same_pictures(monkeypatch, slow_run_pictures)
    html = tmp_path / "p.html"
    assert main(["report", str(run), "--html", str(html), "--no-timeline"]) in (0, 1)  # never an internal error
    assert "internal error" not in capsys.readouterr().err
    assert not html.exists() or 'data-picture="roofline"' in html.read_text()


@pytest.mark.parametrize(
    "edit, want",
    [
        (lambda g: g.pop("model"), "'model' is missing"),
        (lambda g: g.update(chips="eight"), "wrong type"),
        (lambda g: g.update(knobs=[1, 2]), "`knobs` is not an object"),
        (lambda g: g.update(requested_duration_s=-1), "refuses the run's settings"),
    ],
)
def test_a_hand_edited_ground_truth_is_a_clear_error(slow_run, tmp_path, capsys, edit, want):
    _hand_edited_is_a_clear_error(slow_run, tmp_path, capsys, "ground_truth.json", edit, want)


def test_pipes_and_devices_are_refused_not_waited_on(tmp_path, capsys, slow_run):
    import os
    import shutil

    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "report.json")
    assert main(["findings", str(fifo)]) == 1
    assert "not a regular file" in capsys.readouterr().err
    run = tmp_path / "r"
    shutil.copytree(slow_run, run)
    (run / "ground_truth.json").unlink()
    os.mkfifo(run / "ground_truth.json")
    assert main(["findings", str(run), "--reproject", "--out", str(tmp_path / "o")]) == 1
    assert "not a regular file" in capsys.readouterr().err
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "e.metrics").write_text("")
    (cat / "z.findings.yaml").symlink_to("/dev/zero")
    assert main(["check", "--catalog", str(cat)]) == 1  # the cache key reads regular files only
    assert "internal error" not in capsys.readouterr().err


def test_reproject_with_no_knob_to_remove_says_so(tmp_path, capsys):
    """`findings --reproject` on findings whose rules name no emulator knob printed the estimates as if
    nothing had been asked (a new user's trial): each says it was not re-projected, and a line says none was."""

    run = tmp_path / "run"
    run.mkdir()
    doc = json.loads(_default_run_report(tmp_path).read_text())
    for f in doc["findings"]:  # rules that name no knob (the link-transfer rule names overlap_collectives)
        f["remove"] = {}
    (run / "report.json").write_text(json.dumps(doc))
    assert main(["findings", str(run), "--reproject", "--out", str(tmp_path / "o")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not re-projected `topdown.compute.matrix`: its cause is not an emulator knob" in out
    # 2: interconnect bound is folded into link transfer, which holds all of its share; matrix-engine bound
    # (32.6 % > 25 %) is a finding of its own (the library's thresholds are not `when parent`)
    assert "--reproject: none of the 2 finding(s) was re-projected" in out


def _default_run_report(tmp_path):
    assert main(["run", "--duration", "0.4s", "--out", str(tmp_path / "r")]) == 0
    return tmp_path / "r" / "report.json"


def test_a_share_tied_on_several_chips_names_them_all(tmp_path, capsys):
    """Seven chips waiting alike for a slow one: the finding named one of them (chip 4's 18.2627 % over chip 2's
    18.2598 %, clock-drift noise) where the wait table showed chip 2 largest (a hand audit); it names them all."""
    from perfonto.cli import main

    argv = ["run", "--slow-chip", "3:1.4286", "--duration", "0.5s", "--out", str(tmp_path / "o"), "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    f = next(f for f in doc["findings"] if f["metric"] == "topdown.interconnect.peer_wait")
    assert f["share_basis"] == "the largest per-chip share, alike on chips 0–2, 4–7"


def test_a_gain_past_what_a_share_can_size_is_not_printed_as_a_figure():
    """A batch-1 decode read "memory bound: about +36807.8 % throughput" (s / (1 − s) at s = 99.7 %; a new
    user's trial): past +1,900 % (s > 95 %) the reports say "more than" and why."""
    from perfonto.analysis.findings import estimated_gain, gain_text

    assert gain_text(estimated_gain(0.5)) == "+100.0 %" and gain_text(estimated_gain(0.95)) == "+1900.0 %"
    assert gain_text(estimated_gain(0.997)) == "more than +1,900 %" and gain_text(None) == "—"


def test_a_share_the_blamed_resource_is_idle_through_says_so(tmp_path, capsys):
    """A what-if audit's decode run (8 clients, 128/2048): "bound by link transfer: about +57.3 %" with the
    links busy 0.43 % of the time (c2c.link_busy), and its re-projection gained +0.4 %; "weight streaming
    +58 %" with HBM busy 14.2 % of a 36.7 % share. Such a finding now says the share is mostly latency or
    fixed per-operation cost, which a faster resource does not remove; the default prefill-heavy run's links
    (busy 46.8 % of a 47.8 % share) get no such caveat."""
    out = tmp_path / "dec"
    args = ["run", "--isl", "128", "--osl", "2048", "--concurrency", "8", "--duration", "300ms", "--out", str(out)]
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    found = {f["metric"]: f for f in json.loads((out / "report.json").read_text())["findings"]}
    link = found["topdown.interconnect.link_transfer"]
    busy = link["evidence"]["c2c.link_busy"]
    assert busy < 0.5 * link["share"] * 100 and "latency — each collective's setup and its hops" in link["caveat"]
    assert link["caveat"].startswith(f"c2c.link_busy = {busy:.2f} % against a {link['share'] * 100:.1f} % share")
    assert "fixed per-operation cost" in found["topdown.memory.weights"]["caveat"]
    assert "but: c2c.link_busy = " in text
    assert main(["run", "--out", str(tmp_path / "base"), "--json"]) == 0
    capsys.readouterr()
    base = json.loads((tmp_path / "base" / "report.json").read_text())["findings"]
    assert base and not any("caveat" in f for f in base)
