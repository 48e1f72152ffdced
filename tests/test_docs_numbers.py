"""Numbers in the generated docs read back as the values in the catalog: a register scale of 1,048,576 (MiB
in bytes, ``hbm.allocated_bytes``) was printed ``1.04858e+06`` by ``:g``, which is 1,048,580."""

from __future__ import annotations

import math

import pytest

from perfonto.codegen.docs import generate_markdown
from perfonto.ontology.units import fmt_number


@pytest.mark.parametrize(
    "x, text",
    [
        (1048576, "1048576"),
        (1e9, "1e+09"),
        (1e-9, "1e-09"),
        (3.35, "3.35"),
        (2.0**-15, "3.0517578125e-05"),
        (0.0, "0"),
        (-4.8, "-4.8"),
        (1979, "1979"),
        (1 / 3, "0.3333333333333333"),
    ],
)
def test_a_number_is_written_so_that_it_reads_back(x, text):
    assert fmt_number(x) == text and float(text) == x


def test_every_shipped_signal_scale_in_the_docs_reads_back():
    import perfonto

    graph = perfonto.load_catalog().graph
    md = generate_markdown(graph)
    row = next(ln for ln in md.splitlines() if ln.startswith("| `hbm.allocated_bytes`"))
    assert "| 1048576 |" in row
    for s in graph.generation.signals.values():
        assert math.isclose(float(fmt_number(s.scale)), s.scale, rel_tol=0, abs_tol=0)
