"""``perfonto emulate --fleet HOSTSxCHIPS --out DIR``: a partitioned fleet dataset for tests and
benchmarks (``emulator.fleet``): ``counters/host=<host>/part-0.parquet``, ``topology.csv`` and
``ground_truth.json``, with a few slow chips, a throttled link and a hot rack. Analyse it with
``perfonto analyze DIR --out OUT`` (the same as ``perfonto analyze DIR/counters --topology
DIR/topology.csv --out OUT``). Exit 0 when written, 1 when
the emulator refused the parameters, 2 for usage errors."""

from __future__ import annotations

import argparse

from . import HELP
from .common import (
    CommandError,
    non_negative_int,
    output_options,
    positive_int,
    split_refused,
    stderr,
    summary,
)
from .workload_args import workload_options
from .run import emulation_of


def _fleet(text: str) -> tuple[int, int]:
    from perfonto.emulator.fleet import parse_fleet

    try:
        return parse_fleet(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub) -> None:
    e = sub.add_parser("emulate", help=HELP["emulate"])
    e.add_argument(
        "--fleet", type=_fleet, required=True, metavar="HOSTSxCHIPS", help="hosts and chips per host, e.g. 16x8"
    )
    workload_options(e, "model", "duration", "sample_period", "seed", "warmup_steps")
    e.add_argument(
        "--slow-chips",
        type=non_negative_int,
        default=None,
        help="hosts with one chip binned slower (default: 2, or every host of a smaller fleet)",
    )
    e.add_argument("--hosts-per-rack", type=positive_int, default=4, help="hosts per rack (default: 4)")
    e.add_argument("--racks-per-pod", type=positive_int, default=2, help="racks per pod (default: 2)")
    output_options(e)
    e.set_defaults(func=cmd_emulate)


def cmd_emulate(args) -> int:
    from perfonto.emulator.fleet import FleetSpec, generate_fleet
    from perfonto.emulator.presets import generation

    from ..outputs import OutputError, output_folder

    err = stderr()
    hosts, chips = args.fleet
    if args.slow_chips is None:  # the default fits any fleet: `--fleet 1x1` was refused for the default's sake
        args.slow_chips = min(2, hosts)
    if args.slow_chips > hosts:
        raise CommandError(
            f"--slow-chips {args.slow_chips}: the fleet has {hosts} host(s), and each slow chip is on a host of its "
            f"own; give at most {hosts}",
            2,
        )
    spec = FleetSpec(
        hosts, chips, hosts_per_rack=args.hosts_per_rack, racks_per_pod=args.racks_per_pod, slow=args.slow_chips
    )
    try:
        with output_folder(args.out, command=args.argv, force=args.force) as tmp:
            truth = generate_fleet(
                generation("sohu"),
                spec,
                tmp,
                **emulation_of(args),
                log=lambda s: err.print(s, markup=False),
            )
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    except ValueError as exc:
        usage = split_refused(
            exc,
            f"emulate runs each host's chips as one tensor-parallel group: give --fleet {hosts}xN with N one of those",
        )
        raise (usage or CommandError(str(exc), 1)) from None
    doc = {
        "ok": True,
        "out": args.out,
        "hosts": hosts,
        "chips_per_host": chips,
        "slow_chips": truth["slow_chips"],
        "throttled_links": truth["throttled_links"],
        "hot_racks": truth["hot_racks"],
        "counters": f"{args.out}/counters",
        "topology": f"{args.out}/topology.csv",
    }
    summary(
        args,
        doc,
        f"wrote {hosts} hosts x {chips} chips to {args.out}/counters (slow chips: "
        f"{', '.join(f'{h} chip {c}' for h, c in truth['slow_chips']) or 'none'}; throttled links: "
        f"{', '.join(f'{h} chip {c} link {k}' for h, c, k in truth['throttled_links']) or 'none'}; hot racks: "
        f"{', '.join(truth['hot_racks']) or 'none'}); analyse with: perfonto analyze "
        f"{args.out} --out OUT (its counters/ with its topology.csv)",
        err=err,
    )
    return 0
