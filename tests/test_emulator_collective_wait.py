"""A chip waiting at a collective for a slower peer moves nothing on its links until the group has
arrived (found by a hand audit: a waiting chip's window read 61 % peer wait, 0 % link transfer and links
36.7 % busy, because the collective's link bytes and busy time were spread over its whole slot, wait
included; the multi-chip section then saw only the slow chip's links saturate)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from perfonto import emulator

CORE_HZ, LINK_HZ = 1.5e9, 1.6e9  # sohu's core and link clocks (ontology/catalog/sohu.yaml)


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    out = tmp_path_factory.mktemp("slowlinks")
    run = dict(chips=4, slow_chip=(2, 1.3), duration_s=0.2, sample_period_s=2e-4, warmup_steps=40)
    emulator.run("sohu", out_dir=out, **run)
    t = pq.read_table(out / "counters.parquet").to_pandas()
    per_chip = {}
    for chip, g in t.groupby("chip"):
        d32 = lambda col: np.diff(np.stack(g[col].to_numpy()).astype(np.int64), axis=0) % (1 << 32)  # noqa: E731
        d48 = lambda col: np.diff(np.stack(g[col].to_numpy()).astype(np.int64), axis=0) % (1 << 48)  # noqa: E731
        per_chip[int(chip)] = {
            "busy_s": d32("c2c.busy_cycles") / LINK_HZ,  # (windows, links)
            "tx": d48("c2c.tx_bytes"),
            "transfer_s": d32("seq.collective_transfer_cycles") / CORE_HZ,
            "wait_s": d32("seq.collective_wait_cycles") / CORE_HZ,
        }
    return per_chip


def test_links_are_busy_only_while_the_collective_transfers(windows):
    for chip, w in windows.items():
        excess = w["busy_s"].max(axis=1) - w["transfer_s"]  # a link is never busy longer than the transfer
        assert excess.max() < 2e-6, (chip, float(excess.max()))


def test_a_window_of_waiting_only_sends_nothing(windows):
    waiting = 0
    for w in windows.values():
        only_wait = (w["transfer_s"] == 0) & (w["wait_s"] > 0)
        waiting += int(only_wait.sum())
        assert not w["tx"][only_wait].any()
    assert waiting > 0  # the run has such windows: the check above is not vacuous
