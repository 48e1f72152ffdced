"""`perfonto project --catalog DIR` projects the generation a catalog folder declares — future silicon
extending a shipped one — as `sweep` and `run` already did (a breaker found `project --generation
sohu_next` said only "no generation named sohu_next", with no way to point it at the folder)."""

from __future__ import annotations

import json

from perfonto.cli import main

NEXT = """generation: sohu_next
extends: sohu
description: Sohu with twice the HBM bandwidth (a what-if)
spec:
  hbm.peak_bandwidth: {value: 14.4, unit: TB/s, provenance: assumed, source: what-if, description: HBM bandwidth.}
"""


def _steady(capsys, *argv) -> dict:
    assert main(["project", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_project_reads_a_catalog_folders_generation(tmp_path, capsys):
    (tmp_path / "next.yaml").write_text(NEXT)
    base = _steady(capsys)
    doc = _steady(capsys, "--catalog", str(tmp_path))
    assert doc["generation"] == "sohu_next" and base["generation"] == "sohu"
    # twice the HBM bandwidth: faster, and less than twice (the matrix work and the collectives stay)
    ratio = doc["steady_tokens_per_second"] / base["steady_tokens_per_second"]
    assert 1.02 < ratio < 2.0


def test_a_misspelt_spec_override_is_caught(tmp_path, capsys):
    """`hbm.peak_bandwith` in a generation extending sohu left sohu's 7.2 TB/s in force: project printed
    sohu's own figure, rc 0 (a new user's what-if). check warns; the emulator refuses it."""
    (tmp_path / "g.yaml").write_text(NEXT.replace("hbm.peak_bandwidth", "hbm.peak_bandwith"))
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "warning[lint-spec-near-miss]: spec constant `spec.hbm.peak_bandwith`" in out.out + out.err
    assert main(["project", "--catalog", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "g.yaml:5: spec constant `spec.hbm.peak_bandwith` is new in `sohu_next`" in err
    assert "did you mean `hbm.peak_bandwidth`?" in err


def test_project_names_the_file_line_of_a_bad_generation_and_refuses_an_unknown_name(tmp_path, capsys):
    (tmp_path / "g.yaml").write_text(NEXT.replace("provenance", "provenence"))
    assert main(["project", "--catalog", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "generation `sohu_next` does not load:" in err and "g.yaml:5:" in err and "provenence" in err  # was `None`
    assert main(["project", "--generation", "sohuu"]) == 2  # a usage error, as for run
    assert "did you mean `sohu`?" in capsys.readouterr().err


def test_a_correct_override_and_new_constants_are_not_called_misspelt(tmp_path, capsys):
    """An architect's Caelius trial: the README's own `hbm.peak_bandwidth` override was warned about as a
    misspelling of `sram.peak_bandwidth` (every key of the child's file counted as new), and a new block's
    `uec.peak_bandwidth` or an FP4 peak beside the inherited BF16 one blocked the emulator. A typo of an
    inherited key is still caught."""
    extra = (
        "  mxu.peak_flops_fp4: {value: 36000, unit: TFLOP/s, provenance: assumed, source: x, description: FP4.}\n"
        "  uec.peak_bandwidth: {value: 1.8, unit: TB/s, provenance: assumed, source: x, description: UEC links.}\n"
        "  vpu.peak_flops_bf16: {value: 90, unit: TFLOP/s, provenance: assumed, source: x, description: VPU peak.}\n"
        "blocks:\n"
        "  uec:\n"
        "    clock: core\n"
        "    description: Ultra Ethernet links.\n"
        "    instances: {link: 4}\n"
        "    signals:\n"
        "      tx_bytes: {kind: counter, unit: B, width: 64, description: Bytes sent on the link.}\n"
    )
    (tmp_path / "g.yaml").write_text(NEXT + extra)
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "lint-spec-near-miss" not in out.out + out.err
    assert main(["project", "--catalog", str(tmp_path)]) == 0
    capsys.readouterr()
    (tmp_path / "g.yaml").write_text(NEXT + extra.replace("mxu.peak_flops_fp4", "mxu.peak_flosp_bf16"))
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "spec constant `spec.mxu.peak_flosp_bf16` is new in `sohu_next` and close to `spec.mxu.peak_flops_bf16`" in (
        out.out + out.err
    )


def test_an_override_in_another_dimension_is_an_error_at_the_override(tmp_path, capsys):
    """`hbm.peak_bandwidth: {unit: TFLOP/s}` gave 8 errors in the shipped library's metric files and
    none at the override."""
    (tmp_path / "g.yaml").write_text(NEXT.replace("unit: TB/s", "unit: TFLOP/s"))
    assert main(["check", "--catalog", str(tmp_path)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "g.yaml:5:" in text and "error[unit-mismatch]: spec constant `spec.hbm.peak_bandwidth` overrides" in text
    assert "which is in TB/s, with TFLOP/s" in text
    assert "memory.metrics" not in text


def test_a_counter_too_narrow_for_its_max_rate_is_flagged_with_the_width_it_needs(tmp_path, capsys):
    """A 16-bit byte counter at 100 GB/s wraps every 0.66 µs: check passed it and every window of the
    run came back null. A 1 ms window at 1e11 B/s adds 1e8 raw counts: rule 4b nulls it unless 1e8 + 1 <
    2^bits → 27 bits (2^27 = 1.34e8); a 27-bit counter reads 1 ms windows (a review: not 28), and a 16-bit
    cycle counter at the 1.5 GHz core clock (no max_rate: the clock + 1 %) wraps in 44 µs and is flagged."""
    gen = NEXT + (
        "blocks:\n  uec:\n    clock: core\n    description: Ultra Ethernet links.\n    instances: {link: 4}\n"
        "    signals:\n"
        "      tx_bytes: {kind: counter, unit: B, width: 16, max_rate: 100 GB/s, description: Bytes sent on it.}\n"
        "      rx_bytes: {kind: counter, unit: B, width: 27, max_rate: 100 GB/s, description: Bytes received.}\n"
        "      busy: {kind: counter, unit: core_cycle, width: 16, description: Cycles the link was busy.}\n"
    )
    (tmp_path / "g.yaml").write_text(gen)
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "g.yaml:12:" in text and "warning[lint-wrap-period]: counter `uec.tx_bytes` can rise by 1e+08 raw" in text
    assert "(it wraps every 655 ns)" in text and "give it at least 27 bits" in text
    assert "`uec.rx_bytes`" not in text
    assert "warning[lint-wrap-period]: counter `uec.busy` can rise by 1.515e+06 raw counts" in text


def test_a_counter_without_max_rate_is_checked_at_its_blocks_peak(tmp_path, capsys):
    """An architect's 24-bit byte counter on a link of 512 GB/s (a per-instance peak), with no max_rate,
    passed check and read 0.84 % for links 48.8 % busy (windows of several wraps read small). At the
    block's lowest peak per instance: a 1 ms window adds 5.12e11 × 1e-3 = 5.12e8 raw counts, past 2^24 =
    16,777,216 (it wraps every 16,777,215 / 5.12e11 s = 32.8 µs): 29 bits needed (2^29 = 5.37e8). A
    chip-scope peak is a total over the instances: 400 GB/s over 4 links is 100 GB/s each → 1e8 counts a
    window, 27 bits; a 32-bit counter of that block is not flagged, nor one of a block
    without a peak (dbg)."""
    gen = NEXT + (
        "  noc.link_peak: {value: 512, unit: GB/s, provenance: assumed, source: a what-if, scope: instance,\n"
        "                  description: One link's peak.}\n"
        "  noc.link_floor: {value: 1024, unit: GB/s, provenance: assumed, source: a what-if, scope: instance,\n"
        "                   description: A higher peak.}\n"
        "  uec.peak: {value: 400, unit: GB/s, provenance: assumed, source: a what-if, description: All links.}\n"
        "  dbg.refclk: {value: 100, unit: MHz, provenance: assumed, source: a what-if, description: Ref clock.}\n"
        "blocks:\n  noc:\n    clock: core\n    description: NoC links.\n    instances: {link: 16}\n"
        "    signals:\n"
        "      tx_bytes: {kind: counter, unit: B, width: 24, description: Bytes sent on it.}\n"
        "  uec:\n    clock: core\n    description: Ultra Ethernet links.\n    instances: {link: 4}\n"
        "    signals:\n"
        "      tx_bytes: {kind: counter, unit: B, width: 16, description: Bytes sent on it.}\n"
        "      rx_bytes: {kind: counter, unit: B, width: 32, description: Bytes received.}\n"
        "  dbg:\n    clock: core\n    description: No peak declared.\n"
        "    signals:\n"
        "      tx_bytes: {kind: counter, unit: B, width: 16, description: Bytes sent.}\n"
        '      errs: {kind: counter, unit: "1", width: 16, description: A count of errors.}\n'
    )
    (tmp_path / "g.yaml").write_text(gen)
    assert main(["check", "--catalog", str(tmp_path)]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "counter `noc.tx_bytes` can rise by 5.12e+08 raw counts in a 1 ms window at its block's peak " in text
    assert "`spec.noc.link_peak` (5.12e+11 B/s)" in text and "(it wraps every 32.8 µs)" in text, text
    assert "give it at least 29 bits" in text and "declare its `max_rate`" in text
    assert "counter `uec.tx_bytes` can rise by 1e+08 raw counts" in text and "give it at least 27 bits" in text
    assert "`uec.rx_bytes`" not in text and "`dbg.tx_bytes`" not in text
    assert "`dbg.errs`" not in text  # a dimensionless count is not checked at a frequency (a review: a refclk)


def test_the_assumptions_name_the_peak_a_dtype_runs_at(capsys):
    """`project --generation caelius --dtype fp4` listed only "peak FP8 18 PFLOP/s" among its assumptions
    while its GEMMs ran at caelius's FP4 peak, 36 PFLOP/s (an architect's trial)."""
    doc = _steady(capsys, "--generation", "caelius", "--dtype", "fp4")
    assert any("peak FP4 36 PFLOP/s (spec.mxu.peak_flops_fp4)" in s for s in doc["assumptions"]), doc["assumptions"]
    fp8 = _steady(capsys, "--generation", "caelius")
    assert not any("matrix math" in s for s in fp8["assumptions"])


def test_a_packed_registers_fields_are_in_explain_and_the_docs(tmp_path, capsys):
    """An architect's packed `uec.link_status`: explain said "read through its fields" without naming them
    and "wraps at 32 bits" for a status word; the docs listed no field and "used by: —" while a metric read
    its `lanes` field."""
    gen = NEXT + (
        "blocks:\n  uec:\n    clock: core\n    description: Ultra Ethernet links.\n    instances: {link: 4}\n"
        "    signals:\n      link_status:\n        kind: packed\n        width: 32\n"
        "        description: Link status register.\n        fields:\n"
        "          up: {bits: [0, 0], description: 1 while the link is up.}\n"
        "          lanes: {bits: [1, 4], description: Active lanes.}\n"
    )
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "g.yaml").write_text(gen)
    (cat / "m.metrics").write_text('metric uec.lanes_min [1] = min(uec.link_status.lanes)\n  "Fewest lanes."\n')
    assert main(["explain", "uec.link_status", "--catalog", str(cat)]) == 0
    out = capsys.readouterr().out
    assert "read as it is, no wrap (a packed register)" in out and "wraps at" not in out
    assert "uec.link_status.lanes: bits 1..4 [1] — Active lanes." in out
    assert main(["codegen", "--target", "docs", "--catalog", str(cat), "--out", str(tmp_path / "d")]) == 0
    doc = (tmp_path / "d" / "sohu_next.md").read_text()
    assert "| `uec.link_status` | packed |  | 32 | 1 | Link status register. | [`uec.lanes_min`]" in doc
    assert "| `uec.link_status.lanes` | field, bits 1..4 | 1 | 4 | 1 | Active lanes. | [`uec.lanes_min`]" in doc
