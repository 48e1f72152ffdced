"""`perfonto serve` as a process: a scrape parsed by prometheus_client's OpenMetrics parser equals the
batch evaluator (the fallback of the Prometheus test), promtool's lint, health, errors, shutdown."""

import json
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from live_helpers import (
    ServeProcess,
    batch,
    close_enough,
    emulate,
    expected_series,
    get,
    parse_openmetrics,
    published_reference,
)
from perfonto.metrics.catalog import load_catalog

HOST = "node-a"


@pytest.fixture(scope="module")
def graph():
    return load_catalog(None, "sohu").graph


@pytest.fixture(scope="module")
def parts(graph, tmp_path_factory):
    """A folder of 3 published parts, and the batch evaluation of the same samples."""
    d = tmp_path_factory.mktemp("serve")
    return published_reference(graph, d)


def _run(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "perfonto", *args], capture_output=True, text=True, timeout=timeout)


def test_scrape_parsed_by_prometheus_client_equals_batch(graph, parts):
    folder, ev = parts
    W = ev.windows.interval.shape[0]
    with ServeProcess(["--follow", str(folder), "--host", HOST, "--poll", "0.1s"]) as s:
        s.wait_for(lambda h: h["windows"] == W, what="all windows")
        code, text = get(s.url + "/metrics")
        assert code == 200 and text.rstrip().endswith("# EOF")
        got = parse_openmetrics(text, graph)
        assert "# UNIT perfonto_hbm_read_bandwidth_bytes_per_second bytes_per_second" in text
        assert "# TYPE perfonto_hbm_bytes counter" in text and "perfonto_hbm_bytes_created" in text
        assert "NaN" not in text
        assert 'perfonto_catalog_info{catalog_hash="%s"' % graph.content_hash in text
    assert close_enough(got, expected_series(graph, ev, HOST)) == []


@pytest.mark.slow  # an external tool (promtool); `.ci/run` runs it after the fast suite
@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed (.ci/run installs Debian's prometheus package, which ships it)",
)
def test_promtool_check_metrics_finds_no_problem(parts):
    folder, ev = parts
    with ServeProcess(["--follow", str(folder), "--poll", "0.1s"]) as s:
        s.wait_for(lambda h: h["windows"] > 0, what="a window")
        # promtool 2.42 parses the classic text format only (it reads `# TYPE … info` of OpenMetrics as an
        # error), so it checks the text-format rendering of the same families
        code, text = get(s.url + "/metrics", accept="text/plain; version=0.0.4")
        assert code == 200 and "perfonto_hbm_bytes_total" in text
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip(), r.stderr.strip()) == (0, "", "")
    bad = text.replace("perfonto_hbm_bytes_total", "perfonto_hbmBytes", 1)  # the lint can fail
    r = subprocess.run(["promtool", "check", "metrics"], input=bad, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 or r.stdout or r.stderr


def test_health_index_404_and_clean_shutdown_on_sigterm_and_sigint(parts):
    folder, _ = parts
    for sig in (signal.SIGTERM, signal.SIGINT):
        s = ServeProcess(["--follow", str(folder), "--poll", "0.1s", "--json"])
        try:
            h = s.wait_for(lambda h: h["status"] == "ok", what="status ok")
            assert h["source"]["parts"] == 3 and h["generation"] == "sohu"
            assert get(s.url + "/")[0] == 200 and get(s.url + "/nope")[0] == 404
        finally:
            code, out, err = s.stop(sig)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["ok"] is True and doc["windows"] > 0 and "stopped:" in err


def test_emulate_serves_in_real_time_and_equals_the_emulators_dump(graph, tmp_path):
    # a duration within one chunk is exactly emulator.run's dump; the source then finishes
    ref = emulate(tmp_path / "ref", graph.generation, chips=2, duration_s=0.3, seed=3)
    ev = batch(graph, ref, tmp_path)
    with ServeProcess(
        [
            "--emulate",
            "--model",
            "llama-3.1-8b",
            "--chips",
            "2",
            "--duration",
            "0.3s",
            "--seed",
            "3",
            "--warmup-steps",
            "50",
            "--host",
            HOST,
        ]
    ) as s:
        h = s.wait_for(lambda h: h["status"] == "finished", what="the emulation to finish")
        got = parse_openmetrics(get(s.url + "/metrics")[1], graph)
    assert h["windows"] == ev.windows.interval.shape[0] and h["source"]["chunks"] == 1
    assert close_enough(got, expected_series(graph, ev, HOST)) == []


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    """The command's refusals, in process (each child costs 1-2 s of start-up); the exit code, stdout and
    stderr of a real process are checked by the first case here and by the shutdown test below."""
    from perfonto.cli import main

    r = _run("serve", "--follow", str(tmp_path / "missing"), "--port", "0", "--json")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "no such file or folder" in doc["error"]
    assert main(["serve", "--follow", str(tmp_path), "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "65535" in err and "Traceback" not in err
    assert main(["serve", "--emulate", "--otlp", "localhost:4318"]) == 2
    assert "OTLP/HTTP endpoint" in capsys.readouterr().err
    assert main(["serve", "--emulate", "--chips", "2", "--slow-chip", "7:1.5", "--port", "0", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"].startswith("cannot emulate:")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--follow", str(tmp_path), "--port", str(port), "--json"]) == 1
    assert "cannot listen on 127.0.0.1:%d" % port in json.loads(capsys.readouterr().out)["error"]
    assert main(["serve"]) == 2
    assert "--emulate" in capsys.readouterr().err


def test_follow_refuses_another_tools_capture_and_names_analyze(tmp_path, capsys):
    """A folder of node_exporter scrapes or a perf stat file is not a growing collector dump: --follow waited
    on them in silence, its health saying "starting" (a new user's trial); it now says to analyse them."""
    from pathlib import Path

    from perfonto.cli import main

    scrapes = tmp_path / "scrapes"
    scrapes.mkdir()
    (scrapes / "1764650000.000.prom").write_text(
        '# TYPE node_cpu_seconds counter\nnode_cpu_seconds_total{cpu="0",mode="idle"} 1\n'
    )
    perf = Path(__file__).parent / "fixtures" / "perf" / "perf-stat-interval.csv"
    for path, fmt in ((scrapes, "openmetrics"), (perf, "perf-stat")):
        assert main(["serve", "--follow", str(path), "--port", "0"]) == 1
        err = capsys.readouterr().err
        assert f"{fmt} output; --follow reads the collector format only" in err and "perfonto analyze" in err
