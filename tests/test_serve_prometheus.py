"""A real scrape: Prometheus (Debian's package, installed by .ci/run) scrapes `perfonto serve --follow`
on 127.0.0.1 while parts are appended, and the values its HTTP API returns equal the batch evaluator's
window values for the same samples. Where Prometheus is not installed the test says so and is skipped;
tests/test_serve_cli.py checks the same values with prometheus_client's own OpenMetrics parser."""

import json
import shutil
import subprocess
import time
import urllib.parse

import pytest

from live_helpers import (
    ServeProcess,
    close_enough,
    end_process,
    expected_series,
    free_port,
    get,
    publish,
    reference_dump,
    write_parts,
)
from perfonto.metrics.catalog import load_catalog
from perfonto.metrics.telemetry import expositions

PROMETHEUS = shutil.which("prometheus")
HOST = "node-b"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="Prometheus is not installed (.ci/run installs Debian's `prometheus` package with apt-get; it could not "
        "here): falling back to prometheus_client's parser in "
        "test_serve_cli.py::test_scrape_parsed_by_prometheus_client_equals_batch",
    ),
]  # slow: a real Prometheus scraping for seconds (an external tool); `.ci/run` runs it after the fast suite


def _query(base: str, q: str) -> list[dict]:
    code, body = get(f"{base}/api/v1/query?query={urllib.parse.quote(q)}")
    doc = json.loads(body)
    assert code == 200 and doc["status"] == "success", body
    return doc["data"]["result"]


def _wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
            if last:
                return last
        except (OSError, ValueError) as exc:  # Prometheus still starting
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def test_prometheus_scraped_values_equal_the_batch_windows(tmp_path):
    graph = load_catalog(None, "sohu").graph
    table, _, ev = reference_dump(graph, tmp_path / "emu")
    W = ev.windows.interval.shape[0]
    parts = write_parts(table, tmp_path / "parts", 4)
    for p in parts[:2]:
        publish(p)
    serve = ServeProcess(["--follow", str(tmp_path / "parts"), "--host", HOST, "--poll", "0.1s"])
    prom = None
    try:
        serve.wait_for(lambda h: h["windows"] > 0, what="the first parts")
        port = free_port()
        target = serve.url.removeprefix("http://")
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
            f"scrape_configs:\n  - job_name: perfonto\n    static_configs:\n      - targets: ['{target}']\n"
        )
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        base = f"http://127.0.0.1:{port}"
        _wait(
            lambda: [r for r in _query(base, 'up{job="perfonto"}') if r["value"][1] == "1"], 60, "Prometheus to scrape"
        )
        for p in parts[2:]:  # appended while Prometheus scrapes
            publish(p)
        serve.wait_for(lambda h: h["windows"] == W, what="all windows")
        _wait(
            lambda: [
                r for r in _query(base, 'perfonto_serve_windows_total{job="perfonto"}') if float(r["value"][1]) == W
            ],
            30,
            "a scrape after the last part",
        )
        _wait(
            lambda: float(_query(base, 'count_over_time(up{job="perfonto"}[10m])')[0]["value"][1]) >= 4,
            30,
            "a few scrapes",
        )
        time.sleep(1.2)  # two more scrapes: the series that turned null are marked stale
        families = {e.prom_name for e in expositions(graph).values()}
        got = {}
        for r in _query(base, '{job="perfonto",__name__=~"perfonto_.+"}'):
            labels = dict(r["metric"])
            name = labels.pop("__name__")
            labels.pop("job"), labels.pop("instance")
            if name.removesuffix("_total") in families and not name.endswith("_created"):
                got[(name, tuple(sorted(labels.items())))] = float(r["value"][1])
        want = expected_series(graph, ev, HOST)
        assert len(want) > 100
        assert close_enough(got, want) == []
        info = _query(base, 'perfonto_catalog_info{job="perfonto"}')
        assert info[0]["metric"]["catalog_hash"] == graph.content_hash
        h = serve.health()
        assert h["scrapes"]["openmetrics"] >= 4  # Prometheus negotiated the OpenMetrics format
    finally:
        if prom is not None:
            end_process(prom)
        code, _, err = serve.stop()
    assert code == 0, err
