"""perfonto sweep (issue 18, point 1): the HBM-bandwidth sweep against the roofline ridge by hand,
the output formats and plots, the cache, and the errors of the --vary syntax."""

from __future__ import annotations

import json

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.emulator.assumptions import Assumptions
from perfonto.emulator.presets import resolve
from perfonto.whatif.knobs import Point, parse_vary
from perfonto.whatif.points import Cache, Target, base_generation
from perfonto.whatif.sweep import run_points, sweep

#: Llama-3.3-70B on one Sohu chip under the `claim` preset (a fused dataflow: no per-op overhead,
#: activations in SRAM), a closed loop of 256 requests of 16 input and 512 output tokens: every step
#: decodes 256 rows (a new 16-token prompt joins one step in 32).
DECODE = dict(model="llama-3.3-70b", chips=1, isl=16, osl=512, concurrency=256, requests=1024, preset="claim")


def _base(**wl) -> Point:
    return Point(workload=tuple(sorted(wl.items())))


def test_hbm_sweep_crossing_matches_the_roofline_ridge_by_hand(tmp_path):
    # The hand calculation. Each weight matrix is read once per step (FP8: 1 B per weight) and used
    # for T = 256 rows: 2·T = 512 FLOP per byte. The matrix engine's time per byte is
    # 2T / (P · e_c(T)) with the claim preset's P = 10 PFLOP/s and e_c(T) = 0.95 · T / (T + 16);
    # HBM's is 1 / (B · e_m) with e_m = 0.90 · b / (b + 256 KiB) for a b = 8192 × 57344 B (gate/up)
    # matrix. The GEMMs, most of the step, turn from HBM-bound to compute-bound where the two meet:
    #   B* = P · e_c(T) / (2T · e_m) = 1e16 · 0.89412 / (512 · 0.89950) = 19.41 TB/s.
    p = resolve("sohu", "claim")
    assert (
        float(p.hardware["peak_fp8"]) == 10.0e15
        and p.assumptions.mxu_eff_max == 0.95
        and p.assumptions.mxu_half_rows == 16.0
    )
    assert (
        p.assumptions.hbm_eff_max == 0.90
        and Assumptions().hbm_half_bytes == 256 * 1024
        and not p.assumptions.activations_in_hbm
    )
    T, P = 256, 10.0e15
    e_c = 0.95 * T / (T + 16)
    b = 8192 * 57344
    e_m = 0.90 * b / (b + 256 * 1024)
    ridge = P * e_c / (2 * T * e_m) / 1e12
    assert ridge == pytest.approx(19.41, abs=0.01)

    gen = base_generation(Target())
    knob = parse_vary("spec.hbm.peak_bandwidth=4..64TB/s:5:log", gen)
    assert knob.values == pytest.approx((4, 8, 16, 32, 64))
    res = sweep(Target(), _base(**DECODE), [knob], jobs=1, cache=Cache(tmp_path / "cache"))
    tps = [r["tokens_per_second"] for r in res.rows]
    assert [r["bottleneck"] for r in res.rows] == ["memory", "memory", "memory", "compute", "compute"]
    assert tps[0] < tps[1] < tps[2] < tps[3]  # more bandwidth, more tokens while HBM-bound
    assert tps[1] / tps[0] == pytest.approx(2.0, rel=0.03)  # and in proportion (the memory roofline)
    assert tps[4] == pytest.approx(tps[3], rel=0.01)  # flat once compute-bound
    (c,) = res.crossings
    assert (c["from"], c["to"], c["grid"]) == ("memory", "compute", [16.0, 32.0])
    assert c["at"] == pytest.approx(ridge, rel=0.05)
    assert c["high"] / c["low"] - 1 <= 0.005  # bisected, not the grid's midpoint


def test_spec_override_is_a_derived_generation_not_a_patch():
    gen = base_generation(Target())
    before = gen.spec["spec.hbm.peak_bandwidth"]
    row_hi, row_lo = run_points(
        Target(), [_base(**DECODE).with_values(**{"spec.hbm.peak_bandwidth": v}) for v in (64.0, 4.0)], jobs=1
    )
    assert row_hi["tokens_per_second"] > 3 * row_lo["tokens_per_second"]
    assert gen.spec["spec.hbm.peak_bandwidth"] is before and before.value == 7.2  # the loaded generation is untouched
    from perfonto.whatif.points import derived_generation

    d = derived_generation(Target(), _base().with_values(**{"spec.hbm.peak_bandwidth": 8.0}))
    c = d.spec["spec.hbm.peak_bandwidth"]
    assert (c.value, c.unit_text, c.provenance) == (8.0, "TB/s", "assumed") and "was 7.2 TB/s" in c.source
    assert d.content_hash != gen.content_hash


def test_sweep_cli_writes_table_plot_and_reuses_its_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    argv = [
        *"sweep --model llama-3.1-8b --chips 1 --osl 256 --concurrency 32 --requests 64 --jobs 1".split(),
        *"--vary spec.hbm.peak_bandwidth=4,8TB/s --vary isl=64,128".split(),
    ]

    def sweep(table, plot):
        return main([*argv, "--out", str(tmp_path / table), "--plot", str(tmp_path / plot), "--json"])

    assert sweep("t.csv", "f.png") == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["points"]) == 4 and doc["cache"]["hits"] == 0
    t = pcsv.read_csv(tmp_path / "t.csv")
    assert t.num_rows == 4 and {
        "spec.hbm.peak_bandwidth [TB/s]",
        "isl",
        "tokens_per_second",
        "bottleneck",
        "mfu",
    } <= set(t.column_names)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sweep("t.parquet", "f.svg") == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cache"]["hits"] == 4 and again["points"] == doc["points"]
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 4 and b"<svg" in (tmp_path / "f.svg").read_bytes()[:400]
    # the JSON says its units (MFU and shares are fractions here, percent in report.json) ...
    assert doc["units"]["mfu"] == "fraction" and doc["units"]["itl_p50_s"] == "s" and 0 < doc["points"][0]["mfu"] < 1
    # ... and the text says what came from the cache (it said nothing)
    assert main(argv) == 0
    assert f"cache: 4 projection(s) read from {tmp_path / 'c' / 'whatif'}; any others" in capsys.readouterr().out
    for f in (tmp_path / "c" / "whatif").rglob("*.json"):  # rows of another shape (a breaker's {}, [], null)
        f.write_text(json.dumps({}))
    assert main([*argv, "--json"]) == 0  # projected again, not an internal error
    assert json.loads(capsys.readouterr().out)["cache"]["hits"] == 0
    (tmp_path / "ro").write_text("a file where the cache folder should be")
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "ro"))
    assert main(argv) == 0
    assert "cannot be written (read-only, or not a folder): nothing was kept" in capsys.readouterr().out
    # a table under a file: the option and the path named (it said only "/…/ro: File exists")
    assert main([*argv, "--out", str(tmp_path / "ro" / "t.csv")]) == 1
    assert f"--out {tmp_path / 'ro' / 't.csv'}: cannot be written" in " ".join(capsys.readouterr().err.split())
    assert main([*argv, "--no-cache"]) == 0
    assert "cache: off" in capsys.readouterr().out


def test_cache_key_changes_with_the_generation_and_the_point():
    from perfonto.whatif.points import point_key

    a = point_key(Target(), _base(isl=128))
    assert a == point_key(Target(), _base(isl=128))
    assert a != point_key(Target(), _base(isl=256))
    assert a != point_key(Target(), _base(isl=128).with_values(**{"spec.hbm.peak_bandwidth": 8.0}))
    assert a != point_key(Target("caelius"), _base(isl=128))


@pytest.mark.parametrize(
    "vary, message",
    [
        ("spec.hbm.peak_bandwith=4..16TB/s:7", "did you mean `spec.hbm.peak_bandwidth`"),
        ("spec.hbm.peak_bandwidth=16..4TB/s:3", "from low to high"),
        ("spec.hbm.peak_bandwidth=4..16TB/s:1", "at least 2 points"),
        ("spec.hbm.peak_bandwidth=4..16TB/s", "A..B:N"),
        ("spec.hbm.peak_bandwidth=4..16 GFLOP/s:3", "does not convert"),
        ("isl=128,abc", "not an integer"),
        ("islx=128", "did you mean `isl`"),
        ("mapping=tp4-xx2", "not tp<N>"),
        ("dtype=fp16", "not one of"),
        ("isl", "NAME=VALUES"),
    ],
)
def test_bad_vary_is_a_usage_error_with_a_hint(vary, message, capsys):
    assert main(["sweep", "--vary", vary, "--no-cache", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and message in doc["error"]


def test_empty_sweep_and_a_constant_the_preset_sets(capsys):
    assert main(["sweep", "--no-cache", "--json"]) == 2
    assert "nothing to sweep" in json.loads(capsys.readouterr().out)["error"]
    assert (
        main(["sweep", "--preset", "claim", "--vary", "spec.mxu.peak_flops_fp8=8,9PFLOP/s", "--no-cache", "--json"])
        == 2
    )
    assert "preset `claim` sets peak_fp8 itself" in json.loads(capsys.readouterr().out)["error"]


@pytest.mark.parametrize(
    "text, values",
    [
        ("spec.hbm.peak_bandwidth=4,8TB/s", (4.0, 8.0)),
        ("spec.hbm.peak_bandwidth=4000GB/s,8TB/s", (4.0, 8.0)),
        ("spec.hbm.peak_bandwidth=x0.5,x2", (3.6, 14.4)),
        ("spec.hbm.capacity=96..192GB:3", (96.0, 144.0, 192.0)),
        ("spec.clock.core=1..2GHz:2", (1e9, 2e9)),
        ("concurrency=1..256:9:log", (1, 2, 4, 8, 16, 32, 64, 128, 256)),
        ("isl=128,2048", (128, 2048)),
        ("model=llama-3.1-8b,llama3-70b", ("llama-3.1-8b", "llama3-70b")),
    ],
)
def test_vary_syntax(text, values):
    assert parse_vary(text, base_generation(Target())).values == pytest.approx(values)


def test_the_old_cache_option_says_what_replaced_it(tmp_path, capsys, monkeypatch):
    """``--cache DIR`` was the what-if commands' own cache folder; perfonto has one cache folder now
    (``PERFONTO_CACHE_DIR``): the old option is a usage error that names it, and the old variable a note."""
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "c"))
    argv = ["sweep", "--vary", "isl=64,128", "--requests", "8", "--jobs", "1", "--json"]
    assert main([*argv, "--cache", str(tmp_path / "old")]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert "--cache is gone" in doc["error"] and "PERFONTO_CACHE_DIR=" in doc["error"]
    assert not (tmp_path / "old").exists()
    monkeypatch.setenv("PERFONTO_CACHE", str(tmp_path / "old"))
    monkeypatch.delenv("PERFONTO_CACHE_DIR")  # the old variable alone: a note (--no-cache: nothing written)
    assert main([*argv, "--no-cache"]) == 0
    assert "PERFONTO_CACHE is no longer read" in capsys.readouterr().err and not (tmp_path / "old").exists()


def test_a_sweep_over_lengths_says_when_the_request_count_changes(capsys, monkeypatch, tmp_path):
    """Without --requests each point takes TensorRT-LLM's count for its lengths (30,000 up to 256 tokens,
    3,000 up to 2,500), so isl 128 → 256 at osl 128 goes from 30,000 requests to 3,000 and the offline
    TTFT p50 (mostly the queue) falls ~9× (a breaker read it as a bug): each row gives its count, and the
    text says so."""
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "c"))
    argv = ["sweep", "--vary", "isl=128,256", "--jobs", "1", "--no-cache"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["points"]
    assert [r["requests"] for r in rows] == [30000, 3000]
    assert main(argv) == 0
    assert "served different numbers of requests" in " ".join(capsys.readouterr().out.split())
    assert main([*argv, "--requests", "500", "--json"]) == 0
    assert {r["requests"] for r in json.loads(capsys.readouterr().out)["points"]} == {500}
    # closed loop: the count follows the concurrency (10 × it) and the queue is the concurrency: no such note
    assert main(["sweep", "--vary", "concurrency=4,8", "--jobs", "1", "--no-cache"]) == 0
    assert "served different numbers" not in capsys.readouterr().out
