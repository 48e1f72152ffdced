"""Time the main job and its evaluation step; print ratios against baselines measured in the same run.

Usage: python benchmarks/bench_run.py [--repeat N]

- `perfonto run` (defaults: Llama-3-70B, 8 chips, 1 s, 1 ms) as a user runs it, in a subprocess,
  against the 30 s budget of issue 2;
- the generated evaluator vs the reference interpreter on the same windows (speed-up ratio);
- phase times reported by the job itself (compile, emulate, codegen, evaluate).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_S = 30.0


def time_cli(repeat: int) -> tuple[list[float], dict]:
    walls, last = [], {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "perfonto", "run", "--json", "--out", d], capture_output=True, text=True
            )
            walls.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                raise SystemExit(f"perfonto run failed:\n{proc.stderr}")
            last = json.loads(proc.stdout)
    return walls, last


def time_evaluators(repeat: int) -> tuple[float, float, int]:
    from perfonto import emulator
    from perfonto.codegen.python_evaluator import generate, load
    from perfonto.metrics.catalog import shipped_others
    from perfonto.metrics.compiler import compile_files
    from perfonto.metrics.interpreter import evaluate
    from perfonto.metrics.windows import prepare, read_counters
    from perfonto.ontology import load_generation

    gen, _ = load_generation("sohu")
    graph = compile_files(gen, others=shipped_others(gen))
    mod = load(generate(graph))
    with tempfile.TemporaryDirectory() as d:
        res = emulator.run(
            gen, model="llama3-70b", chips=8, duration_s=1.0, sample_period_s=1e-3, seed=0, out_dir=Path(d)
        )
        w = prepare(read_counters(res.counters_path, gen), gen)
    gen_t, ref_t = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        mod.evaluate(w.values, w.interval, w.chips)
        gen_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        evaluate(graph, w)
        ref_t.append(time.perf_counter() - t0)
    return statistics.median(gen_t), statistics.median(ref_t), w.interval.size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    walls, doc = time_cli(args.repeat)
    med = statistics.median(walls)
    print(
        f"perfonto run (defaults), {args.repeat} runs: median {med:.2f} s, min {min(walls):.2f} s, max "
        f"{max(walls):.2f} s"
    )
    print(f"  ratio to the 30 s budget: {med / BUDGET_S:.3f}")
    print("  phases (last run): " + ", ".join(f"{k} {v:.2f} s" for k, v in doc.get("timings_s", {}).items()))
    g, r, rows = time_evaluators(max(args.repeat, 5))
    print(
        f"evaluation of every metric over {rows} window-chip rows: generated {g * 1e3:.1f} ms, "
        f"reference interpreter {r * 1e3:.1f} ms, ratio generated/reference {g / r:.2f}"
    )


if __name__ == "__main__":
    main()
