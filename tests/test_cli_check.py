"""`perfonto check`: all four kinds of error in one run, each with file:line:col, exit 1."""

import json
import re
import shutil

from perfonto.cli import main
from conftest import FIXTURES


def test_check_shipped_catalog_is_clean(capsys):
    assert main(["check"]) == 0
    assert "0 error(s)" in capsys.readouterr().out


def test_check_reports_all_four_errors(tmp_path, capsys):
    d = tmp_path / "cat"
    shutil.copytree(FIXTURES / "bad_catalog", d)
    assert main(["check", "--catalog", str(d)]) == 1
    out = capsys.readouterr().out
    found = dict(re.findall(r"^(\S+\.metrics:\d+:\d+): error\[([a-z-]+)\]", out, re.M))
    assert found == {
        f"{d}/a_units.metrics:1:22": "unit-mismatch",
        f"{d}/b_unknown.metrics:1:33": "unknown-name",
        f"{d}/c_cycle.metrics:1:20": "cycle",
        f"{d}/d_syntax.metrics:2:50": "syntax",
    }
    assert "did you mean `hbm.read_bytes`" in out


def test_check_json(tmp_path, capsys):
    d = tmp_path / "cat"
    shutil.copytree(FIXTURES / "bad_catalog", d)
    assert main(["check", "--catalog", str(d), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert sorted(x["code"] for x in doc["diagnostics"] if x["severity"] == "error") == [
        "cycle",
        "syntax",
        "unit-mismatch",
        "unknown-name",
    ]


def test_usage_errors_exit_2(capsys):

    assert main(["run", "--chips", "zero"]) == 2
    assert main(["frobnicate"]) == 2


def test_json_failures_still_print_one_document(tmp_path, capsys):
    import json as _json

    cases = [
        (["run", "--json", "--generation", "nosuch", "--out", str(tmp_path / "o")], 2),
        (["test", "--json", str(tmp_path / "none")], 1),
        (["diff", "--json", "sohu", "nosuch"], 2),
        (["explain", "mfu", "--generation", "nosuch"], 2),
        (["check", "--generation", "nosuch"], 2),
        (["validate", "--generation", "nosuch"], 2),
    ]
    for argv, code in cases:
        assert main(argv) == code, argv
        out = capsys.readouterr().out
        if "--json" in argv:
            doc = _json.loads(out)
            assert doc["ok"] is False and doc["exit_code"] == code


def test_usage_errors_for_bad_numbers(capsys):

    for argv in (
        ["run", "--seed", "-1"],
        ["run", "--warmup-steps", "-5"],
        ["run", "--duration", "nan s"],
        ["run", "--duration", "inf s"],
        ["run", "--duration", "9 ** 9 ** 9 ms"],
    ):
        assert main(argv) == 2, argv


def _folder(tmp_path, name: str):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "mine.yaml").write_text(f'generation: {name}\nextends: sohu\ndescription: "my Sohu"\n')
    return d


def test_check_uses_the_catalog_folders_generation(tmp_path, capsys):
    # was: error[unknown-generation]: no file declares `generation: sohu` (help: did you mean `sohu_mine`?)
    d = _folder(tmp_path, "sohu_mine")
    assert main(["check", "--catalog", str(d), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["generation"] == "sohu_mine" and doc["signals"] == 61
    assert not any(x["code"] == "unknown-generation" for x in doc["diagnostics"])


def test_check_reports_an_invalid_generation_name_as_such(tmp_path, capsys):
    d = _folder(tmp_path, "sohu-mine")
    for extra in ([], ["--generation", "sohu"]):  # the folder's generation, or another one asked for
        assert main(["check", "--catalog", str(d), *extra]) == 1
        out = capsys.readouterr().out
        assert f"{d}/mine.yaml:1:13: error[schema]" in out and "sohu-mine" in out and "^[a-z][a-z0-9_]*$" in out
        assert "unknown-generation" not in out and "did you mean" not in out


MINE = 'metric my.double [GB/s] = hbm.bandwidth * 2\n  "Twice the HBM bandwidth."\n  groups memory\n'


def test_a_folder_of_metric_files_only_keeps_the_shipped_library(tmp_path, capsys):
    # was: "1 metrics compiled", and hbm.bandwidth an unknown name (did you mean spec.hbm.peak_bandwidth?)
    from perfonto.metrics.catalog import load_catalog

    d = tmp_path / "cat"
    d.mkdir()
    (d / "mine.metrics").write_text(MINE)
    cat = load_catalog(d, None)
    assert not cat.errors and {"my.double", "hbm.bandwidth", "mfu"} <= set(cat.graph.metrics)
    assert len(cat.graph.metrics) == len(load_catalog().graph.metrics) + 1
    assert (
        "metric files compiled: the shipped metric library (written for `sohu`) and the folder's 1 metric file(s) "
        "(mine.metrics); --no-library leaves the library out"
    ) in cat.notes
    bare = load_catalog(d, None, library=False)
    assert (
        set(bare.graph.metrics) == set()
        and "metric files compiled: the folder's 1 metric file(s) (mine.metrics) only "
        "(--no-library: the shipped metric library is left out)"
        in bare.notes
    )
    assert main(["check", "--catalog", str(d)]) == 0
    assert "sohu: 61 signals, 88 metrics compiled, 0 error(s)" in capsys.readouterr().out  # + mxu.peak_flops_dominant


def test_an_inherited_report_of_absent_metrics_is_one_warning(tmp_path, capsys):
    """A folder of one metric file compiled with --no-library inherits sohu's `report:`, whose metrics it does
    not define: one warning saying how many (a breaker counted 29, one per name)."""
    (tmp_path / "a.metrics").write_text('metric hbm.rb [GB/s] = sum(hbm.read_bytes) / interval\n  "Reads."\n')
    assert main(["check", "--catalog", str(tmp_path), "--no-library"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert text.count("report-unknown-metric") == 1 and "`report:` names 29 metric(s)" in text


HEAD = """extends: sohu
description: next.
spec:
  hbm.peak_bandwidth: {value: 14.4, unit: TB/s, provenance: assumed, source: x, description: HBM.}
"""


def test_the_library_note_names_the_generation_it_is_compiled_for_and_a_replaced_shipped_one(tmp_path):
    """An architect's trial: the note said "the shipped metric library (for `sohu`)" while compiling
    `caelius_arch`, and a folder declaring `generation: caelius` replaced the shipped caelius in silence
    (project printed the folder's 14.4 TB/s, not the shipped 16)."""
    from perfonto.metrics.catalog import load_catalog

    (tmp_path / "g.yaml").write_text("generation: caelius_arch\n" + HEAD)
    cat = load_catalog(tmp_path, None)
    assert not cat.errors
    assert any("the shipped metric library (written for `sohu`, which `caelius_arch` extends)" in n for n in cat.notes)
    assert not any("replaces the shipped" in n for n in cat.notes)
    (tmp_path / "g.yaml").write_text("generation: caelius\n" + HEAD)
    cat = load_catalog(tmp_path, None)
    assert any("the folder's generation `caelius` replaces the shipped one of that name" in n for n in cat.notes)
