"""Compiler rules: names, units (pint), instance axes, chip degree, cycles — and the values they give."""

import numpy as np
import pytest

from perfonto.metrics.interpreter import evaluate
from perfonto.metrics.windows import Windows

from helpers import compile_src


def codes(graph):
    return [d.code for d in graph.errors]


def value(gen, text, inputs=None, interval=1.0, chips=1.0, name=None):
    """Compile ``text`` and evaluate its last metric on one window of one chip."""
    graph = compile_src(gen, text)
    assert not graph.errors, [d.render() for d in graph.errors]
    vals = {}
    for sig_name, sig in gen.signals.items():
        shape = (1, 1) + tuple(s for _, s in sig.axes)
        vals[sig_name] = np.full(shape, (inputs or {}).get(sig_name, 0.0), dtype=float)
    w = Windows(np.array([[interval]]), vals, chips)
    out = evaluate(graph, w)
    name = name or list(graph.metrics)[-1]
    return out[name][0, 0]


def test_unit_mismatch_bytes_plus_cycles(sohu):
    g = compile_src(sohu, "metric m [B] = sum(hbm.read_bytes) + seq.elapsed_cycles")
    (d,) = g.errors
    assert d.code == "unit-mismatch" and (d.span.line, d.span.col) == (1, 16)
    assert "core_cycle" in d.message and "B" in d.message


def test_core_cycles_and_hbm_cycles_do_not_mix(sohu):
    g = compile_src(sohu, "metric m [1] = avg(hbm.active_cycles) / seq.elapsed_cycles")
    assert codes(g) == ["unit-mismatch"]


def test_declared_unit_must_convert(sohu):
    g = compile_src(sohu, "metric m [GB/s] = seq.steps / interval")
    (d,) = g.errors
    assert d.code == "unit-mismatch" and "declared in [GB/s]" in d.message


def test_unknown_name_has_did_you_mean(sohu):
    g = compile_src(sohu, "metric m [GB/s] = sum(hbm.read_byte) / interval")
    (d,) = g.errors
    assert d.code == "unknown-name" and "`hbm.read_bytes`" in d.hint and (d.span.line, d.span.col) == (1, 23)


def test_cycle_is_named(sohu):
    g = compile_src(sohu, "metric a [1] = b + 1\nmetric b [1] = c * 2\nmetric c [1] = a / 3\nmetric ok [1] = 2")
    (d,) = g.errors
    assert d.code == "cycle" and "`a` uses `b` uses `c` uses `a`" in d.message
    assert list(g.metrics) == ["ok"]


def test_self_reference_is_a_cycle(sohu):
    assert codes(compile_src(sohu, "metric a [1] = a + 1")) == ["cycle"]


def test_duplicate_and_shadowing_names(sohu):
    g = compile_src(sohu, "metric a [1] = 1\nmetric a [1] = 2\nmetric hbm.read_bytes [B] = 1 B")
    assert codes(g) == ["duplicate-name", "duplicate-name"]


def test_kib_per_second_to_mib_per_second_divides_by_1024(sohu):
    # 2,048,000 KiB over 1 s declared as MiB/s -> 2,000; as MB/s -> 2,097.152
    kib = 2_048_000 * 1024.0
    assert value(sohu, "metric m [MiB/s] = pcie.rx_bytes / interval", {"pcie.rx_bytes": kib}) == pytest.approx(
        2000.0, rel=1e-12
    )
    assert value(sohu, "metric m [MB/s] = pcie.rx_bytes / interval", {"pcie.rx_bytes": kib}) == pytest.approx(
        2097.152, rel=1e-12
    )


def test_rate_declared_as_byte_rate_fails(sohu):
    assert codes(compile_src(sohu, "metric m [MiB/s] = 1 / interval")) == ["unit-mismatch"]


def test_percent_and_ratio(sohu):
    # busy seconds per second of 1.0 declared as percent -> 100, as ratio -> 1
    assert value(sohu, "metric m [percent] = 1 s / interval") == pytest.approx(100.0)
    assert value(sohu, "metric m [ratio] = 1 s / interval") == pytest.approx(1.0)
    assert value(sohu, "metric m [1] = 1 - 25 %") == pytest.approx(0.75)


def test_literals_with_units_convert(sohu):
    assert value(sohu, "metric m [B] = 1 KiB + 64 B") == 1088.0
    assert value(sohu, "metric m [GB/s] = 64 B * 1.5 GHz") == pytest.approx(96.0)


def test_flops_over_window_from_interval(sohu):
    # 1.0e12 FLOP over a 100 ms window -> 10 TFLOP/s
    v = value(sohu, "metric m [TFLOP/s] = sum(mxu.flops_fp8) / interval", {"mxu.flops_fp8": 1e12 / 8}, interval=0.1)
    assert v == pytest.approx(10.0, rel=1e-12)


def test_axes_mismatch_needs_rollup(sohu):
    g = compile_src(sohu, "metric m [1] = hbm.read_bytes / c2c.tx_bytes")
    (d,) = g.errors
    assert d.code == "axes-mismatch" and "hbm.stack[6]" in d.message and "c2c.link[12]" in d.message
    assert not compile_src(sohu, "metric m [1] = sum(hbm.read_bytes) / sum(c2c.tx_bytes)").errors


def test_per_instance_metric_broadcasts_chip_value(sohu):
    g = compile_src(sohu, "metric m [percent] = hbm.read_bytes / sum(hbm.read_bytes)")
    assert not g.errors and g.metrics["m"].axes == (("hbm.stack", 6),)
    v = value(sohu, "metric m [percent] = hbm.read_bytes / sum(hbm.read_bytes)", {"hbm.read_bytes": 5.0})
    np.testing.assert_allclose(v, np.full(6, 100 / 6))


def test_rollup_of_chip_level_value_is_an_error(sohu):
    assert codes(compile_src(sohu, "metric m [1] = sum(seq.steps)")) == ["rollup"]


def test_adding_a_total_to_a_ratio_is_a_chip_degree_error(sohu):
    g = compile_src(sohu, "metric m [1] = seq.steps / 1 event + seq.steps / seq.steps")
    assert codes(g) == ["chip-degree"]


def test_server_level_ratio_of_totals_and_scaled_peaks(sohu):
    # per-chip spec constants are multiplied by the number of chips at server level
    text = "metric m [percent] = sum(mxu.flops_fp8) / (spec.mxu.peak_flops_fp8 * interval)"
    flops = 0.5 * 9000e12 * 8  # eight chips at half their peak, summed
    assert value(sohu, text, {"mxu.flops_fp8": flops / 8}, chips=8.0) == pytest.approx(50.0)


def test_division_by_zero_is_null(sohu):
    v = value(
        sohu,
        "metric m [core_cycle/instruction] = sum(mxu.busy_cycles) / sum(mxu.instructions)",
        {"mxu.busy_cycles": 500.0 / 8},
    )
    assert np.isnan(v)


def test_condition_is_not_a_metric(sohu):
    assert codes(compile_src(sohu, "metric m [1] = interval > 1 s")) == ["bool-metric"]


def test_if_else_and_min_max(sohu):
    assert value(sohu, "metric m [s] = interval if interval > 1 s else 2 s", interval=0.5) == 2.0
    assert value(sohu, "metric m [s] = min(interval, 300 ms)", interval=0.5) == pytest.approx(0.3)
    assert value(sohu, "metric m [1] = clamp(1.7, 0, 1.0)") == 1.0
    assert value(sohu, "metric m [1] = clamp(0.3, 0, 1.0)") == 0.3


def test_bounds_and_threshold_convert_to_declared_unit(sohu):
    g = compile_src(sohu, 'metric m [percent] = 1 s / interval\n bounds 0 .. 1 ratio\n threshold > 0.8 ratio: "busy"')
    m = g.metrics["m"]
    assert m.bounds == (0.0, 100.0) and m.threshold == (">", pytest.approx(80.0), "busy")


def test_reversed_bounds_are_an_error(sohu):
    assert codes(compile_src(sohu, "metric m [1] = 1\n bounds 1 .. 0")) == ["bounds-order"]


def test_metric_reuse_keeps_values(sohu):
    # a = x + y, b = a - y, c = a + 3y with x = 100, y = 20 -> 120, 100, 180
    text = (
        "metric a [tok] = seq.input_tokens + seq.output_tokens\n"
        "metric b [tok] = a - seq.output_tokens\n"
        "metric c [tok] = a + 3 * seq.output_tokens\n"
    )
    ins = {"seq.input_tokens": 100.0, "seq.output_tokens": 20.0}
    assert value(sohu, text, ins, name="a") == 120.0
    assert value(sohu, text, ins, name="b") == 100.0
    assert value(sohu, text, ins, name="c") == 180.0


def test_unavailable_dependency_does_not_stop_the_rest(sohu):
    g = compile_src(sohu, "metric a [1] = nope\nmetric b [1] = a * 2\nmetric c [1] = 3")
    assert codes(g) == ["unknown-name"] and list(g.metrics) == ["c"]


def test_library_compiles_with_required_names(library):
    required = [
        "mxu.utilization",
        "mfu",
        "hbm.read_bandwidth",
        "hbm.write_bandwidth",
        "hbm.bandwidth_utilization",
        "arithmetic_intensity",
        "roofline.attainable_flops",
        "c2c.bandwidth_utilization",
        "pcie.bandwidth_utilization",
        "tokens_per_second",
        "output_tokens_per_second",
        "energy_per_token",
        "topdown.compute_bound",
        "topdown.memory_bound",
        "topdown.interconnect_bound",
        "topdown.host_bound",
        "topdown.idle",
    ]
    assert not [n for n in required if n not in library.metrics]
    assert len(library.metrics) >= 30
    units = {
        n: library.metrics[n].unit_text
        for n in ("hbm.read_bandwidth", "arithmetic_intensity", "roofline.attainable_flops", "energy_per_token")
    }
    assert units == {
        "hbm.read_bandwidth": "GB/s",
        "arithmetic_intensity": "FLOP/B",
        "roofline.attainable_flops": "TFLOP/s",
        "energy_per_token": "J/token",
    }
