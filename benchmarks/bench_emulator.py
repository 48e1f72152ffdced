"""Time the emulator and print ratios: cost per simulated second, per chip, against the issue's budget.

Usage: python benchmarks/bench_emulator.py [--quick]

Each measurement runs ``emulator.run`` (Llama-3-70B, 2048/128, warm start, 1 ms samples, counters and
ground truth written) in a fresh subprocess, so that its wall time and peak memory (max RSS) are its
own. Printed:

- the acceptance case — 60 s of 8 chips at 1 ms — against the 20 s and 2 GB budget;
- linearity in simulated time (8 chips; 15, 30, 60 s): wall seconds per simulated second, the ratio
  of each to the first (1.0 = linear, below 1 = a fixed start-up cost spread thinner) and the
  marginal cost of the added seconds;
- linearity in chips (15 s; 1, 2, 4, 8 chips): wall seconds per chip per simulated second, same ratios
  and the marginal cost of an added chip;
- a projection and the calibration replay (``perfonto project`` / ``validate-emulator`` work).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, tempfile, time
from perfonto import emulator
chips, dur = int(sys.argv[1]), float(sys.argv[2])
t0 = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    r = emulator.run("sohu", model="llama3-70b", chips=chips, duration_s=dur, sample_period_s=1e-3, isl=2048, osl=128,
                     warmup_steps=400, out_dir=d)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                  "steps": r.ground_truth["steps"], "samples": int(dur * 1000) + 1}))
"""

BUDGET_S, BUDGET_GB = 20.0, 2.0


def measure(chips: int, duration: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(chips), str(duration)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"emulator run failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _scaling(xs, run, units):
    """For each ``x`` of ``xs``: ``(x, run(x), wall s per unit, that over the first x's, marginal wall s
    per added x since the previous one (None for the first))``, ``units(x)`` the units of work at ``x``."""
    ref, prev = None, None
    for x in xs:
        m = run(x)
        per = m["wall_s"] / units(x)
        ref = ref or per
        yield x, m, per, per / ref, (m["wall_s"] - prev[1]) / (x - prev[0]) if prev else None
        prev = (x, m["wall_s"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter runs (7.5, 15, 30 s; 7.5 s for the chip sweep)")
    args = ap.parse_args()
    durations = [7.5, 15.0, 30.0] if args.quick else [15.0, 30.0, 60.0]
    base = durations[0]

    big = measure(8, 60.0)
    print(
        f"60 s of 8-chip Llama-3-70B at 1 ms samples: {big['wall_s']:.2f} s wall, {big['max_rss_gb']:.2f} GB max RSS "
        f"({big['steps']} steps, {big['samples']} samples × 8 chips)"
    )
    print(
        f"  ratio to the {BUDGET_S:.0f} s budget: {big['wall_s'] / BUDGET_S:.3f}; to the {BUDGET_GB:.0f} GB budget: "
        f"{big['max_rss_gb'] / BUDGET_GB:.3f}; wall s per simulated s: {big['wall_s'] / 60.0:.4f}"
    )

    print("linearity in simulated time (8 chips):")
    for d, m, per, ratio, marginal in _scaling(durations, lambda d: measure(8, d), lambda d: d):
        slope = f", marginal {marginal:.4f} s per added simulated s" if marginal is not None else ""
        print(
            f"  {d:5.1f} s simulated: {m['wall_s']:6.2f} s wall, {per:.4f} s per simulated s, ratio {ratio:.2f}, "
            f"{m['max_rss_gb']:.2f} GB{slope}"
        )

    print(f"linearity in chips ({base:g} s simulated):")
    for c, m, per, ratio, marginal in _scaling((1, 2, 4, 8), lambda c: measure(c, base), lambda c: c * base):
        slope = f", marginal {marginal:.3f} s per added chip" if marginal is not None else ""
        print(
            f"  {c} chip(s): {m['wall_s']:6.2f} s wall, {per:.4f} s per chip per simulated s, ratio {ratio:.2f}{slope}"
        )

    from perfonto.emulator.calibration import prepare
    from perfonto.emulator.calibration_rows import load_rows
    from perfonto.emulator.project import project

    t0 = time.perf_counter()
    project("sohu", model="llama3-70b", chips=8, isl=2048, osl=128, dtype="fp8")
    t1 = time.perf_counter()
    _, rows = load_rows()
    for r in rows:
        prepare(r)
    t2 = time.perf_counter()
    print(
        f"projection (sohu, 8 chips, 2048/128, 3,000 requests): {t1 - t0:.2f} s; replay of the {len(rows)} "
        f"calibration benchmarks: {t2 - t1:.2f} s ({(t2 - t1) / len(rows):.2f} s per row, budget 60 s per row)"
    )


if __name__ == "__main__":
    main()
