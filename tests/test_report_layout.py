"""A report for any catalog (issue 27, point 3): a generation's `report:` declares the server table's
headline, the per-chip columns and groups (ontology.model.ReportDecl); the terminal report, the HTML page
and report.json show exactly that (analysis.report_model); without a declaration, every metric that
evaluated, grouped by block. A name that is not a metric is a diagnostic at its file:line:col."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from perfonto.analysis.report_model import ReportModel, choose, metric_block, page_model
from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog

PERF = Path(__file__).parent / "fixtures" / "perf" / "perf-stat-interval.csv"
DCGM = Path(__file__).parent / "fixtures" / "dcgm-dmon" / "dmon-2gpu.txt"
SHIPPED = Path(__file__).parents[1] / "perfonto" / "catalogs"

GENERATION = """\
generation: mytool
description: A user's own catalog of perf's software events.
clock_domains:
  cpu:
    frequency: {value: 1, unit: GHz, provenance: assumed, source: "unused"}
blocks:
  task:
    description: perf's software events.
    clock: cpu
    signals:
      clock: {kind: counter, unit: s, scale: 1.0e-9, width: 64, description: t, sources: {perf: task-clock}}
      page_faults: {kind: counter, unit: event, width: 64, description: p, sources: {perf: page-faults}}
      context_switches: {kind: counter, unit: event, width: 64, description: c, sources: {perf: context-switches}}
"""
REPORT = """\
report:
  headline: [faults.per_second, cpus_utilized]
  per_chip: {cpus_utilized: CPUs}
  groups:
    scheduler: [switches.per_second]
"""
METRICS = """\
metric faults.per_second [event/s] = task.page_faults / task.clock
  "Page faults per second of task-clock."
metric cpus_utilized [1] = task.clock / interval
  "CPUs utilized."
metric switches.per_second [event/s] = task.context_switches / task.clock
  "Context switches per second of task-clock."
metric faults.per_switch [1] = task.page_faults / task.context_switches
  "Page faults per context switch."
"""


def _catalog(d: Path, report: str | None) -> Path:
    d.mkdir()
    (d / "mytool.yaml").write_text(GENERATION + (report or ""))
    (d / "mytool.metrics").write_text(METRICS)
    return d


def _rows(text: str, title: str) -> list[str]:
    """The first cells of a rich table's body rows, the table found by the start of its title."""
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[i + 1 :]:
        if line.startswith("└"):
            return out
        if line.startswith("│"):
            out.append(line.split("│")[1].strip())
    raise AssertionError(f"table {title!r} has no end")


def _chip_tables(text: str) -> list[list[str]]:
    """The column headers of every per-chip table of the terminal report, in order (their titles wrap
    with the console's width; their first column is `chip`)."""
    heads = [[c.strip() for c in line.strip("┃").split("┃")] for line in text.splitlines() if line.startswith("┃")]
    return [h for h in heads if h[0] == "chip"]


class _Page(HTMLParser):
    """The metric names of the page's server table and, per per-chip table, its metrics."""

    def __init__(self):
        super().__init__()
        self.section = None
        self.table = None
        self.headline: list[str] = []
        self.tables: dict[str, list[str]] = {}
        self.group = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id")
        elif tag == "h3" and self.section == "per-chip":
            self.group = a.get("data-group")
        elif tag == "table" and self.section == "per-chip":
            self.table = self.group if a.get("class") == "per-chip-group" else "(columns)"
            self.tables[self.table] = []
        elif tag == "td" and "data-metric" in a:
            if self.section == "headline":
                self.headline.append(a["data-metric"])
            elif self.section == "per-chip" and a["data-metric"] not in self.tables[self.table]:
                self.tables[self.table].append(a["data-metric"])


def _run(capsys, tmp_path, catalog: Path, capture: Path = PERF, *extra) -> tuple[str, dict, _Page]:
    """Analyse ``capture`` against ``catalog``: the terminal text, report.json and the HTML page parsed."""
    out = tmp_path / "out"
    capsys.readouterr()
    fmt = ["--format", "perf-stat"] if capture == PERF else []
    assert main(["analyze", str(capture), *fmt, "--catalog", str(catalog), "--out", str(out), *extra]) == 0
    text = capsys.readouterr().out
    doc = json.loads((out / "report.json").read_text())
    assert main(["report", str(out), "--html", str(tmp_path / "r.html"), "--no-timeline"]) == 0
    page = _Page()
    page.feed((tmp_path / "r.html").read_text())
    return text, doc, page


def test_a_declared_report_is_what_the_terminal_html_and_json_show(capsys, tmp_path):
    text, doc, page = _run(capsys, tmp_path, _catalog(tmp_path / "cat", REPORT))
    declared = ["faults.per_second", "cpus_utilized"]  # not the catalog's order; two metrics left out
    assert _rows(text, "Server level") == declared
    assert page.headline == declared
    assert doc["report"] == {
        "headline": declared,
        "groups": {"scheduler": ["switches.per_second"]},
        "per_chip": {"cpus_utilized": "CPUs"},
        "declared": True,
        "fleet": declared,  # none declared: the headline's
    }
    assert _chip_tables(text) == [["chip", "CPUs"], ["chip", "switches.per_second"]]
    assert "scheduler" in text.split("CPUs = cpus_utilized")[1].split("switches.per_second")[0]  # the group's title
    assert page.tables == {"(columns)": ["cpus_utilized"], "scheduler": ["switches.per_second"]}
    assert "faults.per_switch" in doc["metrics"]  # left out of the tables, not of the report


def test_without_a_declaration_every_metric_shows_grouped_by_block(capsys, tmp_path):
    text, doc, page = _run(capsys, tmp_path, _catalog(tmp_path / "cat", None))
    # blocks in the order they first appear: `faults` (the dotted names), then `task` (cpus_utilized reads
    # task.clock), then `switches`
    every = ["faults.per_second", "faults.per_switch", "cpus_utilized", "switches.per_second"]
    assert _rows(text, "Server level") == every
    assert page.headline == every
    groups = {
        "faults": ["faults.per_second", "faults.per_switch"],
        "task": ["cpus_utilized"],
        "switches": ["switches.per_second"],
    }
    assert doc["report"] == {"headline": every, "groups": groups, "per_chip": {}, "declared": False, "fleet": every}
    assert {k: v for k, v in page.tables.items()} == groups
    # no table of separate columns: the groups are the per-chip tables
    assert _chip_tables(text) == [["chip", *names] for names in groups.values()]


def test_terminal_html_and_json_agree_on_the_metric_count(capsys, tmp_path):
    from perfonto.analysis.report_json import metric_count_text

    text, doc, _ = _run(capsys, tmp_path, _catalog(tmp_path / "cat", REPORT))
    # the catalog's 4 metrics, every one with a value over the perf capture; no records, none unavailable
    assert doc["metric_count"] == {"evaluated": 4, "with_value": 4, "request": 0, "unavailable": 0}
    line = metric_count_text(doc["metric_count"])
    assert line in " ".join(text.split())
    assert f"<th>metrics</th><td>{line}</td>" in (tmp_path / "r.html").read_text()


def _place(path: Path, needle: str, nth: int = 0) -> str:
    """``file:line:col`` of the ``nth`` occurrence of ``needle`` in ``path`` (1-based line and column)."""
    lines = path.read_text().splitlines()
    hits = [(i + 1, line.index(needle) + 1) for i, line in enumerate(lines) if needle in line]
    return f"{path}:{hits[nth][0]}:{hits[nth][1]}"


@pytest.mark.parametrize(
    "report, bad",
    [
        ("report:\n  headline: [faults.per_second, cpu_utilized]\n", "cpu_utilized"),
        ("report:\n  groups:\n    sched: [switches.per_second, switch.per_second]\n", "switch.per_second"),
        ("report:\n  per_chip:\n    faults.per_sec: faults\n", "faults.per_sec"),
    ],
)
def test_a_name_that_is_not_a_metric_is_an_error_at_its_place(capsys, tmp_path, report, bad):
    cat = _catalog(tmp_path / "cat", report)
    got = [d for d in load_catalog(cat, None, cache=False).diagnostics if d.code == "report-unknown-metric"]
    assert len(got) == 1 and got[0].severity == "error"
    assert str(got[0].span) == _place(cat / "mytool.yaml", bad)
    capsys.readouterr()
    assert main(["check", "--catalog", str(cat)]) == 1
    out = capsys.readouterr()
    assert f"{_place(cat / 'mytool.yaml', bad)}: error[report-unknown-metric]" in out.out + out.err


def test_a_child_inherits_the_report_or_replaces_it_whole(tmp_path):
    cat = _catalog(tmp_path / "cat", REPORT)
    child = "generation: mine\nextends: mytool\ndescription: A child.\n"
    (cat / "mine.yaml").write_text(child)
    spec = load_catalog(cat, "mine", cache=False).generation.report
    assert spec.headline == ("faults.per_second", "cpus_utilized") and spec.per_chip == {"cpus_utilized": "CPUs"}
    (cat / "mine.yaml").write_text(child + "report:\n  headline: [faults.per_switch]\n")
    spec = load_catalog(cat, "mine", cache=False).generation.report
    assert spec.headline == ("faults.per_switch",)
    assert spec.groups == {} and spec.per_chip == {}  # replaced whole, not merged with the parent's
    (cat / "mine.yaml").write_text(child + "report: null\n")
    assert load_catalog(cat, "mine", cache=False).generation.report is None  # back to the default


def test_an_inherited_bad_name_is_a_warning_pointing_into_the_parent(tmp_path):
    cat = _catalog(tmp_path / "cat", "report:\n  headline: [cpus_utilized, faults.per_minute]\n")
    (cat / "mine.yaml").write_text("generation: mine\nextends: mytool\ndescription: A child.\n")
    c = load_catalog(cat, "mine", cache=False)
    got = [d for d in c.diagnostics if d.code == "report-unknown-metric"]
    assert [d.severity for d in got] == ["warning"] and not c.errors
    assert str(got[0].span) == _place(cat / "mytool.yaml", "faults.per_minute")


def test_sohus_tables_are_declared_in_its_yaml_and_inherited():
    sohu = load_catalog(generation="sohu").generation.report
    assert sohu is not None and sohu.headline[:3] == ("tokens_per_second", "output_tokens_per_second", "mfu")
    assert sohu.per_chip["mxu.utilization"] == "MXU %"
    for g in ("sohu", "h100", "h200", "b200", "caelius"):
        c = load_catalog(generation=g)
        assert c.generation.report.headline == sohu.headline
        assert not [d for d in c.diagnostics if d.code.startswith("report-")]  # every name a metric of the library


@pytest.mark.parametrize(
    "folder, generation, headline",
    [
        ("linux", None, ["cpus_utilized", "context_switches.per_second"]),
        ("node", None, ["busy_share", "user_share", "system_share", "iowait_share"]),
        ("dcgm", "dcgm_h100", ["gr_engine.active", "sm.active", "sm.occupancy"]),
        ("dcgm", "dcgm_h200", ["gr_engine.active", "sm.active", "sm.occupancy"]),
    ],
)
def test_the_shipped_tool_catalogs_declare_their_headline(folder, generation, headline):
    c = load_catalog(SHIPPED / folder, generation, cache=False)
    assert not [d for d in c.diagnostics if d.code == "report-unknown-metric"]
    assert list(c.generation.report.headline[: len(headline)]) == headline


def test_the_dcgm_report_shows_dmons_fields_that_evaluated(capsys, tmp_path):
    text, doc, page = _run(
        capsys, tmp_path, SHIPPED / "dcgm", DCGM, "--generation", "dcgm_h100", "--sample-period", "100ms"
    )
    # the declared headline less the fields this capture lacks (SMOCC, TENSO, PCIe and NVLink: unavailable)
    shown = ["gr_engine.active", "sm.active", "hbm.bandwidth_estimate", "power.average", "power.draw"]
    shown += ["power.tdp_share"]
    assert {"sm.occupancy", "tensor.flops_estimate", "pcie.bandwidth", "nvlink.bandwidth"} <= set(doc["unavailable"])
    assert _rows(text, "Server level") == shown == page.headline == doc["report"]["headline"]
    # dmon's columns, then the groups: `links` has no metric that evaluated (left out), `power` has both
    assert _chip_tables(text) == [["chip", "GRACT", "SMACT", "DRAMA TB/s", "POWER W"], ["chip", *shown[4:]]]
    assert page.tables == {"(columns)": ["gr_engine.active", "sm.active", *shown[2:4]], "power": shown[4:]}


def test_choose_and_the_block_of_a_metric():
    assert metric_block("hbm.read_bandwidth") == "hbm"
    assert metric_block("mfu", ["mxu.flops", "mxu.busy", "core.cycles"]) == "mxu"
    assert metric_block("ratio", []) == "other"
    m = choose(["a.x", "b", "a.y"], ["a.y"], None, {"a.x": "a", "b": "q", "a.y": "a"})
    assert m == ReportModel(["a.x", "a.y", "b"], {"a": ["a.y"]}, {}, False, ["a.x", "a.y", "b"])
    ten = [f"m{i}" for i in range(10)]
    assert choose(ten, [], None, {}).fleet == ten[:8]  # the default fleet tables: the headline's first eight
    spec = load_catalog(generation="sohu").generation.report
    m = choose(["mfu", "power.average", "power.temperature_mean", "tokens_per_second"], [], spec, {})
    assert m.headline == ["tokens_per_second", "mfu", "power.average"]  # sohu.yaml's order
    assert m.fleet == ["tokens_per_second", "mfu", "power.average", "power.temperature_mean"]


def test_a_report_json_without_the_section_reads_its_shipped_generations_declaration():
    doc = {"generation": "h100", "lineage": ["sohu", "h100"], "metrics": {}, "per_chip": []}
    doc["metrics"] = {n: {"value": 1.0, "unit": ""} for n in ("mfu", "mxu.utilization", "other.metric")}
    assert page_model(doc).headline == ["mfu", "mxu.utilization"] and page_model(doc).declared
    doc["lineage"], doc["generation"] = ["mine"], "mine"
    # the default: by block, an undotted name without its signals (not in report.json) under `other`
    assert page_model(doc).headline == ["mfu", "other.metric", "mxu.utilization"]


def test_a_metric_over_instance_axes_in_the_report_is_a_warning(tmp_path):
    cat = _catalog(tmp_path / "cat", "report:\n  headline: [cpus_utilized, core.busy_share]\n")
    core = (
        "  core:\n    description: per-core time.\n    clock: cpu\n    instances: {core: 2}\n    signals:\n"
        "      busy: {kind: counter, unit: s, scale: 1.0e-9, width: 64, description: busy time}\n"
    )
    text = (cat / "mytool.yaml").read_text().replace("report:\n", core + "report:\n")
    (cat / "mytool.yaml").write_text(text)
    (cat / "mytool.metrics").write_text(METRICS + 'metric core.busy_share [1] = core.busy / interval\n  "Per core."\n')
    c = load_catalog(cat, None, cache=False)
    got = [d for d in c.diagnostics if d.code.startswith("report-")]
    assert [(d.code, d.severity) for d in got] == [("report-axes", "warning")] and not c.errors
    assert str(got[0].span) == _place(cat / "mytool.yaml", "core.busy_share") and "(core.core)" in got[0].message
