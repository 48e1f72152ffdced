"""Roll-ups of a per-instance measurement against a per-instance peak should match: a mean over the
instances (``avg``, ``min``, ``max``) divided by the chip's total over them (``sum``, or a chip-scope
constant), or the reverse, is off by the number of instances as a fraction. An architect followed the scope
error's own hint (``sum(spec.…)``) from ``avg(noc.tx_bytes) / (spec.noc.link_peak_bandwidth * interval)`` to
``avg(noc.tx_bytes) / (sum(spec.noc.link_peak_bandwidth) * interval)``: it compiled and read 3.05 % for
16 links busy 48.8 %. It is a warning (``scope-rollup``), not an error: "how many links' worth" is meant
as written (a review and a metric author: as an error it refused that, the hottest link over the chip's
utilisation, and efficiency while busy). Hand numbers: 4 links of 100 GB/s peak carry 10, 20, 30 and 40
GB in a 1 s window (mean 25 GB, total 100 GB): the mean link is 25 % busy and so is the chip (100 of 400
GB/s); the hottest link is 40 % busy, 1.6 × the chip's 25 %."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import compile_src
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import Windows


@pytest.fixture(scope="module")
def links(tmp_path_factory):
    from perfonto.ontology import load_generation

    p = tmp_path_factory.mktemp("l") / "links.yaml"
    p.write_text("""\
generation: links
description: a part with 4 links
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
spec:
  noc.link_peak: {value: 100, unit: GB/s, provenance: assumed, scope: instance}
  noc.chip_peak: {value: 400, unit: GB/s, provenance: assumed, scope: chip}
blocks:
  noc:
    description: the links
    clock: core
    instances: {link: 4}
    signals:
      tx_bytes: {kind: counter, unit: B, width: 64, description: bytes sent on the link}
""")
    gen, d = load_generation(p)
    assert gen is not None, [x.render() for x in d]
    return gen


WINDOW = Windows(np.ones((1, 1)), {"noc.tx_bytes": np.array([[[10e9, 20e9, 30e9, 40e9]]])})

RIGHT = [
    ("avg(noc.tx_bytes) / (avg(spec.noc.link_peak) * interval)", 25.0),
    ("sum(noc.tx_bytes) / (sum(spec.noc.link_peak) * interval)", 25.0),
    ("avg(noc.tx_bytes / (spec.noc.link_peak * interval))", 25.0),
    ("sum(noc.tx_bytes) / (spec.noc.chip_peak * interval)", 25.0),
    ("-avg(noc.tx_bytes) / (-avg(spec.noc.link_peak) * interval)", 25.0),
    # the hottest link over the chip: each side rolled up alike, the ratio of two utilisations
    ("max(noc.tx_bytes / spec.noc.link_peak) / (sum(noc.tx_bytes) / sum(spec.noc.link_peak))", 160.0),
    ("(max(noc.tx_bytes) / avg(spec.noc.link_peak)) / (sum(noc.tx_bytes) / spec.noc.chip_peak)", 160.0),
]
WRONG = [
    "avg(noc.tx_bytes) / (sum(spec.noc.link_peak) * interval)",  # 6.25 %: the one the hint led to
    "sum(noc.tx_bytes) / (avg(spec.noc.link_peak) * interval)",  # 100 %
    "max(noc.tx_bytes) / (sum(spec.noc.link_peak) * interval)",
    "avg(noc.tx_bytes) / (spec.noc.chip_peak * interval)",  # a chip-scope peak is a total over the links
    "sum(spec.noc.link_peak) * interval / avg(noc.tx_bytes)",  # the reverse division
]


def _rollup_warnings(g) -> list:
    return [d for d in g.diagnostics if d.code == "scope-rollup"]


@pytest.mark.parametrize("formula, want", RIGHT)
def test_like_roll_ups_compile_quietly_and_read_the_hand_figure(links, formula, want):
    g = compile_src(links, f"metric u [percent] = {formula}")
    assert not g.errors and not _rollup_warnings(g), [x.render() for x in g.diagnostics]
    assert float(np.ravel(evaluate(g, WINDOW)["u"])[0]) == pytest.approx(want)


@pytest.mark.parametrize("formula", WRONG)
def test_a_mean_against_a_chip_total_is_warned_of_naming_the_count(links, formula):
    unit = "1/percent" if formula.startswith("sum(spec") else "percent"
    g = compile_src(links, f"metric u [{unit}] = {formula}")
    warned = _rollup_warnings(g)
    assert not g.errors and len(warned) == 1, [x.render() for x in g.diagnostics]
    assert "off by the number of instances (4)" in warned[0].message and warned[0].severity == "warning"
    assert "avg(x) / avg(spec.…)" in warned[0].hint


def test_the_mismatch_through_named_metrics_is_warned_of_too(links):
    """A metric author's split: `mean_link = avg(noc.tx_bytes) / interval`, then `mean_link /
    sum(spec.noc.link_peak)` read 25 GB/s over 400 GB/s = 6.25 % for links 25 % busy, in silence."""
    src = (
        'metric mean_link [GB/s] = avg(noc.tx_bytes) / interval\n  "mean link"\n'
        'metric u [percent] = mean_link / sum(spec.noc.link_peak)\n  "utilisation"\n'
    )
    g = compile_src(links, src)
    assert [d.code for d in _rollup_warnings(g)] == ["scope-rollup"], [x.render() for x in g.diagnostics]
    assert float(np.ravel(evaluate(g, WINDOW)["u"])[0]) == pytest.approx(6.25)  # the figure it warns of


def test_the_scope_error_for_an_unrolled_peak_no_longer_points_at_the_wrong_fix(links):
    g = compile_src(links, "metric u [percent] = avg(noc.tx_bytes) / (spec.noc.link_peak * interval)")
    assert [d.code for d in g.errors] == ["scope"]
    assert "`avg(x) / avg(spec.…)` for the mean" in g.errors[0].hint and "declare its scope" in g.errors[0].hint


def test_a_peak_clause_over_a_mean_is_warned_of_at_the_clause(links):
    """`metric x [GB] = avg(c2c.tx_bytes)` with `peak spec.c2c.peak_bandwidth` (the chip's total over 12
    links) generated `x.pct_of_peak` at 1.19 % for links 14.26 % busy, in silence (a metric author)."""
    g = compile_src(links, 'metric m [GB] = avg(noc.tx_bytes)\n  "mean link bytes"\n  peak spec.noc.chip_peak\n')
    warned = _rollup_warnings(g)
    assert len(warned) == 1 and warned[0].span.line == 3, [x.render() for x in g.diagnostics]
