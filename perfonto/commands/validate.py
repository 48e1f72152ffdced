"""``perfonto validate``: metrics against the emulator's ground truth on several workloads (exit 1 if
any error exceeds 0.5 %); the last line is the worst error. Metrics the emulator cannot feed (a signal
without an ``emulator:`` binding, the normal case for a next generation's new counters) are listed as
unavailable with the reason, on stderr, as ``perfonto run`` lists them."""

from __future__ import annotations

import json

from . import HELP
from .common import catalog_failure, catalog_options, CommandError, stderr


def register(sub) -> None:
    v = sub.add_parser("validate", help=HELP["validate"])
    catalog_options(v, metavar="DIR")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    v.set_defaults(func=cmd_validate)


def cmd_validate(args) -> int:
    import numpy as np

    from perfonto.validation import validate

    err = stderr()
    from perfonto.ontology.diagnostics import CatalogError

    try:
        checks, elapsed, unavailable = validate(
            args.generation, catalog=args.catalog, log=lambda s: err.print(s, markup=False)
        )
    except CatalogError as exc:
        raise catalog_failure(exc, args) from None
    if unavailable:
        err.print("Unavailable metrics (on this generation, or not fed by the emulator):", markup=False)
        for name, why in sorted(unavailable.items()):
            err.print(f"  • {name}: {why}", markup=False)
    if not checks:
        raise CommandError("no metric of the catalog has a ground-truth counterpart; nothing was checked", 1)
    bad = [c for c in checks if not np.isfinite(c.error) or c.error > 5e-3]
    worst = max(checks, key=lambda c: c.error)
    if args.json:
        print(
            json.dumps(
                {
                    "checks": [vars(c) | {"error": c.error} for c in checks],
                    "unavailable": dict(sorted(unavailable.items())),
                    "failed": len(bad),
                    "elapsed_s": elapsed,
                    "worst": {"workload": worst.workload, "metric": worst.metric, "error": worst.error},
                },
                indent=2,
            )
        )
        return 1 if bad else 0
    print(f"{'workload':<28} {'metric':<30} {'measured':>16} {'truth':>16} {'error':>10}")
    for c in checks:
        flag = "  FAIL" if c in bad else ""
        print(f"{c.workload:<28} {c.metric:<30} {c.measured:>16.6g} {c.truth:>16.6g} {c.error * 100:>9.4f}%{flag}")
    print(f"{len(checks)} checks, {len(bad)} over 0.5 %, {elapsed:.1f} s")
    print(f"worst error: {worst.error * 100:.4f} % ({worst.metric}, {worst.workload})")
    return 1 if bad else 0
