"""Can `perfonto serve` keep up with 8 chips sampled at 1 kHz? Prints samples/s against that rate.

Usage: python benchmarks/bench_serve.py [--chips 8] [--seconds 10] [--no-paced]

1. Pipeline throughput, unpaced, in this process: 1 ms samples of an emulated run (Llama-3-70B on the
   chips) pushed through the generated Stream in the blocks a paced server pushes (50 ms), with an
   OpenMetrics rendering of /metrics after every simulated second (a 1 s scrape interval); also the
   same with the emulator producing the chunks (what `--emulate` costs end to end). A sample is one
   timestamp of every chip; the required rate is 1000 samples/s.
2. The real thing: `perfonto serve --emulate` in a subprocess for ``--seconds`` of wall time, scraped
   every second over HTTP; reports the samples served per wall second, the source's lag behind the
   wall clock at the end, and the scrape latency.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

RATE = 1000.0  # samples/s per chip: 1 kHz


def pipeline(chips: int, seconds: float) -> dict:
    import threading

    from prometheus_client.openmetrics.exposition import generate_latest

    from perfonto.analysis.evaluate import load_evaluator
    from perfonto.analysis.live import LiveMetrics
    from perfonto.analysis.openmetrics import LiveCollector, registry_for
    from perfonto.codegen.python_evaluator import generate
    from perfonto.live_emulate import EmulatedSource
    from perfonto.metrics.catalog import load_catalog

    graph = load_catalog(None, "sohu").graph
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "ev.py"
        p.write_text(generate(graph), encoding="utf-8")
        ev = load_evaluator(p)
    knobs = dict(
        model="llama3-70b",
        chips=chips,
        sample_period_s=1e-3,
        isl=2048,
        osl=128,
        warmup_steps=400,
        slow_chip=None,
        throttled_link=None,
        router_skew=0.0,
    )
    src = EmulatedSource(graph.generation, seed=0, duration_s=seconds, chunk_s=1.0, realtime=False, **knobs)
    t0 = time.perf_counter()
    src.start()
    chunks = list(src.blocks(threading.Event()))
    t_emulate = time.perf_counter() - t0
    src.close()
    live = LiveMetrics(graph, ev, host="bench")
    reg = registry_for(LiveCollector(live, {"generation": "sohu"}, lambda: {"errors": 0, "lag_s": 0.0}))
    samples, scrapes = 0, []
    t0 = time.perf_counter()
    for chunk in chunks:
        for i in range(0, chunk.samples, 50):
            live.push(chunk.slice(i, i + 50))
        samples += chunk.samples
        ts = time.perf_counter()
        body = generate_latest(reg)
        scrapes.append(time.perf_counter() - ts)
    t_push = time.perf_counter() - t0
    return {
        "samples": samples,
        "push_s": t_push,
        "emulate_s": t_emulate,
        "scrape_ms": 1e3 * statistics.median(scrapes),
        "scrape_bytes": len(body),
    }


def paced(chips: int, seconds: float) -> dict:
    proc = subprocess.Popen(
        [sys.executable, "-m", "perfonto", "serve", "--emulate", "--chips", str(chips), "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        deadline = time.monotonic() + 120
        lines = []
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"(http://127\.0\.0\.1:\d+)/metrics", line)
            url = m.group(1) if m else None
        if url is None:
            raise SystemExit("perfonto serve did not start:\n" + "".join(lines))
        t_start = time.monotonic()
        health = lambda: json.loads(urllib.request.urlopen(url + "/healthz", timeout=10).read())  # noqa: E731
        s0 = health()["samples"]
        lat = []
        while time.monotonic() - t_start < seconds:
            time.sleep(1.0)
            t = time.perf_counter()
            urllib.request.urlopen(url + "/metrics", timeout=10).read()
            lat.append(time.perf_counter() - t)
        h = health()
        wall = time.monotonic() - t_start
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=5)
    return {
        "samples": h["samples"] - s0,
        "wall_s": wall,
        "lag_s": h["source"]["lag_s"],
        "scrape_ms": 1e3 * statistics.median(lat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--no-paced", action="store_true", help="skip the subprocess run at real time")
    a = ap.parse_args()
    r = pipeline(a.chips, a.seconds)
    push_rate = r["samples"] / r["push_s"]
    e2e_rate = r["samples"] / (r["push_s"] + r["emulate_s"])
    print(
        f"{a.chips} chips, 1 ms samples, {r['samples']} samples ({a.seconds:g} s simulated); required {RATE:.0f} "
        "samples/s"
    )
    print(
        f"  Stream + state + a /metrics render per second: {push_rate:10.0f} samples/s = {push_rate / RATE:6.1f} x "
        f"the rate ({r['scrape_ms']:.1f} ms and {r['scrape_bytes'] / 1024:.0f} KiB per render)"
    )
    print(
        f"  … plus emulating the chunks (--emulate):        {e2e_rate:10.0f} samples/s = {e2e_rate / RATE:6.1f} x "
        "the rate"
    )
    if not a.no_paced:
        p = paced(a.chips, a.seconds)
        served = p["samples"] / p["wall_s"]
        kept = abs(served / RATE - 1) < 0.05 and (p["lag_s"] or 0) < 0.5
        print(
            f"  perfonto serve --emulate, paced, {p['wall_s']:.1f} s wall: {served:7.0f} samples/s = "
            f"{served / RATE:5.2f} x the rate, "
            f"lag {p['lag_s'] if p['lag_s'] is None else round(p['lag_s'], 3)} s, scrape {p['scrape_ms']:.1f} ms "
            f"-> {'keeps up' if kept else 'FALLS BEHIND'}"
        )


if __name__ == "__main__":
    main()
