"""Top-down level 2 (issue 16, point 6): interconnect → link transfer vs waiting for peers, memory →
weights vs KV cache vs activations, compute → matrix vs vector, host → PCIe vs launch, from sequencer
counters the ontology declares and binds; children add up to their parent in every window; the
headline names waiting on a slow chip, and link transfer under a throttled link."""

from __future__ import annotations

import numpy as np
import pytest

from perfonto.analysis.bottleneck import tree_children
from perfonto.job import run_job

LEAVES = [
    "topdown.compute.matrix",
    "topdown.compute.vector",
    "topdown.memory.weights",
    "topdown.memory.kv_cache",
    "topdown.memory.activations",
    "topdown.interconnect.link_transfer",
    "topdown.interconnect.peer_wait",
    "topdown.host.pcie",
    "topdown.host.launch",
    "topdown.idle",
]


def _job(tmp_path, **knobs):
    return run_job(duration_s=3.0, sample_period_s=0.01, out=tmp_path, **knobs)  # several ~0.3-0.5 s steps


@pytest.fixture(scope="module")
def nominal(tmp_path_factory):
    """The job without a knob, run once for the tests that read it (read only)."""
    return _job(tmp_path_factory.mktemp("nominal"))


def _share(gt, key, chip=None):
    src = gt if chip is None else gt["per_chip"][chip]
    return 100 * src["topdown2_s"][key] / sum(src["topdown_s"].values())


def test_level2_tree_adds_up_and_matches_the_truth(nominal):
    r = nominal
    kids = tree_children(r.graph)
    assert kids["topdown.compute_bound"] == ["topdown.compute.matrix", "topdown.compute.vector"]
    assert kids["topdown.interconnect_bound"] == [
        "topdown.interconnect.link_transfer",
        "topdown.interconnect.peer_wait",
    ]
    assert r.analysis.tree_violations == []  # siblings add up in every window, as at level 1
    ev, gt = r.evaluation, r.ground_truth
    for parent, names in kids.items():
        if parent is not None:
            total = sum(ev.window[n] for n in names)
            assert np.nanmax(np.abs(total - ev.window[parent])) < 1e-9, parent
    for metric, key in [
        ("topdown.interconnect.link_transfer", "collective_transfer"),
        ("topdown.memory.kv_cache", "memory_kv"),
        ("topdown.compute.matrix", "compute_matrix"),
        ("topdown.memory.activations", "memory_activations"),
    ]:
        assert float(ev.server[metric]) == pytest.approx(_share(gt, key), rel=2e-3, abs=1e-3), metric
    assert float(ev.server["topdown.interconnect.peer_wait"]) == 0.0  # identical chips never wait for each other


def test_slow_chip_headline_names_waiting_on_that_chip(tmp_path):
    """Chip 3's ops take 1.5 × as long; in lock step every other chip waits (1.5 − 1) × its own op
    time (compute + memory cycles) at the collectives, chip 3 itself not at all."""
    r = _job(tmp_path, slow_chip=(3, 1.5))
    h, gt, ev = r.headline, r.ground_truth, r.evaluation
    assert h["metric"] == "topdown.interconnect.peer_wait" and h["chip"] == 3 and "waiting for chip 3" in h["message"]
    assert "interconnect bound" not in h["message"]
    for c in range(8):
        pc = gt["per_chip"][c]
        ops = pc["topdown_s"]["compute"] + pc["topdown_s"]["memory"]
        want = 0.0 if c == 3 else 0.5 * ops
        assert pc["topdown2_s"]["collective_wait"] == pytest.approx(want, rel=5e-3, abs=1e-5), c
    assert float(ev.server["topdown.interconnect.peer_wait"]) == pytest.approx(_share(gt, "collective_wait"), rel=2e-3)
    assert h["share"] * 100 == pytest.approx(float(ev.server["topdown.interconnect.peer_wait"]))
    assert h["share"] > 0.15
    per_chip = np.asarray(ev.per_chip["topdown.interconnect.peer_wait"])
    assert per_chip[3] < 0.1 and (np.delete(per_chip, 3) > 15).all()
    assert r.analysis.tree_violations == []


def test_throttled_link_link_transfer_leads(tmp_path, nominal):
    r = _job(tmp_path, throttled_link=(2, 5, 4.0))
    h, ev, gt = r.headline, r.evaluation, r.ground_truth
    assert h["metric"] == "topdown.interconnect.link_transfer" and h["chip"] is None
    leaves = {n: float(ev.server[n]) for n in LEAVES}
    assert max(leaves, key=leaves.get) == "topdown.interconnect.link_transfer"
    assert leaves["topdown.interconnect.peer_wait"] < 0.1  # every chip's collective is as slow: nobody waits
    assert leaves["topdown.interconnect.link_transfer"] == pytest.approx(_share(gt, "collective_transfer"), rel=2e-3)
    per_byte = gt["topdown2_s"]["collective_transfer"] / gt["c2c_tx_bytes"]
    nominal_per_byte = nominal.ground_truth["topdown2_s"]["collective_transfer"] / nominal.ground_truth["c2c_tx_bytes"]
    assert per_byte > 2.5 * nominal_per_byte  # a ring moves at its slowest link's rate: 1/4 of it (latency aside)
    assert r.analysis.tree_violations == []
