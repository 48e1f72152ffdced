"""A level — a gauge (its window value is the mean over the window) or a packed register's field (its
value at the window's end) — divided by the window's duration is no rate: an architect's
``sum(noc.link_status.retries) / interval`` compiled and read 80,000 event/s in every window but 210.5
event/s over the run. It is a compile error now — divided by the window's duration itself (``interval``, times a
constant), multiplied by ``1 / interval``, or read through a metric that reads only levels. A counter over
interval, a gauge times interval (energy from power), a gauge alone and a level over a rate (Little's law,
joules per token from power: a review found them refused by a first version) compile."""

from __future__ import annotations

import pytest

from helpers import compile_src


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    from perfonto.ontology import load_generation

    p = tmp_path_factory.mktemp("lv") / "lv.yaml"
    p.write_text("""\
generation: lv
description: a part with a gauge, a counter and a packed register
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
blocks:
  noc:
    description: the links
    clock: core
    instances: {link: 2}
    signals:
      tx_bytes: {kind: counter, unit: B, width: 64, description: bytes sent}
      status:
        kind: packed
        width: 32
        unit: "1"
        description: link status
        fields:
          retries: {bits: [0, 15], unit: event, description: retries latched}
  smc:
    description: SRAM
    clock: core
    signals:
      occupancy: {kind: gauge, unit: B, across_chips: sum, description: bytes held}
      power: {kind: gauge, unit: W, across_chips: sum, description: power drawn}
""")
    g, d = load_generation(p)
    assert g is not None, [x.render() for x in d]
    return g


@pytest.mark.parametrize(
    "formula, unit, name",
    [
        ("sum(noc.status.retries) / interval", "event/s", "noc.status.retries"),
        ("smc.occupancy / interval", "B/s", "smc.occupancy"),
        ("(smc.occupancy + 1 [B]) / (2 * interval)", "B/s", "smc.occupancy"),
        ("smc.occupancy * (1 / interval)", "B/s", "smc.occupancy"),
    ],
)
def test_a_level_over_the_window_is_refused_naming_it(gen, formula, unit, name):
    g = compile_src(gen, f"metric m [{unit}] = {formula}")
    assert [d.code for d in g.errors] == ["level-rate"], [x.render() for x in g.errors]
    assert f"`{name}` is a level" in g.errors[0].message


@pytest.mark.parametrize(
    "formula, unit",
    [
        ("sum(noc.tx_bytes) / interval", "B/s"),
        ("smc.power * interval", "J"),
        ("smc.occupancy", "B"),
        ("sum(noc.tx_bytes) / smc.occupancy / interval", "1/s"),  # a count in it: a rate of that count
        ("smc.occupancy / (sum(noc.tx_bytes) / interval)", "s"),  # Little's law: bytes held over bytes/s
        ("smc.power / (sum(noc.tx_bytes) / interval)", "J/B"),  # energy per byte from the power gauge
        ("smc.power * interval / (smc.power * interval)", "1"),
    ],
)
def test_counts_over_the_window_and_levels_alone_compile(gen, formula, unit):
    g = compile_src(gen, f"metric m [{unit}] = {formula}")
    assert not g.errors, [x.render() for x in g.errors]


def test_a_level_through_a_named_metric_is_refused_too(gen):
    """`occ = smc.occupancy` then `occ / interval`: the same figure, split in two (a metric author)."""
    src = 'metric occ [B] = smc.occupancy\n  "held"\nmetric m [B/s] = occ / interval\n  "no rate"\n'
    g = compile_src(gen, src)
    assert [d.code for d in g.errors] == ["level-rate"], [x.render() for x in g.errors]
    assert "`smc.occupancy` is a level" in g.errors[0].message
