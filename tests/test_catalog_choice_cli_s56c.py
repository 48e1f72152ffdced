"""Commands on a catalog folder of two sibling generations (both `extends: sohu`): without --generation a
usage error (2) naming both and the option — they said "no file declares `generation: sohu`" (check,
exit 1) or "generation `sohu` does not load" (docs) —, with it the named one, its parent chain resolved.

Needs ``metrics.catalog.load_catalog`` to pass a missing generation to the loader (not ``sohu``), and
``perfonto docs``/``check`` to treat the loader's error as a usage error (helper C's report, s56).
"""

from __future__ import annotations

import json

import pytest

from perfonto.cli import main

from tests.test_catalog_choice_s56c import siblings

WANT = "generations found: caelius_a, caelius_b; pick one with --generation NAME"


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["docs", "--out", "{tmp}/site"],
        ["explain", "mfu"],
        ["codegen", "--target", "sql", "--out", "{tmp}/q"],
        ["analyze", "{tmp}/none.parquet", "--out", "{tmp}/a"],
    ],
    ids=lambda a: a[0],
)
def test_no_generation_named_is_a_usage_error_naming_both(tmp_path, capsys, argv):
    cat = siblings(tmp_path / "cat")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main([*argv, "--catalog", str(cat)]) == 2
    err = capsys.readouterr().err
    assert WANT in " ".join(err.split())
    assert "`caelius_a` (caelius-a.yaml) and `caelius_b` (caelius-b.yaml)" in err
    assert "sohu" not in err  # the default the user never gave


def test_check_json_says_so_too(tmp_path, capsys):
    cat = siblings(tmp_path / "cat")
    assert main(["check", "--catalog", str(cat), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "pick one with --generation NAME" in doc["error"]


def test_a_named_generation_is_loaded_and_commands_work(tmp_path, capsys):
    cat = siblings(tmp_path / "cat")
    assert main(["check", "--catalog", str(cat), "--generation", "caelius_b"]) == 0
    assert "caelius_b: 61 signals" in capsys.readouterr().out
    assert main(["docs", "--catalog", str(cat), "--generation", "caelius_a", "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.md").exists()
    run = tmp_path / "run"
    assert (
        main(["run", "--duration", "200ms", "--catalog", str(cat), "--generation", "caelius_a", "--out", str(run)]) == 0
    )
    out = tmp_path / "an"
    argv = ["analyze", str(run / "counters.parquet"), "--catalog", str(cat), "--generation", "caelius_a"]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    doc = json.loads((out / "report.json").read_text())
    assert doc["generation"] == "caelius_a"
