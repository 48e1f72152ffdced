"""With one throttled link the link-transfer finding read the time as "latency … more link bandwidth or
fewer bytes do not [help] — unless one link is slow", although the same report had found the slow link
(``multichip.slow_links``): the ring's other links wait for it, so their mean busy share is low. When a
slow link was found, the finding says it is the cause and names it (``analysis.findings.name_slow_links``)."""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace

import pytest

from perfonto.analysis.findings import name_slow_links
from perfonto.cli import main


@pytest.fixture(scope="module")
def throttled(tmp_path_factory):
    out = tmp_path_factory.mktemp("slow_link") / "run"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "--duration", "0.3s", "--throttled-link", "2:5:4", "--out", str(out), "--json"]) == 0
    return json.loads((out / "report.json").read_text())


def test_link_finding_names_the_throttled_link_as_the_cause(throttled):
    doc = throttled
    (sl,) = doc["multichip"]["slow_links"]
    assert (sl["chip"], sl["link"]) == (2, 5)
    assert sl["rate_ratio"] == pytest.approx(0.25, abs=1e-6)  # throttled to a quarter of its rate (2:5:4)
    assert sl["busy_s"] == pytest.approx(4 * sl["median_busy_s"], rel=1e-3)  # same bytes, four times as long
    f = next(f for f in doc["findings"] if f["metric"] == "topdown.interconnect.link_transfer")
    cav = f["caveat"]
    assert cav.startswith("a slow or throttled link is the cause: chip 2 link 5 carries its bytes at 25 % of the ")
    assert f"busy {sl['busy_s']:.3g} s, the median link {sl['median_busy_s']:.3g} s" in cav
    assert "latency —" not in cav and "more link bandwidth or fewer bytes do not" not in cav


def test_without_a_slow_link_the_latency_reading_stays():
    rule = SimpleNamespace(metric="topdown.interconnect.link_transfer", busy="c2c.link_busy")
    graph = SimpleNamespace(findings=[rule])
    found = [{"metric": "topdown.interconnect.link_transfer", "caveat": "… which is latency …"}]
    assert name_slow_links(graph, found, {"slow_links": []})[0]["caveat"] == "… which is latency …"
    assert name_slow_links(graph, found, None)[0]["caveat"] == "… which is latency …"


def test_only_link_findings_are_changed_and_the_slowest_come_first():
    rules = [
        SimpleNamespace(metric="topdown.interconnect.link_transfer", busy="c2c.link_busy"),
        SimpleNamespace(metric="topdown.memory_bound", busy="hbm.bandwidth_utilization"),
    ]
    found = [
        {
            "metric": "topdown.interconnect.link_transfer",
            "evidence": {"c2c.link_busy": 20.0},
            "evidence_units": {"c2c.link_busy": "percent"},
        },
        {"metric": "topdown.memory_bound", "caveat": "fixed per-operation cost"},
    ]
    slow = [
        {"chip": 1, "link": 0, "rate_ratio": 0.5, "busy_s": 1.0, "median_busy_s": 0.5},
        {"chip": 3, "link": 7, "rate_ratio": 0.2, "busy_s": 2.5, "median_busy_s": 0.5},
    ]
    out = name_slow_links(SimpleNamespace(findings=rules), found, {"slow_links": slow})
    cav = out[0]["caveat"]
    assert cav.index("chip 3 link 7 carries its bytes at 20 %") < cav.index("chip 1 link 0 carries its bytes at 50 %")
    assert "(busy 2.5 s, the median link 0.5 s)" in cav
    assert "(c2c.link_busy = 20 % is the mean over the links)" in cav
    assert out[1]["caveat"] == "fixed per-operation cost"
