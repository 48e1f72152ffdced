"""``perfonto sensitivity``: elasticities of tokens/s and latency to each spec constant at one
operating point (``whatif.sensitivity``), ranked."""

from __future__ import annotations

import json

from . import HELP
from .common import CommandError, stdout


def register(sub) -> None:
    from perfonto.whatif.cliargs import add_workload_args

    p = sub.add_parser("sensitivity", help=HELP["sensitivity"])
    add_workload_args(p)
    p.add_argument(
        "--step", type=float, default=0.05, help="step h on ln x of the central difference (default: 0.05, ±5 %%)"
    )
    p.add_argument(
        "--constants",
        default=None,
        metavar="A,B",
        help="only these spec constants (default: every one the emulator reads)",
    )
    p.set_defaults(func=cmd_sensitivity)


def cmd_sensitivity(args) -> int:
    from perfonto.whatif.cliargs import base_point, cache_of, target_of
    from perfonto.whatif.knobs import KnobError
    from perfonto.whatif.sensitivity import sensitivity

    from .project import EmuProgress

    try:
        target = target_of(args.generation, args.catalog)
        base = base_point(args)
        names = [c.strip() for c in args.constants.split(",") if c.strip()] if args.constants else None
        if args.constants is not None and not names:
            raise KnobError("--constants is empty; name spec constants, e.g. spec.hbm.peak_bandwidth")
        with EmuProgress("sensitivity", enabled=not args.json, after_s=0.5) as bar:
            res = sensitivity(
                target, base, step=args.step, constants=names, jobs=args.jobs, cache=cache_of(args), progress=bar
            )
    except KnobError as exc:
        code = 1 if "does not run" in str(exc) else 2
        raise CommandError(str(exc), code) from None
    doc = res.to_json()
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    from rich.table import Table

    out = stdout()
    b = res.base
    out.print(
        f"[bold]{b['model']}[/] on {b['chips']} × {b['generation']}, {b['isl']}/{b['osl']} tokens, preset "
        f"{b['preset']}: {b['benchmark_tokens_per_second']:,.0f} tokens/s over the benchmark "
        f"({b['tokens_per_second']:,.0f} at full load), "
        f"bottleneck {b['bottleneck']}"
    )
    t = Table(title=f"elasticity d ln y / d ln x (central difference, x × e^±{res.step:g})")
    for col in ("#", "constant", "value", "tokens/s", "ITL p50", "TTFT p50", "tok/s per unit", "bottleneck −/+"):
        t.add_column(col, justify="left" if col in ("constant", "bottleneck −/+") else "right")
    for i, r in enumerate(res.ranked, 1):
        e, m = r["elasticity"], r["marginal"]["benchmark_tokens_per_second"]

        def f(v):
            return "—" if v is None else f"{v:+.3f}"

        bn = (
            r["bottleneck_down"]
            if r["bottleneck_down"] == r["bottleneck_up"]
            else f"{r['bottleneck_down']} / {r['bottleneck_up']}"
        )
        t.add_row(
            str(i),
            r["constant"],
            f"{r['value']:g} {r['unit']}",
            f(e["benchmark_tokens_per_second"]),
            f(e["itl_p50_s"]),
            f(e["ttft_p50_s"]),
            "—" if m is None else f"{m:,.4g}",
            str(bn),
        )
    out.print(t)
    out.print(
        "tok/s per unit: the marginal d y / d x, tokens/s per one more unit of the constant (in its unit, column value)"
    )
    if res.fixed:
        out.print(f"set by preset {b['preset']} (not varied): {', '.join(res.fixed)}")
    return 0
