"""`perfonto explain` / `graph` read their text from the cache when the catalog's files are unchanged
(issue 26: a warm explain loads no catalog), and make it again when a file changes."""

import perfonto.metrics.explain as explain_mod
from perfonto.cli import main

MINE = """metric my.busy [percent] = avg(mxu.busy_cycles) / seq.elapsed_cycles
  "{text}"
  bounds 0 .. 100
"""


def _explain(capsys, *argv) -> tuple[int, str]:
    rc = main(["explain", *argv])
    return rc, capsys.readouterr().out


def test_warm_explain_reads_the_cache_and_equals_a_compile(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PERFONTO_NO_CACHE", "1")
    rc0, fresh = _explain(capsys, "mfu")
    monkeypatch.delenv("PERFONTO_NO_CACHE")
    rc1, first = _explain(capsys, "mfu")
    assert (rc0, rc1) == (0, 0) and first == fresh and "caelius: available" in first
    assert len(list((tmp_path / "cache" / "texts").iterdir())) == 1

    def no_compile(*a, **k):
        raise AssertionError("a warm explain must not evaluate the catalog")

    monkeypatch.setattr(explain_mod, "explain", no_compile)
    rc2, second = _explain(capsys, "mfu")
    assert rc2 == 0 and second == fresh
    # another metric, or graph, is another entry: made, not read from mfu's
    with_graph = main(["graph", "mfu"])
    assert with_graph == 0 and capsys.readouterr().out.startswith("flowchart LR")
    assert len(list((tmp_path / "cache" / "texts").iterdir())) == 2


def test_an_edited_catalog_file_is_explained_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "cat"
    d.mkdir()
    (d / "mine.metrics").write_text(MINE.format(text="First words."))
    rc, out = _explain(capsys, "my.busy", "--catalog", str(d))
    assert rc == 0 and "First words." in out
    (d / "mine.metrics").write_text(MINE.format(text="Second words."))
    rc, out = _explain(capsys, "my.busy", "--catalog", str(d))
    assert rc == 0 and "Second words." in out and "First words." not in out


def test_errors_are_not_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        assert main(["explain", "mfuu"]) == 2
        assert "did you mean `mfu`" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "texts").exists()


def test_a_warm_explain_process_imports_no_pint_networkx_or_numpy(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PERFONTO_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PERFONTO_NO_CACHE", None)
    probe = (
        "import sys\nfrom perfonto.cli import main\nrc = main(['explain', 'mfu'])\n"
        "print('LOADED', sorted(m for m in ('pint', 'networkx', 'numpy') if m in sys.modules))\nsys.exit(rc)"
    )
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr[-2000:]
    cold, warm = (r.stdout.rsplit("LOADED", 1) for r in runs)
    assert cold[0] == warm[0] and "caelius: available" in warm[0]
    assert "pint" in cold[1] and warm[1].strip() == "[]"


def test_no_cache_holds_for_one_command_only(tmp_path, monkeypatch, capsys):
    """``--no-cache`` turns every perfonto cache off for its command; ``main`` called in-process (a test, a
    user's script) leaves ``PERFONTO_NO_CACHE`` as it found it, so a later command still reads the cache."""
    import os

    monkeypatch.setenv("PERFONTO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PERFONTO_NO_CACHE", raising=False)
    seen = []
    monkeypatch.setattr(explain_mod, "explain", lambda *a, **k: seen.append(os.environ.get("PERFONTO_NO_CACHE")) or "")
    assert _explain(capsys, "mfu", "--no-cache")[0] == 0
    assert seen == ["1"] and "PERFONTO_NO_CACHE" not in os.environ
    monkeypatch.setenv("PERFONTO_NO_CACHE", "0")
    assert _explain(capsys, "mfu", "--no-cache")[0] == 0
    assert os.environ["PERFONTO_NO_CACHE"] == "0"
