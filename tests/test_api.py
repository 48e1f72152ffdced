"""The public API (issue: one namespace, a public API): the documented example runs, the names are
explicit, the package installs as one import namespace, and a user's own `metrics.py` / `ontology/`
/ `codegen.py` do not shadow perfonto."""

from __future__ import annotations

import re
import tempfile
import subprocess
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

import perfonto
from perfonto.guides import guide_text

ROOT = Path(__file__).resolve().parents[1]


def test_documented_example_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # emulate(out=None)'s folder: in the test's own
    code = re.search(r"```python\n(.*?)```", guide_text("api.md"), re.S).group(1)
    exec(compile(code, "api.md", "exec"), {})
    out = capsys.readouterr().out
    assert "<perfonto.Catalog sohu:" in out and "GB/s" in out


def test_all_is_explicit_and_resolves():
    assert sorted(perfonto.__all__) == sorted(set(perfonto.__all__))
    for name in perfonto.__all__:
        assert getattr(perfonto, name) is not None, name
    assert (Path(perfonto.__file__).parent / "py.typed").exists()
    with pytest.raises(AttributeError):
        perfonto.no_such_name  # noqa: B018


def test_catalog_errors_and_raise(tmp_path):
    (tmp_path / "bad.metrics").write_text("metric x [GB] = sum(hbm.read_byte)\n")
    cat = perfonto.load_catalog(tmp_path)
    assert not cat.ok and [d.code for d in cat.errors] == ["unknown-name"]
    with pytest.raises(perfonto.CatalogError) as e:
        perfonto.load_catalog(tmp_path, raise_on_error=True)
    assert e.value.diagnostics[0].span.line == 1
    good = perfonto.load_catalog()
    assert "hbm.read_bytes" in good.signals and "mfu" in good.metrics
    assert "hbm.read_bytes" in good.explain("hbm.read_bytes")
    with pytest.raises(perfonto.UnknownMetric, match="did you mean") as unknown:
        good.explain("hbm.read_byte")
    assert isinstance(unknown.value, KeyError)  # callers that caught KeyError still do


def test_one_base_catches_every_public_error(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    """``perfonto.Error`` is the base of every error perfonto raises for bad input (issue 32): an API user
    catches one thing; each error keeps the built-in class it had."""
    from perfonto.ontology.errors import PerfontoError

    assert perfonto.Error is PerfontoError
    for cls, builtin in (
        (perfonto.CatalogError, Exception),
        (perfonto.DumpError, ValueError),
        (perfonto.UnknownMetric, KeyError),
    ):
        assert issubclass(cls, perfonto.Error) and issubclass(cls, builtin), cls
    with pytest.raises(perfonto.Error, match="did you mean"):
        perfonto.load_catalog().explain("mffu")
    for bad, says in (
        (dict(model="nope"), "unknown model"),
        (dict(chips=0), "chips must be"),
        (dict(chips=1.5), "chips must be a whole number"),
        (dict(duration=-1), "duration: a duration is positive"),  # perfonto.values' rule, as the CLI's
        (dict(isl=float("nan")), "isl must be a whole number"),
        (dict(slow_chip=5), r"slow_chip must be \(chip, factor\)"),  # was a TypeError from deep inside
        (dict(throttled_link=(0, 1)), r"throttled_link must be \(chip, link, factor\)"),
    ):
        with pytest.raises(perfonto.Error, match=says) as refused:
            perfonto.emulate(**bad)
        assert isinstance(refused.value, ValueError)  # as it always was
    assert not list(tmp_path.iterdir()), "a refused emulate() left the folder it made"
    with pytest.raises(perfonto.Error, match="unknown model"):
        perfonto.emulate(model="nope", out=tmp_path / "a" / "b" / "run")
    assert not (tmp_path / "a").exists()  # nor the parents it made
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")
    with pytest.raises(perfonto.Error, match="perfonto did not write it"):  # the CLI's --out guard (api.md)
        perfonto.emulate(model="nope", out=tmp_path / "mine")
    with pytest.raises(perfonto.Error, match="unknown model"):
        perfonto.emulate(model="nope", out=tmp_path / "mine", force=True)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    assert (tmp_path / "mine" / "notes.txt").read_text() == "the user's"


def test_evaluate_takes_tables_and_frames(tmp_path):
    import pyarrow.parquet as pq

    cat = perfonto.load_catalog()
    emu = perfonto.emulate(model="llama-3.1-8b", chips=1, duration=0.02, isl=128, osl=16, out=tmp_path / "run")
    table = pq.read_table(emu.counters)
    by_path = perfonto.evaluate(cat, emu.counters)
    by_table = perfonto.evaluate(cat, table)
    by_frame = perfonto.evaluate(cat, table.to_pandas())
    for r in (by_table, by_frame):
        assert r.value("hbm.bandwidth") == pytest.approx(by_path.value("hbm.bandwidth"), rel=1e-12)
    windows = round(emu.ground_truth["duration_s"] / 1e-3)  # whole engine steps: at least the 20 ms asked for
    assert isinstance(by_path.window, pa.Table) and by_path.window.num_rows == windows >= 20
    assert by_path.per_chip.num_rows == 1 and by_path.server.num_rows == 1
    assert by_path.to_polars("server").shape[0] == 1
    assert by_path.bounds.num_rows == 0
    with pytest.raises(TypeError, match="pyarrow Table"):
        perfonto.evaluate(cat, 42)
    with pytest.raises(KeyError, match="did you mean"):
        perfonto.evaluate(cat, emu.counters, metrics=["hbm.bandwith"])
    some = perfonto.evaluate(cat, emu.counters, metrics=["hbm.bandwidth"])
    assert some.value("hbm.bandwidth") == pytest.approx(by_path.value("hbm.bandwidth"), rel=1e-12)
    with pytest.raises(perfonto.UnknownMetric, match="`mfu` was not asked for"):
        some.value("mfu")  # a metric of the catalog that metrics=[...] left out: said so, not "no metric"
    with pytest.raises(perfonto.UnknownMetric, match="no metric `mfuu` in this result"):
        some.value("mfuu")
    once = perfonto.evaluate(cat, emu.counters, metrics=iter(["hbm.bandwidth"]))  # an iterator is read once
    assert once.value("hbm.bandwidth") == some.value("hbm.bandwidth")
    with pytest.raises(TypeError, match="a metric name is a string, not NoneType"):
        perfonto.evaluate(cat, emu.counters, metrics=[None])
    with pytest.raises(TypeError, match="a metric name is a string"):
        some.value(None)
    served = perfonto.evaluate(cat, emu.counters, requests=emu.requests, metrics=["ttft", "ttft_p50"])
    assert served.value("ttft_p50") is not None
    with pytest.raises(perfonto.UnknownMetric, match=r"`ttft` has a value per record .* Result.records\['ttft'\]"):
        served.value("ttft")


def test_version_flag(capsys):
    from perfonto.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"perfonto {perfonto.__version__}"


@pytest.mark.slow
def test_wheel_holds_one_top_level_package(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=600,
        capture_output=True,
    )
    (whl,) = tmp_path.glob("perfonto-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"perfonto"}, top
    for must in (
        "perfonto/ontology/catalog/sohu.yaml",
        "perfonto/schemas/generation.schema.json",
        "perfonto/metrics/library/serving.metrics",
        "perfonto/guides/api.md",
        "perfonto/py.typed",
    ):
        assert must in names, must
    import posixpath

    z = zipfile.ZipFile(whl)
    for y in [n for n in names if n.startswith("perfonto/ontology/catalog/") and n.endswith(".yaml")]:
        rel = re.match(r"# yaml-language-server: \$schema=(\S+)$", z.read(y).decode().splitlines()[0]).group(1)
        assert posixpath.normpath(posixpath.join(posixpath.dirname(y), rel)) in names, (y, rel)


def test_users_own_modules_do_not_shadow_perfonto(tmp_path):
    (tmp_path / "metrics.py").write_text("raise SystemExit('the user metrics.py was imported')\n")
    (tmp_path / "codegen.py").write_text("raise SystemExit('the user codegen.py was imported')\n")
    (tmp_path / "ontology").mkdir()
    (tmp_path / "ontology" / "__init__.py").write_text("raise SystemExit('the user ontology/ was imported')\n")
    run = lambda *a: subprocess.run([sys.executable, *a], cwd=tmp_path, capture_output=True, text=True, timeout=300)  # noqa: E731
    r = run("-c", "import perfonto, perfonto.metrics.compiler, perfonto.ontology; print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    r = run("-m", "perfonto", "check")
    assert r.returncode == 0, r.stderr
    r = run("-m", "perfonto", "run", "--duration", "0.1s", "--out", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]


def test_schema_modelines_resolve_in_the_installed_layout():
    from perfonto.ontology.loader import catalog_dir

    for y in catalog_dir().glob("*.yaml"):
        first = y.read_text().splitlines()[0]
        rel = re.match(r"# yaml-language-server: \$schema=(\S+)$", first).group(1)
        assert (y.parent / rel).resolve().is_file(), (y, rel)
        assert (y.parent / rel).resolve().parent.name == "schemas"


def test_a_run_stopped_while_writing_leaves_no_shorter_capture(tmp_path):
    """Ctrl-C (here: from the progress callback) while the counters are written: no counters.parquet that
    reads as a shorter capture is left, and a caller's earlier counters.parquet in ``out`` is kept whole."""

    def stop(phase, done, total):
        if phase == "counters" and done > 0:
            raise KeyboardInterrupt

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "counters.parquet").write_bytes(b"the caller's earlier capture")
    args = dict(model="llama-3.1-8b", chips=1, duration=0.05, isl=128, osl=16, sample_period=1e-4, progress=stop)
    for out in (tmp_path / "new", tmp_path / "mine"):
        with pytest.raises(KeyboardInterrupt):
            perfonto.emulate(out=out, force=True, **args)  # force: "mine" is not perfonto's folder
    assert not (tmp_path / "new" / "counters.parquet").exists()
    assert (tmp_path / "mine" / "counters.parquet").read_bytes() == b"the caller's earlier capture"
    assert not list(tmp_path.rglob("*.partial"))
