"""Run the fuzz targets with a time or input budget: ``python -m fuzz.run [--budget 10s] [--inputs N]
[--target T ...] [--seed S] [--json]``.

Inputs are the targets' seeds mutated by a small structure-aware mutator (byte and token edits,
splices of two seeds, repeated and nested fragments, huge numbers, odd line ends and separators,
deep brackets) — deterministic for a seed. Each input runs in-process under a per-input time limit
(``--hang``, default 10 s of the process's CPU time, SIGPROF; and 6 × that of wall-clock time,
SIGALRM, for an input that blocks without computing): an exception that is not the target's clean
refusal is a *crash*, an input over either limit a *hang* — CPU time, so that a loaded machine's
stalls are not counted as hangs; both are saved to ``fuzz/corpus/<target>/`` (the saved
corpus runs as regression tests in ``tests/test_fuzz_corpus.py``). Exit 1 when anything was found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import sys
import time
import traceback
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"

FRAGMENTS = [
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b":",
    b'"',
    b"'",
    b"\\",
    b"#",
    b"\n",
    b"\r",
    b"\r\n",
    b"\t",
    b" ",
    b"\x00",
    b"\xff\xfe",
    b"\xe2\x80\xa8",
    b"\x0c",
    b"\x85",
    b"-",
    b"+",
    b"*",
    b"/",
    b"**",
    b"%",
    b"..",
    b"=",
    b"if",
    b"else",
    b"and",
    b"not",
    b"sum(",
    b"avg(",
    b"max(",
    b"p99(",
    b"clamp(",
    b"reduce(",
    b"select(",
    b"1e308",
    b"1e999",
    b"-0",
    b"nan",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"9" * 5000,
    b"0x10",
    b"18446744073709551616",
    b"&anchor",
    b"*anchor",
    b"!!python/object",
    b"<<: ",
    b"---\n",
    b"...\n",
    b"~",
    b"null",
    b"true",
    b"interval",
    b"spec.hbm.capacity",
    b"hbm.read_bytes",
    b"request.token_times",
    b"token_gap.duration",
    b"[GB/s]",
    b"[percent]",
    b"%",
    b'"x"',
    b"metric ",
    b"bounds 0 .. 100",
    b'threshold > 80 %: "x"',
    b"duration_time",
    b"#slots",
    b"source_count(",
    b"d_ratio(",
    b"@",
    b"?",
]


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """One mutated input from ``seeds``."""
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
        op = rng.randrange(10)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:  # flip a byte
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op == 1:  # insert a fragment
            data[pos:pos] = rng.choice(FRAGMENTS)
        elif op == 2 and data:  # delete a range
            data[pos : pos + rng.randrange(1, 16)] = b""
        elif op == 3:  # splice another seed
            other = rng.choice(seeds)
            a = rng.randrange(len(other) + 1)
            data[pos:pos] = other[a : a + rng.randrange(1, 200)]
        elif op == 4 and data:  # repeat a range
            n = rng.randrange(1, 40)
            data[pos:pos] = bytes(data[pos : pos + n]) * rng.choice((2, 10, 200))
        elif op == 5:  # deep nesting
            depth = rng.choice((50, 500, 5000))
            o, c = rng.choice(((b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"-", b""), (b"not ", b"")))
            data[pos:pos] = o * depth + b"1" + c * depth
        elif op == 6:  # replace a digit run with an extreme number
            data[pos:pos] = rng.choice((b"99999999999999999999999", b"1e400", b"-1", b"0", b"4294967296", b"1.5"))
        elif op == 7:  # odd line ends everywhere
            data = bytearray(
                bytes(data).replace(b"\n", rng.choice((b"\r", b"\r\n", b"\xe2\x80\xa8", b"\x0c\n", b"\n\n")))
            )
        elif op == 8 and data:  # truncate
            data = data[:pos]
        else:  # swap two ranges of the seed
            a, b = sorted((rng.randrange(len(data) + 1), rng.randrange(len(data) + 1)))
            data[a:b] = bytes(data[a:b])[::-1]
        if len(data) > 400_000:
            data = data[:400_000]
    return bytes(data)


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("CPU" if signum == signal.SIGPROF else "wall-clock")


WALL_FACTOR = 6  # wall-clock limit = WALL_FACTOR × the CPU-time limit (an input that blocks)


def run_one(target: str, data: bytes, hang_s: float = 10.0) -> tuple[str, str]:
    """``("ok" | "crash" | "hang", detail)`` of one input: a hang is over ``hang_s`` seconds of CPU
    time or ``WALL_FACTOR × hang_s`` of wall-clock time."""
    from .targets import TARGETS, clean_errors

    _, fn = TARGETS[target]
    clean = clean_errors(target)
    old = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, hang_s)
    signal.setitimer(signal.ITIMER_REAL, hang_s * WALL_FACTOR)
    try:
        fn(data)
        return "ok", ""
    except _Hang as h:
        limit = hang_s if str(h) == "CPU" else hang_s * WALL_FACTOR
        return "hang", f"over {limit:g} s of {h} time"
    except clean:
        return "ok", ""
    except (MemoryError, RecursionError, Exception) as exc:  # everything else is a crash
        tb = traceback.format_exc(limit=-6)
        return "crash", f"{type(exc).__name__}: {str(exc)[:300]}\n{tb}"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old[0])
        signal.signal(signal.SIGPROF, old[1])


def save(target: str, data: bytes, kind: str) -> Path:
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{kind}-{hashlib.sha256(data).hexdigest()[:16]}"
    p.write_bytes(data)
    return p


def campaign(
    target: str, *, budget_s: float | None, inputs: int | None, seed: int, hang_s: float, log=lambda s: None
) -> dict:
    """Run one target until the time budget or the input count is reached; return its figures."""
    from .targets import TARGETS

    seeds_fn, _ = TARGETS[target]
    seeds = seeds_fn() or [b""]
    rng = random.Random(f"{target}:{seed}")
    t0 = time.monotonic()
    n = crashes = hangs = 0
    found: list[str] = []
    while True:
        if inputs is not None and n >= inputs:
            break
        if budget_s is not None and time.monotonic() - t0 >= budget_s:
            break
        data = seeds[n] if n < len(seeds) else mutate(rng, seeds)
        kind, detail = run_one(target, data, hang_s)
        n += 1
        if kind != "ok":
            crashes += kind == "crash"
            hangs += kind == "hang"
            p = save(target, data, kind)
            found.append(f"{p.name}: {detail.splitlines()[0] if detail else kind}")
            log(f"[{target}] {kind} #{n}: {p} — {detail[:2000]}")
        if n % 5000 == 0:
            log(f"[{target}] {n} inputs, {crashes} crashes, {hangs} hangs, {time.monotonic() - t0:.0f} s")
    return {
        "target": target,
        "inputs": n,
        "crashes": crashes,
        "hangs": hangs,
        "seconds": round(time.monotonic() - t0, 1),
        "found": found,
    }


def _seconds(text: str) -> float:
    text = text.strip()
    for suffix, f in (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * f
    return float(text)


def main(argv: list[str] | None = None) -> int:
    from .targets import TARGETS

    p = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", action="append", choices=sorted(TARGETS), help="a target (repeatable; default: all)")
    p.add_argument("--budget", default=None, help="time per target, e.g. 10s, 5m (default 10s unless --inputs)")
    p.add_argument("--inputs", type=int, default=None, help="inputs per target")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--hang",
        type=float,
        default=10.0,
        help="CPU seconds after which one input is a hang (wall-clock: 6 times that)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = p.parse_args(argv)
    budget = _seconds(args.budget) if args.budget else (None if args.inputs else 10.0)
    out = []
    for t in args.target or sorted(TARGETS):
        out.append(
            campaign(
                t,
                budget_s=budget,
                inputs=args.inputs,
                seed=args.seed,
                hang_s=args.hang,
                log=lambda s: print(s, file=sys.stderr, flush=True),
            )
        )
    if args.json:
        print(
            json.dumps(
                {"targets": out, "crashes": sum(r["crashes"] for r in out), "hangs": sum(r["hangs"] for r in out)},
                indent=2,
            )
        )
    else:
        for r in out:
            print(
                f"{r['target']:8s} {r['inputs']:>9,} inputs  {r['crashes']} crashes  {r['hangs']} hangs  "
                f"{r['seconds']:>7.1f} s"
            )
    return 1 if any(r["crashes"] or r["hangs"] for r in out) else 0


if __name__ == "__main__":
    sys.exit(main())
