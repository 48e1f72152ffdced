"""C header ABI (issue 15, point 13): signal ids stay stable when signals are added — append-only
along ``extends`` (renamed signals keep their id, a removed one's id is never reused) or given with
``id:`` — and ``perfonto diff`` reports an id change as incompatible."""

import json

from perfonto.cli import main
from perfonto.codegen.c_header import generate_header
from perfonto.ontology.loader import load_generation

from helpers import one_block_yaml

SIG = '      {name}: {{kind: counter, unit: event, width: 32, description: "counter {name}"{extra}}}\n'


def _gen(tmp_path, name, sigs, extends=None):
    text = one_block_yaml(name, "".join(SIG.format(name=s, extra=e) for s, e in sigs), extends=extends or "")
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


def test_sohu_ids_survive_in_caelius():
    sohu, _ = load_generation("sohu")
    cae, _ = load_generation("caelius")
    assert all(cae.signals[n].id == s.id for n, s in sohu.signals.items() if n in cae.signals)
    assert cae.signals["c2c.replays"].id == sohu.signals["c2c.retries"].id  # renamed: same register
    assert cae.signals["mxu.flops_fp4"].id == max(s.id for s in sohu.signals.values()) + 1  # appended
    assert sohu.signals["hbm.refresh_cycles"].id not in {s.id for s in cae.signals.values()}  # removed: never reused
    text = generate_header(cae)
    assert f"PERFONTO_CAELIUS_SIG_MXU__FLOPS_FP4 = {cae.signals['mxu.flops_fp4'].id}," in text
    assert f'[{cae.signals["c2c.replays"].id}] = {{"c2c.replays"' in text


def test_inserting_a_signal_renumbers_and_diff_says_incompatible(tmp_path, capsys):
    old = _gen(tmp_path, "v1", [("a", ""), ("c", "")])
    new = _gen(tmp_path, "v2", [("a", ""), ("b", ""), ("c", "")])
    g1, _ = load_generation(old)
    g2, _ = load_generation(new)
    assert (g1.signals["b.c"].id, g2.signals["b.c"].id) == (1, 2)
    assert main(["diff", str(old), str(new), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["compatible"] and any("b.c" in e and "C header id from 1 to 2" in e for e in doc["errors"])
    pinned = _gen(tmp_path, "v3", [("a", ""), ("b", ", id: 7"), ("c", "")])
    assert main(["diff", str(old), str(pinned), "--json"]) == 0  # a new signal with its own id moves nothing
    g3, _ = load_generation(pinned)
    assert (g3.signals["b.a"].id, g3.signals["b.b"].id, g3.signals["b.c"].id) == (0, 7, 1)
    assert "[7] = {" in generate_header(g3) and "PERFONTO_V3_SIGNAL_COUNT = 8" in generate_header(g3)


def test_a_child_adds_signals_after_its_parent(tmp_path):
    _gen(tmp_path, "base", [("a", ""), ("c", "")])
    child = tmp_path / "kid.yaml"
    child.write_text(
        "generation: kid\nextends: base\ndescription: child\nclock_domains: {}\nblocks:\n  b:\n    signals:\n"
        + SIG.format(name="b", extra="")
    )
    g, diags = load_generation(child)
    assert g is not None, [d.render() for d in diags]
    assert {n: s.id for n, s in g.signals.items()} == {"b.a": 0, "b.c": 1, "b.b": 2}


def test_an_id_given_twice_is_an_error(tmp_path):
    p = _gen(tmp_path, "dup", [("a", ", id: 3"), ("b", ", id: 3")])
    g, diags = load_generation(p)
    assert g is None and [d.code for d in diags] == ["signal-id"] and diags[0].span.line == 11


def test_packed_fields_decode_in_c_as_the_catalog_reads_them(tmp_path):
    """The header gave no bit positions for packed fields (firmware decoded `power.status` by hand). Sohu's
    `power.status`: pstate bits [0, 3], thermal_throttle bit 4. The word 0x1B = 0b1_1011 holds pstate 0xB
    = 11 and thermal_throttle 1; 0x0F holds pstate 15, thermal_throttle 0. Compiled and run where a C
    compiler is."""
    import shutil
    import subprocess

    import pytest

    gen, _ = load_generation("sohu")
    text = generate_header(gen)
    f = "PERFONTO_SOHU_FIELD_POWER__STATUS__"
    assert f"#define {f}PSTATE_SHIFT 0u" in text and f"#define {f}PSTATE_MASK UINT64_C(0xf)" in text
    assert f"#define {f}THERMAL_THROTTLE_SHIFT 4u" in text and f"#define {f}THERMAL_THROTTLE_WIDTH 1u" in text
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on this machine: the field macros are checked as text only")
    (tmp_path / "sohu.h").write_text(text)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "sohu.h"\nint main(void) {\n'
        f'  printf("%u %u %u %u\\n", (unsigned){f}PSTATE_GET(0x1B), (unsigned){f}THERMAL_THROTTLE_GET(0x1B),\n'
        f"         (unsigned){f}PSTATE_GET(0x0F), (unsigned){f}THERMAL_THROTTLE_GET(0x0F));\n"
        "  return 0;\n}\n"
    )
    exe = tmp_path / "decode"
    build = subprocess.run(
        [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "main.c", "-o", str(exe)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout.split() == ["11", "1", "15", "0"]
