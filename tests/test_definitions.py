"""Issue 29, point 7 — definitions: optional inputs with a default (``default(x, d)``), a dimensionless
per-sample exponent (``2 ** field``), the spec constants each value used recorded in report.json, a child
generation's unit override without ``scale_field`` as a diagnostic, and every dtype a generation declares
(caelius's FP4) counted in achieved FLOP/s and MFU. Numbers are worked by hand in the comments."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.analysis.capture import evaluable
from perfonto.codegen.python_evaluator import generate, load
from perfonto.codegen.sql import generate_sql
from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import prepare, read_counters
from perfonto.ontology.loader import load_generation

from helpers import compile_src, one_block_yaml
from test_differential_backends import _sql_values

SIGNALS = (
    "      err: {kind: counter, unit: event, width: 32, description: failed requests}\n"
    "      ok: {kind: counter, unit: event, width: 32, sentinel: [4294967295], description: served requests}\n"
    "      energy: {kind: counter, unit: event, width: 32, description: energy in 2^-ESU joules}\n"
    "      rapl: {kind: packed, width: 32, description: units, fields: {esu: {bits: [8, 12], description: ESU}}}\n"
)
RATES = """\
metric t.error_rate [1] = b.err / (b.err + default(b.ok, 0))
metric t.error_rate5 [1] = b.err / (b.err + default(b.ok, 5 event))
"""
ERR = [0, 5, 12, 20]  # increments 5, 7, 8
OK = [0, 15, 4294967295, 50]  # increments 15, then a sentinel (two null windows)


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    p = tmp_path_factory.mktemp("gen") / "t.yaml"
    p.write_text(one_block_yaml("t", SIGNALS))
    g, diags = load_generation(p)
    assert g is not None, [d.render() for d in diags]
    return g


def _table(cols: dict[str, list[int]]) -> pa.Table:
    n = len(next(iter(cols.values())))
    data = {
        "chip": pa.array([0] * n, pa.int64()),
        "timestamp_ns": pa.array([i * 1_000_000 for i in range(n)], pa.int64()),
    }
    data |= {k: pa.array(v, pa.uint64()) for k, v in cols.items()}
    return pa.table(data)


def _backends(graph, gen, table, folder) -> dict[str, dict[str, np.ndarray]]:
    """Every backend's window values of ``graph`` over ``table``: the reference interpreter on the whole
    catalog, and the generated NumPy evaluator and DuckDB SQL on the catalog the capture can evaluate."""
    pq.write_table(table, folder / "d.parquet")
    dump = read_counters(folder / "d.parquet", gen)
    w = prepare(dump, gen)
    evaluated, _, gone, _ = evaluable(graph, set(dump.absent), None)
    assert not gone, gone
    mod = load(generate(evaluated))
    return {
        "interpreter": evaluate(graph, w),
        "numpy": mod.evaluate(w.values, w.interval, w.chips),
        "sql": _sql_values(evaluated, [table], [w.interval.shape])[0],
    }


def test_an_absent_ok_count_takes_its_default_on_every_backend(gen, tmp_path):
    graph = compile_src(gen, RATES)
    assert not graph.errors, [d.render() for d in graph.errors]
    got = _backends(graph, gen, _table({"b.err": ERR}), tmp_path)  # no `b.ok` column at all
    for backend, v in got.items():
        # default 0: err / (err + 0) = 1 in each window
        np.testing.assert_allclose(np.asarray(v["t.error_rate"], float)[:, 0], [1.0, 1.0, 1.0], err_msg=backend)
        # default 5: 5/10, 7/12, 8/13
        np.testing.assert_allclose(
            np.asarray(v["t.error_rate5"], float)[:, 0], [0.5, 7 / 12, 8 / 13], rtol=1e-12, err_msg=backend
        )


def test_a_metric_reading_ok_without_a_default_is_still_unavailable(gen, tmp_path):
    graph = compile_src(gen, RATES + "metric t.strict [1] = b.err / (b.err + b.ok)\n")
    pq.write_table(_table({"b.err": ERR}), tmp_path / "d.parquet")
    dump = read_counters(tmp_path / "d.parquet", gen)
    evaluated, _, gone, unavailable = evaluable(graph, set(dump.absent), None)
    assert gone == {"t.strict": "not in the dump: b.ok"}
    assert set(evaluated.metrics) == {"t.error_rate", "t.error_rate5"}
    assert evaluated.content_hash != graph.content_hash  # the evaluator cache tells the two catalogs apart


def test_a_null_ok_window_takes_its_default_on_every_backend(gen, tmp_path):
    graph = compile_src(gen, RATES)
    got = _backends(graph, gen, _table({"b.err": ERR, "b.ok": OK}), tmp_path)
    for backend, v in got.items():
        # window 0: 5 / (5 + 15) = 0.25; windows 1 and 2 touch the sentinel: ok is null, so 7/(7+0), 8/(8+0)
        np.testing.assert_allclose(np.asarray(v["t.error_rate"], float)[:, 0], [0.25, 1.0, 1.0], err_msg=backend)
        # with default 5: 0.25, 7/12, 8/13
        np.testing.assert_allclose(
            np.asarray(v["t.error_rate5"], float)[:, 0], [0.25, 7 / 12, 8 / 13], rtol=1e-12, err_msg=backend
        )


def test_spark_sql_coalesces_the_optional_input(gen):
    graph = compile_src(gen, RATES)
    text = generate_sql(graph, dialect="spark", pretty=False)
    assert text.count("COALESCE(") >= 2, text


@pytest.mark.parametrize(
    "formula, code, where, message",
    [
        ("default(b.ok, 5 B)", "unit-mismatch", (1, 38), "must be in a unit of x"),  # bytes are not events
        ("default(b.ok, 5)", "unit-mismatch", (1, 38), "must be in a unit of x"),  # a bare 5 is a ratio, not 5 events
        ("default(b.ok)", "arity", (1, 24), "takes two arguments"),
        ("default(b.ok, 0, 1)", "arity", (1, 24), "takes two arguments"),
    ],
)
def test_the_default_is_checked_for_units(gen, formula, code, where, message):
    graph = compile_src(gen, f"metric t.bad [event] = {formula}\n")
    (d,) = graph.errors
    assert (d.code, (d.span.line, d.span.col)) == (code, where) and message in d.message, d.render()


# -- b) a dimensionless per-sample exponent -------------------------------------------------------------------


def test_a_field_exponent_of_a_dimensionless_base_on_every_backend(gen, tmp_path):
    graph = compile_src(
        gen,
        "metric t.esu_joules [uJ] = 1 J * 0.5 ** b.rapl.esu\n"  # the energy-status unit: 2^-ESU J
        "metric t.esu_scale [1] = 2 ** b.rapl.esu\n"
        "metric t.esu_pct [1] = 2 ** (b.rapl.esu * 50 %)\n",  # 50 % is 0.5: the exponent is half the field
    )
    assert not graph.errors, [d.render() for d in graph.errors]
    esu = [14 << 8, 14 << 8, 16 << 8, 10 << 8]  # the field (bits 8..12) at the window's end sample: 14, 16, 10
    energy = [0, 2**14, 2**14 + 3 * 2**16, 2**14 + 3 * 2**16 + 5 * 2**10]  # increments 2^14, 3 * 2^16, 5 * 2^10
    got = _backends(graph, gen, _table({"b.energy": energy, "b.rapl": esu}), tmp_path)
    for backend, v in got.items():
        # 2^-14 J = 61.03515625 uJ, 2^-16 J = 15.2587890625 uJ, 2^-10 J = 976.5625 uJ
        np.testing.assert_allclose(
            np.asarray(v["t.esu_joules"], float)[:, 0], [61.03515625, 15.2587890625, 976.5625], err_msg=backend
        )
        np.testing.assert_allclose(np.asarray(v["t.esu_scale"], float)[:, 0], [2.0**14, 2.0**16, 2.0**10])
        np.testing.assert_allclose(np.asarray(v["t.esu_pct"], float)[:, 0], [2.0**7, 2.0**8, 2.0**5], err_msg=backend)


@pytest.mark.parametrize(
    "formula, code, col, message",
    [
        # a quantity in J to a per-sample power: its unit would change per window
        ("(b.energy * 1 [J/event]) ** b.rapl.esu", "unit-mismatch", 20, "per-sample exponent `b.rapl.esu`"),
        ("2 ** (1 J)", "unit-mismatch", 26, "must be dimensionless"),  # a dimensioned exponent
        ("2 ** interval", "unit-mismatch", 25, "must be dimensionless"),
        ("2 ** (b.energy / 1 event)", "chip-degree", 26, "adds up across chips"),  # a counter total: degree 1
    ],
)
def test_a_per_sample_exponent_is_refused_with_a_reason(gen, formula, code, col, message):
    graph = compile_src(gen, f"metric t.bad [1] = {formula}\n")
    (d,) = graph.errors
    assert (d.code, d.span.line, d.span.col) == (code, 1, col) and message in d.message, d.render()
