"""A `threshold … when parent:` is crossed only under a parent chain past its own thresholds
(``analysis.bottleneck.crossed_where``) everywhere a threshold is judged, not only in the server-level list:
the fleet's share of chips past a threshold counted every chip past the metric's own bound, whatever its
parent's value on that chip."""

from __future__ import annotations

from io import StringIO
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from perfonto.analysis.bottleneck import crossed_where, thresholds_crossed
from perfonto.analysis.fleet import _gate, _spread
from perfonto.analysis.findings import findings
from perfonto.analysis.fleet_words import past
from perfonto.metrics.catalog import load_catalog
from perfonto.report import render_guided

TREE = """\
metric t.root [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Root."
  threshold > 50 %: "root"
metric t.mid [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Mid."
  threshold > 20 % when parent: "mid"
  parent t.root
metric t.leaf [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Leaf."
  threshold > 5 % when parent: "leaf"
  parent t.mid
"""

# Four chips. t.leaf is past its own 5 % on all four; on chip 0 its chain is past (root 60 > 50, mid 25 > 20):
# crossed; chip 1's root is under (40); chip 2's mid is under (15); chip 3's root has no value: not checked.
PER_CHIP = {
    "t.root": np.array([60.0, 40.0, 60.0, np.nan]),
    "t.mid": np.array([25.0, 25.0, 15.0, 25.0]),
    "t.leaf": np.array([6.0, 6.0, 6.0, 6.0]),
}
PLACE = [("h0", c, None, None) for c in range(4)]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    d = tmp_path_factory.mktemp("tree")
    (d / "t.metrics").write_text(TREE)
    cat = load_catalog(d, "sohu")
    assert not cat.errors, [e.render() for e in cat.errors]
    return cat.graph


def _share(graph, name):
    v = PER_CHIP[name]
    return _spread(graph.metrics[name], v, PLACE, 5, _gate(graph, name, PER_CHIP, v.shape))[0]["threshold"]


def test_the_fleet_share_past_a_when_parent_threshold_counts_only_chips_under_a_parent_past_its_own(graph):
    leaf = _share(graph, "t.leaf")
    assert leaf["share_of_chips"] == pytest.approx(1 / 4)  # chip 0 only; the old count was 4 / 4 = 100 %
    assert leaf["when_parent"] and leaf["unchecked"] == {"count": 1, "parents": ["t.root"]}  # chip 3
    mid = _share(graph, "t.mid")  # past its 20 % on chips 0, 1, 3; chip 1's root is under, chip 3's unknown
    assert mid["share_of_chips"] == pytest.approx(1 / 4)  # the old count was 3 / 4
    assert mid["unchecked"] == {"count": 1, "parents": ["t.root"]}
    root = _share(graph, "t.root")  # stands alone: 2 of the 3 chips with a value
    assert root["share_of_chips"] == pytest.approx(2 / 3) and "when_parent" not in root and "unchecked" not in root
    assert past(leaf) == "25.0 % (> 5 when parent); 1 more past it, not checked: t.root has no value there"
    assert past(root) == "66.7 % (> 50)"


def test_the_chip_rule_is_the_server_rule(graph):
    """Chip by chip, the fleet's gate says what ``thresholds_crossed`` says of that chip's values alone."""
    crossed, unchecked, _ = crossed_where(graph, "t.leaf", PER_CHIP, (4,))
    for c in range(4):
        one = {n: np.float64(v[c]) for n, v in PER_CHIP.items()}
        listed = {n: msg for n, _, msg in thresholds_crossed(graph, one)}
        assert ("t.leaf" in listed) == bool(crossed[c] or unchecked[c]), c
        assert ("not checked" in listed.get("t.leaf", "")) == bool(unchecked[c]), c
    # the parents named are those unknown on a chip past its own bound: chip 1's mid has no value, but its
    # leaf (1 %) is under its own 5 %, so only chip 0's missing root is named
    two = {"t.root": np.array([np.nan, 60.0]), "t.mid": np.array([25.0, np.nan]), "t.leaf": np.array([6.0, 1.0])}
    crossed, unchecked, names = crossed_where(graph, "t.leaf", two, (2,))
    assert crossed.tolist() == [False, False] and unchecked.tolist() == [True, False] and names == ["t.root"]


# A finding rule fires on the evidence it has. A generation without the link retry counter (`c2c.retries`)
# cannot compute `c2c.retry_rate`, one of the three evidence metrics of "bound by link transfer"; that finding
# was dropped whole, though its trigger (the link-transfer share) and its share of time are measured.


def _no_retries(tmp_path):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "sohu2.yaml").write_text(
        "generation: sohu2\nextends: sohu\ndescription: no link retry counter\nremoved: [c2c.retries]\n"
    )
    return d


LINK = "topdown.interconnect.link_transfer"


def test_a_finding_fires_on_the_evidence_it_has_and_names_what_it_could_not_read(tmp_path):
    graph = load_catalog(_no_retries(tmp_path), None, cache=False).graph
    assert "c2c.retry_rate" in graph.unavailable
    if LINK not in {r.metric for r in graph.findings}:  # the loader's part (metrics/findings.py) may still drop it
        (rule,) = [r for r in load_catalog(cache=False).graph.findings if r.metric == LINK]
        graph.findings = [*graph.findings, rule]
    server = {n: np.float64(0.0) for n in graph.metrics}
    server |= {LINK: np.float64(40.0), "c2c.bandwidth_utilization": np.float64(30.0), "c2c.link_busy": np.nan}
    ev = SimpleNamespace(server=server, per_chip={}, chips=np.arange(1))
    crossed = SimpleNamespace(thresholds=[(LINK, 40.0, "bound by link transfer")])
    (f,) = findings(graph, ev, crossed, None)
    assert f["title"] == "bound by link transfer"
    assert f["estimated_gain"] == pytest.approx(0.4 / 0.6)  # a 40 % share: 0.4 / (1 − 0.4) = +66.7 %
    assert f["evidence"]["c2c.bandwidth_utilization"] == 30.0
    unread = f["evidence_unread"]
    assert set(unread) == {"c2c.link_busy", "c2c.retry_rate"} and unread["c2c.link_busy"] == "no value on this run"
    assert unread["c2c.retry_rate"].startswith("unavailable: ") and "c2c.retries" in unread["c2c.retry_rate"]
    assert f["next"] == ["c2c.link_busy"]  # c2c.retry_rate cannot be looked at on this generation
    out = StringIO()
    render_guided([f], Console(file=out, width=400))
    text = out.getvalue()
    assert "evidence: c2c.bandwidth_utilization = 30" in text and "retry_rate =" not in text
    assert "evidence not read: c2c.link_busy (no value on this run); c2c.retry_rate (unavailable: " in text


def test_the_loader_keeps_a_rule_whose_evidence_is_unavailable(tmp_path):
    cat = load_catalog(_no_retries(tmp_path), None, cache=False)
    assert LINK in {r.metric for r in cat.graph.findings}
    assert any(f"finding `{LINK}` fires without `c2c.retry_rate`" in n for n in cat.notes)
