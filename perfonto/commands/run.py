"""``perfonto run``: the main job (see ``perfonto.job``)."""

from __future__ import annotations

import argparse
import json
import math

from . import HELP
from .steady_option import add_steady_state
from .common import (
    BY_HELP,
    OUT_HELP,
    CommandError,
    split_refused,
    catalog_failure,
    catalog_options,
    groupings,
    job_arguments,
    non_negative_int,
    output_options,
    positive_int,
    stderr,
    stdout,
)
from .workload_args import unknown_generation, workload_options
from .project import add_scenario_args, scenario_of

DEFAULT_OUT = "perfonto-out"


def register(sub) -> None:
    r = sub.add_parser("run", help=HELP["run"])
    workload_options(
        r, "model", "chips", "duration", "sample_period", "isl", "osl", "seed", "warmup_steps", chips=EMULATED_CHIPS
    )
    catalog_options(
        r,
        catalog="a catalog folder (ontology *.yaml, *.metrics); a generation extending a shipped one also gets the "
        "shipped metric library",
        metavar="DIR",
        library=True,
    )
    workload_options(r, "slow_chip", "throttled_link", "router_skew")
    workload_options(
        r,
        "preset",
        "requests",
        preset={"note": "the generation's; the engine is sized as `project` sizes it"},
        requests={"note": "an unbounded queue, or enough for the duration"},
    )
    add_scenario_args(r)
    r.add_argument("--by", type=groupings, default=(), metavar="op|layer|phase", help=BY_HELP)
    r.add_argument(
        "--op-snapshots",
        action="store_true",
        help="also read the counters at every op boundary (trigger-on-marker, snapshots.parquet): exact per-op "
        "attribution",
    )
    output_options(r, f"{OUT_HELP} (default: ./{DEFAULT_OUT})", default=DEFAULT_OUT)
    add_steady_state(r)
    r.set_defaults(func=cmd_run)


#: The emulation options (``run`` and ``serve`` have them all) → the emulator's parameters.
EMULATION = {
    "model": "model",
    "chips": "chips",
    "duration": "duration_s",
    "sample_period": "sample_period_s",
    "isl": "isl",
    "osl": "osl",
    "seed": "seed",
    "warmup_steps": "warmup_steps",
    "slow_chip": "slow_chip",
    "throttled_link": "throttled_link",
    "router_skew": "router_skew",
}


def emulation_of(args) -> dict:
    """The emulator's keyword arguments (``emulator.run``, ``job.run_job``, ``live_emulate.EmulatedSource``,
    ``emulator.project``, ``emulator.fleet``) from the emulation options the command has."""
    return {param: getattr(args, opt) for opt, param in EMULATION.items() if hasattr(args, opt)}


def _chips(text: str) -> int:
    from perfonto.emulator.run import MAX_CHIPS

    v = positive_int(text)
    if v > MAX_CHIPS:
        raise argparse.ArgumentTypeError(f"at most {MAX_CHIPS} chips: {text!r}")
    return v


#: ``--chips`` of the emulating commands (``run``, ``serve``): at most ``emulator.run.MAX_CHIPS``.
EMULATED_CHIPS = {"type": _chips, "note": "8; 1 … 1024"}


def _non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0: {text!r}")
    return v


def _parts(text: str, n: int, what: str) -> list[str]:
    parts = text.split(":")
    if len(parts) != n:
        raise argparse.ArgumentTypeError(f"write {what}, got {text!r}")
    return parts


def _factor(text: str) -> float:
    v = _non_negative_float(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"a slowdown factor is ≥ 1 (1.2 = 20 % slower): {text!r}")
    return v


def _slow_chip(text: str) -> tuple[int, float]:
    c, f = _parts(text, 2, "CHIP:FACTOR, e.g. 3:1.2")
    return non_negative_int(c), _factor(f)


def _throttled_link(text: str) -> tuple[int, int, float]:
    c, link, f = _parts(text, 3, "CHIP:LINK:FACTOR, e.g. 2:5:4")
    return non_negative_int(c), non_negative_int(link), _factor(f)


class _Progress:
    """``emulator.run``'s ``progress(phase, done, total)`` on ``EmuProgress`` (a terminal only)."""

    LABELS = {"schedule": "emulating: scheduling steps", "counters": "emulating: writing counters"}

    def __init__(self, enabled: bool):
        from .project import EmuProgress

        self.bar = EmuProgress("emulating", enabled=enabled)

    def __call__(self, phase: str, done: float, total: float) -> None:
        self.bar(done, total)
        if self.bar.bar is not None:
            self.bar.bar.update(self.bar.task, description=self.LABELS.get(phase, phase))

    def close(self) -> None:
        self.bar.close()


def cmd_run(args) -> int:

    from perfonto.ontology.diagnostics import CatalogError
    from perfonto.emulator.engine_profiles import EngineProfileError
    from perfonto.emulator.presets import PresetError

    from ..job import run_job
    from ..outputs import OutputError
    from ..report import render

    err = stderr()
    if args.sample_period < 1e-6:
        raise CommandError(f"--sample-period must be at least 1us (got {args.sample_period:g} s)", 2)
    if args.sample_period > args.duration:
        raise CommandError(
            f"--sample-period ({args.sample_period:g} s) is longer than --duration ({args.duration:g} s): "
            f"no window would fit",
            2,
        )
    if getattr(args, "catalog", None) is None and getattr(args, "generation", None):
        refused = unknown_generation(args.generation)  # before the catalog compiles: with a did-you-mean
        if refused is not None:
            raise refused
    bar = _Progress(enabled=not args.json)
    try:
        result = run_job(
            **emulation_of(args),
            **job_arguments(args, err),
            progress=bar,
            serving=scenario_of(args),
            by=args.by,
            op_snapshots=args.op_snapshots,
            steady_state=args.steady_state,
        )
    except CatalogError as exc:
        raise catalog_failure(exc, args) from None
    except OutputError as exc:
        raise CommandError(str(exc), 1) from None
    except (PresetError, EngineProfileError) as exc:  # an option naming no preset or profile: a usage error
        raise CommandError(str(exc), 2) from None
    except (ValueError, OSError) as exc:
        usage = split_refused(exc, "run maps its chips as one tensor-parallel group: give --chips N, N one of those")
        raise (usage or CommandError(str(exc), 1)) from None
    finally:
        bar.close()
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        render(result, stdout())
    return 0
