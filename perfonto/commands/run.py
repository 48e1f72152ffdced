"""``perfonto run``: the main job (see ``perfonto.job``)."""
from __future__ import annotations

import json

from .common import CommandError, duration, non_negative_int, positive_int, stderr, stdout

DEFAULT_OUT = "perfonto-out"


def register(sub) -> None:
    from emulator import MODELS

    r = sub.add_parser("run", help="compile the catalog, emulate a workload, evaluate every metric and report the bottleneck")
    r.add_argument("--model", default="llama3-70b", choices=sorted(MODELS), help="model to emulate (default: llama3-70b)")
    r.add_argument("--chips", type=positive_int, default=8, help="chips in the tensor-parallel group (default: 8)")
    r.add_argument("--duration", type=duration, default=1.0, help="simulated time, e.g. 1s, 500ms (default: 1s)")
    r.add_argument("--sample-period", type=duration, default=1e-3, help="counter sampling period (default: 1ms)")
    r.add_argument("--isl", type=positive_int, default=2048, help="input tokens per request (default: 2048)")
    r.add_argument("--osl", type=positive_int, default=128, help="output tokens per request (default: 128)")
    r.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default: 0)")
    r.add_argument("--warmup-steps", type=non_negative_int, default=400,
                   help="steps scheduled before t = 0 and not measured, so the run starts with a full batch (default: 400; 0 = cold start)")
    r.add_argument("--generation", default="sohu", help="hardware generation (default: sohu)")
    r.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default: ./{DEFAULT_OUT})")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout, messages on stderr")
    r.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from ontology.diagnostics import CatalogError

    from ..job import run_job
    from ..report import render

    err = stderr()
    try:
        result = run_job(model=args.model, chips=args.chips, duration_s=args.duration, sample_period_s=args.sample_period,
                         isl=args.isl, osl=args.osl, seed=args.seed, warmup_steps=args.warmup_steps,
                         generation=args.generation, out=args.out, log=lambda s: err.print(s, markup=False))
    except CatalogError as exc:
        usage = any(d.code == "unknown-generation" for d in exc.diagnostics)
        raise CommandError("the catalog does not compile; run `perfonto check` for the full list"
                           if not usage else f"no generation named `{args.generation}`", 2 if usage else 1, exc.diagnostics) from None
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc), 1) from None
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        render(result, stdout())
    return 0
