"""`perfonto validate --catalog DIR` when a metric reads a signal the emulator does not produce (no
`emulator:` binding, the normal case for a next generation's new counters): it validates the metrics
the emulator can feed and lists the others as unavailable with the reason, as `perfonto run` does. It
stopped with "error: /tmp/tmpXXXX/counters.parquet: the dump has no dma.transfer_sizes, …; evaluate the
metrics it can feed (perfonto analyze does)", exit 1."""

import json

import pytest

from perfonto.analysis.validate import emulated_part
from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog

#: sohu with a packed DMA control register that has no emulator binding.
GEN = """\
generation: sohu_next
extends: sohu
description: Sohu with a DMA control register the emulator does not model.
blocks:
  dma:
    signals:
      ctrl:
        kind: packed
        width: 32
        description: DMA control register.
        fields: {mode: {bits: [0, 1], description: Transfer mode.}}
"""

#: Metrics on sohu's unbound histogram `dma.transfer_sizes`, directly, through another metric and through
#: `default`, and on a field of the unbound register.
METRICS = """\
metric my.transfer_rate [event/s] = sum(dma.transfer_sizes) / interval
  "DMA descriptors per second, from the transfer-size histogram."
  groups dma

metric my.transfer_rate_k [event/s] = my.transfer_rate / 1000
  "DMA descriptors per second, in thousands."
  groups dma

metric my.dma_mode [1] = max(dma.ctrl.mode)
  "DMA transfer mode field."
  groups dma

metric my.transfers_or_none [event/s] = sum(default(dma.transfer_sizes, 0)) / interval
  "DMA descriptors per second, 0 where the capture lacks the histogram."
  groups dma
"""

NO_BINDING = "which the emulator does not produce (no `emulator:` binding)"


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "next"
    d.mkdir()
    (d / "g.yaml").write_text(GEN)
    (d / "my.metrics").write_text(METRICS)
    return d


def test_emulated_part_leaves_out_the_metrics_reading_unbound_signals(folder):
    cat = load_catalog(folder, "sohu_next")
    assert not cat.errors
    part, unavailable = emulated_part(cat.graph)
    assert unavailable == {
        "my.transfer_rate": f"reads `dma.transfer_sizes`, {NO_BINDING}",
        "my.transfer_rate_k": f"reads `dma.transfer_sizes`, {NO_BINDING}",  # through my.transfer_rate
        "my.dma_mode": f"reads `dma.ctrl`, {NO_BINDING}",  # a field of the unbound register
    }
    assert not set(unavailable) & set(part.all_metrics)
    # `default(x, 0)` over an absent x reads 0: still validated; so is every library metric
    assert "my.transfers_or_none" in part.all_metrics
    assert set(part.all_metrics) == set(cat.graph.all_metrics) - set(unavailable)


def test_emulated_part_keeps_the_generations_own_unavailable_reasons():
    cat = load_catalog(None, "caelius")
    part, unavailable = emulated_part(cat.graph)
    assert unavailable == {
        "hbm.refresh_overhead": "signal `hbm.refresh_cycles` was removed in generation `caelius`"
    }  # every signal caelius's library reads has a binding
    assert part.all_metrics.keys() == cat.graph.all_metrics.keys()


def test_validate_checks_what_the_emulator_feeds_and_lists_the_rest(folder, capsys):
    assert main(["validate", "--catalog", str(folder), "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["failed"] == 0 and len(doc["checks"]) > 0
    assert doc["unavailable"]["my.transfer_rate"] == f"reads `dma.transfer_sizes`, {NO_BINDING}"
    assert set(doc["unavailable"]) == {"my.transfer_rate", "my.transfer_rate_k", "my.dma_mode"}
    assert "  • my.dma_mode: reads `dma.ctrl`, " in cap.err
    for text in (cap.out, cap.err):  # no internal temp file, no traceback, no other command to run
        assert "counters.parquet" not in text and "Traceback" not in text and "perfonto analyze" not in text
