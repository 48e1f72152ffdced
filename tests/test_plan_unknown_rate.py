"""`perfonto plan`'s read interval for counters with no declared `max_rate`: a counter of an amount takes
its block's peak, the estimate `check`'s lint-wrap-period warns with, and what is still unknown is named
in the headline. A tester's plan headlined "read every 1.07374 s" while check warned that a 16-bit byte
counter of the same plan wraps every 21 µs at its block's peak."""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.plan_groups import plan_groups

#: Two ports sharing a 400 GB/s block peak (200 GB/s each); `bytes` is 16-bit in units of 64 B with no
#: max_rate, `events` a count with none (no peak bounds a count), `cycles` a 32-bit counter of the 1 GHz clock.
GEN = """\
generation: tiny
description: planner test, one block with a peak
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed, source: test}}
spec:
  pmu.peak_bandwidth: {value: 400, unit: GB/s, provenance: assumed, source: test, description: both ports}
blocks:
  pmu:
    description: one monitored block
    clock: core
    instances: {port: 2}
    signals:
      cycles: {kind: counter, unit: core_cycle, width: 32, description: free-running cycles}
      bytes: {kind: counter, unit: B, width: 16, scale: 64, description: bytes moved in units of 64 B}
      events: {kind: counter, unit: event, width: 32, description: events seen by the port}
      wide: {kind: counter, unit: B, width: 32, max_rate: 64 GB/s, description: bytes with a declared max rate}
"""
METRICS = """\
metric bw [B/s] = sum(pmu.bytes) / interval
  "Bytes per second."
metric ev_per_cycle [event/core_cycle] = sum(pmu.events) / sum(pmu.cycles)
  "Events per cycle."
metric wide_bw [B/s] = sum(pmu.wide) / interval
  "Bytes per second, declared rate."
"""
ALL = ["bw", "ev_per_cycle", "wide_bw"]

#: bytes: 200 GB/s per port / 64 B per count = 3.125e9 counts/s; (2^16 − 1) / 3.125e9 / 2 = 1.04856e-5 s
BYTES_CAP = 65535 / 3.125e9 / 2


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "tiny.yaml").write_text(GEN)
    (d / "t.metrics").write_text(METRICS)
    return d


def test_a_counter_without_max_rate_is_capped_at_its_blocks_peak(folder):
    cat = load_catalog(folder, "tiny")
    assert not cat.errors, [d.render() for d in cat.errors]
    plan = plan_groups(cat, ALL)
    b = plan.caps["pmu.bytes"]
    assert b.cap_s == pytest.approx(1.04856e-5, rel=1e-12) and b.cap_s == pytest.approx(BYTES_CAP, rel=1e-12)
    assert b.max_rate == pytest.approx(2e11) and b.peak == "spec.pmu.peak_bandwidth"
    assert "no max_rate declared" in b.note and "spec.pmu.peak_bandwidth" in b.note
    assert plan.read_interval_s == pytest.approx(BYTES_CAP, rel=1e-12)  # it was the cycle counter's 2.13 s
    # a declared max_rate is its own: 64 GB/s, 2^32 values: (2^32 − 1) / 6.4e10 / 2 = 0.0335544 s
    assert plan.caps["pmu.wide"].peak is None and plan.caps["pmu.wide"].cap_s == pytest.approx((2**32 - 1) / 6.4e10 / 2)
    # a count of events has no peak: unknown, and named
    assert plan.caps["pmu.events"].cap_s is None and plan.uncapped == ("pmu.events",)


def test_headline_uses_the_peak_and_names_what_it_leaves_out(folder, capsys):
    assert main(["plan", "--catalog", str(folder), "--metrics", ",".join(ALL)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.endswith(
        "read every 10.4856 µs or more often (the cap leaves out 1 counter(s) of unknown rate or width: pmu.events)"
    )


def test_json_carries_the_peak_and_the_uncapped_counters(folder, capsys):
    assert main(["plan", "--catalog", str(folder), "--metrics", ",".join(ALL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["read_interval_s"] == pytest.approx(BYTES_CAP, rel=1e-12)
    assert doc["uncapped"] == ["pmu.events"]
    assert doc["read_caps"]["pmu.bytes"]["peak"] == "spec.pmu.peak_bandwidth"


def test_plan_and_check_use_one_estimate(folder, capsys):
    """check: wraps every (2^16 − 1) / 3.125e9 = 20.9712 µs; the plan's cap is half of that."""
    main(["check", "--catalog", str(folder)])
    out = capsys.readouterr().out
    assert "counter `pmu.bytes`" in out and "it wraps every 21 µs" in out
    plan = plan_groups(load_catalog(folder, "tiny"), ["bw"])
    assert 2 * plan.read_interval_s == pytest.approx(20.9712e-6, rel=1e-9)
    assert plan.uncapped == ()  # nothing left out: no note in the headline
    capsys.readouterr()
    main(["plan", "--catalog", str(folder), "--metrics", "bw"])
    assert capsys.readouterr().out.splitlines()[0].endswith("read every 10.4856 µs or more often")


def test_a_block_with_two_peaks_is_read_at_the_faster(tmp_path):
    """A read interval must hold at the fastest rate the counter can reach: with a 400 GB/s and a 100 GB/s
    peak in the block, the cap is taken at 400 GB/s (the lowest peak gave sohu's mxu.flops_fp8 a cap twice
    too long, at the BF16 peak), while check's lint still warns at the lowest (what even it wraps)."""
    from perfonto.ontology.rates import peak_rate

    d = tmp_path / "cat"
    d.mkdir()
    slow = (
        "  pmu.peak_read_bandwidth: {value: 100, unit: GB/s, provenance: assumed, source: test, description: reads}\n"
    )
    (d / "tiny.yaml").write_text(GEN.replace("blocks:\n", slow + "blocks:\n", 1))
    (d / "t.metrics").write_text(METRICS)
    cat = load_catalog(d, "tiny")
    assert not cat.errors, [x.render() for x in cat.errors]
    sig = cat.generation.signals["pmu.bytes"]
    assert peak_rate(cat.generation, sig) == (pytest.approx(5e10), "spec.pmu.peak_read_bandwidth")  # 100 / 2 ports
    b = plan_groups(cat, ALL).caps["pmu.bytes"]
    assert b.peak == "spec.pmu.peak_bandwidth" and b.cap_s == pytest.approx(BYTES_CAP, rel=1e-12)
