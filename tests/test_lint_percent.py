"""``percent-times-100``: a metric declared ``[percent]`` whose formula ends in ``* 100`` is 100 × too large,
because perfonto converts a ratio to the declared unit itself. A new user's ``mxu.utilization * 100`` read
4,967.7 %, and ``avg(mxu.busy_cycles) / seq.elapsed_cycles * 100`` (perf's and TMA's habit) read 3,196 % for
a matrix engine busy 31.96 % of the time."""

from __future__ import annotations

import pytest

from helpers import compile_src


@pytest.mark.parametrize(
    "formula, where",
    [
        ("avg(mxu.busy_cycles) / seq.elapsed_cycles * 100", "* 100"),
        ("100 * avg(mxu.busy_cycles) / seq.elapsed_cycles", "100 *"),
        ("avg(mxu.busy_cycles) / seq.elapsed_cycles / 0.01", "/ 0.01"),
    ],
)
def test_a_percent_metric_times_100_is_refused_at_the_literal(sohu, formula, where):
    g = compile_src(sohu, f'metric t.busy [percent] = {formula}\n  "busy share"\n')
    (d,) = [x for x in g.errors if x.code == "percent-times-100"]
    text = d.render()
    assert "declared [percent]" in text and "100 × too large" in text and "drop the" in text
    col = formula.index("0.01" if where == "/ 0.01" else "100") + len("metric t.busy [percent] = ") + 1
    assert d.span.col == col, (d.span, col)
    assert "t.busy" not in g.metrics


def test_a_ratio_declared_in_percent_and_other_hundreds_compile(sohu):
    """The right way, a dimensionless 100 not at the top of the product, and a unit that is not percent."""
    src = (
        'metric t.ok [percent] = avg(mxu.busy_cycles) / seq.elapsed_cycles\n  "busy share"\n'
        'metric t.sum [percent] = (avg(mxu.busy_cycles) + 100 * avg(vpu.busy_cycles)) / seq.elapsed_cycles\n  "x"\n'
        'metric t.per100 [1] = avg(mxu.busy_cycles) / seq.elapsed_cycles * 100\n  "per hundred cycles"\n'
    )
    g = compile_src(sohu, src)
    assert not [x for x in g.errors if x.code == "percent-times-100"], [x.render() for x in g.errors]
    assert {"t.ok", "t.sum", "t.per100"} <= set(g.metrics)
