"""Signal kinds as one table (ontology/kinds.py, issue 26): a kind added to the table with its reference
rule is evaluated by every backend that has a handler for its window rule, equal to the reference, and
refused by name by every backend that has none."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.capture.dump_scan import plan_dump
from perfonto.cli import main
from perfonto.codegen.python_evaluator import generate, load
from perfonto.codegen.sql import generate_sql, parquet_source
from perfonto.metrics import interpreter
from perfonto.metrics import windows
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.levels import evaluate_levels
from perfonto.analysis.engine import evaluate_capture
from perfonto.ontology import kinds

YAML = """\
generation: toy
description: a generation with a signal of kind {kind}
clock_domains:
  core: {{frequency: {{value: 1, unit: GHz, provenance: assumed}}}}
blocks:
  t:
    description: a block
    clock: core
    instances: {{lane: 2}}
    signals:
      bytes: {{kind: {kind}, unit: B, {width}scale: 4, description: bytes moved}}
"""
METRICS = """\
metric t.rate [B/s] = sum(t.bytes) / interval
  "Bytes per second over both lanes."
metric t.busiest [B] = max(t.bytes)
  "The busier lane's bytes."
"""


def _catalog(tmp_path, kind: str, width: str = "width: 16, "):
    d = tmp_path / kind
    d.mkdir()
    (d / "toy.yaml").write_text(YAML.format(kind=kind, width=width), encoding="utf-8")
    (d / "toy.metrics").write_text(METRICS, encoding="utf-8")
    return d


def _dump(path, samples: int = 60, chips: int = 2, seed: int = 3) -> None:
    """16-bit registers that wrap; chip 1's registers step back at sample 40 (read as a reset)."""
    rng = np.random.default_rng(seed)
    inc = rng.integers(0, 9000, size=(samples, chips, 2)).astype(np.uint64)
    raw = np.cumsum(inc, axis=0)
    raw[40:, 1] -= raw[40, 1] - raw[39, 1] + np.uint64(1000)  # chip 1 steps back 1,000 counts at sample 40
    raw &= np.uint64(0xFFFF)
    t = pa.table(
        {
            "chip": np.tile(np.arange(chips, dtype=np.int32), samples),
            "timestamp_ns": np.repeat(np.arange(samples, dtype=np.int64) * 1_000_000, chips),
            "t.bytes": pa.FixedSizeListArray.from_arrays(pa.array(raw.reshape(-1)), 2),
        }
    )
    pq.write_table(t.replace_schema_metadata({"perfonto": json.dumps({"sample_period_ns": 1_000_000})}), path)


@pytest.fixture
def toy_counter():
    kinds.register(
        kinds.Kind(
            "toy_counter",
            "increase",
            "sum",
            "sum",
            True,
            "required",
            kinds.KINDS["counter"].options,
            "its increase over the window",
            9,
            "a counter by another name",
        )
    )
    yield "toy_counter"
    kinds.unregister("toy_counter")


@pytest.fixture
def toy_peak():
    """A kind with a window rule no backend but the reference knows: the larger of the window's two
    end samples, × scale (a peak-hold level)."""

    def peak(sig, raw, interval, dump):
        v = np.maximum(raw[:-1], raw[1:]).astype(np.float64) * sig.scale
        return v, np.zeros(v.shape, np.uint8)

    kinds.register(
        kinds.Kind(
            "toy_peak",
            "peak",
            "time_weighted",
            "declared",
            False,
            "forbidden",
            frozenset({"across_chips"}),
            "the larger of its two end samples",
            10,
        )
    )
    windows.RULES["peak"] = peak
    yield "toy_peak"
    windows.RULES.pop("peak", None)
    kinds.unregister("toy_peak")


def _reference(graph, path):
    from perfonto.capture.dump import read_counters

    dump = read_counters(path, graph.generation)
    w = windows.prepare(dump, graph.generation)
    return w, interpreter.evaluate(graph, w)


def test_an_added_kind_is_evaluated_by_every_backend_as_its_rule_says(tmp_path, toy_counter):
    path = tmp_path / "dump.parquet"
    _dump(path)
    toy = load_catalog(_catalog(tmp_path, toy_counter), None, library=False, cache=False).graph
    ref_cat = load_catalog(_catalog(tmp_path, "counter"), None, library=False, cache=False).graph
    assert toy.generation.signals["t.bytes"].kind == "toy_counter" and not toy.errors
    w, want = _reference(toy, path)
    _, same = _reference(ref_cat, path)
    assert np.isnan(want["t.rate"]).any() and np.isfinite(want["t.rate"]).any()  # the reboot nulls a window
    for name in toy.metrics:  # the reference rule of `increase` is the counter's
        np.testing.assert_array_equal(want[name], same[name])
    mod = load(generate(toy))  # the generated evaluator (NumPy path in the suite)
    res = evaluate_capture(toy, mod, plan_dump(path, toy.generation), None, keep=True)
    for name in toy.metrics:
        np.testing.assert_array_equal(res.evaluation.window[name], want[name], err_msg=name)
    sql = generate_sql(toy, parquet_source(str(path)), host=False)
    t = duckdb.sql(sql).to_arrow_table().sort_by([("window", "ascending"), ("chip", "ascending")])
    rate = np.array(t.column("t.rate").to_pylist(), dtype=float).reshape(want["t.rate"].shape)
    np.testing.assert_allclose(rate, want["t.rate"], rtol=1e-12)
    levels = evaluate_levels(toy, w, lambda inp, iv, chips: interpreter.evaluate(toy, _with(w, inp, iv, chips)))
    np.testing.assert_allclose(res.evaluation.server["t.rate"], levels.server["t.rate"], rtol=1e-12)


def _with(w, inputs, interval, chips):
    return windows.Windows(interval, inputs, chips, "run", None, {})


def test_a_kind_without_a_handler_is_refused_by_name(tmp_path, toy_peak, capsys):
    path = tmp_path / "dump.parquet"
    _dump(path)
    cat = _catalog(tmp_path, toy_peak, width="")
    graph = load_catalog(cat, None, library=False, cache=False).graph
    assert not graph.errors, [d.render() for d in graph.errors]
    _, want = _reference(graph, path)  # the reference has the rule: the larger end sample × 4
    raw = pq.read_table(path).column("t.bytes").combine_chunks().flatten().to_numpy().reshape(60, 2, 2)
    hand = np.maximum(raw[:-1], raw[1:]).astype(float) * 4.0
    np.testing.assert_array_equal(want["t.busiest"], hand.max(axis=2))
    with pytest.raises(kinds.UnsupportedKind, match="`toy_peak`.*window rule `peak`"):
        generate(graph)  # the NumPy evaluator and the numba kernel share its layout
    from perfonto.codegen.sql import generate_sql as gen_sql

    for dialect in ("duckdb", "spark"):
        with pytest.raises(kinds.UnsupportedKind, match="toy_peak"):
            gen_sql(graph, parquet_source(str(path)), host=False, dialect=dialect)
    capsys.readouterr()
    code = main(
        [
            "analyze",
            str(path),
            "--catalog",
            str(cat),
            "--no-library",
            "--no-cache",
            "--out",
            str(tmp_path / "o"),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and "toy_peak" in doc["error"] and "internal error" not in doc["error"]


def test_an_unknown_kind_in_yaml_names_the_kinds(tmp_path, capsys):
    cat = _catalog(tmp_path, "countr")
    code = main(["check", "--catalog", str(cat), "--no-library", "--no-cache"])
    cap = capsys.readouterr()
    text = cap.out + cap.err
    assert (
        code == 1
        and "no signal kind `countr`" in text
        and "did you mean `counter`" in text
        and "toy.yaml:11:21" in text
    )


@pytest.mark.slow
def test_the_kernel_evaluates_an_added_kind_as_the_reference(tmp_path, toy_counter, monkeypatch):
    """The numba kernel (compiled here: slow) takes the added kind's window rule from its layout class."""
    pytest.importorskip("numba", reason="the compiled kernel needs numba (pip install -e '.[test]')")
    monkeypatch.delenv("PERFONTO_NO_JIT", raising=False)
    path = tmp_path / "dump.parquet"
    _dump(path)
    toy = load_catalog(_catalog(tmp_path, toy_counter), None, library=False, cache=False).graph
    w, want = _reference(toy, path)
    mod = load(generate(toy))
    res = evaluate_capture(toy, mod, plan_dump(path, toy.generation), None, keep=True)
    assert res.stats["kernel"] == res.stats["pieces"] >= 1
    for name in toy.metrics:
        np.testing.assert_array_equal(res.evaluation.window[name], want[name], err_msg=name)
