"""`--by op` kept values no metric can take without a word: a new user's `metrics_by_op.parquet` gave the
PCIe copy `host_out` 125,208 GB/s of HBM traffic (1,739 % of the peak) and 2,214.7 % MFU — matrix work of
the LM head spread over the short ops that shared its 1 ms windows. The values are kept (the groups still
add up to the run); each group now names the metrics outside their declared bounds, and the report says so."""

from __future__ import annotations

import numpy as np

from perfonto.analysis.groups import GroupMetrics, bounds_note, group_table


def test_a_group_outside_declared_bounds_is_named_in_the_table_and_a_note(graph):
    values = {"mfu": np.array([40.0, 2214.7]), "hbm.bandwidth_utilization": np.array([55.0, 1739.0])}
    gm = GroupMetrics("op", ["ffn_gate_up", "host_out"], np.array([1.0, 5.1e-5]), np.array([10, 3]), values, "rates")
    t = group_table(gm, graph).to_pydict()
    assert t["out_of_bounds"][0] == [] and set(t["out_of_bounds"][1]) == {"hbm.bandwidth_utilization", "mfu"}
    (note,) = bounds_note(gm, graph)
    assert note.startswith("by op: 1 of 2 group(s) hold values outside their metrics' declared bounds — host_out (")
    assert "unreliable" in note
    ok = GroupMetrics("op", ["a"], np.array([1.0]), np.array([1]), {"mfu": np.array([40.0])}, "rates")
    assert bounds_note(ok, graph) == [] and group_table(ok, graph).to_pydict()["out_of_bounds"] == [[]]
