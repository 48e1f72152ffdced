"""A loop of ``parent`` clauses (a metric its own parent, or two each other's) is a compile error at the
clause: ``perfonto check`` said 0 errors and ``perfonto analyze`` hung walking the tree up (the findings'
order). A ``when parent`` threshold whose parent is not evaluated (left out of ``--metrics``) says its
parent was not checked, as the rule promises, instead of counting as crossed in silence."""

from __future__ import annotations

import numpy as np

from perfonto.analysis.bottleneck import thresholds_crossed
from perfonto.metrics.catalog import load_catalog, select_metrics

LOOP = """\
metric a.x [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "A."
  parent a.y
metric a.y [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "B."
  parent a.x
metric a.z [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "C."
  parent a.z
"""


def test_a_loop_of_parents_is_an_error_at_its_clause(tmp_path):
    (tmp_path / "m.metrics").write_text(LOOP)
    cat = load_catalog(tmp_path, "sohu")
    loops = [d for d in cat.errors if d.code == "parent-cycle"]
    assert [(d.span.line, d.span.col) for d in loops] == [(3, 10), (9, 10)]
    assert "`a.x` → `a.y` → `a.x` form a loop" in loops[0].message and "`a.z` → `a.z`" in loops[1].message


GATED = """\
metric t.root [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Root."
  threshold > 50 %: "root"
metric t.leaf [percent] = sum(mxu.busy_cycles) / seq.elapsed_cycles
  "Leaf."
  threshold > 5 % when parent: "leaf"
  parent t.root
"""


def test_a_when_parent_threshold_under_a_parent_not_evaluated_says_so(tmp_path):
    (tmp_path / "t.metrics").write_text(GATED)
    graph = select_metrics(load_catalog(tmp_path, "sohu").graph, ["t.leaf"])
    assert "t.root" not in graph.metrics
    (hit,) = [(n, m) for n, _, m in thresholds_crossed(graph, {"t.leaf": np.float64(9.0)}) if n == "t.leaf"]
    assert "t.root" in hit[1] and "not checked" in hit[1]


def test_an_empty_flat_dump_is_a_dump_error(tmp_path):
    """A flat-layout dump with a host column and no rows (a sample period given) ended in "internal error:
    ValueError: need at least one array to concatenate", and the API raised a bare ValueError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import perfonto

    p = tmp_path / "empty.parquet"
    cols = {"chip": pa.array([], pa.int32()), "timestamp_ns": pa.array([], pa.int64())}
    cols |= {f"mxu.busy_cycles[{k}]": pa.array([], pa.uint64()) for k in range(8)}
    cols |= {"seq.elapsed_cycles": pa.array([], pa.uint64()), "host": pa.array([], pa.string())}
    pq.write_table(pa.table(cols), p)
    try:
        perfonto.evaluate(perfonto.load_catalog(), p, sample_period="1ms")
    except perfonto.DumpError as exc:
        assert str(exc).startswith(f"{p}: no sample rows; a window needs two samples of each chip")
    else:
        raise AssertionError("an empty dump was evaluated")
