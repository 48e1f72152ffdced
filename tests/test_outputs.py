"""Safe outputs: folders are complete or absent, never mixed; a folder perfonto did not write is
refused; `--json` keeps its promise of one JSON document on every failure of every command."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfonto.cli import main
from perfonto.commands import COMMANDS
from perfonto.outputs import OutputError, output_folder

PERFONTO = [sys.executable, "-m", "perfonto"]


def _ctrl_c_as_in_a_terminal():
    """In the child, before perfonto starts: SIGINT back to its default, as a user's terminal gives it. A
    test run started in the background of a non-interactive shell (or by pytest-xdist's workers) inherits
    SIGINT ignored, and a process that starts with SIGINT ignored keeps ignoring it (Python's convention)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _popen(args, cwd):
    return subprocess.Popen(
        [*PERFONTO, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )


def test_two_concurrent_runs_into_one_folder(tmp_path):
    out = tmp_path / "X"
    a = _popen(["run", "--duration", "300ms", "--chips", "2", "--out", str(out), "--json"], tmp_path)
    time.sleep(0.05)
    b = _popen(["run", "--duration", "300ms", "--chips", "4", "--out", str(out), "--json"], tmp_path)
    ra, rb = a.communicate(timeout=300), b.communicate(timeout=300)
    codes = sorted([a.returncode, b.returncode])
    assert codes == [0, 1], (ra[1][-800:], rb[1][-800:])
    loser = ra if a.returncode else rb
    assert "another perfonto" in json.loads(loser[0])["error"]
    report = json.loads((out / "report.json").read_text())
    import pyarrow.parquet as pq

    chips = len(set(pq.read_table(out / "counters.parquet", columns=["chip"]).column("chip").to_pylist()))
    assert report["chips"] == chips == len(report["per_chip"])  # one consistent run
    assert not list(tmp_path.glob(".X.*"))  # no temporary folder or lock left behind


def _interrupted_run(tmp_path, name, sig, settle_s=0.0):
    """``perfonto run --duration 20s --out tmp_path/name``, sent ``sig`` once its temporary folder is there
    (and ``settle_s`` later); returns the finished process and the output path."""
    out = tmp_path / name
    p = _popen(["run", "--duration", "20s", "--out", str(out)], tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob(f".{name}.tmp-*")):
        time.sleep(0.05)
    time.sleep(settle_s)
    p.send_signal(sig)
    p.communicate(timeout=120)
    return p, out


def test_interrupted_run_leaves_no_folder(tmp_path):
    p, out = _interrupted_run(tmp_path, "Y", signal.SIGINT, settle_s=0.5)
    assert p.returncode != 0
    assert not out.exists() and not list(tmp_path.glob(".Y*"))
    assert main(["analyze", str(out), "--out", str(tmp_path / "z")]) == 1
    assert main(["timeline", str(out), "--out", str(tmp_path / "t.json")]) == 1


def test_sigterm_cleans_up_too(tmp_path):
    _, out = _interrupted_run(tmp_path, "T", signal.SIGTERM)
    assert not out.exists() and not list(tmp_path.glob(".T*"))


def test_a_folder_perfonto_did_not_write_is_refused(tmp_path, capsys):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("precious")
    assert main(["run", "--duration", "50ms", "--chips", "1", "--out", str(mine), "--json"]) == 1
    assert "perfonto did not write it" in json.loads(capsys.readouterr().out)["error"]
    assert (mine / "chapter1.tex").read_text() == "precious"
    # --force replaces perfonto's outputs, never a file it did not write (issue 28)
    assert main(["run", "--duration", "50ms", "--chips", "1", "--out", str(mine), "--force"]) == 0
    assert (mine / "chapter1.tex").read_text() == "precious" and (mine / "perfonto.json").exists()
    # a folder perfonto wrote is replaced by the next run without --force, the user's file still kept
    assert main(["run", "--duration", "50ms", "--chips", "1", "--out", str(mine)]) == 0
    assert (mine / "chapter1.tex").read_text() == "precious"


def test_failure_inside_leaves_the_old_folder(tmp_path):
    out = tmp_path / "o"
    with output_folder(out) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError):
        with output_folder(out) as tmp:
            (tmp / "a.txt").write_text("second")
            raise RuntimeError("boom")
    assert (out / "a.txt").read_text() == "first" and not list(tmp_path.glob(".o.*"))


def test_stale_lock_is_taken_over(tmp_path):
    out = tmp_path / "o"
    (tmp_path / ".o.lock").write_text("999999999")  # no such process
    with output_folder(out) as tmp:
        (tmp / "x").write_text("ok")
    assert (out / "x").exists()
    (tmp_path / ".o.lock").write_text(str(os.getppid()))  # a live process holds it
    with pytest.raises(OutputError, match="another perfonto"):
        with output_folder(out):
            pass


def test_abbreviations_are_off(tmp_path, capsys):
    assert main(["run", "--chip", "4", "--out", str(tmp_path / "r"), "--json"]) == 2
    cap = capsys.readouterr()
    assert "unrecognized arguments: --chip" in json.loads(cap.out)["error"]
    # the command's usage, which lists --chips, not the top level's (a new user was shown `perfonto COMMAND ...`)
    assert cap.err.startswith("usage: perfonto run ") and "--chips CHIPS" in cap.err
    assert main(["--bogus"]) == 2 and capsys.readouterr().err.startswith("usage: perfonto [-h]")


def _one_json(out: str) -> dict:
    doc = json.loads(out)  # exactly one document: json.loads refuses trailing data
    assert isinstance(doc, dict) and doc.get("ok") is False
    return doc


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_one_json_document_on_an_unknown_flag(command, capsys):
    assert main([command, "--json", "--no-such-flag"]) == 2
    assert _one_json(capsys.readouterr().out)["exit_code"] == 2


MISSING_FILE = {
    "analyze": ["analyze", "{m}", "--out", "{t}/o"],
    "test": ["test", "{m}"],
    "align": ["align", "{m}"],
    "timeline": ["timeline", "{m}", "--out", "{t}/t.json"],
    "import": ["import", "perf", "{m}", "--out", "{t}/i"],
    "check": ["check", "--catalog", "{m}"],
    "codegen": ["codegen", "--target", "python", "--catalog", "{m}", "--out", "{t}/g"],
    "docs": ["docs", "--catalog", "{m}", "--out", "{t}/d"],
    "explain": ["explain", "mfu", "--catalog", "{m}"],
    "run": ["run", "--catalog", "{m}", "--out", "{t}/r"],
    "diff": ["diff", "sohu", "{m}"],
    "validate-emulator": ["validate-emulator", "--rows", "{m}"],
    "calibrate": ["calibrate", "--rows", "{m}", "--out", "{t}/f.yaml"],
    "serve": ["serve", "--follow", "{m}", "--port", "0"],
    "emulator-quantities": ["emulator-quantities", "--generation", "{m}.yaml"],
    "sweep": ["sweep", "--catalog", "{m}", "--vary", "isl=128,256", "--no-cache"],
    "sensitivity": ["sensitivity", "--catalog", "{m}", "--no-cache"],
    "compare": ["compare", "sohu", "{m}.yaml", "--no-cache"],
    "coverage": ["coverage", "--scenarios", "{m}.yaml"],
    "report": ["report", "{m}", "--html", "{t}/r.html"],
    "compare-runs": ["compare-runs", "{m}", "{m}2"],
    "findings": ["findings", "{m}", "--reproject", "--out", "{t}/f"],
    "plan": ["plan", "--catalog", "{m}", "--metrics", "mfu"],
}
BAD_VALUE = {
    "run": ["run", "--chips", "zero"],
    "analyze": ["analyze", "x", "--out", "o", "--timestamp-unit", "days"],
    "project": ["project", "--chips", "-3"],
    "align": ["align", "x", "--saturation", "2"],
    "codegen": ["codegen", "--target", "fortran", "--out", "o"],
    "timeline": ["timeline", "x", "--out", "o", "--format", "pdf"],
    "export": ["export", "csv", "--out", "o"],
    "import": ["import", "csv", "x", "--out", "o"],
    "graph": ["graph", "mfu", "--format", "png"],
    "explain": ["explain", "no.such.metric"],
    "diff": ["diff", "sohu", "nosuch"],
    "validate": ["validate", "--generation", "nosuch"],
    "check": ["check", "--generation", "nosuch"],
    "docs": ["docs", "--generation", "nosuch", "--out", "o"],
    "serve": ["serve", "--follow", "x", "--port", "70000"],
    "sweep": ["sweep", "--vary", "spec.hbm.peak_bandwidth=4..16TB/s:0"],
    "sensitivity": ["sensitivity", "--step", "-1"],
    "compare": ["compare", "sohu", "caelius", "--vary", "isl=1..2:x"],
    "coverage": ["coverage", "--seeds", "0"],
    "emulate": ["emulate", "--fleet", "4by8", "--out", "o"],
    "compare-runs": ["compare-runs", "a", "b", "--fail-on-regression", "mfu:x"],
    "plan": ["plan", "--metrics", "mfu", "--slots", "0"],
}


@pytest.mark.parametrize("command", sorted(MISSING_FILE))
def test_missing_file_gives_one_json_document(command, tmp_path, capsys):
    argv = [a.format(m=str(tmp_path / "missing"), t=str(tmp_path)) for a in MISSING_FILE[command]] + ["--json"]
    code = main(argv)
    assert code in (1, 2), argv
    _one_json(capsys.readouterr().out)


@pytest.mark.parametrize("command", sorted(BAD_VALUE))
def test_bad_value_gives_one_json_document(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(BAD_VALUE[command] + ["--json"])
    assert code in (1, 2), command
    _one_json(capsys.readouterr().out)


def test_names_too_long_for_the_file_system(tmp_path, capsys):
    long = str(tmp_path / ("x" * 300))
    assert main(["run", "--duration", "50ms", "--chips", "1", "--out", long, "--json"]) == 1
    assert "too long" in _one_json(capsys.readouterr().out)["error"]
    assert main(["analyze", long, "--out", str(tmp_path / "o"), "--json"]) == 1
    _one_json(capsys.readouterr().out)


def test_all_commands_are_covered():
    assert Path(__file__).exists() and set(COMMANDS) <= set(MISSING_FILE) | set(BAD_VALUE) | {
        "validate",
        "project",
        "export",
        "graph",
    }


def test_codegen_and_import_never_replace_a_file_they_did_not_write(tmp_path, capsys):
    """Found by a session trying to break perfonto: `codegen --target docs --out d` replaced the user's
    d/sohu.md, `import perf F --out d` their d/perf_small.yaml, and `codegen --catalog c --out c` wrote
    into the input catalog. Both now write their folder as the other commands do (atomically, with a
    manifest), several targets or imports accumulating in one folder."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "sohu.md").write_text("USER\n")
    assert main(["codegen", "--target", "docs", "--out", str(d)]) == 1  # not perfonto's folder
    assert main(["codegen", "--target", "docs", "--out", str(d), "--force"]) == 1  # still the user's file
    assert (d / "sohu.md").read_text() == "USER\n"
    (d / "sohu.md").rename(d / "notes.md")
    assert main(["codegen", "--target", "docs", "--out", str(d), "--force"]) == 0
    assert (d / "notes.md").read_text() == "USER\n" and (d / "sohu.md").read_text().startswith("# sohu")
    g = tmp_path / "gen"  # the README's gen/: one target after another, each replacing only its own files
    for target in ("python", "sql", "python"):
        assert main(["codegen", "--target", target, "--out", str(g)]) == 0
    assert {"sohu_evaluator.py", "sohu.sql", "perfonto.json"} <= {p.name for p in g.iterdir()}
    cat = tmp_path / "cat"
    shutil.copytree(Path(__file__).parents[1] / "perfonto" / "catalogs" / "linux", cat)
    before = sorted(p.name for p in cat.iterdir())
    assert main(["codegen", "--target", "docs", "--catalog", str(cat), "--no-library", "--out", str(cat)]) == 1
    assert sorted(p.name for p in cat.iterdir()) == before
    err = capsys.readouterr().err
    assert "perfonto did not write this file" in err and "is the input" in err
    imp = tmp_path / "imp"
    imp.mkdir()
    (imp / "perf_small.yaml").write_text("USER YAML\n")
    src = Path(__file__).parent / "fixtures" / "import" / "perf_small.json"
    assert main(["import", "perf", str(src), "--out", str(imp), "--force"]) == 1
    assert (imp / "perf_small.yaml").read_text() == "USER YAML\n"
    assert main(["import", "perf", str(src), "--out", str(tmp_path / "imp2"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["generations"][0]["metrics_file"] == str(tmp_path / "imp2" / "perf_small.metrics")
    assert ".tmp-" not in json.dumps(doc)


def test_report_and_timeline_never_replace_the_runs_own_files(tmp_path, capsys):
    """Found by a session trying to break perfonto: `report R --html R/metrics.parquet` and `timeline R --out
    R/trace.parquet` replaced the run's own files (exit 0), after which every later command failed with
    pyarrow's "Parquet magic bytes not found", naming no file; `--plots R` wrote pictures the manifest did
    not list."""
    run = tmp_path / "R"
    assert main(["run", "--model", "llama-3.1-8b", "--chips", "2", "--duration", "50ms", "--out", str(run)]) == 0
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["report", str(run), "--html", str(run / "metrics.parquet")]) == 1
    assert main(["timeline", str(run), "--out", str(run / "trace.parquet")]) == 1
    assert main(["timeline", str(run), "--out", str(run / "report.json")]) == 1
    assert "is one of the files of the run" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert main(["report", str(run), "--html", str(run / "page.html"), "--plots", str(run)]) == 0  # new names: fine
    listed = json.loads((run / "perfonto.json").read_text())["files"]
    assert "roofline.png" in listed and "roofline.svg" in listed
    broken = tmp_path / "B"
    shutil.copytree(run, broken)
    (broken / "trace.parquet").write_text("<!DOCTYPE html>")  # what an overwrite used to leave
    capsys.readouterr()
    assert main(["timeline", str(broken), "--out", str(tmp_path / "t.json")]) == 1
    err = capsys.readouterr().err
    assert f"{broken / 'trace.parquet'}: not a readable Parquet file" in " ".join(err.split())


def test_codegen_replaces_a_file_it_generated_where_no_manifest_lists_it(tmp_path, capsys):
    """The repository's schemas/ (a package: __init__.py beside the generated schemas, no manifest) is refreshed
    with `codegen --target schemas --out schemas --force`: the schemas carry perfonto's `$id`, so they are
    replaced; __init__.py is kept; a schema-named file without the mark is a user's and refused."""
    d = tmp_path / "schemas"
    shutil.copytree(
        Path(__file__).parents[1] / "schemas", d, ignore=shutil.ignore_patterns("__pycache__", "perfonto.json")
    )
    init = (d / "__init__.py").read_bytes()
    assert main(["codegen", "--target", "schemas", "--out", str(d), "--force"]) == 0
    assert (d / "__init__.py").read_bytes() == init and (d / "generation.schema.json").stat().st_size > 1000
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "vectors.schema.json").write_text('{"mine": true}')
    assert main(["codegen", "--target", "schemas", "--out", str(tmp_path / "u"), "--force"]) == 1
    assert (tmp_path / "u" / "vectors.schema.json").read_text() == '{"mine": true}'


def test_accumulating_outputs_survive_a_failure_and_keep_the_folders_inputs(tmp_path, capsys, monkeypatch):
    """From a review of codegen/import writing their folders: (1) a third target that failed while moving files
    deleted the first two targets' files; (2) a user's notes that merely said "perfonto generated" were taken for
    perfonto's and replaced; (3) codegen into an analyze folder dropped its recorded inputs, after which timeline and
    align could not find the capture; (4) `report R --plots R` worked once, then was refused; (5) a second import
    into one folder replaced the first's import-report.json; the folder's permissions were lost."""
    import perfonto.outputs as outputs

    g = tmp_path / "gen"
    assert main(["codegen", "--target", "python", "--out", str(g)]) == 0
    assert main(["codegen", "--target", "sql", "--out", str(g)]) == 0
    (g / "zz-notes.md").write_text("mine\n")  # carried after the earlier targets (sorted)
    real_rename = os.rename

    def failing(src, dst):  # the carry of the user's notes fails, after the earlier targets were moved
        if str(src).endswith("zz-notes.md"):
            raise PermissionError(13, "Permission denied", str(src))
        return real_rename(src, dst)

    monkeypatch.setattr(outputs.os, "rename", failing)
    assert main(["codegen", "--target", "c-header", "--out", str(g)]) == 1
    monkeypatch.setattr(outputs.os, "rename", real_rename)
    assert {"sohu_evaluator.py", "sohu.sql", "zz-notes.md"} <= {p.name for p in g.iterdir()}
    assert not (g / "sohu.h").exists() and not any(p.name.startswith(".") for p in g.iterdir())

    (g / "sohu.md").write_text("My analysis: the evaluator here is perfonto generated; see below.\n" * 20)
    assert main(["codegen", "--target", "docs", "--out", str(g)]) == 1  # a user's file, whatever it says
    assert (g / "sohu.md").read_text().startswith("My analysis")
    os.chmod(g, 0o700)
    (g / "sohu.md").unlink()
    assert main(["codegen", "--target", "docs", "--out", str(g)]) == 0
    assert (g.stat().st_mode & 0o777) == 0o700 and not (g / outputs.CARRIED).exists()

    run = tmp_path / "R"
    assert main(["run", "--model", "llama-3.1-8b", "--chips", "2", "--duration", "50ms", "--out", str(run)]) == 0
    inputs = json.loads((run / "perfonto.json").read_text())["inputs"]
    assert main(["codegen", "--target", "sql", "--out", str(run)]) == 0
    assert json.loads((run / "perfonto.json").read_text())["inputs"] == inputs
    for _ in range(2):
        assert main(["report", str(run), "--plots", str(run)]) == 0

    src = Path(__file__).parent / "fixtures" / "import" / "perf_small.json"
    imp = tmp_path / "imp"
    assert main(["import", "perf", str(src), "--out", str(imp), "--name", "first"]) == 0
    assert main(["import", "perf", str(src), "--out", str(imp), "--name", "second"]) == 0
    assert json.loads((imp / "import-report.json").read_text())["generations"][0]["generation"] == "first"
    assert json.loads((imp / "import-report-second.json").read_text())["generations"][0]["generation"] == "second"


def test_a_damaged_manifest_or_ground_truth_is_a_clear_error(tmp_path, capsys):
    """From the review: a perfonto manifest whose `files` is a number, or whose `inputs` is a list, and a ground truth
    whose `assumptions` is a string gave "internal error"."""
    from perfonto.outputs import refuse_run_file
    from perfonto.whatif.reproject import ReprojectError, reproject

    run = tmp_path / "R"
    run.mkdir()
    (run / "perfonto.json").write_text(json.dumps({"perfonto": "0", "run_id": "x", "files": 5, "inputs": [1]}))
    refuse_run_file(run / "page.html", run, "--html")  # a new name: written as asked, no exception
    with pytest.raises(Exception, match="is one of the files of the run"):
        refuse_run_file(run / "report.json", run, "--html")
    (run / "ground_truth.json").write_text(json.dumps({"knobs": {}, "assumptions": "x"}))
    with pytest.raises(ReprojectError, match="`assumptions` is not an object"):
        reproject(run, {"overlap_collectives": True}, tmp_path / "o")


def test_codegen_into_a_mount_point_writes_file_by_file(tmp_path, capsys, monkeypatch):
    """A mount point (a Docker volume as --out) cannot be renamed ("Device or resource busy", found by a review):
    codegen writes its files into it one by one, still refusing to replace a user's file."""
    import perfonto.outputs as outputs

    d = tmp_path / "vol"
    d.mkdir()
    real = os.path.realpath(d)
    monkeypatch.setattr(outputs.os.path, "ismount", lambda p: os.path.realpath(p) == real)
    assert main(["codegen", "--target", "python", "--out", str(d)]) == 0
    assert main(["codegen", "--target", "sql", "--out", str(d)]) == 0
    ino = d.stat().st_ino
    assert {"sohu_evaluator.py", "sohu.sql", "perfonto.json"} <= {p.name for p in d.iterdir()}
    assert set(json.loads((d / "perfonto.json").read_text())["files"]) >= {"sohu_evaluator.py", "sohu.sql"}
    (d / "sohu.h").write_text("/* mine */\n")
    assert main(["codegen", "--target", "c-header", "--out", str(d)]) == 1
    assert (d / "sohu.h").read_text() == "/* mine */\n" and d.stat().st_ino == ino  # the folder itself stayed
