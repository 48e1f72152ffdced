"""Issue 29, point 7 — definitions: optional inputs with a default (``default(x, d)``), a dimensionless
per-sample exponent (``2 ** field``), the spec constants each value used recorded in report.json, a child
generation's unit override without ``scale_field`` as a diagnostic, and every dtype a generation declares
(caelius's FP4) counted in achieved FLOP/s and MFU. Numbers are worked by hand in the comments."""

from __future__ import annotations

from pathlib import Path

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

from helpers import compile_src, generation_from_yaml, one_block_yaml
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
    return generation_from_yaml(tmp_path_factory.mktemp("gen") / "t.yaml", one_block_yaml("t", SIGNALS))


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


def test_a_null_ok_window_of_a_captured_count_stays_null_on_every_backend(gen, tmp_path):
    """The default stands in for an input the capture lacks, never for a null window of one it has: a
    window where `ok` reads a sentinel is unknown, not zero (7 / (7 + 0) = 100 % would be a silently wrong
    error rate)."""
    graph = compile_src(gen, RATES)
    got = _backends(graph, gen, _table({"b.err": ERR, "b.ok": OK}), tmp_path)
    for backend, v in got.items():
        # window 0: 5 / (5 + 15) = 0.25; windows 1 and 2 touch the sentinel: ok is null, so the rate is null
        for name in ("t.error_rate", "t.error_rate5"):
            got_w = np.asarray(v[name], float)[:, 0]
            assert got_w[0] == pytest.approx(0.25, rel=1e-12) and np.isnan(got_w[1:]).all(), (backend, name, got_w)


def test_sql_reads_a_captured_optional_input_as_it_is(gen):
    graph = compile_src(gen, RATES)
    for dialect in ("duckdb", "spark"):
        text = generate_sql(graph, dialect=dialect, pretty=False)
        assert "COALESCE(" not in text.upper().replace("COALESCE(SUM", ""), text


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


# -- c) and e) every dtype of caelius counted; the constants each value used -------------------------------------


@pytest.fixture(scope="module")
def caelius_graph():
    from perfonto.metrics.catalog import shipped_others
    from perfonto.metrics.compiler import compile_files

    g, _ = load_generation("caelius")
    graph = compile_files(g, others=shipped_others())
    assert not graph.errors, [d.render() for d in graph.errors]
    return graph


def _caelius_window(graph) -> dict[str, float]:
    """One hand-made window of one caelius chip, 10 ms: per core (16) 2e12 FP4, 0.5e12 FP8 and 0.1e12 BF16
    FLOP; 40e12 model FLOP; per HBM stack (8) 1e9 bytes read and 0.5e9 written."""
    from perfonto.metrics.windows import Windows

    def per(n: int, v: float) -> np.ndarray:
        return np.full((1, 1, n), v)

    values = {
        "mxu.flops_fp4": per(16, 2e12),
        "mxu.flops_fp8": per(16, 0.5e12),
        "mxu.flops_bf16": per(16, 0.1e12),
        "seq.model_flops": np.full((1, 1), 40e12),
        "hbm.read_bytes": per(8, 1e9),
        "hbm.write_bytes": per(8, 0.5e9),
    }
    names = ["mxu.achieved_flops", "mfu", "hfu", "arithmetic_intensity", "mxu.flops"]
    out = evaluate(graph, Windows(np.full((1, 1), 0.01), values), names)
    return {k: float(np.ravel(v)[0]) for k, v in out.items()}


def test_caelius_fp4_work_counts_in_flops_mfu_hfu_and_intensity(caelius_graph):
    v = _caelius_window(caelius_graph)
    # 16 x (2 + 0.5 + 0.1) e12 = 41.6e12 FLOP in 0.01 s = 4160 TFLOP/s (without FP4: 960 TFLOP/s)
    assert v["mxu.achieved_flops"] == pytest.approx(4160.0, rel=1e-12)
    assert v["mxu.flops"] == pytest.approx(41.6, rel=1e-12)  # TFLOP
    # each precision at its own dense peak (caelius: FP4 36000, FP8 18000, BF16 9000 TFLOP/s):
    # hfu = (3200 / 36000 + 800 / 18000 + 160 / 9000) = 0.0889 + 0.0444 + 0.0178 = 15.11 %
    hfu = 100 * (3200 / 36000 + 800 / 18000 + 160 / 9000)
    assert v["hfu"] == pytest.approx(hfu, rel=1e-12)
    # mfu: the model's 40e12 of the 41.6e12 executed FLOP, times hfu = 14.53 % (over the FP8 peak alone: 22 %)
    assert v["mfu"] == pytest.approx(40 / 41.6 * hfu, rel=1e-12)
    # 41.6e12 FLOP / (8 x 1.5e9 B) = 3466.67 FLOP/B
    assert v["arithmetic_intensity"] == pytest.approx(41.6e12 / 12e9, rel=1e-12)


def test_sohu_compiles_the_same_formulas_without_fp4(caelius_graph):
    from perfonto.metrics.catalog import shipped_others
    from perfonto.metrics.compiler import compile_files

    sohu, _ = load_generation("sohu")
    graph = compile_files(sohu, others=shipped_others())
    assert not graph.errors and "mfu" in graph.metrics and "mxu.achieved_flops" in graph.metrics
    assert not [d for d in graph.diagnostics if d.code in ("lint-flop-coverage", "unknown-name")]
    assert not [d for d in caelius_graph.diagnostics if d.code == "lint-flop-coverage"]  # FP4 no longer left out
    assert "mxu.flops_fp4" in caelius_graph.metrics["mxu.achieved_flops"].signal_deps
    assert "mxu.flops_fp4" not in graph.metrics["mxu.achieved_flops"].signal_deps
    # without the other generations, mxu.flops_fp4 is unknown anywhere: a warning, and the default is used
    alone = compile_files(sohu)
    assert not alone.errors and "mxu.achieved_flops" in alone.metrics
    assert any(d.code == "unknown-name" and d.severity == "warning" for d in alone.diagnostics)


def test_report_records_the_constants_each_value_used(caelius_graph):
    from perfonto.analysis.report_json import constants_json

    metrics = {"mfu": {"value": 1.0}, "mxu.achieved_flops": {"value": 2.0}}
    table = constants_json(caelius_graph, metrics)
    # mfu reads mxu.peak_flops_dominant, which chooses among the three dense peaks
    assert metrics["mfu"]["constants"] == [
        "spec.mxu.peak_flops_bf16",
        "spec.mxu.peak_flops_fp4",
        "spec.mxu.peak_flops_fp8",
    ]
    assert "constants" not in metrics["mxu.achieved_flops"]  # counters over the interval: no constant
    assert table["spec.mxu.peak_flops_fp4"] == {
        "value": 36000.0,
        "unit": "TFLOP/s",
        "provenance": "assumed",
        "source": "twice the FP8 rate, as on B200",
        "scope": "chip",
        "where": f"caelius.yaml:{caelius_graph.generation.spec['spec.mxu.peak_flops_fp4'].span.line}",
    }
    assert set(table) == set(metrics["mfu"]["constants"])


@pytest.mark.slow
def test_caelius_fp4_emulation_agrees_with_ground_truth(tmp_path, monkeypatch):
    """A 50 ms caelius run at FP4 weights (llama3-8b, one chip), analysed end to end: achieved FLOP/s,
    MFU and HFU as the emulator's ground truth has them, and report.json names the constants."""
    import perfonto
    from perfonto.analysis.validate import truth_table

    monkeypatch.setenv("PERFONTO_NO_JIT", "1")  # the pure-Python kernel: no numba compile for one chip
    em = perfonto.emulate(
        "caelius", model="llama3-8b", chips=1, duration=0.05, dtype="fp4", warmup_steps=20, out=tmp_path / "run"
    )
    gt = em.ground_truth
    assert gt["flops_fp4"] > 0.9 * gt["flops"]  # the work is FP4: leaving it out would read ~4 % of it
    doc = perfonto.evaluate(perfonto.load_catalog(generation="caelius"), em.path).report.to_json()
    m = doc["metrics"]
    d = gt["duration_s"]
    assert m["mxu.achieved_flops"]["value"] == pytest.approx(gt["flops"] / d / 1e12, rel=1e-6)
    # each precision at its own peak (FP4 36000, FP8 18000, BF16 9000 TFLOP/s), as the emulator's mfu has it
    at_peak = gt["flops_fp4"] / 36000e12 + gt["flops_fp8"] / 18000e12 + gt["flops_bf16"] / 9000e12
    assert m["mfu"]["value"] == pytest.approx(100 * gt["mfu"], rel=1e-6)
    assert m["mfu"]["value"] == pytest.approx(100 * gt["model_flops"] / gt["flops"] * at_peak / d, rel=1e-6)
    assert m["hfu"]["value"] == pytest.approx(100 * gt["hfu"], rel=1e-6)
    truth = truth_table(load_generation("caelius")[0], gt)
    assert truth["mfu"]() == pytest.approx(m["mfu"]["value"], rel=1e-6)
    assert (
        "spec.mxu.peak_flops_fp4" in m["mfu"]["constants"]
        and doc["constants"]["spec.mxu.peak_flops_fp4"]["value"] == 36000.0
    )


# -- d) a child's unit override without its scale_field -------------------------------------------------------

PARENT = one_block_yaml(
    "p",
    "      rapl: {kind: packed, width: 32, description: units, fields: {esu: {bits: [8, 12], description: ESU}}}\n"
    "      energy: {kind: counter, unit: J, width: 32, scale_field: {field: b.rapl.esu, base: 0.5}, "
    "description: energy in 2^-ESU J}\n",
)


@pytest.mark.parametrize(
    "override, error",
    [
        ("energy: {unit: mJ}", True),  # a plain mJ counter that would still be scaled by 2^-ESU: refused
        ("energy: {unit: mJ, scale_field: null}", False),  # the plain unit, said explicitly
        ("energy: {unit: mJ, scale_field: {field: b.rapl.esu, base: 0.5}}", False),  # restated
        ("energy: {unit: J, description: same unit}", False),  # the unit unchanged: the field still applies
    ],
)
def test_a_child_changing_a_scaled_unit_must_restate_scale_field(tmp_path, override, error):
    (tmp_path / "p.yaml").write_text(PARENT)
    child = "generation: c\nextends: p\ndescription: child\nblocks:\n  b:\n    signals:\n      " + override + "\n"
    (tmp_path / "c.yaml").write_text(child)
    g, diags = load_generation(tmp_path / "c.yaml")
    found = [d for d in diags if d.code == "scale-field-override"]
    if not error:
        assert g is not None and not found, [d.render() for d in diags]
        return
    (d,) = found
    # the child's `unit` value: line 7 (`      energy: {unit: mJ}`), column 22
    assert (Path(d.span.file).name, d.span.line, d.span.col) == ("c.yaml", 7, 22), d.render()
    assert "keeps the parent's `scale_field`" in d.message and "scale_field: null" in d.hint
    assert g is None  # an error: nothing is resolved from it


def test_perf_export_reads_the_default_as_the_generation_has_it(caelius_graph):
    from perfonto.interop.perf_export import export
    from perfonto.metrics.catalog import shipped_others
    from perfonto.metrics.compiler import compile_files

    def expr(graph, name):
        return next(e["MetricExpr"] for e in export(graph).entries if e.get("MetricName") == name)

    sohu = compile_files(load_generation("sohu")[0], others=shipped_others())
    # sohu has no FP4 counter: the zero default is dropped, as the formula read before FP4 was added
    assert expr(sohu, "mxu.achieved_flops") == "((mxu.flops_fp8 * 1024) + (mxu.flops_bf16 * 1024)) / duration_time"
    assert "(mxu.flops_fp4 * 1024)" in expr(caelius_graph, "mxu.achieved_flops")


def test_an_absent_ok_count_through_the_engine(tmp_path, monkeypatch):
    """The whole analysis (the fused kernel's pure-Python twin, levels, report) on a capture without ``b.ok``."""
    import perfonto

    monkeypatch.setenv("PERFONTO_NO_JIT", "1")
    cat_dir = tmp_path / "cat"
    cat_dir.mkdir()
    (cat_dir / "t.yaml").write_text(one_block_yaml("t", SIGNALS))
    (cat_dir / "rates.metrics").write_text(RATES)
    pq.write_table(_table({"b.err": ERR}), tmp_path / "d.parquet")
    res = perfonto.evaluate(perfonto.load_catalog(cat_dir, library=False, raise_on_error=True), tmp_path / "d.parquet")
    assert "t.error_rate" not in res.unavailable
    # windows: 5/(5+0), 7/(7+0), 8/(8+0) = 1; default 5 events: 5/10, 7/12, 8/13
    assert res.window.column("t.error_rate").to_pylist() == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(res.window.column("t.error_rate5").to_pylist(), [0.5, 7 / 12, 8 / 13], rtol=1e-12)
    # the run: 20 errors over 20 + 0
    assert res.server.column("t.error_rate").to_pylist() == [1.0]
