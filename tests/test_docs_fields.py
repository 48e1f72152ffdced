"""Docs and explain of a metric on a packed field, and the signal facts of ``codegen --target docs``
(caelius finding 10).

``f.mode = max(kvc.ctrl.mode)`` reads field ``kvc.ctrl.mode`` (bits 0..1 of ``kvc.ctrl``): its
"depends on" said "—" (a field is in no ``signal_deps``), and its server level "a ratio of server totals",
while fields combine across chips by max (``ontology.kinds.FIELD``): chips at mode 2 and 1 give 2.
The single-page reference showed ``kvc.evictions`` (64-bit, effective width 40) as width 64 and
``kvc.energy`` (32-bit, 1000 J range at 1e-6 J per count) as width 32, with no stability.
"""

import pytest

from perfonto.codegen.docs import generate_markdown
from perfonto.codegen.docs_site import generate_site
from perfonto.metrics.across_chips import chip_extreme, field_deps
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.explain import explain

from helpers import one_block_yaml

SIGNALS = (
    '      ctrl: {kind: packed, width: 32, description: "control word", fields: '
    '{mode: {bits: [0, 1], description: "mode"}, enabled: {bits: [2, 2], description: "on"}}}\n'
    '      evictions: {kind: counter, unit: event, width: 64, effective_width: 40, description: "40-bit count"}\n'
    '      energy: {kind: counter, unit: J, scale: 1.0e-6, width: 32, wrap_range: 1000.0 J, description: "in uJ"}\n'
    '      old: {kind: counter, unit: event, width: 32, stability: deprecated, description: "old events"}\n'
    '      temp: {kind: gauge, unit: degC, across_chips: max, description: "temperature"}\n'
)
METRICS = """metric f.mode [1] = max(kvc.ctrl.mode)
  "Mode field."
  groups kvc
  bounds 0 .. 3

metric f.rate [event/s] = sum(kvc.evictions) / interval
  "Evictions per second."
  groups kvc

metric f.hot [degC] = max(kvc.temp)
  "Hottest engine."
  groups kvc
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    d = tmp_path_factory.mktemp("fields")
    (d / "f.yaml").write_text(one_block_yaml("f", SIGNALS, block="kvc", instances="{engine: 2}"))
    (d / "f.metrics").write_text(METRICS)
    cat = load_catalog(d, "f", library=False, cache=False)
    assert cat.graph is not None and not cat.errors, [x.render() for x in cat.diagnostics]
    return cat.graph


def _entry(text: str, head: str) -> str:
    return text.split(head, 1)[1].split("\n#", 1)[0]


def test_a_field_metric_is_the_max_over_chips(graph):
    assert field_deps(graph, "f.mode") == ["kvc.ctrl.mode"]
    assert chip_extreme(graph, "f.mode") == "max"
    assert chip_extreme(graph, "f.hot") == "max"  # a gauge declared max, as before
    assert chip_extreme(graph, "f.rate") is None  # a counter: a total


def test_the_reference_lists_the_field_and_its_server_rule(graph):
    entry = _entry(generate_markdown(graph), "### `f.mode`")
    assert "- **depends on**: `kvc.ctrl.mode`" in entry
    assert "at server level the max over chips" in entry and "ratio of server totals" not in entry
    assert "- **bounds**: 0 .. 3\n" in entry  # a [1] metric: no unit "1" after the bounds


def test_the_reference_gives_wrap_and_stability(graph):
    text = generate_markdown(graph)
    assert "| `kvc.evictions` | counter | event | 64 (wraps at 40) | 1 |" in text
    assert "| `kvc.energy` | counter | J | 32 (wraps at 1000000000 counts) | 1e-06 |" in text  # 1000 J / 1e-6 J
    assert "| old events (deprecated) |" in text


def test_the_site_lists_the_field_and_its_server_rule(graph):
    page = generate_site({"f": graph}, "f")["groups/kvc.md"]
    entry = _entry(page, "## `f.mode`")
    assert "- **depends on**: [`kvc.ctrl.mode`](../generations/f.md#kvcctrlmode)" in entry
    assert "- **server level**: the max over chips" in entry
    assert "- **bounds**: 0 .. 3\n" in entry
    assert "- **server level**: the max over chips" in _entry(page, "## `f.hot`")  # a max gauge, said so too
    assert "- **server level**: the sum over chips (a total)" in _entry(page, "## `f.rate`")


def test_explain_says_the_field_combines_by_max(graph):
    text = explain(graph, "f.mode")
    assert "server level: the max over chips (a packed field combined across chips by max)" in text
    assert "bounds: 0 .. 3\n" in text


def test_a_gauge_averaged_across_chips_is_marked_mean_in_the_fleet_tables(library):
    """The fleet row's batch size (1,230 requests in flight: a per-server level, the mean over its chips)
    stood beside 210 requests/s (the fleet's sum) with no word; a gauge combined by ``avg`` is marked."""
    from perfonto.metrics.across_chips import chip_extreme, chip_mean

    assert chip_mean(library, "batch_size") and chip_extreme(library, "batch_size") is None
    assert not chip_mean(library, "tokens_per_second") and not chip_mean(library, "power.temperature_peak")
