"""What a user runs, timed: ``perfonto analyze`` as a process on a Parquet dump, against DuckDB running
perfonto's own generated SQL over the same file, in one run, cold and warm cache. Not a test: it
prints figures (ratios measured in the same run) and writes them as JSON with ``--json``.

    pip install -e '.[test,bench]'
    python benchmarks/bench_analyze.py [--duration 30s] [--chips 8] [--repeat 3] [--data-dir DIR] [--json]

1. the dump: ``perfonto run --duration 30s`` (8 chips × 30,001 samples = 240,008 rows of the shipped
   catalog's 60 signals, 243 registers a row), made once in ``--data-dir`` and reused;
2. ``perfonto codegen --target sql --counters DUMP``: the generated DuckDB query over that file;
3. DuckDB: ``COPY (the generated query) TO 'metrics.parquet'`` in a child process (``SET threads`` to the
   machine's cores), ``--repeat`` times: its output is the same metric table analyze writes;
3b. Polars: the same generated query through ``polars.SQLContext`` over ``pl.scan_parquet`` of the same file (its
   fixed-size list columns cast to lists, which Polars' SQL indexes), written with ``write_parquet``, in a
   child process, ``--repeat`` times (skipped, saying so, where Polars is not installed);
4. ``perfonto analyze DUMP --out DIR`` in a child process: **cold** — an empty cache folder
   (``PERFONTO_CACHE_DIR``), so the catalog is compiled and the kernel JIT-compiled — then **warm**,
   ``--repeat`` times with the cache the cold run filled (the compiled catalog and numba's cache of the
   kernel); wall time from the process's start to its exit, and its peak resident memory;
5. start-up: ``perfonto --help`` and ``perfonto explain mfu`` with the warm cache (median of 5);
6. the I/O baseline: a process that does only the reading and writing analyze does, with no window rule
   and no formula — start, import pyarrow and NumPy, decode the whole dump (``pq.read_table``, Arrow's
   threads; analyze reads only the columns its metrics need, a few fewer) and write the metric table
   analyze wrote (read into memory before its clock goes on; written as analyze writes it: Snappy,
   dictionaries for the string columns only), one after the other. Not a strict lower bound (an engine
   may overlap the decode with the write), but the scale of what the 0.2 × DuckDB target leaves for the
   rest: the baseline ÷ DuckDB is printed beside analyze ÷ DuckDB.
Every process reads the same file; before each timed run the file is read once so that it is in the
page cache for all of them alike (both engines decode it from memory, neither from the disk).
The headline is warm analyze ÷ DuckDB (the median of each); DuckDB's and analyze's metric tables are
cross-checked on a sample of windows (values within 1e-9 relative, the same nulls).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable


def _run(cmd: list[str], env: dict | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, peak RSS in MB, the finished process) of ``cmd``; its output goes to temporary
    files (a pipe would fill and stall it: ``os.wait4`` reads no pipe)."""
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    done = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err[-3000:]}")
    return wall, usage.ru_maxrss / 1024.0, done


def _warm_file(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


DUCKDB_CHILD = r"""
import duckdb, os, sys, time
sql, out = open(sys.argv[1]).read().rstrip().rstrip(";"), sys.argv[2]
con = duckdb.connect()
con.execute(f"SET threads = {os.cpu_count()}")
n = con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet)").fetchone()[0]
print(n)
"""


POLARS_CHILD = r"""
import re, sys
import polars as pl
sql = "\n".join(l for l in open(sys.argv[1]).read().splitlines() if not l.startswith("--")).rstrip().rstrip(";")
lf = pl.scan_parquet(sys.argv[3])
arrays = [(n, t) for n, t in lf.collect_schema().items() if isinstance(t, pl.Array)]
lf = lf.with_columns([pl.col(n).cast(pl.List(t.inner)) for n, t in arrays])
ctx = pl.SQLContext()
ctx.register("counters", lf)
out = ctx.execute(re.sub(r"READ_PARQUET\('[^']*'\)", "counters", sql, flags=re.I)).collect()
out.write_parquet(sys.argv[2])
print(out.height)
"""


FLOOR_CHILD = r"""
import sys, time
t_start = float(sys.argv[3])
import numpy, pyarrow as pa, pyarrow.parquet as pq
t_read = time.time()
out = pq.read_table(sys.argv[2])  # analyze's metric table, in memory before the clock goes on
t_out = time.time()
t = pq.read_table(sys.argv[1])
strings = [f.name for f in out.schema if pa.types.is_string(f.type) or pa.types.is_list(f.type)]
pq.write_table(out, sys.argv[4], compression="snappy", use_dictionary=strings)
print((t_read - t_start) + (time.time() - t_out), t.num_rows)
"""


def _floor(dump: Path, metrics: Path, out: Path, env: dict) -> float:
    """Seconds of the I/O baseline (module docstring, item 6): from the child's start (the parent's
    ``time.time()`` just before it is started) to its end, less its untimed read of analyze's table."""
    _warm_file(dump)
    _warm_file(metrics)
    t0 = time.time()
    return float(_run([PY, "-c", FLOOR_CHILD, str(dump), str(metrics), repr(t0), str(out)], env)[2].stdout.split()[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", default="30s")
    ap.add_argument("--chips", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--data-dir", default=None, help="where the dump is kept between runs (default: a folder under the temp dir)"
    )
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    ap.add_argument(
        "--cache-dir",
        default=None,
        help="perfonto's cache folder, kept after the run (default: a fresh one, removed); with --no-cold it "
        "must already hold this catalog's compiled catalog and kernel",
    )
    ap.add_argument(
        "--no-cold", action="store_true", help="skip the cold-cache run (needs a --cache-dir a run has filled)"
    )
    a = ap.parse_args(argv)
    data = Path(a.data_dir or Path(tempfile.gettempdir()) / "perfonto-bench-analyze")
    run_dir = data / f"run-{a.chips}x{a.duration}"
    dump = run_dir / "counters.parquet"
    work = Path(tempfile.mkdtemp(prefix="perfonto-bench-analyze-"))
    env = dict(os.environ)
    env.pop("PERFONTO_NO_JIT", None)
    # warm means what a user's second run has: Python's bytecode cache too (a shell that sets
    # PYTHONDONTWRITEBYTECODE would make every run compile perfonto's ~800 modules from source)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if a.no_cold and a.cache_dir is None:
        raise SystemExit("--no-cold needs --cache-dir (a cache a cold run has filled)")
    try:
        if not dump.exists():
            print(f"making the dump: perfonto run --duration {a.duration} --chips {a.chips}", file=sys.stderr)
            _run(
                [
                    PY,
                    "-m",
                    "perfonto",
                    "run",
                    "--duration",
                    a.duration,
                    "--chips",
                    str(a.chips),
                    "--out",
                    str(run_dir),
                    "--force",
                    "--json",
                ],
                env,
            )
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(dump).metadata.num_rows
        sql = work / "sohu.sql"
        _run([PY, "-m", "perfonto", "codegen", "--target", "sql", "--counters", str(dump), "--out", str(work)], env)
        duck = []
        for k in range(a.repeat):
            _warm_file(dump)
            out = work / f"duck-{k}.parquet"
            wall, peak, _ = _run([PY, "-c", DUCKDB_CHILD, str(sql), str(out)], env)
            duck.append((wall, peak))
        polars = _polars_runs(sql, dump, work, a.repeat, env)
        cache = Path(a.cache_dir) if a.cache_dir else work / "cache"
        env_cache = dict(env, PERFONTO_CACHE_DIR=str(cache))
        cold_wall = cold_peak = float("nan")
        if not a.no_cold:
            _warm_file(dump)
            cold_wall, cold_peak, _ = _run(
                [PY, "-m", "perfonto", "analyze", str(dump), "--out", str(work / "cold"), "--json"], env_cache
            )
        warm = []
        for k in range(a.repeat):
            _warm_file(dump)
            wall, peak, done = _run(
                [PY, "-m", "perfonto", "analyze", str(dump), "--out", str(work / f"warm-{k}"), "--json"], env_cache
            )
            warm.append((wall, peak))
            if "compiling" in done.stderr:
                raise SystemExit("a warm run compiled again:\n" + done.stderr)
        starts = {}
        for name, cmd in (("help", ["--help"]), ("explain_mfu", ["explain", "mfu"])):
            times = [_run([PY, "-m", "perfonto", *cmd], env_cache)[0] for _ in range(5)]
            starts[name] = statistics.median(times)
        floors = [_floor(dump, _one_table(work / "warm-0"), work / f"floor-{k}.parquet", env) for k in range(a.repeat)]
        check = _cross_check(work / "duck-0.parquet", _metrics_of(work / "warm-0"))
        p_check = _cross_check(work / "polars-0.parquet", _metrics_of(work / "warm-0")) if polars else None
        res = _result(rows, dump, duck, polars, (cold_wall, cold_peak, a.no_cold), warm, starts, floors)
        res["cross_check"], res["polars_cross_check"] = check, p_check
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        _print_text(res, a.no_cold)
    return 0


def _result(rows, dump: Path, duck: list, polars: list, cold: tuple, warm: list, starts: dict, floors: list) -> dict:
    """The figures as one JSON document: each engine's runs (wall s, peak MB), their medians and ratios."""
    cold_wall, cold_peak, no_cold = cold
    d_med = statistics.median(w for w, _ in duck)
    w_med = statistics.median(w for w, _ in warm)
    f_med = statistics.median(floors)
    p_med = statistics.median(w for w, _ in polars) if polars else None
    return {
        "rows": rows,
        "dump_mb": round(dump.stat().st_size / 1e6, 1),
        "duckdb_s": [round(w, 3) for w, _ in duck],
        "duckdb_median_s": round(d_med, 3),
        "duckdb_peak_mb": round(max(p for _, p in duck)),
        "analyze_cold_s": None if no_cold else round(cold_wall, 3),
        "analyze_cold_peak_mb": None if no_cold else round(cold_peak),
        "analyze_warm_s": [round(w, 3) for w, _ in warm],
        "analyze_warm_median_s": round(w_med, 3),
        "analyze_warm_peak_mb": round(max(p for _, p in warm)),
        "warm_vs_duckdb": round(w_med / d_med, 3),
        "cold_vs_duckdb": None if no_cold else round(cold_wall / d_med, 3),
        "analyze_rows_per_s": round(rows / w_med),
        "duckdb_rows_per_s": round(rows / d_med),
        "help_s": round(starts["help"], 3),
        "explain_mfu_s": round(starts["explain_mfu"], 3),
        "polars_s": [round(w, 3) for w, _ in polars] or None,
        "polars_median_s": None if p_med is None else round(p_med, 3),
        "warm_vs_polars": None if p_med is None else round(w_med / p_med, 3),
        "io_baseline_s": [round(f, 3) for f in floors],
        "io_baseline_median_s": round(f_med, 3),
        "io_baseline_vs_duckdb": round(f_med / d_med, 3),
        "warm_vs_io_baseline": round(w_med / f_med, 3),
        "targets": {"warm_vs_duckdb": 0.2, "explain_mfu_s": 1.0, "help_s": 0.5},
    }


def _print_text(res: dict, no_cold: bool) -> None:
    """The figures of ``res`` (``main``'s JSON document) as lines of text."""
    print(f"dump: {res['rows']:,} rows ({res['dump_mb']} MB Parquet)")
    print(
        f"DuckDB on the generated SQL   {res['duckdb_median_s']:7.2f} s  (runs {res['duckdb_s']}, peak "
        f"{res['duckdb_peak_mb']} MB)"
    )
    if res["polars_median_s"] is not None:
        print(
            f"Polars SQL on the same query  {res['polars_median_s']:7.2f} s  (runs {res['polars_s']}; analyze ÷ Polars "
            f"{res['warm_vs_polars']}; cross-check: {res['polars_cross_check']})"
        )
    else:
        print("Polars: not installed (pip install polars), not timed")
    if not no_cold:
        print(
            f"perfonto analyze, cold cache  {res['analyze_cold_s']:7.2f} s  ÷ DuckDB {res['cold_vs_duckdb']}  "
            "(compiles the catalog and the kernel)"
        )
    print(
        f"perfonto analyze, warm cache  {res['analyze_warm_median_s']:7.2f} s  ÷ DuckDB {res['warm_vs_duckdb']}  "
        f"(target ≤ 0.2; runs {res['analyze_warm_s']}, peak {res['analyze_warm_peak_mb']} MB)"
    )
    print(
        f"I/O baseline (start, import, decode the dump, write the metric table)  {res['io_baseline_median_s']:7.2f} s"
        f"  ÷ DuckDB {res['io_baseline_vs_duckdb']}; analyze ÷ it {res['warm_vs_io_baseline']}  "
        f"(runs {res['io_baseline_s']})"
    )
    print(
        f"perfonto --help {res['help_s']:.2f} s (target < 0.5), perfonto explain mfu {res['explain_mfu_s']:.2f} "
        "s (target < 1)"
    )
    print(f"cross-check against DuckDB: {res['cross_check']}")


def _polars_runs(sql: Path, dump: Path, work: Path, repeat: int, env: dict) -> list:
    """(wall s, peak MB) of each of ``repeat`` Polars runs of the query (``POLARS_CHILD``); [] without Polars."""
    runs = []
    if _have("polars"):
        for k in range(repeat):
            _warm_file(dump)
            runs.append(_run([PY, "-c", POLARS_CHILD, str(sql), str(work / f"polars-{k}.parquet"), str(dump)], env)[:2])
    return runs


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _one_table(run_out: Path) -> Path:
    """analyze's metric table of ``run_out`` as one Parquet file (its parts concatenated)."""
    import pyarrow.parquet as pq

    one = run_out / "metrics-one.parquet"
    pq.write_table(pq.read_table(_metrics_of(run_out)), one)
    return one


def _metrics_of(run_out: Path) -> Path:
    """analyze's metric table in ``run_out``: a ``metrics/`` folder of parts, or one ``metrics.parquet``
    (a capture small enough for one part)."""
    return run_out / "metrics" if (run_out / "metrics").is_dir() else run_out / "metrics.parquet"


def _cross_check(duck: Path, ours: Path, n: int = 4000) -> str:
    """Metric values of the first ``n`` (window, chip) rows of both tables, within 1e-9, same nulls."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    d = pq.read_table(duck)
    o = pq.read_table(ours)
    key = lambda t: pc.add(pc.multiply(t.column("window").cast("int64"), 1 << 20), t.column("chip").cast("int64"))  # noqa: E731
    d = d.take(pc.sort_indices(key(d)))
    o = o.take(pc.sort_indices(key(o)))
    d, o = d.slice(0, n), o.slice(0, n)
    names = [
        c
        for c in o.column_names
        if c in d.column_names and c not in ("window", "chip", "host", "start_ns", "interval_s", "out_of_bounds")
    ]
    bad = []
    for c in names:
        x, y = _floats(o, c), _floats(d, c)
        if (
            x.shape != y.shape
            or not np.array_equal(np.isnan(x), np.isnan(y))
            or not np.allclose(x[~np.isnan(x)], y[~np.isnan(y)], rtol=1e-9, atol=0)
        ):
            bad.append(c)
    return f"{len(names) - len(bad)} of {len(names)} metrics agree on {n} rows" + (
        f"; differ: {bad[:5]}" if bad else ""
    )


def _floats(t, c):
    import numpy as np
    import pyarrow as pa

    a = t.column(c).combine_chunks()
    if pa.types.is_fixed_size_list(a.type) or pa.types.is_list(a.type):
        a = a.flatten()
    return np.asarray(a.to_numpy(zero_copy_only=False), dtype=float)


if __name__ == "__main__":
    sys.exit(main())
