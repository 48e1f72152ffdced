"""perfonto compare (issue 18, point 3): two generations side by side, each ratio attributed by moving one
assumption (a spec constant or a preset setting) at a time from A's value to B's."""

from __future__ import annotations

import json

import pyarrow.csv as pcsv
import pytest

from perfonto.cli import main
from perfonto.whatif.compare import compare, spec_changes
from perfonto.whatif.knobs import Point
from perfonto.whatif.points import Target, base_generation

DECODE = dict(model="llama-3.1-8b", chips=1, isl=128, osl=1024, concurrency=64, requests=256)
PREFILL = dict(model="llama-3.1-8b", chips=1, isl=4096, osl=2, requests=200)
RATIO = "benchmark_tokens_per_second"


def _w(d) -> Point:
    return Point(workload=tuple(sorted(d.items())))


def _factor(entry, prefix):
    return next(c["factor"][RATIO] for c in entry["changes"] if c["what"].startswith(prefix))


def test_sohu_vs_caelius_decode_is_driven_by_hbm_and_prefill_by_the_matrix_peak():
    cmp = compare(Target("sohu"), Target("caelius"), [_w(DECODE), _w(PREFILL)], jobs=1)
    dec, pre = cmp.entries
    # decode-heavy: memory-bound on both; 7.2 → 16 TB/s alone gives nearly all of the ratio
    assert dec["a"]["bottleneck"] == dec["b"]["bottleneck"] == "memory"
    assert dec["drives"].startswith("spec.hbm.peak_bandwidth: 7.2 → 16 TB/s")
    assert 1.1 < dec["ratio"][RATIO] < 16 / 7.2
    assert _factor(dec, "spec.hbm.peak_bandwidth") == pytest.approx(dec["ratio"][RATIO], rel=0.05)
    # prefill-heavy: compute-bound; 9 → 18 PFLOP/s FP8 drives it, HBM bandwidth matters less
    assert pre["a"]["bottleneck"] == "compute"
    assert pre["drives"].startswith("spec.mxu.peak_flops_fp8: 9000 → 18000 TFLOP/s")
    assert _factor(pre, "spec.mxu.peak_flops_fp8") > _factor(pre, "spec.hbm.peak_bandwidth") > 1.0
    assert "spec.mxu.peak_flops_fp4 only on caelius" in cmp.only  # Sohu has no FP4 math to move


def test_sohu_vs_b200_converts_units_and_finds_the_fp8_peak():
    changes, only = spec_changes(base_generation(Target("sohu")), base_generation(Target("b200")))
    what = {c.spec[0][0]: c.spec[0][1] for c in changes}
    assert what["spec.c2c.peak_bandwidth"] == pytest.approx(0.9)  # 900 GB/s in Sohu's TB/s
    assert what["spec.sram.capacity"] == pytest.approx(160e6 / 2**20)  # 160 MB in Sohu's MiB
    assert what["spec.mxu.peak_flops_fp8"] == 4500
    cmp = compare(Target("sohu"), Target("b200"), [_w(PREFILL)], jobs=1)
    (e,) = cmp.entries
    assert e["ratio"][RATIO] < 0.7 and e["drives"].startswith("spec.mxu.peak_flops_fp8: 9000 → 4500")


def test_a_preset_difference_is_attributed_setting_by_setting():
    cmp = compare(
        Target("sohu"),
        Target("sohu"),
        [_w(dict(model="llama3-70b", chips=8, isl=2048, osl=128, requests=600))],
        preset_b="claim",
        jobs=1,
    )
    (e,) = cmp.entries
    kinds = {c["kind"] for c in e["changes"]}
    assert kinds == {"assumption", "hardware", "mapping", "engine"}  # same generation: no spec constant moves
    assert e["ratio"][RATIO] > 3  # the claim preset is far faster
    top = e["changes"][0]
    assert top["factor"][RATIO] == max(c["factor"][RATIO] for c in e["changes"] if c["factor"][RATIO] >= 1)
    assert e["drives"] == top["what"] and e["interaction"] == pytest.approx(
        e["ratio"][RATIO] / __import__("math").prod(c["factor"][RATIO] for c in e["changes"])
    )


def test_compare_cli_table_plot(tmp_path, capsys):
    argv = [
        "compare",
        "sohu",
        "caelius",
        "--model",
        "llama-3.1-8b",
        "--chips",
        "1",
        "--osl",
        "64",
        "--requests",
        "100",
        "--vary",
        "isl=128,2048",
        "--jobs",
        "1",
        "--no-cache",
        "--out",
        str(tmp_path / "c.csv"),
        "--plot",
        str(tmp_path / "c.svg"),
    ]
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"] == "sohu" and doc["b"] == "caelius" and len(doc["workloads"]) == 2
    t = pcsv.read_csv(tmp_path / "c.csv")
    assert t.column("isl").to_pylist() == [128, 2048] and "drives" in t.column_names
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()[:400]
    assert main(argv) == 0
    assert "one change at a time" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["compare", "sohu", "nosuch"], 2, "nosuch"),
        (["compare", "sohu", "caelius", "--vary", "spec.hbm.peak_bandwidth=1,2TB/s"], 2, "vary only workload knobs"),
        (["compare", "sohu", "caelius", "--preset", "claim"], 2, "--preset-a and --preset-b"),
        (["compare", "sohu", "caelius", "--preset-b", "nosuch"], 2, "no preset 'nosuch'"),
        (["compare", "sohu", "caelius", "--plot", "x.pdf"], 2, ".png or .svg"),
    ],
)
def test_compare_errors(argv, code, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--no-cache", "--json"]) == code
    assert message in json.loads(capsys.readouterr().out)["error"]
