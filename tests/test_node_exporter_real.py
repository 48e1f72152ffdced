"""A real capture from Prometheus's node_exporter on the machine that runs the tests (Debian's
prometheus-node-exporter; .ci/run installs it): started on 127.0.0.1, scraped five times into a folder
of scrapes named by their time, `perfonto analyze` (format recognised, shipped `node` catalog) gives
each CPU's busy share over the run equal to a computation from the scrape text within 1e-9 (issue 27).
Skips, saying why, where node_exporter is missing or cannot serve."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from perfonto.cli import main

pytestmark = pytest.mark.slow
LINE = re.compile(r'^node_cpu_seconds_total\{cpu="(\d+)",mode="(\w+)"\} (\S+)$', re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def exporter():
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exe is None:
        pytest.skip(
            "node_exporter is not installed (Debian: apt-get install prometheus-node-exporter; .ci/run installs it)"
        )
    port = _free_port()
    proc = subprocess.Popen(
        [exe, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults", "--collector.cpu"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.skip(f"node_exporter exited: {proc.stderr.read().decode()[-300:]}")
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.skip("node_exporter did not serve /metrics within 10 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_per_cpu_busy_share_equals_the_scrape_texts(exporter, tmp_path, capsys):
    folder = tmp_path / "scrapes"
    folder.mkdir()
    texts = []
    for k in range(5):
        t = time.time()
        body = urllib.request.urlopen(exporter, timeout=5).read()
        (folder / f"{t:.6f}.prom").write_bytes(body)
        texts.append(body.decode())
        sum(i * i for i in range(400_000 * (k + 1)))  # some busy time between scrapes
        time.sleep(0.1)
    capsys.readouterr()
    assert main(["analyze", str(folder), "--out", str(tmp_path / "o"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    per_cpu = doc["metrics"]["cpu.busy_share"]["value"]  # the `cpu` axis, sized by the scrapes, CPUs in order

    def seconds(text):  # (cpu, mode) -> seconds, read from the text independently of perfonto's parser
        return {(int(c), m): float(v) for c, m, v in LINE.findall(text)}

    first, last = seconds(texts[0]), seconds(texts[-1])
    cpus = sorted({c for c, _ in first})
    assert cpus and len(per_cpu) == len(cpus)
    got = dict(zip(cpus, per_cpu))
    assert f"cpu: {len(cpus)} instance{'s' if len(cpus) > 1 else ''} from the data" in " ".join(doc["notes"])
    for c in cpus:
        d = {m: last[(c, m)] - first[(c, m)] for (cc, m) in first if cc == c}
        total = sum(d.values())
        want = (total - d["idle"] - d["iowait"]) / total
        assert abs(got[c] - want) <= 1e-9, (c, got[c], want)
    busy_all = sum(sum(last[k] - first[k] for k in first if k[0] == c and k[1] not in ("idle", "iowait")) for c in cpus)
    total_all = sum(last[k] - first[k] for k in first)
    assert abs(doc["metrics"]["busy_share"]["value"] - busy_all / total_all) <= 1e-9  # the machine: ratio of totals
