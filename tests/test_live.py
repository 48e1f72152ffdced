"""The live pipeline in-process: parts followed in order, pushed through the generated Stream, equal to
the batch evaluator's window values; bad parts, resets and memory."""

import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from live_helpers import (
    snapshot_series,
    close_enough,
    expected_series,
    publish,
    reference_dump,
    write_parts,
)
from perfonto.analysis.follow import Follower, read_part
from perfonto.analysis.live import LiveMetrics
from perfonto.metrics.telemetry import expositions


@pytest.fixture(scope="module")
def dump(graph, tmp_path_factory):
    """(full dump with one null register, its batch evaluation, the table)."""
    table, full, ev = reference_dump(graph, tmp_path_factory.mktemp("emu"))
    return full, ev, table


_snapshot_series = snapshot_series


def test_parts_followed_in_order_equal_the_batch_windows(graph, evaluator, dump, tmp_path):
    full, ev, table = dump
    parts = write_parts(table, tmp_path / "parts", 4)
    live = LiveMetrics(graph, evaluator, host="h0")
    f = Follower(tmp_path / "parts", graph.generation)
    assert f.poll() == ([], [])  # nothing published yet (.tmp- names are a writer's)
    for p in parts[:2]:
        publish(p)
    blocks, msgs = f.poll()
    assert len(blocks) == 2 and msgs == []
    for b in blocks:
        live.push(b)
    for p in parts[2:]:
        publish(p)
    blocks, _ = f.poll()
    for b in blocks:
        live.push(b)
    W, C = ev.windows.interval.shape
    snap = live.snapshot()
    assert (snap.samples, snap.windows) == (W + 1, W)  # windows continue across the part boundaries
    want = expected_series(graph, ev, "h0")
    nulled = [k for k in want if k[0].startswith("perfonto_hbm_read_bandwidth")]
    assert nulled == [(nulled[0][0], (("chip", "0"), ("host", "h0")))]  # chip 1's last window is null: omitted
    assert close_enough(_snapshot_series(live), want) == []
    hbm_total = [k for k in want if k[0] == "perfonto_hbm_bytes_total"]
    assert len(hbm_total) == 2  # a counter keeps its total when its last window is null
    assert snap.null_windows["hbm.read_bandwidth"] == 1 and snap.null_windows["mfu"] == 0


def test_corrupt_part_is_skipped_once_settled_and_later_parts_wait(graph, dump, tmp_path):
    _, _, table = dump
    parts = [publish(p) for p in write_parts(table, tmp_path / "parts", 3)]
    parts[1].write_bytes(b"PAR1 not really parquet")
    now = [0.0]
    f = Follower(tmp_path / "parts", graph.generation, settle_s=2.0, clock=lambda: now[0])
    blocks, msgs = f.poll()
    assert len(blocks) == 1 and msgs == []  # part 1 may still be being written: part 2 waits
    now[0] = 1.0
    assert f.poll() == ([], [])
    now[0] = 3.0
    blocks, msgs = f.poll()
    assert len(blocks) == 1 and len(msgs) == 1
    assert msgs[0].startswith("skipped part part-00001.parquet:") and "not a readable Parquet counter dump" in msgs[0]
    assert f.skipped == 1 and f.parts == 2


def test_time_going_back_starts_a_new_baseline(graph, evaluator, dump, tmp_path):
    _, _, table = dump
    a, b = write_parts(table, tmp_path / "p", 2)
    publish(a)
    f = Follower(tmp_path / "p", graph.generation)
    first, msgs = f.poll()
    assert msgs == []
    # a device reset: the next part's timestamps restart before the first sample counted
    t = pq.read_table(str(tmp_path / "p" / "part-00000.parquet"))
    ts = t.column("timestamp_ns").to_numpy()
    t = t.set_column(t.column_names.index("timestamp_ns"), "timestamp_ns", pa.array(ts - int(ts.min()) - 10**9))
    pq.write_table(t, str(tmp_path / "p" / "part-00009.parquet"))
    second, msgs = f.poll()
    blocks = first + second
    assert [bl.new_baseline for bl in blocks] == [False, True] and "new baseline" in msgs[0]
    live = LiveMetrics(graph, evaluator, host="h")
    n = [live.push(bl) for bl in blocks]
    assert n[0] == n[1] == blocks[0].samples - 1  # no window spans the jump back
    assert live.snapshot().baselines == 2


def test_one_file_rewritten_with_more_samples(graph, dump, tmp_path):
    _, _, table = dump
    path = tmp_path / "counters.parquet"
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), str(path))
    f = Follower(path, graph.generation)
    first, _ = f.poll()
    pq.write_table(table, str(path))
    second, _ = f.poll()
    assert first[0].samples + second[0].samples == read_part(path, graph.generation).samples
    assert not second[0].new_baseline and second[0].timestamps_ns[0, 0] > first[0].timestamps_ns[-1, 0]
    assert f.poll() == ([], [])


def test_chips_may_not_change(graph, evaluator, dump):
    full, _, _ = dump
    block = read_part(full, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h")
    live.push(block)
    other = block.slice(0, block.samples)
    other.chips = np.array([5, 6])
    with pytest.raises(ValueError, match=r"differ from the served \(host:chip\)"):
        live.push(other)


def test_memory_does_not_grow_with_samples(graph, evaluator, dump):
    full, _, _ = dump
    block = read_part(full, graph.generation)
    live = LiveMetrics(graph, evaluator, host="h")
    step = 50

    def feed(rounds):
        for r in range(rounds):
            for i in range(0, block.samples, step):
                b = block.slice(i, i + step)
                b.new_baseline = i == 0
                live.push(b)

    feed(2)
    tracemalloc.start()
    feed(2)
    base = tracemalloc.get_traced_memory()[0]
    feed(20)
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert live.snapshot().samples == 24 * block.samples
    assert grown < 256 * 1024, f"live state grew by {grown} bytes over 20 × {block.samples} samples"


def test_naming_conventions_pinned(graph):
    e = expositions(graph)
    assert (e["hbm.read_bandwidth"].prom_name, e["hbm.read_bandwidth"].unit.factor) == (
        "perfonto_hbm_read_bandwidth_bytes_per_second",
        1e9,
    )
    assert (e["mfu"].prom_name, e["mfu"].unit.factor, e["mfu"].instrument) == ("perfonto_mfu_ratio", 0.01, "gauge")
    assert (e["hbm.bytes"].prom_name, e["hbm.bytes"].instrument) == ("perfonto_hbm_bytes", "counter")
    assert (
        e["topdown.cycles"].instrument == "counter" and e["power.average"].prom_name == "perfonto_power_average_watts"
    )
    assert e["kv_cache_tokens"].instrument == "gauge"  # a level, not an amount
    assert e["power.temperature_peak"].instrument == "gauge"  # declared `rollup max`
    # a generated submetric and a hand-written metric that would collide once dots become underscores
    assert e["mxu.flops.per_cycle"].prom_name != e["mxu.flops_per_cycle"].prom_name


def _emulated_source(graph, **kw):
    from perfonto.live_emulate import EmulatedSource

    knobs = dict(model="llama-3.1-8b", chips=2, sample_period_s=1e-3, isl=2048, osl=128, warmup_steps=50)
    no_faults = dict(slow_chip=None, throttled_link=None, router_skew=0.0)
    return EmulatedSource(graph.generation, seed=0, **kw, **knobs, **no_faults)


def test_emulation_in_chunks_follows_on_with_a_new_baseline_per_chunk(graph, evaluator):
    import threading

    src = _emulated_source(graph, duration_s=0.4, chunk_s=0.2, realtime=False)
    try:
        src.start()
        blocks = list(src.blocks(threading.Event()))
    finally:
        src.close()
    assert [b.new_baseline for b in blocks] == [False, True] and src.chunks == 2
    assert np.all(blocks[1].timestamps_ns[0] == blocks[0].timestamps_ns[-1] + 1_000_000)  # one period on, per chip
    live = LiveMetrics(graph, evaluator, host="h")
    assert sum(live.push(b) for b in blocks) == sum(b.samples - 1 for b in blocks)  # no window spans two chunks


def test_emulation_is_paced_by_the_wall_clock(graph):
    import threading
    import time

    src = _emulated_source(graph, duration_s=0.3, chunk_s=1.0, tick_s=0.02)
    try:
        src.start()
        t0, seen = time.monotonic(), []
        for b in src.blocks(threading.Event()):
            seen.append((time.monotonic() - t0, b.samples))
    finally:
        src.close()
    total = np.cumsum([n for _, n in seen])
    assert total[-1] == 301 and len(seen) >= 5  # pushed in several paced slices, not at once
    for (t, _), n in zip(seen, total):
        assert n <= t / 1e-3 + 1 + 30  # never ahead of the wall clock (30 ms of slack for the first slice)
    assert seen[-1][0] >= 0.29


def test_parts_keyed_by_host_and_chip_and_parts_without_a_signal(graph, evaluator, dump, tmp_path):
    import pyarrow as pa

    _, ev, table = dump
    two = pa.concat_tables(
        [table.append_column("host", pa.array([h] * table.num_rows)) for h in ("rack1-a", "rack1-b")]
    )
    pq.write_table(two.replace_schema_metadata(table.schema.metadata), str(tmp_path / "hosts.parquet"))
    live = LiveMetrics(graph, evaluator, host="ignored")
    live.push(read_part(tmp_path / "hosts.parquet", graph.generation))
    snap = live.snapshot()
    assert snap.series == (("rack1-a", "0"), ("rack1-a", "1"), ("rack1-b", "0"), ("rack1-b", "1"))
    np.testing.assert_allclose(snap.values["mfu"], np.tile(ev.window["mfu"][-1], 2) * 0.01, rtol=1e-12)
    # a collector that does not read the HBM counters: their metrics are null (left out), the others serve
    part = table.drop_columns(["hbm.read_bytes"]).replace_schema_metadata(table.schema.metadata)
    pq.write_table(part, str(tmp_path / "partial.parquet"))
    live = LiveMetrics(graph, evaluator, host="h")
    live.push(read_part(tmp_path / "partial.parquet", graph.generation))
    snap = live.snapshot()
    assert np.isnan(snap.values["hbm.read_bandwidth"]).all() and np.isnan(snap.values["hbm.bytes"]).all()
    np.testing.assert_allclose(snap.values["mfu"], ev.window["mfu"][-1] * 0.01, rtol=1e-12)
