"""Issue 28, defects 1 and 3: a name from data never chooses a path, and perfonto never deletes a file it
did not write nor an input. Data-loss tests check the bytes of every pre-existing file after the command
and the listing of the parent folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from perfonto.capture.partitions import PathEscapeError, inside, segment, value
from perfonto.cli import main


def _csv(path: Path, host: str | None = "h0", rows: int = 20) -> Path:
    head = ("host," if host is not None else "") + "chip,timestamp_ns,seq.elapsed_cycles,seq.idle_cycles"
    lines = [head] + [
        (f"{host}," if host is not None else "") + f"0,{(r - 1) * 1_000_000},{r * 1000},{r}" for r in range(1, rows + 1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes), symbolic links as their target."""
    out = {}
    for d, dirs, files in os.walk(root):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = Path(d) / f
            out[str(p.relative_to(root))] = ("->" + os.readlink(p)).encode() if p.is_symlink() else p.read_bytes()
    return out


# -- 1. a host name from data ------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["../../../../../OUTSIDE", "a/b", "..", ".", "a\x00b", "x=y%2F", "ünï cødé", "~home"])
def test_a_host_round_trips_through_one_path_component(host):
    seg = segment("host", host)
    assert "/" not in seg and "\x00" not in seg and seg not in (".", "..") and seg.startswith("host=")
    assert value(seg.removeprefix("host=")) == host


def test_a_host_that_climbs_out_stays_inside_out(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    d = _csv(tmp_path / "in" / "d.csv", host="../../../../../OUTSIDE")
    out = tmp_path / "deep" / "a" / "b" / "o"
    assert main(["analyze", str(d), "--engine", "embedded", "--out", str(out)]) == 0
    parts = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("part-*.parquet"))
    assert parts == ["deep/a/b/o/metrics/host=..%2F..%2F..%2F..%2F..%2FOUTSIDE/part-00000.parquet"]
    assert sorted(os.listdir(tmp_path)) == ["deep", "in"] and sorted(os.listdir(tmp_path / "deep" / "a")) == ["b"]
    # the folder name decodes back to the host, for DuckDB and pyarrow alike
    import duckdb

    got = duckdb.sql(
        f"select distinct host from read_parquet('{out}/metrics/**/*.parquet', hive_partitioning=true)"
    ).fetchall()
    assert got == [("../../../../../OUTSIDE",)]


def test_a_host_with_a_nul_byte_is_a_folder_not_an_internal_error(tmp_path, capsys):
    import pyarrow as pa

    t = pa.table(
        {
            "host": ["a\x00b"] * 20,
            "chip": pa.array([0] * 20, pa.int64()),
            "timestamp_ns": pa.array([i * 1_000_000 for i in range(20)], pa.int64()),
            "seq.elapsed_cycles": pa.array([(i + 1) * 1000 for i in range(20)], pa.uint64()),
            "seq.idle_cycles": pa.array([i + 1 for i in range(20)], pa.uint64()),
        }
    )
    pq.write_table(t, tmp_path / "d.parquet")
    assert main(["analyze", str(tmp_path / "d.parquet"), "--engine", "embedded", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "\x00" not in printed and "a\\x00b/0" in printed  # escaped on the terminal too
    assert [p.name for p in (tmp_path / "o" / "metrics").iterdir()] == ["host=a%00b"]


def test_a_host_too_long_for_a_file_name_is_refused_with_its_file(tmp_path, capsys):
    d = _csv(tmp_path / "d.csv", host="x" * 300)
    assert main(["analyze", str(d), "--engine", "embedded", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert f"{d}: column host: the host `xxx" in err and "300 characters" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["d.csv"]


def test_inside_follows_links(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    assert inside(tmp_path / "out" / "x", tmp_path / "out")
    with pytest.raises(PathEscapeError, match="outside the output folder"):
        inside(tmp_path / "out" / "link" / "x", tmp_path / "out")


# -- 3. user files and inputs -------------------------------------------------------------------------------
def test_a_second_analyze_keeps_the_users_notes(tmp_path, capsys):
    d = _csv(tmp_path / "d.csv")
    prev = tmp_path / "prev"
    assert main(["analyze", str(d), "--out", str(prev)]) == 0
    (prev / "my_notes.txt").write_text("notes\n")
    (prev / "docs" / "review.md").write_text("my review\n")  # inside one of perfonto's subfolders, too
    before = _snapshot(tmp_path)
    assert main(["analyze", str(d), "--out", str(prev)]) == 0
    after = _snapshot(tmp_path)
    assert after["prev/my_notes.txt"] == b"notes\n" and after["prev/docs/review.md"] == b"my review\n"
    assert after["d.csv"] == before["d.csv"]
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "prev"]
    manifest = json.loads((prev / "perfonto.json").read_text())
    assert "my_notes.txt" not in manifest["files"] and "report.json" in manifest["files"]
    assert "kept 2 file(s)" in capsys.readouterr().err


def test_force_keeps_what_perfonto_did_not_write_and_refuses_a_clash(tmp_path, capsys):
    d = _csv(tmp_path / "d.csv")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    assert main(["analyze", str(d), "--out", str(mine), "--force"]) == 0
    assert (mine / "thesis.tex").read_text() == "precious" and (mine / "report.json").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "report.json").write_text("my own report")
    before = _snapshot(tmp_path)
    assert main(["analyze", str(d), "--out", str(other), "--force"]) == 1
    assert "report.json: perfonto did not write this file" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "mine", "other"]


@pytest.mark.parametrize("where", ["equal", "above", "inside"])
def test_an_out_that_would_replace_or_read_its_input_is_refused(tmp_path, capsys, where):
    folder = tmp_path / "dumps"
    folder.mkdir()
    _csv(folder / "d.csv")
    src = folder if where != "above" else folder / "d.csv"
    out = {"equal": folder, "above": tmp_path, "inside": folder / "o"}[where]
    before = _snapshot(tmp_path)
    for force in ([], ["--force"]):
        assert main(["analyze", str(src), "--out", str(out), *force]) == 1
        err = capsys.readouterr().err
        assert "the output folder" in err and "input" in err and "choose an --out outside it" in err, err
        assert _snapshot(tmp_path) == before


def test_a_symlinked_out_writes_where_it_points_and_leaves_no_links(tmp_path):
    d = _csv(tmp_path / "d.csv")
    real = tmp_path / "real"
    link = tmp_path / "link"
    assert main(["analyze", str(d), "--out", str(real)]) == 0
    link.symlink_to(real)
    assert main(["analyze", str(d), "--out", str(link)]) == 0
    assert link.is_symlink() and (real / "report.json").is_file()
    assert sorted(os.listdir(tmp_path)) == ["d.csv", "link", "real"]  # no .real.old-<id> or .link.* left behind


# -- 2. single-file outputs are atomic -------------------------------------------------------------------------
#: The environment of a child run under a small disk (``_with_small_disk``): no perfonto cache, and no bytecode
#: written — a module the child compiled had its .pyc cut at the size limit (the write's EFBIG is ignored), and
#: every later import of it, in any test, failed with "EOFError: marshal data too short".
SMALL_DISK_ENV = {"PERFONTO_NO_CACHE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _with_small_disk(limit: int):
    """A child whose files may not grow past ``limit`` bytes (RLIMIT_FSIZE; SIGXFSZ ignored so the write
    fails with EFBIG, as a full disk fails with ENOSPC)."""
    import resource
    import signal

    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


@pytest.mark.parametrize(
    "args, name",
    [
        (["export", "perf-json"], "perf.json"),
        (["export", "semconv"], "semconv"),
        (["sweep", "--vary", "isl=128,256", "--no-cache"], "sweep.json"),
        pytest.param(["run", "--duration", "100ms", "--chips", "1"], "o", marks=pytest.mark.slow),
        pytest.param(["compare", "sohu", "caelius", "--no-cache"], "cmp.json", marks=pytest.mark.slow),
    ],
)
def test_a_write_that_fails_midway_leaves_the_old_output_whole(tmp_path, monkeypatch, capsys, args, name):
    """The old output is written in process (``main``); the write that fails is a child's, whose file size
    is capped (a resource limit of its own)."""
    import subprocess
    import sys

    out = tmp_path / name
    env = {**os.environ, **SMALL_DISK_ENV}

    def perfonto(**kw):
        return subprocess.run(
            [sys.executable, "-m", "perfonto", *args, "--out", str(out)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
            **kw,
        )

    monkeypatch.chdir(tmp_path)
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err[-2000:]
    before = _snapshot(tmp_path)
    small = perfonto(preexec_fn=_with_small_disk(600))
    assert small.returncode == 1, small.stderr[-2000:]
    assert "Traceback" not in small.stderr and f"{out}" in small.stderr.split("error:")[-1], small.stderr[-1500:]
    assert _snapshot(tmp_path) == before  # the old output byte for byte, and no temporary left beside it
    assert sorted(os.listdir(tmp_path)) == sorted(
        {name} | {n for n in os.listdir(tmp_path) if n.startswith(".") and n.endswith(".lock")}
    )


# -- 7. --catalog DIR takes the folder's generation -----------------------------------------------------------
@pytest.mark.parametrize("target", ["perf-json", "semconv"])
def test_export_of_a_catalog_folder_takes_its_generation(tmp_path, capsys, target):
    folder = Path(__file__).resolve().parents[1] / "perfonto" / "catalogs" / "dcgm"
    assert main(["export", target, "--catalog", str(folder), "--out", str(tmp_path / "o"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["generation"] == "dcgm_h200"  # the one no other file extends


def test_two_writers_through_a_link_and_its_target_share_one_lock(tmp_path):
    import subprocess
    import sys
    import time

    from perfonto.outputs import OutputError, output_folder

    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time, sys\nfrom perfonto.outputs import output_folder\n"
            f"with output_folder({str(real)!r}) as t:\n    print('held', flush=True)\n    time.sleep(20)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with pytest.raises(OutputError, match="another perfonto"):
            with output_folder(link):
                pass
        assert time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait()


def test_serve_follow_takes_the_catalog_folders_generation(tmp_path):
    from live_helpers import ServeProcess

    (tmp_path / "parts").mkdir()
    folder = Path(__file__).resolve().parents[1] / "perfonto" / "catalogs" / "node"
    with ServeProcess(["--follow", str(tmp_path / "parts"), "--catalog", str(folder)]) as s:
        assert "metrics of node (catalog hash" in "".join(s.err_lines)


# -- a review's findings (issue 28): ways the first version still lost a user's data ---------------------------
def _make(out, files: dict[str, str], **kw):
    from perfonto.outputs import output_folder

    with output_folder(out, **kw) as tmp:
        for rel, text in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_text(text)


def test_an_out_spelled_with_dotdot_is_the_folder_it_names(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _make(out, {"a.txt": "first"})
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("mine")
    (out / "top.txt").write_text("top")
    monkeypatch.chdir(out / "notes")
    _make("..", {"a.txt": "second"})
    assert (out / "notes" / "mine.txt").read_text() == "mine" and (out / "top.txt").read_text() == "top"
    assert (out / "a.txt").read_text() == "second"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_an_interrupt_between_the_two_renames_puts_everything_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _make(out, {"a.txt": "first"})
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("mine")
    real_rename = Path.rename
    calls = []

    def rename(self, target):
        calls.append(self.name)
        if self.name.startswith(".out.tmp-"):
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        _make(out, {"a.txt": "second"})
    monkeypatch.undo()
    assert (out / "a.txt").read_text() == "first" and (out / "notes" / "mine.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("text", ['{"tool": "other"}', '{"files": "x"}', "[1]", "not json"])
def test_someone_elses_perfonto_json_is_not_perfontos_manifest(tmp_path, text):
    from perfonto.outputs import OutputError

    out = tmp_path / "out"
    out.mkdir()
    (out / "perfonto.json").write_text(text)
    (out / "a.txt").write_text("mine")
    with pytest.raises(OutputError, match="perfonto did not write it"):
        _make(out, {"a.txt": "new"})
    with pytest.raises(OutputError, match="perfonto did not write this file"):
        _make(out, {"a.txt": "new"}, force=True)
    assert (out / "a.txt").read_text() == "mine" and (out / "perfonto.json").read_text() == text


def test_empty_user_folders_and_folder_permissions_are_kept(tmp_path):
    out = tmp_path / "out"
    _make(out, {"a.txt": "first"})
    (out / "empty").mkdir()
    (out / "private").mkdir(mode=0o700)
    os.chmod(out / "private", 0o700)
    (out / "private" / "key").write_text("k")
    _make(out, {"a.txt": "second"})
    assert (out / "empty").is_dir() and (out / "private" / "key").read_text() == "k"
    assert (out / "private").stat().st_mode & 0o777 == 0o700


def test_a_single_file_output_replaces_a_link_and_keeps_permissions(tmp_path):
    from perfonto.outputs import write_file

    (tmp_path / "input.parquet").write_text("precious input")
    (tmp_path / "report.html").symlink_to(tmp_path / "input.parquet")
    write_file(tmp_path / "report.html", "page")
    assert (tmp_path / "input.parquet").read_text() == "precious input"
    assert not (tmp_path / "report.html").is_symlink() and (tmp_path / "report.html").read_text() == "page"
    (tmp_path / "secret.json").write_text("{}")
    os.chmod(tmp_path / "secret.json", 0o600)
    write_file(tmp_path / "secret.json", "{1}")
    assert (tmp_path / "secret.json").stat().st_mode & 0o777 == 0o600


def test_a_user_file_where_an_output_folder_goes_is_a_clear_refusal(tmp_path):
    from perfonto.outputs import OutputError

    out = tmp_path / "out"
    _make(out, {"b.txt": "first"})
    (out / "a").write_text("mine")
    with pytest.raises(OutputError, match="perfonto did not write this file"):
        _make(out, {"a/x.txt": "new"})
    assert (out / "a").read_text() == "mine" and (out / "b.txt").read_text() == "first"


@pytest.mark.slow
def test_timeline_and_align_writes_that_fail_leave_the_old_files_whole(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, **SMALL_DISK_ENV}
    run = tmp_path / "run"
    assert main(["run", "--duration", "100ms", "--chips", "2", "--out", str(run)]) == 0
    for args, name in (
        (["timeline", str(run), "--out", str(tmp_path / "t.json")], "t.json"),
        (["align", str(run)], "run"),
    ):
        first = subprocess.run(
            [sys.executable, "-m", "perfonto", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert first.returncode == 0, first.stderr[-1500:]
        before = _snapshot(tmp_path)
        small = subprocess.run(
            [sys.executable, "-m", "perfonto", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            preexec_fn=_with_small_disk(600),
        )
        assert small.returncode == 1 and "Traceback" not in small.stderr, small.stderr[-1500:]
        assert _snapshot(tmp_path) == before, name


@pytest.mark.slow
def test_coverage_out_under_a_small_disk_leaves_the_old_table_whole(tmp_path):
    """`coverage --out` writes beside and renames; under a small disk its emulations fail first (pyarrow's own
    message), and the previous table is untouched."""
    import subprocess
    import sys

    env = {**os.environ, **SMALL_DISK_ENV}
    args = [
        sys.executable,
        "-m",
        "perfonto",
        "coverage",
        "--only",
        "idle,slow-chip",
        "--seeds",
        "1",
        "--out",
        str(tmp_path / "cov.json"),
    ]
    assert subprocess.run(args, capture_output=True, text=True, env=env, timeout=600).returncode == 0
    before = _snapshot(tmp_path)
    small = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, preexec_fn=_with_small_disk(600))
    assert small.returncode == 1 and "Traceback" not in small.stderr, small.stderr[-1500:]
    assert _snapshot(tmp_path) == before


def test_a_single_file_output_never_replaces_a_device_a_pipe_or_a_users_file(tmp_path, capsys):
    """A breaker (as root): `report --html /dev/zero` replaced the device with the page (rc 0), `--html
    notes.txt` a user's notes, `export perf-json --out` another run's report.json. Single-file outputs now
    refuse a device, a pipe and a folder always, and a file perfonto did not write unless --force; a file
    perfonto wrote is replaced as before (a second run to the same name)."""
    from perfonto.cli import main

    run = tmp_path / "run"
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    notes = tmp_path / "notes.html"
    notes.write_text("my notes")
    for argv, target in (
        (["report", str(run), "--html"], fifo),
        (["report", str(run), "--html"], notes),
        (["timeline", str(run), "--out"], notes),
        (["export", "perf-json", "--out"], notes),
        (["plan", "--metrics", "mfu", "--collector-config"], notes.with_suffix(".json")),
    ):
        if target.suffix == ".json":
            target.write_text('{"mine": 1}')
        assert main([*argv, str(target), "--json"]) == 1, argv
        err = json.loads(capsys.readouterr().out)["error"]
        assert ("not a regular file" in err) if target == fifo else ("a file perfonto did not write" in err), err
    assert notes.read_text() == "my notes" and fifo.is_fifo()
    page = tmp_path / "page.html"
    assert main(["report", str(run), "--html", str(page), "--json"]) == 0
    assert main(["report", str(run), "--html", str(page), "--json"]) == 0  # its own page, replaced
    assert main(["report", str(run), "--html", str(notes), "--force", "--json"]) == 0
    assert "my notes" not in notes.read_text()


def test_a_pipe_given_as_a_run_part_is_refused_not_waited_on(tmp_path, capsys):
    """A breaker's `analyze … --sync fifo` (or --requests, --trace) waited for ever; COUNTERS already refused."""
    from perfonto.cli import main

    run = tmp_path / "run"
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for option in ("--sync", "--requests", "--trace"):
        argv = ["analyze", str(run / "counters.parquet"), "--out", str(tmp_path / "o"), option, str(fifo), "--json"]
        assert main(argv) == 1
        assert json.loads(capsys.readouterr().out)["error"] == (
            f"{fifo}: not a regular file (a device or a pipe?); give {option} a file"
        )


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["analyze", "", "--out", "x"], "COUNTERS"),
        (["analyze", "c.parquet", "--out", "x", "--requests", ""], "--requests"),
        (["report", "r", "--html", "p.html", "--plots", ""], "--plots"),
        (["codegen", "--target", "sql", "--counters", "", "--out", "g"], "--counters"),
        (["compare-runs", "a", ""], "RUN"),
    ],
)
def test_an_empty_path_is_a_usage_error(argv, flag, capsys):
    """A breaker: `analyze ''` read the current folder, `--plots ''` wrote pictures into it, `codegen --counters
    ''` wrote SQL that reads it (rc 0)."""
    assert main([*argv, "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"] == f"{flag}: an empty path; give a file or folder"


def test_an_option_of_one_value_given_twice_is_refused(capsys):
    """A breaker: `run --slow-chip 3:1.2 --slow-chip 4:1.3` kept chip 4's fault only, rc 0; so did --chips,
    --by, --metrics. Options that collect values (--vary, --constant) and switches may repeat."""
    assert main(["run", "--slow-chip", "3:1.2", "--slow-chip", "4:1.3", "--json"]) == 2
    assert "--slow-chip is given twice; give it once" in capsys.readouterr().err
    assert main(["analyze", "x", "--out", "y", "--metrics", "mfu", "--metrics=tokens_per_second"]) == 2
    assert "--metrics is given twice" in capsys.readouterr().err
    assert main(["project", "--json", "--json", "--isl", "64", "--osl", "8", "--requests", "4"]) == 0


def test_a_folder_another_command_wrote_is_not_replaced_without_force(tmp_path, capsys):
    """A breaker: `docs --out RUN` deleted the run's counters and report (its manifest listed them), rc 0.
    codegen adds to a folder (keeping the run's files and inputs: test_outputs), so it is not refused."""
    run = tmp_path / "run"
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    for argv in (["docs", "--out", str(run)], ["emulate", "--fleet", "1x1", "--duration", "20ms", "--out", str(run)]):
        assert main([*argv, "--json"]) == 1
        assert "holds the output of `perfonto run`" in json.loads(capsys.readouterr().out)["error"]
        assert (run / "counters.parquet").is_file() and (run / "report.json").is_file()
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0  # the same command
    assert main(["docs", "--out", str(run), "--force", "--json"]) == 0


def test_an_out_inside_the_run_folder_given_is_refused(tmp_path, capsys):
    """A breaker: `analyze RUN --out RUN/sub` was written (rc 0) though the README refuses an --out inside an
    input: the run folder given was not among the recorded inputs, only its counters.parquet."""
    run = tmp_path / "run"
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0
    capsys.readouterr()
    assert main(["analyze", str(run), "--out", str(run / "sub"), "--json"]) == 1
    assert "lies inside the input" in json.loads(capsys.readouterr().out)["error"] and not (run / "sub").exists()
    assert main(["analyze", str(run), "--out", str(tmp_path / "elsewhere"), "--json"]) == 0


def test_a_page_another_command_wrote_into_a_run_is_not_called_the_users(tmp_path, capsys):
    """A new user: after `report RUN --html RUN/page.html`, a new `run --out RUN` said it kept 3 files "that
    perfonto did not write" — two were the page and its timeline, written by perfonto a minute before."""
    run = tmp_path / "run"
    argv = ["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]
    assert main(argv) == 0
    (run / "notes.txt").write_text("mine")
    assert main(["report", str(run), "--html", str(run / "page.html"), "--json"]) == 0
    capsys.readouterr()
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "kept 1 file(s) in" in err and "that perfonto did not write (e.g. notes.txt)" in err
    assert "that another perfonto command wrote there (e.g. page.html)" in err


def test_review_cases_of_the_output_guards(tmp_path, capsys):
    """A review of the guards: `sweep --plot link.png` wrote through the link into the user's file (savefig
    follows links); `findings r1 --reproject` then `findings r2 --reproject` into the default folder was
    refused ("holds the output of `perfonto r1`": findings records ["findings", RUN]); a page written into a
    run folder an analysis read was refused as one of the run's files."""
    from perfonto.outputs import _subcommand

    assert _subcommand(["findings", "/x/r1"]) == "findings" and _subcommand(["perfonto"]) == "run"
    assert _subcommand(["/usr/bin/python", "-m", "ipykernel_launcher", "-f", "kernel-1.json"]) is None
    notes = tmp_path / "notes.png"
    notes.write_bytes(b"my picture")
    (tmp_path / "plot.png").symlink_to(notes)
    argv = ["sweep", "--model", "llama-3.1-8b", "--chips", "1", "--osl", "8", "--requests", "4"]
    assert main([*argv, "--vary", "isl=64,128", "--plot", str(tmp_path / "plot.png"), "--json"]) == 0
    capsys.readouterr()
    assert notes.read_bytes() == b"my picture" and not (tmp_path / "plot.png").is_symlink()
    run = tmp_path / "run"
    assert main(["run", "--duration", "50ms", "--chips", "2", "--out", str(run), "--json"]) == 0
    assert main(["analyze", str(run), "--out", str(tmp_path / "a"), "--json"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "a"), "--html", str(run / "analysis.html"), "--json"]) == 0
