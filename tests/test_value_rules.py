"""Issue 28, defects 5 and 8: values that wrapped or slipped through — a chip id past int64, a register
value past its declared width, null-like markers in a CSV, a probability of 2 in a sweep — and the
Python API's raw TypeError and KeyError. One rule per value, wherever it enters."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import perfonto
from perfonto.capture.dump import DumpError
from perfonto.cli import main
from perfonto.metrics.windows import read_counters
from perfonto.ontology import load_generation
from perfonto.values import ValueRuleError, check_workload, duration_s, probability


@pytest.fixture(scope="module")
def sohu():
    return load_generation("sohu")[0]


def _table(**cols):
    n = len(next(iter(cols.values())))
    base = {
        "chip": pa.array([0] * n, pa.int64()),
        "timestamp_ns": pa.array([i * 1_000_000 for i in range(n)], pa.int64()),
    }
    return pa.table({**base, **cols})


def test_a_chip_id_past_int64_is_refused_not_wrapped(tmp_path, sohu, capsys):
    t = _table(**{"seq.elapsed_cycles": pa.array([i * 1000 for i in range(10)], pa.uint64())})
    t = t.set_column(0, "chip", pa.array([0] * 5 + [2**63] * 5, pa.uint64()))
    pq.write_table(t, tmp_path / "d.parquet")
    want = (
        f"{tmp_path / 'd.parquet'}: row 6, column `chip`: value 9223372036854775808 is past 2^63 − 1, the largest chip "
        "perfonto holds; write ids and timestamps that fit a signed 64-bit integer"
    )
    with pytest.raises(DumpError) as exc:
        read_counters(tmp_path / "d.parquet", sohu)
    assert str(exc.value) == want
    for engine in ("memory", "embedded"):
        assert main(["analyze", str(tmp_path / "d.parquet"), "--engine", engine, "--out", str(tmp_path / engine)]) == 1
        assert capsys.readouterr().err.strip().endswith(want)


def test_a_value_past_the_register_width_is_refused_where_it_is(tmp_path, sohu, capsys):
    assert sohu.signals["pcie.rx_bytes"].width == 48
    vals = [i * 1000 for i in range(10)]
    vals[6] = 2**64 - 1  # was masked to 48 bits: a 3,052 B window out of nothing
    pq.write_table(_table(**{"pcie.rx_bytes": pa.array(vals, pa.uint64())}), tmp_path / "d.parquet")
    want = "row 7, column `pcie.rx_bytes`: value 18446744073709551615 does not fit the 48-bit register `pcie.rx_bytes`"
    with pytest.raises(DumpError, match=want.replace("(", r"\(").replace("`", "`")):
        read_counters(tmp_path / "d.parquet", sohu)
    assert main(["analyze", str(tmp_path / "d.parquet"), "--engine", "embedded", "--out", str(tmp_path / "o")]) == 1
    assert want in capsys.readouterr().err
    vals[6] = 2**48 - 1  # the largest value that fits is a reading
    pq.write_table(_table(**{"pcie.rx_bytes": pa.array(vals, pa.uint64())}), tmp_path / "ok.parquet")
    assert read_counters(tmp_path / "ok.parquet", sohu).raw["pcie.rx_bytes"].max() == 2**48 - 1


@pytest.mark.parametrize("marker", ["n/a", "N/A", "NULL", "null", "nan", "NaN", "inf", "-inf", "#N/A"])
def test_every_null_like_marker_is_a_value_refused_alike(tmp_path, sohu, marker):
    rows = ["chip,timestamp_ns,seq.elapsed_cycles"] + [
        f"0,{i * 1_000_000},{marker if i == 3 else (i + 1) * 1000}" for i in range(6)
    ]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(
        DumpError, match=rf"d\.csv: row 4, column `seq\.elapsed_cycles`: value '{marker}' is not an unsigned integer"
    ):
        read_counters(tmp_path / "d.csv", sohu)


def test_an_empty_cell_is_the_one_null(tmp_path, sohu):
    rows = ["chip,timestamp_ns,seq.elapsed_cycles"] + [
        f"0,{i * 1_000_000},{'' if i == 3 else (i + 1) * 1000}" for i in range(6)
    ]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    d = read_counters(tmp_path / "d.csv", sohu)
    assert d.missing["seq.elapsed_cycles"][3].all() and not d.missing["seq.elapsed_cycles"][[0, 1, 2, 4, 5]].any()


@pytest.mark.parametrize("value", ["2", "-0.1", "nan", "inf"])
def test_an_acceptance_outside_0_1_is_refused_by_project_and_sweep_alike(capsys, value):
    assert main(["project", "--draft-tokens", "3", "--acceptance", value, "--json"]) == 2
    project_error = json.loads(capsys.readouterr().out)["error"]
    assert main(["sweep", "--vary", f"acceptance=0.5,{value}", "--json", "--no-cache"]) == 2
    sweep_error = json.loads(capsys.readouterr().out)["error"]
    assert "probability is between 0 and 1" in project_error or "finite" in project_error
    assert sweep_error.removeprefix("--vary acceptance: ") == project_error.split("--acceptance: ")[-1].removeprefix(
        "argument --acceptance: "
    )


def test_the_rules_themselves():
    assert probability("0.7") == 0.7 and duration_s("100us") == pytest.approx(1e-4) and duration_s(0.5) == 0.5
    assert check_workload("chips", 8.0) == 8 and check_workload("model", "x") == "x"
    for bad in (
        lambda: probability(1.5),
        lambda: probability("nan"),
        lambda: check_workload("chips", 8.5),
        lambda: check_workload("draft_tokens", -1),
        lambda: check_workload("rate", 0),
        lambda: duration_s("-1s"),
        lambda: duration_s("3 parsecs"),
        lambda: duration_s(True),
        lambda: duration_s(2 * 86_400),
        lambda: duration_s("0.1ns"),  # a sample period that rounded to 0 ns turned the SQL's sampling grid off
    ):
        with pytest.raises(ValueRuleError):
            bad()


def test_the_api_takes_a_duration_text_and_names_unknown_metrics(tmp_path):
    rows = ["chip,timestamp_ns,seq.elapsed_cycles,seq.idle_cycles"] + [
        f"0,{i * 100_000},{(i + 1) * 1000},{i}" for i in range(20)
    ]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    cat = perfonto.load_catalog()
    r = perfonto.evaluate(cat, str(tmp_path / "d.csv"), sample_period="100us")
    with pytest.raises(ValueError, match=r"sample_period: not a duration: 'fast'"):
        perfonto.evaluate(cat, str(tmp_path / "d.csv"), sample_period="fast")
    with pytest.raises(
        perfonto.UnknownMetric, match=r"^no metric `topdown\.idl` in this result; did you mean `topdown\.idle`"
    ):
        r.value("topdown.idl")
    assert issubclass(perfonto.UnknownMetric, KeyError)  # code that caught KeyError before still does
    with pytest.raises(
        perfonto.UnknownMetric, match=r"^no metric `topdown\.idl` in the catalog; did you mean `topdown\.idle`"
    ):
        perfonto.evaluate(cat, str(tmp_path / "d.csv"), metrics=["topdown.idl"])


# -- 7. options that hung or crashed ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "master, want",
    [
        (
            "spark://127.0.0.1:1",
            "--spark-master 'spark://127.0.0.1:1': no master answers (127.0.0.1:1: Connection refused)",
        ),
        ("nonsense://x", "--spark-master 'nonsense://x': not a Spark master URL"),
        ("local[0]", "--spark-master 'local[0]': not a Spark master URL"),
        ("spark://host-without-port", "`host-without-port` is not HOST:PORT"),
    ],
)
def test_a_spark_master_is_checked_in_seconds(tmp_path, capsys, master, want):
    import time

    rows = ["chip,timestamp_ns,seq.elapsed_cycles"] + [f"0,{i * 1_000_000},{(i + 1) * 1000}" for i in range(6)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    t0 = time.monotonic()
    assert (
        main(
            [
                "analyze",
                str(tmp_path / "d.csv"),
                "--engine",
                "spark",
                "--spark-master",
                master,
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert want in err and "internal error" not in err and time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    "after_s", [pytest.param(0.3, marks=pytest.mark.slow), 1.0, pytest.param(2.0, marks=pytest.mark.slow)]
)
def test_ctrl_c_while_run_starts_prints_no_traceback(tmp_path, after_s):
    import signal
    import subprocess
    import sys
    import time

    # a 10 s run: the signal lands while it runs, whatever the machine's speed (a warm 1 s run now ends in
    # about 2 s on a quiet machine and had exited 0 before the 2 s signal was sent)
    p = subprocess.Popen(
        [sys.executable, "-m", "perfonto", "run", "--duration", "10s", "--out", str(tmp_path / "o")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default, as in a terminal: a child of a background job or an xdist worker inherits SIGINT
        # ignored, ran to the end and exited 0, which this test used to accept
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(after_s)
    assert p.poll() is None, "the run ended before Ctrl-C was sent: the test checks nothing"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    # 130 (perfonto's exit after Ctrl-C) or -SIGINT (Python's own exit by the signal, as a shell expects);
    assert p.returncode in (130, -signal.SIGINT), (p.returncode, err[-1000:])
    assert not (tmp_path / "o").exists()
