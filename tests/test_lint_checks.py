"""`perfonto check` on formulas that type but are wrong (issue 15, points 9 and 10): the rules of
``metrics.lint`` through the command a catalog author runs (the per-rule cases are the fixture
pairs under tests/fixtures/compiler/lint/)."""

import json

from perfonto.cli import main
from perfonto.metrics.catalog import load_catalog


def _check(tmp_path, capsys, text: str):
    d = tmp_path / "cat"
    d.mkdir(exist_ok=True)
    (d / "m.metrics").write_text(text)
    code = main(["check", "--catalog", str(d), "--json"])
    return code, json.loads(capsys.readouterr().out)["diagnostics"]


def test_check_refuses_each_wrong_formula_with_its_location(tmp_path, capsys):
    text = (
        'metric a.x [percent] = clamp(avg(mxu.busy_cycles) / seq.elapsed_cycles, 1, 0)\n  "x"\n'
        'metric b.x [GB/s] = sum(hbm.read_bytes) / (0 * interval)\n  "x"\n'
        'metric c.x [1] = power.status + 1\n  "x"\n'
        'metric d.x [GB] = sum(hbm.read_bytes) * (avg(mxu.busy_cycles) / seq.elapsed_cycles)\n  "x"\n'
    )
    code, diags = _check(tmp_path, capsys, text)
    assert code == 1
    got = {(x["code"], x["line"]) for x in diags if x["severity"] == "error"}
    assert got == {("clamp-order", 1), ("div-zero", 3), ("packed-word", 5), ("total-times-ratio", 7)}


def test_threshold_outside_bounds_is_a_warning(tmp_path, capsys):
    text = (
        'metric e.x [percent] = avg(mxu.busy_cycles) / seq.elapsed_cycles\n  "x"\n  bounds 0 .. 100\n  threshold '
        '< -5 %: "never"\n'
    )
    code, diags = _check(tmp_path, capsys, text)
    assert code == 0
    (w,) = [x for x in diags if x["code"] == "threshold-bounds"]
    assert w["severity"] == "warning" and w["line"] == 4 and "can never fire" in w["message"]


def test_caelius_fp4_counter_left_out_of_hfu_is_flagged():
    """A formula that reads FP8 and BF16 work but not FP4 on caelius is flagged; the shipped library counts
    every dtype (issue 29: ``default(mxu.flops_fp4, 0 FLOP)``), so neither caelius nor sohu is."""
    from perfonto.metrics.compiler import compile_texts

    cat = load_catalog(None, "caelius")
    assert not [d for d in cat.diagnostics if d.code == "lint-flop-coverage"]
    src = (
        "metric e.partial [TFLOP/s] = sum(mxu.flops_fp8 + mxu.flops_bf16) / interval\n"
        "metric e.use [1] = e.partial / e.partial\n"
    )
    graph = compile_texts(cat.generation, {"x.metrics": src})
    warns = {d.message.split("`")[1]: d.message for d in graph.diagnostics if d.code == "lint-flop-coverage"}
    assert "e.partial" in warns and "mxu.flops_fp4" in warns["e.partial"] and "e.use" in warns["e.partial"]
    sohu = load_catalog(None, "sohu")  # sohu's utilisation metrics read every FLOP counter it has
    assert not [d for d in sohu.diagnostics if d.code == "lint-flop-coverage"]


def test_a_top_down_child_in_another_dimension_than_its_parent_is_a_warning(tmp_path, capsys):
    # a new user hung a GB/s under topdown.memory.weights (percent); children are shares adding up to it
    text = (
        'metric hbm.weight_read_bandwidth [GB/s] = sum(hbm.read_bytes) / interval\n  "a rate"\n'
        "  parent topdown.memory.weights\n"
        'metric topdown.memory.weights_share [1] = avg(mxu.busy_cycles) / seq.elapsed_cycles\n  "a share"\n'
        "  parent topdown.memory.weights\n"
    )
    code, diags = _check(tmp_path, capsys, text)
    assert code == 0
    (w,) = [x for x in diags if x["code"] == "parent-unit"]
    assert (
        w["severity"] == "warning"
        and w["line"] == 3
        and "[GB/s] is a child of `topdown.memory.weights`" in w["message"]
    )
