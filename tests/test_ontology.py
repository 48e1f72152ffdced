"""The ontology loader: the shipped Sohu catalog, and bad input reported with file:line:col."""

from pathlib import Path

import pytest

from perfonto.ontology import load_generation
from perfonto.ontology.model import Provenance


def test_sohu_catalog(sohu):
    assert len(sohu.signals) >= 40
    assert {s.block for s in sohu.signals.values()} >= {
        "mxu",
        "vpu",
        "sram",
        "hbm",
        "dma",
        "c2c",
        "pcie",
        "seq",
        "power",
    }
    assert dict(sohu.blocks["hbm"]["axes"]) == {"stack": 6}
    assert dict(sohu.blocks["c2c"]["axes"]) == {"link": 12}
    assert any(s.kind == "counter" and s.width == 32 for s in sohu.signals.values())
    # 144 GB HBM3E per chip is public (claimed); the rest is assumed and says so
    cap = sohu.spec["spec.hbm.capacity"]
    assert (cap.value, cap.unit_text, cap.provenance) == (144, "GB", Provenance.claimed.value)
    for name in (
        "spec.mxu.peak_flops_fp8",
        "spec.hbm.peak_bandwidth",
        "spec.sram.capacity",
        "spec.c2c.peak_bandwidth",
        "spec.pcie.peak_bandwidth",
    ):
        assert sohu.spec[name].provenance == "assumed" and sohu.spec[name].source
    # clock domains become spec.clock.<domain> in <domain>_cycle/s
    core = sohu.spec["spec.clock.core"]
    assert core.value == pytest.approx(1.5e9) and str(core.unit) == "core_cycle / second"


def write(tmp_path: Path, text: str, name: str = "gen.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """\
generation: tiny
description: A tiny generation.
clock_domains:
  core: {frequency: {value: 1, unit: GHz, provenance: assumed}}
blocks:
  mxu:
    description: matrix
    clock: core
    instances: {core: 2}
    signals:
      busy_cycles: {kind: counter, unit: core_cycle, width: 32, description: busy}
"""


def load_text(tmp_path, text):
    return load_generation(write(tmp_path, text))


def test_good_fixture_loads(tmp_path):
    gen, diags = load_text(tmp_path, GOOD)
    assert not diags and gen.signals["mxu.busy_cycles"].instances == 2


@pytest.mark.parametrize(
    "text, code, line, col, words",
    [
        (GOOD.replace("width: 32", "widht: 32"), "unknown-field", 11, 54, "did you mean `width`"),
        (
            GOOD.replace("description: busy}", "description: busy, description: again}"),
            "yaml-duplicate-key",
            11,
            84,
            "duplicate key `description`",
        ),
        (GOOD.replace("width: 32", "width: many"), "schema", 11, 61, "valid integer"),
        (GOOD.replace("clock: core", "clock: cor"), "unknown-clock", 8, 12, "did you mean `core`"),
        (GOOD.replace("unit: core_cycle", "unit: furlongs"), "unknown-unit", 11, 42, "furlongs"),
        (GOOD.replace(", width: 32", ""), "counter-width", 11, 20, "needs a `width`"),
        (GOOD.replace("instances: {core: 2}", "instances: {core: 2"), "yaml-syntax", 10, 12, "flow mapping at 9:16)"),
        (GOOD.replace("generation: tiny\n", ""), "missing-field", 1, 1, "missing field `generation`"),
    ],
)
def test_bad_input_is_located(tmp_path, text, code, line, col, words):
    gen, diags = load_text(tmp_path, text)
    assert gen is None
    hit = [d for d in diags if d.code == code]
    assert hit, [d.render() for d in diags]
    d = hit[0]
    assert (d.span.line, d.span.col) == (line, col), d.render()
    assert words in d.render()
    assert d.render().startswith(f"{tmp_path / 'gen.yaml'}:{line}:{col}:")


def test_not_utf8(tmp_path):
    p = tmp_path / "gen.yaml"
    p.write_bytes(GOOD.encode().replace(b"matrix", b"matr\xffx"))
    gen, diags = load_generation(p)
    assert gen is None and diags[0].code == "not-utf8" and (diags[0].span.line, diags[0].span.col) == (7, 22)


def test_alias_bomb_is_refused(tmp_path):
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    gen, diags = load_text(tmp_path, "\n".join(lines) + "\n")
    assert gen is None and diags[0].code == "yaml-too-large"
    assert "could write out: alias/anchor expansion" in diags[0].message


def test_a_large_plain_document_is_not_a_bomb(tmp_path):
    """A migrator's 20,000-event perf file imported into a YAML of more than 200,000 values, which the
    loader then refused as an alias bomb ("alias/anchor expansion?"): the importer wrote a file its own
    loader would not read. The limit grows with the text; a bomb expands far past its text."""
    from perfonto.ontology.yaml_source import MAX_NODES, read_yaml

    text = "signals:\n" + "".join(f"  s{i}: {{kind: counter, unit: event, width: 64}}\n" for i in range(MAX_NODES // 6))
    src = read_yaml(tmp_path / "big.yaml", text)
    assert not src.diagnostics and len(src.data["signals"]) == MAX_NODES // 6  # > MAX_NODES values


def test_all_errors_reported_together(tmp_path):
    text = GOOD.replace("width: 32", "widht: 32").replace("clock: core", "clock: cor")
    gen, diags = load_text(tmp_path, text)
    assert gen is None
    # schema errors stop before resolution, so the unknown field is reported; fix it and the clock shows
    assert [d.code for d in diags] == ["unknown-field"]
    gen, diags = load_text(
        tmp_path, GOOD.replace("width: 32", "width: 0").replace("unit: core_cycle", "unit: B, width2: 1")
    )
    assert sorted(d.code for d in diags) == ["schema", "unknown-field"]


def test_cycle_unit_must_match_block_clock(tmp_path):
    text = GOOD.replace(
        "clock_domains:\n", "clock_domains:\n  hbm: {frequency: {value: 2, unit: GHz, provenance: assumed}}\n"
    )
    text = text.replace("unit: core_cycle", "unit: hbm_cycle")
    gen, diags = load_text(tmp_path, text)
    assert gen is None and [d.code for d in diags] == ["clock-domain-mismatch"]


def test_unknown_generation_has_hint():
    gen, diags = load_generation("sohuu")
    assert gen is None and "`sohu`" in diags[0].hint


@pytest.mark.parametrize(
    "change, code",
    [
        (("value: 1, unit: GHz", "value: 0, unit: GHz"), "spec-value"),
        (("width: 32", "width: true"), "schema"),
        (("mxu:\n", "spec:\n"), "reserved-name"),
    ],
)
def test_impossible_values_and_coercions_are_refused(tmp_path, change, code):
    gen, diags = load_text(tmp_path, GOOD.replace(*change))
    assert gen is None and code in [d.code for d in diags], [d.render() for d in diags]


def test_spec_values_must_be_finite_and_positive(tmp_path):
    text = GOOD.replace(
        "blocks:", "spec:\n  mxu.peak: {value: -9000, unit: TFLOP/s, provenance: assumed, source: x}\nblocks:"
    )
    gen, diags = load_text(tmp_path, text)
    assert gen is None and [d.code for d in diags] == ["spec-value"] and diags[0].span.line == 6
    gen, diags = load_text(tmp_path, text.replace("-9000", ".inf"))
    assert gen is None and diags[0].code == "schema" and "finite" in diags[0].message


def test_unit_expression_bombs_are_refused_fast(tmp_path):
    import time

    t0 = time.perf_counter()
    gen, diags = load_text(tmp_path, GOOD.replace("width: 32,", 'width: 32, max_rate: "9 ** 9 ** 9 core_cycle/s",'))
    assert gen is None and diags[0].code == "unit-mismatch"
    gen, diags = load_text(tmp_path, GOOD.replace("unit: core_cycle", "unit: B ** (9 ** 9 ** 9)"))
    assert gen is None and diags[0].code == "unknown-unit"
    assert time.perf_counter() - t0 < 5


def test_recursive_alias_and_deep_nesting(tmp_path):
    gen, diags = load_text(tmp_path, "generation: x\ndescription: &a [x, *a]\n")
    assert gen is None and diags[0].code in ("yaml-unsupported", "yaml-too-deep", "yaml-too-large")
    gen, diags = load_text(tmp_path, "generation: x\ndescription: " + "[" * 800 + "]" * 800 + "\n")
    assert gen is None and diags[0].code in ("yaml-unsupported", "yaml-too-deep")


@pytest.mark.parametrize(
    "extra",
    [
        "removed: 5",
        "renamed: [a, b]",
        "blocks: 5",
        "blocks: {hbm: 5}",
        "renamed: {mxu.busy_cycles: mxu.b2, mxu.b2: mxu.busy_cycles}",
    ],
)
def test_bad_extends_data_is_a_diagnostic(tmp_path, extra):
    gen, diags = load_text(tmp_path, f"generation: g\nextends: sohu\ndescription: d\n{extra}\n")
    assert gen is None and diags and all(d.span.line >= 1 for d in diags), [d.render() for d in diags]


def test_nul_byte_is_located(tmp_path):
    gen, diags = load_text(tmp_path, GOOD.replace("matrix", "mat\x00rix"))
    assert gen is None and (diags[0].span.line, diags[0].span.col) == (7, 21)


def test_offset_unit_conversion_is_refused(sohu):
    from helpers import compile_src

    g = compile_src(sohu, "metric t [K] = power.temperature")
    assert [d.code for d in g.errors] == ["unit-mismatch"] and "offset unit" in g.errors[0].message
