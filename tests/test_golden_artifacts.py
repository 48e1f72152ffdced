"""Golden files for every generated artifact (issue 15, point 17): the Python evaluator, the SQL of
DuckDB and of Spark, the C header, perf JSON, the single-page docs (the docs site has its own golden
pages: tests/test_codegen_docs.py), each importer's output (generation YAML and metric file) and
`perfonto check`'s rendered diagnostics — all from small fixture inputs, so that a change to any
generator shows up as a reviewed diff.

Each golden file is the artifact's name plus ``.golden`` (tests/golden/artifacts/alpha.sql.golden): expected
output, read as text only.
Refresh only on purpose:  PERFONTO_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_artifacts.py
(an absent or different golden file fails the test otherwise; nothing is rewritten silently).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from perfonto.ontology import load_generation

HERE = Path(__file__).parent
FIXTURE = HERE / "fixtures" / "docs_catalog"
GOLDEN = HERE / "golden" / "artifacts"


def _graph():
    from perfonto.metrics.compiler import compile_files

    gen, diags = load_generation(FIXTURE / "alpha.yaml")
    assert gen is not None, [d.render() for d in diags]
    g = compile_files(gen, [FIXTURE / "lib.metrics"])
    assert not g.errors, [d.render() for d in g.errors]
    return g


def _python(g):
    from perfonto.codegen.python_evaluator import generate

    return generate(g)


def _sql(dialect):
    def make(g):
        from perfonto.codegen.sql import generate_sql, parquet_source

        source = parquet_source("counters.parquet") if dialect == "duckdb" else "counters"
        return generate_sql(g, source, sample_period_ns=1_000_000, dialect=dialect)

    return make


def _header(g):
    from perfonto.codegen.c_header import generate_header

    return generate_header(g.generation)


def _perf_json(g):
    from perfonto.interop.perf_export import export

    return export(g).to_json()


def _docs(g):
    from perfonto.codegen.docs import generate_markdown

    return generate_markdown(g)


ARTIFACTS = {
    "alpha_evaluator.py": _python,
    "alpha.sql": _sql("duckdb"),
    "alpha.spark.sql": _sql("spark"),
    "alpha.h": _header,
    "alpha.perf.json": _perf_json,
    "alpha.md": _docs,
}
IMPORTS = {
    "perf": "perf_small.json",
    "intel": "intel_small.json",
    "arm": "arm_small.json",
    "rocprof": "rocprof_small.yaml",
}


def golden_path(name: str) -> Path:
    """The golden file of artifact ``name``: stored as ``<name>.golden``, expected output kept as text, so that
    the linters, the formatter and the duplicate finder do not read generated code as the project's source."""
    return GOLDEN / f"{name}.golden"


def _compare(name: str, text: str) -> None:
    path = golden_path(name)
    if os.environ.get("PERFONTO_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: write it with PERFONTO_UPDATE_GOLDEN=1 and review it"
    assert path.read_text(encoding="utf-8") == text, (
        f"{name} differs from its golden file: refresh with PERFONTO_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("name", sorted(ARTIFACTS))
def test_generated_artifact(name):
    _compare(name, ARTIFACTS[name](_graph()))


@pytest.mark.parametrize("fmt", sorted(IMPORTS))
def test_importer_output(fmt, tmp_path):
    from perfonto.interop import import_file

    src = tmp_path / IMPORTS[fmt]
    shutil.copy(HERE / "fixtures" / "import" / IMPORTS[fmt], src)  # the YAML header names the file only
    report = import_file(fmt, src, tmp_path / "out", f"{fmt}_small")
    assert report.ok, report.error or report.rejected()
    for built in report.generations:  # rocprofiler names a generation after its architectures
        for path in (built.yaml_path, built.metrics_path):
            _compare(f"import/{path.name}", path.read_text(encoding="utf-8"))


def test_check_rendered_diagnostics(tmp_path, capsys):
    from perfonto.cli import main

    d = tmp_path / "bad_catalog"
    shutil.copytree(HERE / "fixtures" / "bad_catalog", d)
    assert (
        main(["check", "--catalog", str(d), "--no-library"]) == 1
    )  # the folder's diagnostics, not the library's warnings
    out = capsys.readouterr().out.replace(f"{d}/", "bad_catalog/")
    lines = out.splitlines(keepends=True)
    assert lines[-1].startswith("sohu: ") and "4 error(s)" in lines[-1]
    _compare("check_bad_catalog.txt", "".join(lines[:-1]))  # the diagnostics; the summary counts the shipped catalog
