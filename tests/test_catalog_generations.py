"""Generations in a catalog folder are found by the names they declare (a breaker's findings): a parent
named by its `generation:` in a file of another name, two files declaring one generation (one was
silently ignored), and a folder of several generations with none chosen."""

from __future__ import annotations

from pathlib import Path

from perfonto.cli import main


def _write(d, name, text):
    (d / name).write_text(text, encoding="utf-8")


def test_extends_names_the_parent_by_its_generation(tmp_path, capsys):
    _write(tmp_path, "a.yaml", "generation: a1\nextends: b1\ndescription: child\n")
    _write(tmp_path, "b.yaml", "generation: b1\nextends: sohu\ndescription: parent\n")
    assert main(["check", "--catalog", str(tmp_path), "--generation", "a1"]) == 0
    assert "a1: 61 signals" in capsys.readouterr().out


def test_two_files_declaring_one_generation_is_an_error_naming_both(tmp_path, capsys):
    _write(tmp_path, "a.yaml", "generation: g1\nextends: sohu\ndescription: one\n")
    _write(tmp_path, "b.yaml", "generation: g1\nextends: sohu\ndescription: two\n")
    assert main(["explain", "spec.hbm.capacity", "--catalog", str(tmp_path), "--generation", "g1"]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "error[duplicate-generation]: two files declare `generation: g1`" in text
    assert "a.yaml:1" in text and "b.yaml:1" in text


def test_several_generations_and_none_chosen_says_to_pick_one(tmp_path, capsys):
    _write(tmp_path, "a.yaml", "generation: a1\nextends: sohu\ndescription: one\n")
    _write(tmp_path, "b.yaml", "generation: b1\nextends: sohu\ndescription: two\n")
    main(["check", "--catalog", str(tmp_path)])
    out = capsys.readouterr()
    assert "generations found: a1, b1; pick one with --generation NAME" in out.out + out.err


def test_a_c_header_of_a_catalog_whose_metrics_fail_says_so(tmp_path, capsys):
    """The header describes the signals, so it is written when the metrics do not compile; it said nothing of
    them (a breaker's finding): a note now names the errors and where to list them."""
    cat = tmp_path / "cat"
    cat.mkdir()
    _write(cat, "a.metrics", 'metric x [B] = sum(hbm.nope)\n  "d"\n')
    assert main(["codegen", "--target", "c-header", "--catalog", str(cat), "--out", str(tmp_path / "h")]) == 0
    err = capsys.readouterr().err
    assert "note: the catalog's metrics do not compile (1 error(s)" in err and (tmp_path / "h" / "sohu.h").exists()


def test_extends_is_a_name_not_a_list_or_a_path(tmp_path, capsys):
    """`extends: [sohu]` was told "did you mean `sohu`", and `extends: ../base/gen` read a file outside the
    folder before the name pattern refused it (a breaker's findings)."""
    for value in ("[sohu]", "../base/gen"):
        _write(tmp_path, "a.yaml", f"generation: a1\nextends: {value}\ndescription: x\n")
        assert main(["check", "--catalog", str(tmp_path)]) == 1
        out = capsys.readouterr()
        want = "a.yaml:2:10: error[schema]: `extends` is the name of the generation this one extends"
        assert want in out.out + out.err


def test_a_folder_of_finding_rules_checks_every_error_of_a_rule(tmp_path, capsys):
    """A folder holding only a *.findings.yaml is the shipped catalog with its rules (it was refused as
    holding no *.yaml); a rule's unknown knob no longer hides its unknown metric, which gets a did-you-mean."""
    _write(
        tmp_path,
        "mine.findings.yaml",
        "findings:\n  - metric: topdown.memory_bound\n    title: memory bound\n    share: topdown.memory_bound\n"
        "    evidence: [hbm.bandwith_utilization]\n    remove: {hbm_faster: true}\n",
    )
    assert main(["check", "--catalog", str(tmp_path)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "mine.findings.yaml:6:26: error[finding-knob]: unknown emulator knob `hbm_faster`" in text
    assert (
        "names unknown metric `hbm.bandwith_utilization`" in text and "did you mean `hbm.bandwidth_utilization`" in text
    )
    _write(tmp_path, "mine.findings.yaml", "findings:\n  - metric: topdown.memory_bound\n    title: mine\n")
    assert main(["check", "--catalog", str(tmp_path)]) == 0


def test_a_parent_declared_twice_is_an_error_and_a_copy_named_like_its_parent_extends_it(tmp_path, capsys):
    """A design review: two files declaring the generation a child extends were resolved silently (the
    first), and a copy of sohu.yaml renamed to sohu_next but kept as sohu.yaml extended itself (a cycle)."""
    _write(tmp_path, "a.yaml", "generation: base1\nextends: sohu\ndescription: a\n")
    _write(tmp_path, "b.yaml", "generation: base1\nextends: sohu\ndescription: b\n")
    _write(tmp_path, "c.yaml", "generation: child1\nextends: base1\ndescription: c\n")
    assert main(["check", "--catalog", str(tmp_path), "--generation", "child1"]) == 1
    out = capsys.readouterr()
    assert "error[duplicate-generation]: `extends: base1`: two files declare `generation: base1`" in out.out + out.err
    copy = tmp_path / "copy"
    copy.mkdir()
    text = (Path(__file__).parents[1] / "ontology" / "catalog" / "sohu.yaml").read_text()
    _write(copy, "sohu.yaml", text.replace("\ngeneration: sohu\n", "\ngeneration: sohu_next\nextends: sohu\n", 1))
    assert main(["check", "--catalog", str(copy), "--generation", "sohu_next"]) == 0
