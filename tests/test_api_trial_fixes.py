"""What a new user of the Python API found (``perfonto.api``, guide ``api.md``), fixed: ``emulate`` runs the
emulation ``perfonto run`` runs and guards its output folder as the CLI does; wrong arguments are refused
at the boundary with messages that name the parameter and what it takes; ``Result`` says why a
request-level metric has no value; the guide says what the error classes are."""

from __future__ import annotations

import functools
import inspect
import json
import tempfile

import pyarrow.parquet as pq
import pytest

import perfonto
from perfonto.guides import guide_text

MODEL = dict(model="llama-3.1-8b", chips=1, isl=128, osl=16)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One small emulated run folder (with request records and a trace) for the evaluate checks."""
    return perfonto.emulate(duration=0.02, out=tmp_path_factory.mktemp("trial") / "run", **MODEL)


@pytest.fixture(scope="module")
def cat():
    return perfonto.load_catalog()


@pytest.fixture(autouse=True)
def own_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # emulate(out=None)'s folder: in the test's own


def test_emulate_runs_the_emulation_perfonto_run_runs(tmp_path, monkeypatch):
    """Finding 2: the same workload gives the emulator the same arguments from ``perfonto run`` and from
    ``emulate`` — whole engine steps included, so a short run counts its tokens (tokens_per_second was 0)."""
    from perfonto import emulator
    from perfonto.job import run_job

    real, seen = emulator.run, []

    class Stop(Exception):
        pass

    @functools.wraps(real)
    def spy(*args, **kwargs):
        bound = inspect.signature(real).bind(*args, **kwargs)
        bound.apply_defaults()
        seen.append({k: v for k, v in bound.arguments.items() if k not in ("gen", "out_dir")})
        raise Stop

    monkeypatch.setattr(emulator, "run", spy)
    with pytest.raises(Stop):
        run_job(duration_s=0.05, out=tmp_path / "cli", **MODEL)
    with pytest.raises(Stop):
        perfonto.emulate(duration=0.05, out=tmp_path / "api", **MODEL)
    cli, api = seen
    assert api["whole_steps"] is True and api == cli
    assert "whole_steps" in inspect.getdoc(perfonto.emulate)


def test_a_short_emulation_counts_its_tokens(run):
    truth = run.ground_truth
    assert truth["whole_steps"] and truth["steps"] >= 1 and truth["tokens_per_second"] > 0


def test_emulate_guards_its_output_folder_as_the_cli(tmp_path):
    """Finding 3 (and 8's ``out=`` a file): ``perfonto.outputs.output_folder``'s guard, in the API's words."""
    a_file = tmp_path / "notes.py"
    a_file.write_text("mine")
    with pytest.raises(perfonto.Error, match=r"notes\.py: is a file, not a folder; give a folder for `out=`"):
        perfonto.emulate(duration=0.02, out=a_file, **MODEL)
    assert a_file.read_text() == "mine"

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(perfonto.Error, match=r"mine: the folder is not empty .* pass force=True") as refused:
        perfonto.emulate(duration=0.02, out=mine, **MODEL)
    assert "--" not in str(refused.value)  # the API's words, not the CLI's options
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    emu = perfonto.emulate(duration=0.02, out=mine, force=True, **MODEL)
    assert (mine / "notes.txt").read_text() == "the user's" and emu.counters.is_file()
    again = perfonto.emulate(duration=0.02, out=mine, seed=1, **MODEL)  # perfonto's folder now: replaced whole
    assert json.loads((mine / "ground_truth.json").read_text())["seed"] == again.ground_truth["seed"] == 1
    assert (mine / "notes.txt").read_text() == "the user's"


def test_emulate_does_not_mix_into_a_perfonto_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "report.json").write_text("{}")
    manifest = {"perfonto": "0", "run_id": "x", "command": ["perfonto", "run", "--out", str(run_dir)]}
    (run_dir / "perfonto.json").write_text(json.dumps(manifest | {"files": ["perfonto.json", "report.json"]}))
    with pytest.raises(perfonto.Error, match=r"holds the output of `perfonto run`.* pass force=True"):
        perfonto.emulate(duration=0.02, out=run_dir, **MODEL)
    assert sorted(p.name for p in run_dir.iterdir()) == ["perfonto.json", "report.json"]
    perfonto.emulate(duration=0.02, out=run_dir, force=True, **MODEL)
    assert not (run_dir / "report.json").exists()  # the old run's report is not left beside the new counters


def test_a_path_given_as_the_catalog(run, cat):
    """Finding 5."""
    with pytest.raises(TypeError, match=r"not the path '/some/library': load it first, cat = perfonto.load_catalog"):
        perfonto.evaluate("/some/library", run.path)
    with pytest.raises(TypeError, match=r"catalog first and the capture second"):
        perfonto.evaluate(run.path, cat)
    with pytest.raises(TypeError, match=r"a perfonto.Catalog .* not int"):
        perfonto.evaluate(3, run.path)


def test_the_wrong_table_as_the_trace(run, cat):
    """Finding 6: a perfonto error naming the file and the table it should be, not pyarrow's."""
    with pytest.raises(
        perfonto.DumpError, match=r"requests\.parquet: no column `kind`.* trace= takes a table with kind"
    ):
        perfonto.evaluate(cat, run.counters, trace=run.requests)
    with pytest.raises(perfonto.DumpError, match=r"nope\.parquet: no such file; check the path given to sync="):
        perfonto.evaluate(cat, run.counters, sync=run.path / "nope.parquet")


@pytest.mark.parametrize(
    "bad, says",
    [
        (dict(rate="10/s"), r"emulate: rate: '10/s' is not a number; rate is requests per second"),
        (dict(seed=None), r"emulate: seed: None is not an integer; seed is a whole number ≥ 0"),
        (
            dict(duration="5 parsec"),
            r"duration: not a duration: '5 parsec'.*; duration is the simulated time in seconds",
        ),
        (dict(sample_period=0), r"sample_period: a duration is positive .* not 0; sample_period is seconds"),
        (dict(warmup_steps=-1), r"warmup_steps: must be at least 0, not -1; warmup_steps is a whole number"),
        (dict(acceptance=2), r"acceptance: a probability is between 0 and 1"),
    ],
)
def test_emulate_refuses_bad_values_naming_them(bad, says, tmp_path):
    """Finding 8: refused at the boundary (was a TypeError from deep in the emulator), the call's folder not left."""
    with pytest.raises(perfonto.Error, match=says) as refused:
        perfonto.emulate(**(MODEL | bad))
    assert isinstance(refused.value, ValueError)
    assert not list(tmp_path.iterdir())


def test_emulate_names_a_keyword_it_does_not_take():
    with pytest.raises(
        TypeError, match=r"emulate\(\) got an unexpected keyword argument 'slow_chips'; did you mean `slow_chip`"
    ):
        perfonto.emulate(slow_chips=(0, 1.3), **MODEL)
    with pytest.raises(TypeError, match=r"'duration_s'; did you mean `duration`"):
        perfonto.emulate(duration_s=1, **MODEL)


def test_emulate_takes_durations_as_text():
    """Finding 18: ``duration`` and ``sample_period`` with a unit, as ``evaluate``'s ``sample_period``."""
    emu = perfonto.emulate(duration="20ms", sample_period="1ms", whole_steps=False, **MODEL)
    assert emu.ground_truth["duration_s"] == pytest.approx(0.02)
    assert pq.read_table(emu.counters).num_rows == 21  # samples at 0, 1 … 20 ms
    doc = inspect.getdoc(perfonto.emulate)
    for words in ("in seconds", '"50ms"', "slow_chip=(chip, factor)", "whole_steps", "force"):
        assert words in doc, words


def test_explain_wants_a_name(cat):
    """Finding 9."""
    with pytest.raises(TypeError, match=r"Catalog.explain takes a name as a string .* not NoneType"):
        cat.explain(None)


def test_a_table_as_requests(run, cat):
    """Finding 10: the type and what is taken, not the table's printed contents."""
    table = pq.read_table(run.requests)
    for given, kind in ((table, "pyarrow.Table"), (table.to_pandas(), "pandas.DataFrame")):
        with pytest.raises(TypeError, match=rf"requests= takes the path of a Parquet file .* not a {kind}") as e:
            perfonto.evaluate(cat, run.counters, requests=given)
        assert "request_id" not in str(e.value)


def test_a_request_metric_without_request_records(run, cat):
    """Finding 11: said to need the request records, and listed as unavailable."""
    res = perfonto.evaluate(cat, run.counters)
    assert "request records" in res.unavailable["ttft_p50"] and "requests=" in res.unavailable["ttft_p50"]
    with pytest.raises(
        perfonto.UnknownMetric, match=r"`ttft_p50` is unavailable: it is computed from the request records"
    ):
        res.value("ttft_p50")
    served = perfonto.evaluate(cat, run.path)
    assert "ttft_p50" not in served.unavailable and served.value("ttft_p50") is not None


def test_timestamp_unit_is_checked(run, cat):
    """Finding 13."""
    with pytest.raises(perfonto.Error, match=r"timestamp_unit: 'nanoseconds' is not .* one of ns, us, ms, s"):
        perfonto.evaluate(cat, run.counters, timestamp_unit="nanoseconds")


def test_a_generation_name_given_as_the_path():
    """Finding 14: the hint says how to load a shipped generation by name."""
    wrong = perfonto.load_catalog("h100")
    assert not wrong.ok and 'load_catalog(generation="h100")' in wrong.errors[0].hint


def test_the_shipped_library_folder_as_the_path():
    """Finding 14: the shipped library's folder is compiled once (it gave 106 "defined twice" errors)."""
    from perfonto.metrics.compiler import library_files

    library = perfonto.load_catalog(library_files()[0].parent)
    assert library.ok, [d.render() for d in library.errors[:3]]
    assert sorted(library.metrics) == sorted(perfonto.load_catalog().metrics)


def test_the_guide_says_what_the_error_classes_are():
    """Finding 19: CatalogError derives from perfonto.Error alone; the guide no longer says otherwise."""
    text = " ".join(guide_text("api.md").split())
    assert perfonto.CatalogError.__bases__ == (perfonto.Error,)
    assert "each also from the built-in class" not in text
    assert "`CatalogError` and `OutputError`" in text and "derive from `perfonto.Error` alone" in text
    assert issubclass(perfonto.DumpError, ValueError) and issubclass(perfonto.UnknownMetric, KeyError)


@pytest.mark.parametrize("cls", ["Catalog", "Result", "Emulation"])
def test_public_members_have_docstrings(cls):
    """Finding 22."""
    klass = getattr(perfonto, cls)
    for name, member in vars(klass).items():
        if name.startswith("_"):
            continue
        target = member.fget if isinstance(member, property) else getattr(member, "func", member)
        if callable(target) or isinstance(member, property):
            assert inspect.getdoc(target), f"{cls}.{name}"


def test_emulation_repr_is_one_short_line(run):
    """Finding 23: not the whole ground truth."""
    text = repr(run)
    assert len(text) < 200 and "\n" not in text
    assert text.startswith("<perfonto.Emulation ") and "llama-3.1-8b on 1 x sohu" in text
