"""``perfonto`` command line.

Exit codes: 2 for usage errors everywhere; commands that judge (``check``) exit 1 when what they judge
fails; commands that produce (``run``) exit 0 when they produced their output and 1 when they could not.
Under ``--json`` stdout holds one JSON document and nothing else; messages go to stderr.
"""
from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

DEFAULT_OUT = "perfonto-out"


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _duration(text: str) -> float:
    """Parse ``1s``, ``500ms``, ``2.5 s``, ``1min`` into seconds (pint, the project's registry)."""
    from ontology.units import registry_for

    reg = registry_for(())
    try:
        q = reg.Quantity(text)
        if q.dimensionless:
            value = float(q.magnitude)
        else:
            value = float(q.to(reg.second).magnitude)
    except Exception:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (write e.g. 1s, 500ms, 2min)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"duration must be positive: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfonto", description="Counter ontology and metric derivation for Sohu and its successors.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    r = sub.add_parser("run", help="compile the catalog, emulate a workload, evaluate every metric and report the bottleneck")
    from emulator import MODELS

    r.add_argument("--model", default="llama3-70b", choices=sorted(MODELS), help="model to emulate (default: llama3-70b)")
    r.add_argument("--chips", type=_positive_int, default=8, help="chips in the tensor-parallel group (default: 8)")
    r.add_argument("--duration", type=_duration, default=1.0, help="simulated time, e.g. 1s, 500ms (default: 1s)")
    r.add_argument("--sample-period", type=_duration, default=1e-3, help="counter sampling period (default: 1ms)")
    r.add_argument("--isl", type=_positive_int, default=2048, help="input tokens per request (default: 2048)")
    r.add_argument("--osl", type=_positive_int, default=128, help="output tokens per request (default: 128)")
    r.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    r.add_argument("--warmup-steps", type=int, default=400,
                   help="steps scheduled before t = 0 and not measured, so the run starts with a full batch (default: 400; 0 = cold start)")
    r.add_argument("--generation", default="sohu", help="hardware generation (default: sohu)")
    r.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default: ./{DEFAULT_OUT})")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout, messages on stderr")
    c = sub.add_parser("check", help="compile a catalog and print every diagnostic")
    c.add_argument("--catalog", default=None, help="folder of ontology *.yaml and metric *.metrics files (default: the shipped catalog)")
    c.add_argument("--generation", default="sohu", help="generation to compile against (default: sohu)")
    c.add_argument("--json", action="store_true", help="print diagnostics as one JSON object")
    return p


def cmd_check(args) -> int:
    from .catalog import load_catalog

    cat = load_catalog(args.catalog, args.generation)
    err = _stderr()
    for n in cat.notes:
        err.print(f"note: {n}")
    errors = cat.errors
    if args.json:
        doc = {"ok": not errors, "generation": args.generation,
               "metrics": len(cat.graph.metrics) if cat.graph else 0,
               "signals": len(cat.generation.signals) if cat.generation else 0,
               "diagnostics": [d.to_json() for d in cat.diagnostics]}
        print(json.dumps(doc, indent=2))
    else:
        for d in cat.diagnostics:
            print(d.render())
            print()
        if cat.graph is not None:
            print(f"{args.generation}: {len(cat.generation.signals)} signals, {len(cat.graph.metrics)} metrics compiled, "
                  f"{len(errors)} error(s), {len(cat.diagnostics) - len(errors)} warning(s)")
        else:
            print(f"{len(errors)} error(s)")
    return 1 if errors else 0


def cmd_run(args) -> int:
    from ontology.diagnostics import CatalogError

    from .job import run_job
    from .report import render

    err = _stderr()
    try:
        result = run_job(model=args.model, chips=args.chips, duration_s=args.duration, sample_period_s=args.sample_period,
                         isl=args.isl, osl=args.osl, seed=args.seed, warmup_steps=args.warmup_steps,
                         generation=args.generation, out=args.out,
                         log=lambda s: err.print(s))
    except CatalogError as exc:
        for d in exc.diagnostics:
            err.print(d.render(), markup=False)
        err.print("the catalog does not compile; run `perfonto check` for the full list")
        return 1
    except (ValueError, OSError) as exc:
        err.print(f"error: {exc}", markup=False)
        return 1
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        console = Console(highlight=False)
        if not console.is_terminal:  # files and pipes: wide enough for the tables, no wrapping
            console = Console(highlight=False, width=120)
        render(result, console)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["run"]
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return {"run": cmd_run, "check": cmd_check}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
