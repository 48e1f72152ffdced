"""A catalog folder of two sibling generations (both `extends: sohu`) and the codegen SQL header's
regenerate line.

1. With no generation named, the folder's generation is the one no other file extends; two such were
   looked up as `sohu` and reported as "no file declares `generation: sohu`", a name the user never gave.
   ``load_generation_files(paths, None)`` now says the folder holds several, naming each and
   ``--generation``; a command error carrying that is a usage error (2). A named one loads with its parent
   chain resolved.
2. ``perfonto codegen --target sql``'s header said to regenerate with the query's options only: without
   ``--out`` (required) the line did not run, and without ``--catalog``/``--generation`` it made sohu's
   query. It now gives them, as given, and a path holding a line break, ``*/`` or ``/*`` stays inside the
   ``--`` comment (ANSI-C quoted, ``$'\\n'``) while bash still reads the same words.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from perfonto.cli import main
from perfonto.codegen.sql_header import comment_note, comment_safe_shell
from perfonto.commands.common import CommandError
from perfonto.ontology.loader import folder_generations, load_generation_files, unchosen


def siblings(d: Path) -> Path:
    """caelius_a (FP8 peak 9500 TFLOP/s, sohu's 9000) and caelius_b, both extending sohu; a metric file."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "caelius-a.yaml").write_text(
        "generation: caelius_a\nextends: sohu\ndescription: Variant A.\nspec:\n  mxu.peak_flops_fp8:\n    value: 9500\n"
    )
    (d / "caelius-b.yaml").write_text("generation: caelius_b\nextends: sohu\ndescription: Variant B.\n")
    (d / "extra.metrics").write_text(
        'metric mxu.busy_share [percent] = avg(mxu.busy_cycles) / seq.elapsed_cycles\n  "Matrix busy share."\n'
    )
    return d


def _yamls(d: Path) -> list[Path]:
    return sorted(d.glob("*.yaml"))


def test_two_siblings_and_none_named_is_an_error_naming_both(tmp_path):
    d = siblings(tmp_path / "cat")
    assert folder_generations(_yamls(d)) == [("caelius_a", d / "caelius-a.yaml"), ("caelius_b", d / "caelius-b.yaml")]
    gen, diags = load_generation_files(_yamls(d), None)
    assert gen is None and len(diags) == 1
    (diag,) = diags
    assert diag.code == "unknown-generation" and unchosen(diags) is diag
    assert "`caelius_a` (caelius-a.yaml) and `caelius_b` (caelius-b.yaml)" in diag.message
    assert "sohu" not in diag.message + diag.hint  # the old error: no file declares `generation: sohu`
    assert "generations found: caelius_a, caelius_b; pick one with --generation NAME" in diag.hint
    assert diag.span.file == str(d)


def test_a_named_sibling_loads_with_its_parent_chain(tmp_path):
    d = siblings(tmp_path / "cat")
    a, diags = load_generation_files(_yamls(d), "caelius_a")
    assert not [x for x in diags if x.severity == "error"]
    assert a.name == "caelius_a" and a.lineage == ("sohu", "caelius_a")
    assert a.spec["spec.mxu.peak_flops_fp8"].value == 9500.0  # its own override
    assert a.spec["spec.mxu.peak_flops_bf16"].value == 4500.0  # sohu's, inherited
    b, _ = load_generation_files(_yamls(d), "caelius_b")
    assert b.lineage == ("sohu", "caelius_b") and b.spec["spec.mxu.peak_flops_fp8"].value == 9000.0
    assert len(a.signals) == len(b.signals) == 61  # sohu's signals, through the chain


def test_one_leaf_is_the_folders_generation_and_a_cycle_is_reported_not_sohu(tmp_path):
    d = tmp_path / "chain"
    d.mkdir()
    (d / "p.yaml").write_text("generation: p1\nextends: sohu\ndescription: parent\n")
    (d / "c.yaml").write_text("generation: c1\nextends: p1\ndescription: child\n")
    (d / "c.vectors.yaml").write_text("generation: other\n")  # a side file declares no generation
    gen, _ = load_generation_files(sorted(d.glob("*.yaml")), None)
    assert gen is not None and gen.lineage == ("sohu", "p1", "c1")
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "a.yaml").write_text("generation: a1\nextends: b1\ndescription: a\n")
    (loop / "b.yaml").write_text("generation: b1\nextends: a1\ndescription: b\n")
    gen, diags = load_generation_files(_yamls(loop), None)
    assert gen is None and [x.code for x in diags] == ["extends-cycle"]


def test_a_command_error_for_a_folder_of_several_generations_is_a_usage_error(tmp_path):
    d = siblings(tmp_path / "cat")
    _, diags = load_generation_files(_yamls(d), None)
    exc = CommandError("no generation named `sohu`", 1, diags)  # a command's own wording
    assert exc.code == 2 and exc.diagnostics == diags
    assert exc.message == f"{d} holds several generations (listed above): pick one with --generation NAME"
    plain = CommandError("no generation named `x`", 2, [])
    assert plain.message == "no generation named `x`" and plain.code == 2


def _regenerate_line(path: Path) -> str:
    line = path.read_text().splitlines()[1]
    assert line.startswith("-- Do not edit: regenerate with `") and line.endswith("`.")
    return line[len("-- Do not edit: regenerate with `") : -2]


def test_the_regenerate_line_gives_out_catalog_and_generation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    siblings(tmp_path / "my cat")
    argv = ["codegen", "--target", "sql", "--catalog", "my cat", "--generation", "caelius_a", "--no-library"]
    assert main([*argv, "--dialect", "spark", "--counters", "cnt", "--out", "q"]) == 0
    out = tmp_path / "q" / "caelius_a.spark.sql"
    cmd = _regenerate_line(out)
    assert cmd == (
        "perfonto codegen --target sql --out q --catalog 'my cat' --generation caelius_a --no-library "
        "--dialect spark --counters cnt"
    )
    before = out.read_text()
    assert "generation caelius_a" in before.splitlines()[0] and "1 metrics." in before.splitlines()[0]
    os.remove(out)
    words = shlex.split(cmd)
    assert main(words[1:]) == 0  # the line, run as it is, writes the same file
    assert out.read_text() == before


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to read the line as a shell does")
def test_a_path_with_a_line_break_or_comment_marks_stays_in_the_comment(tmp_path):
    out = tmp_path / "o\nut */ DROP TABLE x; /* it's"
    assert main(["codegen", "--target", "sql", "--out", str(out)]) == 0
    text = (out / "sohu.sql").read_text()
    head = text.split("WITH ", 1)[0].splitlines()
    assert len(head) == 2 and all(line.startswith("-- ") for line in head)
    assert "DROP TABLE" in head[1] and text.count("DROP TABLE") == 1  # only in the comment
    assert "*/" not in text and "/*" not in text
    cmd = _regenerate_line(out / "sohu.sql")
    words = _bash_words(cmd)
    assert words == [b"perfonto", b"codegen", b"--target", b"sql", b"--out", os.fsencode(out)]
    before = text
    os.remove(out / "sohu.sql")
    assert main([os.fsdecode(w) for w in words[1:]]) == 0 and (out / "sohu.sql").read_text() == before


def _bash_words(cmd: str) -> list[bytes]:
    """The words bash reads from the command line ``cmd`` (ANSI-C quotes included), as bytes."""
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    script = 'eval "set -- $1"; printf "%s\\0" "$@"'
    done = subprocess.run(["bash", "-c", script, "_", cmd], capture_output=True, check=True, env=env)
    return done.stdout.split(b"\0")[:-1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to read the line as a shell does")
def test_comment_safe_shell_keeps_the_words():
    words = ["a*/b", "/*", "x\ny", "tab\there", "nel\u0085", "ls\u2028", "bad\udcff", "q\"'", "plain/path-1"]
    safe = comment_safe_shell(shlex.join(words))
    assert safe.isprintable() and "*/" not in safe and "/*" not in safe
    assert _bash_words(safe) == [os.fsencode(w) for w in words]
    assert comment_safe_shell("--out q --dialect spark") == "--out q --dialect spark"  # nothing to do
    assert comment_safe_shell('"a*/b"') == '"a*""/b"' and comment_safe_shell("a*/b") == "a*''/b"


def test_a_note_is_one_line_without_comment_marks():
    assert comment_note("dump /tmp/a*/b cannot feed x") == "dump /tmp/a* /b cannot feed x"
    assert comment_note("two\nlines") is None
