"""JSON Schemas are current and the shipped catalogs validate against them; the C header compiles."""

import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from perfonto.codegen.c_header import generate_header
from perfonto.codegen.schemas import schemas
from perfonto.ontology import load_generation
from perfonto.ontology.loader import catalog_dir

ROOT = Path(__file__).resolve().parents[1]


def test_schemas_are_current():
    for name, text in schemas().items():
        path = ROOT / "schemas" / name
        assert path.exists(), f"{path} missing: run `perfonto codegen --target schemas --out schemas --force`"
        refresh = "perfonto codegen --target schemas --out schemas --force"
        assert path.read_text() == text, f"{path} is stale: run `{refresh}`"


@pytest.mark.parametrize("name", sorted(p.stem for p in catalog_dir().glob("*.yaml")))
def test_shipped_catalogs_carry_a_modeline_and_validate(name):
    path = catalog_dir() / f"{name}.yaml"
    first = path.read_text().splitlines()[0]
    m = re.match(r"# yaml-language-server: \$schema=(\S+)$", first)
    assert m, f"{path} lacks the yaml-language-server modeline"
    schema_path = (path.parent / m.group(1)).resolve()
    schema = yaml.safe_load(schema_path.read_text())
    jsonschema.validate(yaml.safe_load(path.read_text()), schema)


def test_schema_rejects_unknown_field():
    import json

    schema = json.loads(schemas()["generation.schema.json"])
    doc = yaml.safe_load((catalog_dir() / "sohu.yaml").read_text())
    doc["blocks"]["hbm"]["signals"]["read_bytes"]["widht"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


@pytest.mark.parametrize("gen_name", ["sohu", "caelius", "b200"])
def test_c_header_compiles(tmp_path, gen_name):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on this machine: the generated header is not compiled")
    gen, _ = load_generation(gen_name)
    h = tmp_path / f"{gen_name}.h"
    h.write_text(generate_header(gen))
    main = tmp_path / "main.c"
    main.write_text(
        f'#include "{gen_name}.h"\nint main(void) {{ return (int)perfonto_{gen_name}_signals[0].width - '
        f"(int)perfonto_{gen_name}_signals[0].width + PERFONTO_{gen_name.upper()}_SIGNAL_COUNT * 0; }}\n"
    )
    proc = subprocess.run(
        [cc, "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", str(main)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    text = h.read_text()
    assert f"PERFONTO_{gen_name.upper()}_BLOCK_HBM_AXIS_STACK {dict(gen.blocks['hbm']['axes'])['stack']}u" in text
    assert f"PERFONTO_{gen_name.upper()}_SIG_HBM__READ_BYTES = " in text
    assert '"hbm.read_bytes", "B", 0u, ' in text


def test_c_identifier_collisions_are_refused(tmp_path):
    from perfonto.ontology import load_generation

    p = tmp_path / "c.yaml"
    p.write_text(
        "generation: c\nextends: sohu\ndescription: d\nblocks:\n  mxu:\n    signals:\n"
        "      instances: {kind: counter, unit: event, width: 32, description: a signal named like a macro}\n"
    )
    gen, _ = load_generation(p)
    text = generate_header(gen)  # macros and enumerators live in different prefixes: no clash
    assert "PERFONTO_C_SIG_MXU__INSTANCES" in text and "PERFONTO_C_BLOCK_MXU_INSTANCES" in text


def test_c_strings_are_escaped():
    from perfonto.codegen.c_header import _c_string

    assert _c_string('a"b\\c\n*/??=') == '"a\\"b\\\\c\\012*/\\077\\077="'


def test_codegen_cli_writes_header(tmp_path, capsys):
    from perfonto.cli import main

    assert main(["codegen", "--target", "c-header", "--generation", "caelius", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "caelius.h").exists()
