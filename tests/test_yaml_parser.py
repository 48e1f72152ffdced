"""Catalog YAML is composed by libyaml's C parser where PyYAML has it (a cold compile of the five shipped
generations spent ~60 % of its time in the Python parser): the same data, the same line:col of every
value on every shipped file, and the Python parser's messages where libyaml refuses the text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import perfonto.ontology.yaml_source as ys

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml: one parser only")


def _read(path: Path, loader) -> ys.YamlSource:
    ys._compose.cache_clear()
    saved, ys._COMPOSER = ys._COMPOSER, loader
    try:
        return ys.read_yaml(path.name, path.read_text(encoding="utf-8"))
    finally:
        ys._COMPOSER = saved
        ys._compose.cache_clear()


@pytest.mark.parametrize("path", sorted((ROOT / "ontology" / "catalog").glob("*.yaml")), ids=lambda p: p.name)
def test_c_and_python_parsers_give_the_same_data_and_positions(path):
    fast, slow = _read(path, yaml.CSafeLoader), _read(path, yaml.SafeLoader)
    assert fast.data == slow.data and fast.data
    assert fast.positions == slow.positions and len(fast.positions) > 100


@pytest.mark.parametrize(
    "text, words, line, col",
    [
        ("a:\n\tb: 1\n", "found character '\\t' that cannot start any token", 2, 1),  # libyaml omits the character
        ("a: &x [1]\nb: *y\n", "found undefined alias 'y'", 2, 4),  # libyaml omits the name
        ("é: [1, 2\nb: {", "expected ',' or ']', but got ':'", 2, 2),
    ],
)
def test_refused_text_keeps_the_python_parsers_message(tmp_path, text, words, line, col):
    (d,) = ys.read_yaml(tmp_path / "bad.yaml", text).diagnostics
    assert d.code == "yaml-syntax" and words in d.message and (d.span.line, d.span.col) == (line, col)


def test_nesting_past_libyamls_limit_is_still_too_deep(tmp_path):
    (d,) = ys.read_yaml(tmp_path / "deep.yaml", "a: " + "[" * 5000 + "]" * 5000).diagnostics
    assert d.code == "yaml-too-deep"


def test_an_error_at_the_end_of_the_file_points_at_its_last_line(tmp_path):
    from perfonto.ontology.yaml_source import read_yaml

    p = tmp_path / "a.yaml"
    p.write_text('generation: a1\nextends: sohu\ndescription: "x\nspec:\n  a: 1\n')  # a quote never closed
    (d,) = read_yaml(p).diagnostics
    assert d.code == "yaml-syntax" and (d.span.line, d.span.col) == (5, 7) and "end of the file" in d.message  # was 6:1
