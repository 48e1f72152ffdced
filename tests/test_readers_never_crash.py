"""Readers that never crash (issue 15, point 15): every finding of the fuzzing campaign on the landed
state, one regression test each. Bad input gives a located error (file:line:col where there is a
file) and a clear exit code — never a traceback, a hang, unbounded memory or a silently wrong value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfonto.cli import main
from perfonto.dsl import parser as dsl_parser
from perfonto.dsl.parser import parse_text
from perfonto.interop import import_file
from perfonto.interop.exprparse import ParseError, parse as parse_formula
from perfonto.interop.rocprof import parse as parse_rocprof
from perfonto.capture.dump import DumpError, read_counters
from perfonto.ontology.loader import load_generation
from perfonto.ontology.yaml_source import read_yaml

from helpers import one_block_yaml

LONG = "n" * 300  # past NAME_MAX (255) of every common file system

COUNTER = '      c: {kind: counter, unit: event, width: 32, description: "a counter of events"}\n'


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``perfonto ARGV`` in a child process (for inputs that used to hang or exhaust memory)."""
    return subprocess.run([sys.executable, "-m", "perfonto", *argv], capture_output=True, text=True, timeout=timeout)


# --- YAML -------------------------------------------------------------------------------------------


def test_yaml_integer_past_pythons_digit_limit(tmp_path, capsys):
    src = read_yaml("big.yaml", "generation: g\nvalue: " + "9" * 5000 + "\n")
    (d,) = src.diagnostics
    assert d.code == "yaml-unsupported" and (d.span.line, d.span.col) == (2, 8) and "5000 digits" in d.message
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "g.yaml").write_text(one_block_yaml("g", COUNTER, instances="{x: " + "1" * 5000 + "}"))
    assert main(["check", "--catalog", str(cat)]) == 1
    out = capsys.readouterr().out
    assert f"{cat / 'g.yaml'}:9:20:" in out and "yaml-unsupported" in out and "internal error" not in out


def test_instance_axes_that_overflow_the_c_header(tmp_path, capsys):
    p = tmp_path / "g.yaml"
    p.write_text(
        one_block_yaml("g", COUNTER, instances="{x: 1000000, y: 1000000, z: 1000000}")
    )  # 1e18 registers > uint32_t
    gen, diags = load_generation(p)
    assert gen is None and [d.code for d in diags] == ["instances"]
    assert diags[0].span.line == 9 and "1,000,000,000,000,000,000 instances" in diags[0].message
    assert main(["codegen", "--target", "c-header", "--catalog", str(tmp_path), "--out", str(tmp_path / "h")]) == 1
    assert "internal error" not in capsys.readouterr().err


def test_yaml_line_separators_keep_the_caret_on_the_named_line():
    # U+2028 ends a line for YAML (and for str.splitlines): the diagnostic's line and shown line agree
    text = "generation: g\u2028description: x\u2028blocks: [\n"
    (d,) = read_yaml("g.yaml", text).diagnostics
    assert d.code == "yaml-syntax"
    assert (
        d.source_line == ""
        or d.source_line.split()[0] == text.replace("\u2028", "\n").split("\n")[d.span.line - 1].split()[0]
    )


# --- the metric language ---------------------------------------------------------------------------


def test_metric_file_with_cr_only_line_ends(sohu, tmp_path, capsys):
    text = (
        '# two metrics, classic Mac OS line ends\rmetric a.x [s] = interval\r  "A."\rmetric b.y [s] = 2 * '
        'interval\r  "B."\r'
    )
    decls, diags = parse_text(text, "m.metrics")
    assert [d.name for d in decls] == ["a.x", "b.y"] and diags == []
    bad = text.replace("2 * interval", "2 * * interval")
    _, diags = parse_text(bad, "m.metrics")
    assert [(d.span.line, d.span.col) for d in diags] == [(4, 22)]
    assert diags[0].source_line.startswith("metric b.y")
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "m.metrics").write_bytes(text.encode())
    assert main(["check", "--catalog", str(cat), "--no-library", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not [x for x in doc["diagnostics"] if x["severity"] == "error"]


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1e"])
def test_caret_points_at_the_line_it_names(sep):
    text = f"metric a.x [s] = interval{sep}\nmetric b.y [s] = interval +\n"
    _, diags = parse_text(text, "m.metrics")
    assert diags and diags[-1].span.line == 2  # the second declaration's error is on line 2 whatever the first holds
    for d in diags:
        shown = text.split("\n")[d.span.line - 1]
        assert d.source_line == shown
        rendered = d.render().splitlines()
        caret = next(r for r in rendered if r.strip().endswith("^") and "|" in r)
        code_line = next(r for r in rendered if r.startswith(f"{d.span.line} | "))
        assert caret.index("^") == len(f"{d.span.line} | ") + d.span.col - 1
        assert sep not in code_line  # a terminal would break the line there


def test_error_recovery_is_linear_in_the_file_size(monkeypatch):
    parsed: list[int] = []
    real = dsl_parser._parse_one

    def counting(text, *a, **k):
        parsed.append(len(text))
        return real(text, *a, **k)

    monkeypatch.setattr(dsl_parser, "_parse_one", counting)
    text = "".join(f"metric m{i}.x [s] = (interval\n" for i in range(2000))
    decls, diags = parse_text(text, "m.metrics")
    assert len(diags) == 2000 and decls == []
    assert sum(parsed) <= 2 * len(text)  # the whole file once, then each declaration once
    assert diags[-1].span.line == 2000


def test_deeply_nested_metric_expression(sohu):
    from helpers import compile_src

    g = compile_src(sohu, "metric a.x [s] = " + "(" * 5000 + "interval" + ")" * 5000 + '\n  "Deep."\n')
    assert not g.errors and "a.x" in g.metrics  # brackets alone nest nothing: the parser is iterative
    g = compile_src(sohu, "metric a.x [s] = " + "-" * 5000 + 'interval\n  "Deep."\n')
    assert [d.code for d in g.errors] == ["too-deep"] and not g.metrics


# --- dumps -----------------------------------------------------------------------------------------


def test_sample_period_infinity_in_dump_metadata(sohu, tmp_path, capsys):
    n = 4
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "seq.elapsed_cycles": pa.array(np.arange(n, dtype=np.uint64) * 1_500_000),
        }
    )
    p = tmp_path / "d.parquet"
    pq.write_table(t.replace_schema_metadata({b"perfonto": b'{"sample_period_ns": Infinity}'}), p)
    with pytest.raises(DumpError, match="sample_period_ns is inf"):
        read_counters(p, sohu)
    assert main(["analyze", str(p), "--out", str(tmp_path / "o"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and "sample_period_ns" in doc["error"]


@pytest.mark.parametrize("n, what", [(0, "no sample rows"), (1, "one sample row")])
def test_a_dump_with_no_window_says_so(tmp_path, capsys, n, what):
    """0 rows was an internal IndexError; a chip with one sample has no window either."""
    t = pa.table(
        {
            "chip": pa.array(np.zeros(n, np.int32)),
            "timestamp_ns": pa.array(np.arange(n, dtype=np.int64) * 1_000_000),
            "seq.elapsed_cycles": pa.array(np.arange(n, dtype=np.uint64) * 1_500_000),
        }
    )
    p = tmp_path / "d.parquet"
    pq.write_table(t, p)
    assert main(["analyze", str(p), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"{p}: {what}; a window needs two samples" in err and "internal error" not in err, err


def test_a_run_folders_damaged_parts_are_named_not_left_out(tmp_path, capsys):
    """A damaged ground_truth.json, or a folder in a part's place, dropped the report's assumptions,
    clock alignment or request metrics without a word."""
    import shutil

    from perfonto import emulator

    run = tmp_path / "run"
    emulator.run("sohu", model="llama-3.1-8b", chips=1, duration_s=0.02, out_dir=run)
    cases = [
        ("ground_truth.json", b'{"broken": ', "ground_truth.json:1:12: not JSON"),
        ("ground_truth.json", b"[1, 2]", "a JSON list, not the object the emulator writes"),
        ("ground_truth.json", b"\xff\xfe", "not UTF-8"),
        ("requests.parquet", None, "requests.parquet: not a file, so the run's requests cannot be read"),
    ]
    for i, (name, body, why) in enumerate(cases):
        case = tmp_path / f"case{i}"
        shutil.copytree(run, case)
        (case / name).unlink()
        if body is None:
            (case / name).mkdir()
        else:
            (case / name).write_bytes(body)
        assert main(["analyze", str(case), "--out", str(tmp_path / f"o{i}")]) == 1
        err = " ".join(capsys.readouterr().err.split())
        assert why in err and f"analyse {case / 'counters.parquet'} alone" in err and "internal" not in err, err
        assert not (tmp_path / f"o{i}").exists()


# --- importers -------------------------------------------------------------------------------------

DEEP = 20_000


@pytest.mark.parametrize(
    "fmt, body",
    [
        ("perf", "[" * DEEP + "]" * DEEP),
        ("intel", '{"Metrics": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("arm", '{"metrics": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("rocprof", "a: " + "[" * DEEP + "]" * DEEP + "\n"),
    ],
)
def test_deeply_nested_documents_in_every_importer(tmp_path, fmt, body):
    p = tmp_path / f"x.{'yaml' if fmt == 'rocprof' else 'json'}"
    p.write_text(body)
    report = import_file(fmt, p, tmp_path / "out")
    assert not report.ok and "nested" in report.error and str(p) in report.error


@pytest.mark.parametrize(
    "fmt, make",
    [
        ("perf", lambda f: json.dumps([{"MetricName": "m", "MetricExpr": f}])),
        (
            "intel",
            lambda f: json.dumps(
                {"Metrics": [{"MetricName": "m", "LegacyName": "m", "Formula": f, "Events": [], "Constants": []}]}
            ),
        ),
        ("arm", lambda f: json.dumps({"events": {}, "metrics": {"m": {"formula": f, "title": "m", "units": "ratio"}}})),
        ("rocprof", lambda f: "m:\n  architectures:\n    gfx942:\n      expression: '" + f + "'\n  description: m\n"),
    ],
)
@pytest.mark.parametrize("shape", ["parens", "unary", "chain"])
def test_deeply_nested_formulas_in_every_importer(tmp_path, fmt, make, shape):
    if shape == "parens":
        f = "(" * DEEP + "a" + ")" * DEEP
    elif shape == "unary":
        f = "-" * DEEP + "a" if fmt != "rocprof" else "reduce(" * 3000 + "a" + ",sum)" * 3000
    else:
        f = " + ".join(["a"] * DEEP)
    p = tmp_path / f"x.{'yaml' if fmt == 'rocprof' else 'json'}"
    p.write_text(make(f))
    report = import_file(fmt, p, tmp_path / "out")  # never raises
    doc = report.to_json()
    if shape == "parens":  # brackets alone nest nothing: `a`
        assert not report.error and report.total == 1
    else:
        assert not report.ok
        assert "nested" in (report.error or "") or any("nested" in r["reason"] for r in report.rejected()), doc


def test_formula_parsers_refuse_deep_nesting_and_unclosed_brackets():
    with pytest.raises(ParseError, match="nested more than 100 levels"):
        parse_formula("-" * 5000 + "a", "perf")
    with pytest.raises(ParseError, match="nested more than 100 levels"):
        parse_formula(" + ".join(["a"] * 5000), "intel")
    with pytest.raises(SyntaxError, match="unexpected `end`"):  # the hand-written parser looped forever here
        parse_rocprof("reduce(SQ_WAVES,sum,[DIM")
    assert len(str(pytest.raises(ParseError, parse_formula, "a +" * 1000, "perf").value)) < 400


# --- paths and devices -----------------------------------------------------------------------------


def _cases(tmp_path: Path) -> list[list[str]]:
    perf = tmp_path / "p.json"
    perf.write_text(json.dumps([{"MetricName": "a", "MetricExpr": "b / c"}]))
    t = f"/tmp/{LONG}"
    return [
        ["check", "--catalog", t],
        ["test", t],
        ["import", "perf", t, "--out", str(tmp_path / "o1")],
        ["import", "perf", str(perf), "--out", str(tmp_path / "o2"), "--name", LONG],
        ["codegen", "--target", "python", "--out", t],
        ["analyze", t, "--out", str(tmp_path / "o3")],
        ["docs", "--out", t],
        ["export", "perf-json", "--out", t + ".json"],
        ["timeline", t, "--out", str(tmp_path / "t.json")],
        ["align", t],
        ["diff", "sohu", t + ".yaml"],
        ["run", "--duration", "2ms", "--out", t],
    ]


def test_overlong_names_and_paths_in_every_command(tmp_path, capsys):
    for argv in _cases(tmp_path):
        code = main([*argv, "--json"])
        out, err = capsys.readouterr()
        assert code in (1, 2), argv
        assert "internal error" not in err and "Errno" not in err, (argv, err)
        doc = json.loads(out)
        assert doc["ok"] is False and (doc.get("error") or doc.get("diagnostics")), (argv, doc)


def test_docs_out_into_an_unwritable_place(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    for out in ("/proc/perfonto-nope/site", str(f / "site")):
        assert main(["docs", "--out", out, "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["ok"] is False and "choose another --out" in doc["error"]


@pytest.mark.parametrize(
    "argv",
    [
        ["test", "/dev/full"],
        ["check", "--catalog", "/dev/full"],
        ["import", "perf", "/dev/full", "--out", "OUT"],
        ["import", "rocprof", "/dev/zero", "--out", "OUT"],
        ["import", "arm", "/dev/zero", "--out", "OUT"],
        ["validate-emulator", "--rows", "/dev/full"],
        ["explain", "mfu", "--catalog", "/dev/full"],
    ],
)
def test_device_files_are_refused_not_read_forever(tmp_path, argv):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    r = _run([a.replace("OUT", str(tmp_path / "o")) for a in argv], timeout=90)
    assert r.returncode in (1, 2), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert "/dev/" in r.stderr + r.stdout


@pytest.mark.parametrize("cmd", ["calibrate", "validate-emulator"])
def test_calibrate_and_validate_emulator_name_the_file(tmp_path, capsys, cmd):
    extra = ["--no-loo", "--out", str(tmp_path / "f.yaml")] if cmd == "calibrate" else []
    for rows, reason in ((tmp_path / "nope.yaml", "No such file"), (tmp_path, "folder")):
        assert main([cmd, "--rows", str(rows), *extra]) == 1
        err = capsys.readouterr().err
        assert str(rows) in err and reason in err and "Errno" not in err


ROW = "{source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 8, osl: 8, value: 3"
SRC = "sources: {a: {url: x, profile: trtllm}}\nrows:\n"


@pytest.mark.parametrize(
    "text,where,why",
    [
        ("sources: [\n", ":1:11:", "malformed YAML"),  # the end of its one line, not a line 2
        (SRC + "  - 7\n", ":3: row 1", "expected a mapping, got 7"),
        (SRC + "  - {source: a, gpu: h100, tp: 1, dtype: fp8, isl: 8, osl: 8, value: 3}\n", ":3: row 1", "no `model`"),
        (
            SRC + f"  - {ROW}}}\n  - {ROW.replace('llama-3.1-8b', 'gpt-17')}}}\n",
            ":4: row 2",
            "unknown model 'gpt-17'",
        ),
        (SRC + f"  - {ROW.replace('dtype: fp8', 'dtype: fp7')}}}\n", ":3: row 1", "unknown dtype 'fp7'"),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: lots, osl: 8, value: 3}\n",
            ":3: row 1",
            "`isl` is a whole number ≥ 1 (got 'lots')",
        ),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 8.7, osl: 8, value: 3}\n",
            ":3: row 1",
            "`isl` is a whole number",
        ),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 8, osl: 8, value: 0}\n",
            ":3: row 1",
            "`value` is a finite number > 0",
        ),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 8, osl: 8, value: .nan}\n",
            ":3: row 1",
            "`value` is a finite",
        ),
        (
            SRC + f"  - {ROW}, concurency: 8}}\n",
            ":3: row 1",
            "unknown field `concurency` (did you mean `concurrency`?)",
        ),
        (
            SRC + "  - {model: llama-3.1-8b, gpu: h100, tp: 1, dtype: fp8, isl: 8, osl: 8, value: 3}\n",
            ":3: row 1",
            "no `source`",
        ),
        (
            SRC + f"  - {ROW}}}\n  - {ROW.replace('source: a', 'source: b')}}}\n",
            ":4: row 2",
            "source `b` is not listed",
        ),
        ("sources: {a: {url: x}}\nrows:\n" + f"  - {ROW}}}\n", ":3: row 1", "names no engine profile (`profile:`)"),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h9000, tp: 1, dtype: fp8, isl: 8, osl: 8, value: 3}\n",
            ":3: row 1",
            "h9000",
        ),
        (SRC + f"  - {ROW}}}\nrows: []\n", ":4:1:", "duplicate key `rows`"),
        (
            SRC + "  - {source: a, model: llama-3.1-8b, gpu: h100, tp: 1, isl: 8, osl: 8, value: 3}\n",
            ":3: row 1",
            "no `dtype`",
        ),
        (SRC + f"  - {ROW}, num_requests: 100000000}}\n", ":3: row 1", "between 0 and 1,000,000"),
        (SRC + f"  - {ROW.replace('value: 3', 'value: 1e3')}}}\n", ":3: row 1", "write the number with a dot"),
        (SRC + f"  - {ROW}, concurrency: 100000000}}\n", ":3: row 1", "between 0 and 10,000"),
        (
            SRC + f"  - {ROW.replace('tp: 1', 'tp: 4096')}}}\n",
            ":3: row 1",
            "`tp` is a whole number between 1 and 1,024",
        ),
        (SRC + f"  - {ROW.replace('tp: 1', 'tp: 512')}, pp: 4}}\n", ":3: row 1", "more than 1024 chips"),
        (SRC + f"  - {ROW}, pp: 3}}\n", ":3: row 1", "do not split over pp = 3"),
        (SRC + f"  - {ROW.replace('isl: 8', 'isl: 100000000000')}}}\n", ":3: row 1", "KV tokens but only"),
        (SRC + f"  - {ROW}, max_batch: 8, token_budget: 1}}\n", ":3: row 1", "never fits a 1-token step"),
        (
            "sources: {a: {url: x, profile: trtllm}, bogus: 5}\nrows:\n" + f"  - {ROW}}}\n",
            ":1: source `bogus`",
            "not 5",
        ),
        ("sources:\n  a: {url: x, profile: trtllm}\n  b:\nrows:\n" + f"  - {ROW}}}\n", ":3: source `b`", "not None"),
        ("sources: [a]\nrows: []\n", "s.yaml:1: `sources` is a mapping", "not a list"),
        # a source list after rows was blamed on row 1's line; a rows file given as --sources said the same
        (
            "rows:\n" + f"  - {ROW}}}\n" + "sources: [a, b]\n",
            "s.yaml:3: `sources` is a mapping",
            "not a list",
        ),
        ("rows:\n" + f"  - {ROW}}}\n", "s.yaml: no `sources`", "is this a rows file"),
        (b"rows: [\xff]\n", ":1:", "not UTF-8"),
    ],
)
def test_a_bad_sources_file_names_its_line_before_any_replay(tmp_path, capsys, monkeypatch, text, where, why):
    """A sources file that does not read, or a row that cannot be replayed, is refused with ``file:line``
    and the reason before any replay (a YAML error was an internal error; a row's unknown model named no
    file and surfaced only in its replay; a misspelt field was ignored)."""
    from perfonto.commands import validate_emulator

    def no_replay(*a, **k):
        raise AssertionError("a replay ran before the sources file was checked")

    monkeypatch.setattr(validate_emulator, "prepare_rows", no_replay)
    p = tmp_path / "s.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["validate-emulator", "--no-loo", "--no-loso", "--sources", str(p)]) == 1
    err = capsys.readouterr().err
    assert f"{p}{where}" in err or (where.startswith("s.yaml") and f"{tmp_path}/{where}" in err), err
    assert why in err and "internal error" not in err, err


def test_calibrate_refuses_a_rows_file_without_rows(tmp_path, capsys):
    p = tmp_path / "r.yaml"
    for text in ("rows: []\n", "title: x\n"):
        p.write_text(text)
        assert main(["calibrate", "--no-loo", "--rows", str(p), "--out", str(tmp_path / "f.yaml")]) == 1
        err = capsys.readouterr().err
        assert f"{p}: no `rows`" in err and "internal error" not in err, err


def test_calibrate_never_writes_over_what_it_should_not(tmp_path, capsys):
    from perfonto.commands.calibrate import _written_by_calibrate
    from perfonto.emulator.assumptions import DATA

    shipped = (DATA / "fitted.yaml").read_bytes()
    rows = tmp_path / "r.yaml"
    rows.write_bytes((DATA / "calibration.yaml").read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    cases = [
        ([], "is not the shipped calibration file: give --out FILE"),  # would replace the shipped constants
        (["--out", str(rows)], "is the --rows file"),
        (["--out", str(notes)], "exists and was not written by `perfonto calibrate`"),
        (["--out", str(DATA / "fitted.yaml")], "is the shipped constants every projection uses"),
        (["--out", str(tmp_path)], "is a folder"),
        (["--out", str(tmp_path / "no" / "f.yaml")], "which does not exist"),
        (["--out", str(notes / "f.yaml")], "which is not a folder"),
        (["--out", ""], "an empty path"),
    ]
    for extra, why in cases:
        assert main(["calibrate", "--no-loo", "--rows", str(rows), *extra]) == 2
        err = capsys.readouterr().err
        assert why in err and "internal error" not in err, err
    assert (DATA / "fitted.yaml").read_bytes() == shipped
    assert rows.read_bytes() == (DATA / "calibration.yaml").read_bytes() and notes.read_text() == "mine\n"
    assert _written_by_calibrate(DATA / "fitted.yaml") and not _written_by_calibrate(notes)


# --- docs ------------------------------------------------------------------------------------------


def test_description_with_leading_spaces_is_not_a_code_block(sohu):
    from perfonto.codegen.docs import generate_markdown
    from perfonto.codegen.docs_site import generate_site
    from helpers import compile_src

    g = compile_src(sohu, 'metric a.x [s] = interval\n  "    indented: would be a code block"\n  groups serving\n')
    for text in [generate_markdown(g), *generate_site({"sohu": g}, "sohu").values()]:
        for line in text.splitlines():
            assert not (line.startswith("    ") and "indented" in line), line


def test_reading_yaml_keeps_no_memory_across_reads(tmp_path):
    """A long-lived process (a fuzz campaign, `perfonto serve`, a notebook) reads catalogs many times:
    nothing of a read outlives it. A shared YAML constructor once kept every scalar node (and with it
    the file's buffers) — 3.5 GB after 90,000 fuzzed generation files, and 10-s garbage collections
    that the campaign counted as hangs. One read of sohu.yaml composes ~600 KB of nodes, so a read that kept
    even a tenth of them crosses the bound in 5 reads (each read under tracemalloc takes ~0.5 s)."""
    import gc
    import tracemalloc

    from perfonto.ontology.loader import catalog_dir

    text = (catalog_dir() / "sohu.yaml").read_text(encoding="utf-8")
    p = tmp_path / "g.yaml"
    p.write_text(text, encoding="utf-8")
    read_yaml(p)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            read_yaml(p)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 200_000, f"{grown:,} bytes kept after 5 reads of a {len(text):,}-character file"
