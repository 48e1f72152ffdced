"""``--engine spark`` runs the embedded engine's generated kernel on Spark executors, host by host
(``analysis.spark_kernel``), and gives what the embedded engine gives: on a fleet from the fleet
generator (slow chips, a topology with racks and pods) made dirty as ``fleet_data`` makes it (wraps,
a reset, an implausible decrease, a sentinel, a null register, a dropped sample), the window values
bit for bit, the chip, server, host, rack, pod and fleet levels within 1e-12 relative, the same null
reasons, checks and nulls — in Spark ``local[2]`` and on a standalone cluster of two workers on
127.0.0.1 (started here from pyspark's own ``spark-class`` and stopped after)."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from fleet_data import PERIOD_NS, dirty_host
from perfonto.analysis.capture import Capture
from perfonto.analysis.fleet import TOP_OUTLIERS
from perfonto.analysis.fleet_capture import analyse_fleet
from perfonto.capture.dump_io import DumpError
from perfonto.capture.topology import read_topology
from perfonto.emulator.fleet import FleetSpec, generate_fleet

pytest.importorskip("pyspark")

HOSTS, CHIPS = 4, 2


@pytest.fixture(scope="module")
def dirty(tmp_path_factory, sohu):
    """The generator's fleet (two slow chips, a throttled link, racks) with hosts 0 and 1 made dirty."""
    out = tmp_path_factory.mktemp("spark-fleet")
    truth = generate_fleet(
        sohu, FleetSpec(HOSTS, CHIPS), out / "data", duration_s=0.3, sample_period_s=PERIOD_NS * 1e-9, warmup_steps=50
    )
    for h in (0, 1):
        path = out / "data" / "counters" / f"host=h{h:03d}" / "part-0.parquet"
        if not path.exists():
            path = next((out / "data" / "counters").glob(f"host=*{h}/part-0.parquet"))
        t = dirty_host(pq.read_table(path), h, CHIPS)
        pq.write_table(t, path, row_group_size=50)
    return out / "data", truth


def _analyse(data, library, engine, out, master="local[2]"):
    return analyse_fleet(
        library,
        Capture(data / "counters", sample_period_ns=PERIOD_NS),
        out,
        topology=read_topology(data / "topology.csv"),
        engine=engine,
        spark_master=master,
        chunk_rows=64,
    )


def _window_table(folder):
    t = pq.read_table(folder).to_pandas()
    return t.sort_values(["host", "chip", "window"]).reset_index(drop=True)


def _close(a, b, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, what
    assert np.array_equal(np.isnan(a), np.isnan(b)), f"{what}: nulls differ"
    m = ~np.isnan(b)
    rel = np.abs(a[m] - b[m]) / np.maximum(np.abs(b[m]), 1e-300)
    assert rel.size == 0 or rel.max() <= 1e-12, f"{what}: off by {rel.max():.3g}"


def _apart(outliers, p50):
    """The outliers apart from the median by more than 1e-12 relative: a chip at the median (identical hosts
    of the generator) is listed or not by the last bit of its value, the engines' sums being in another order."""
    return [o for o in outliers if p50 is None or abs(o["value"] - p50) > 1e-12 * abs(p50)]


def _ties(outliers, top=TOP_OUTLIERS):
    """The outliers' chips as groups of equal values (within 1e-12: chips of identical hosts, listed in
    either order), in order; the last group left out when the list was cut at ``top`` (inside a tie)."""
    groups: list[set] = []
    last = None
    for o in outliers:
        if last is None or abs(o["value"] - last) > 1e-12 * abs(last):
            groups.append(set())
        groups[-1].add((o["host"], o["chip"]))
        last = o["value"]
    return groups[:-1] if len(outliers) == top else groups


def _same_spread(gf, wf):
    """The spread across chips within 1e-12; the outliers the same chips (ties in either order)."""
    assert gf.spread.keys() == wf.spread.keys() and gf.outliers.keys() == wf.outliers.keys()
    for m, sp in wf.spread.items():
        for k in ("p50", "p99", "max"):
            _close(np.nan if gf.spread[m][k] is None else gf.spread[m][k], np.nan if sp[k] is None else sp[k], m)
        for side in ("high", "low"):
            a, b = _apart(gf.outliers[m][side], sp["p50"]), _apart(wf.outliers[m][side], sp["p50"])
            _close([o["value"] for o in a], [o["value"] for o in b], f"outliers {m}")
            assert _ties(a) == _ties(b), (m, side)


def _same_reports(got, want, got_dir, want_dir):
    files = sorted(str(p.relative_to(want_dir)) for p in want_dir.rglob("*.parquet"))
    assert files == sorted(str(p.relative_to(got_dir)) for p in got_dir.rglob("*.parquet")) and len(files) > HOSTS
    wt, gt = _window_table(want_dir), _window_table(got_dir)
    assert len(wt) == HOSTS * CHIPS * 150 and list(gt.columns) == list(wt.columns)
    for col in wt.columns:  # bit for bit: every value, every null
        a, b = gt[col].to_numpy(), wt[col].to_numpy()
        if a.dtype == object:
            assert [json.dumps(np.asarray(x).tolist()) for x in a] == [json.dumps(np.asarray(x).tolist()) for x in b], (
                col
            )
        else:
            assert np.array_equal(a, b, equal_nan=True) and np.array_equal(a.view(np.uint8), b.view(np.uint8)), col
    ge, we = got.evaluation, want.evaluation
    assert ge.nulls == we.nulls and any(r != "undefined (division by zero)" for c in we.nulls.values() for r in c)
    assert ge.coverage.keys() == we.coverage.keys() and min(we.coverage.values()) < 1
    for n in we.per_chip:
        _close(ge.per_chip[n], we.per_chip[n], f"chip {n}")
        _close(ge.server[n], we.server[n], f"server {n}")
        assert abs(ge.coverage[n] - we.coverage[n]) <= 1e-12, n
    gf, wf = got.fleet, want.fleet
    assert gf.nodes == wf.nodes and set(wf.nodes) >= {"chip", "host", "rack", "pod", "fleet"}
    for level in wf.values:
        assert np.array_equal(gf.chips[level], wf.chips[level])
        for n in wf.values[level]:
            _close(gf.values[level][n], wf.values[level][n], f"{level} {n}")
    _same_spread(gf, wf)
    ga, wa = got.analysis, want.analysis
    assert (ga.violation_counts, ga.tree_violations) == (wa.violation_counts, wa.tree_violations)
    assert [vars(v) for v in ga.violations] == [vars(v) for v in wa.violations]


@pytest.mark.slow
def test_spark_local_equals_the_embedded_engine(dirty, library, tmp_path):
    data, truth = dirty
    want = _analyse(data, library, "embedded", tmp_path / "embedded")
    got = _analyse(data, library, "spark", tmp_path / "spark")
    assert got.engine == "spark" and got.rows == want.rows == HOSTS * CHIPS * 150
    assert len(truth["slow_chips"]) == 2 and want.evaluation.nulls  # slow chips and null windows in the data
    _same_reports(got, want, tmp_path / "spark", tmp_path / "embedded")


@pytest.mark.slow
def test_spark_two_workers_equal_the_embedded_engine(dirty, library, tmp_path, monkeypatch):
    """More than one executor (a standalone master and two one-core workers on 127.0.0.1, the four hosts
    in four partitions): the same report as the embedded engine — the dump given by a path relative to the
    driver's folder, which the executors (each in its worker's own folder) failed to open ("internal error:
    FileNotFoundError")."""
    from pathlib import Path

    from perfonto.analysis.spark_cluster import StandaloneCluster

    data, _ = dirty
    want = _analyse(data, library, "embedded", tmp_path / "embedded")
    monkeypatch.chdir(data.parent)
    with StandaloneCluster(workers=2) as url:
        got = _analyse(Path(data.name), library, "spark", tmp_path / "spark", master=url)
    assert got.timings["spark"] > 0 and got.rows == want.rows
    _same_reports(got, want, tmp_path / "spark", tmp_path / "embedded")


def test_spark_engine_refuses_a_csv_dump_clearly(tmp_path, library):
    """A capture Spark does not read (a CSV dump) is a clear error before Spark starts."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from perfonto.analysis.capture import plan_capture
    from perfonto.analysis.spark_kernel import evaluate_on_spark

    t = pa.table({"chip": [0, 0], "timestamp_ns": [0, PERIOD_NS], "seq.steps": pa.array([1, 2], pa.uint64())})
    pacsv.write_csv(t, tmp_path / "c.csv")
    plan = plan_capture(library, Capture(tmp_path / "c.csv", sample_period_ns=PERIOD_NS))
    with pytest.raises(DumpError, match="--engine spark reads Parquet"):
        evaluate_on_spark(None, library, None, plan, None)
