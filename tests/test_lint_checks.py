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
    cat = load_catalog(None, "caelius")
    warns = {d.message.split("`")[1]: d.message for d in cat.diagnostics if d.code == "lint-flop-coverage"}
    assert (
        "mxu.achieved_flops" in warns
        and "mxu.flops_fp4" in warns["mxu.achieved_flops"]
        and "hfu" in warns["mxu.achieved_flops"]
    )
    sohu = load_catalog(None, "sohu")  # sohu's utilisation metrics read every FLOP counter it has
    assert not [d for d in sohu.diagnostics if d.code == "lint-flop-coverage"]
