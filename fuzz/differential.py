"""The open-ended random-catalog campaign (issue 34): ``python -m fuzz.differential N SEED OUT.json`` draws
N valid random catalogs (``tests/test_differential.py``'s generator, with hypothesis seeded by SEED rather
than derandomized as in the suite) and runs each through every backend against the reference
interpreter, counting catalogs drawn, passed, refused by the compiler's lint by design (``total-times-
ratio``, ``div-zero``, ``clamp-order``: hypothesis ``assume``) and failed; OUT.json is rewritten every 50
catalogs. A failure is shrunk by hypothesis and its first, unshrunk catalog kept in ``first_failure``:
add it to the suite as a fixed example. A catalog whose check runs past ``PERFONTO_DIFF_TIMEOUT`` seconds
(default 120) has its DuckDB query interrupted and is counted in ``timed_out``, its catalog kept in
``slow_cases``; the catalog under test is also written to OUT.json.current before each check, so a
campaign killed from outside still names it. Run from the repository root."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
os.environ.setdefault("PERFONTO_NO_JIT", "1")
import conftest  # noqa: E402,F401 - the suite's environment (cache folder, profiles)
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis.errors import UnsatisfiedAssumption  # noqa: E402

import test_differential as td  # noqa: E402
import test_differential_backends as tb  # noqa: E402

TIMEOUT_S = float(os.environ.get("PERFONTO_DIFF_TIMEOUT", 120))


def run(n: int, seed_: int, log: str) -> dict:
    """Draw ``n`` valid catalogs with hypothesis seeded by ``seed_``; counts as in the module docstring,
    rewritten to ``log`` as it goes."""
    counts = {
        "seed": seed_,
        "drawn": 0,
        "passed": 0,
        "refused": 0,
        "failed": 0,
        "timed_out": 0,
        "first_failure": None,
        "slow_cases": [],
    }
    t0 = time.time()

    def flush():
        counts["elapsed_s"] = round(time.time() - t0, 1)
        with open(log, "w") as fh:
            json.dump(counts, fh)

    @seed(seed_)
    @settings(max_examples=n, deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
    @given(td.cases())
    def campaign(case):
        counts["drawn"] += 1
        with open(log + ".current", "w") as fh:
            fh.write(f"{case[1]}\n{case[0]!r}\n{case[2]!r}\n")
        fired, done = threading.Event(), threading.Event()

        def interrupt():  # after TIMEOUT_S, interrupt DuckDB until the check returns (a query may start later)
            if not done.wait(TIMEOUT_S):
                fired.set()
                while not done.wait(0.005):
                    tb._CON.interrupt()

        watchdog = threading.Thread(target=interrupt, daemon=True)
        watchdog.start()
        t_case = time.time()
        try:
            td.check_all(*case)
            counts["passed"] += 1
        except UnsatisfiedAssumption:
            counts["refused"] += 1
            raise
        except Exception as exc:  # a mismatch: kept, then hypothesis shrinks it
            if fired.is_set():  # interrupted: not a mismatch, kept for diagnosis, and the campaign goes on
                counts["timed_out"] += 1
                counts["slow_cases"].append(
                    {
                        "seconds": round(time.time() - t_case, 1),
                        "error": str(exc)[:300],
                        "catalog": case[1],
                        "signals": repr(case[0]),
                        "runs": repr(case[2]),
                    }
                )
                flush()
                return
            counts["failed"] += 1
            if counts["first_failure"] is None:
                counts["first_failure"] = f"{type(exc).__name__}: {str(exc)[:2000]}\n{case[1]}\n{case[0]!r}"
            raise
        finally:
            done.set()
            watchdog.join()
            if counts["drawn"] % 50 == 0:
                flush()

    try:
        campaign()
        counts["result"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the shrunk failure, reported in the counts
        counts["result"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    flush()
    return counts


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]), indent=1)[:3000])
