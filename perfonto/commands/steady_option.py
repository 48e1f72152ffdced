"""The ``--steady-state FRACTION`` option of ``perfonto analyze`` and ``perfonto run`` (issue 29, point 6)."""

from __future__ import annotations

import argparse

from perfonto.analysis.steady_state import DEFAULT_FRACTION, check_fraction

HELP = (
    "report the serving metrics (tok/s, TTFT/TPOT/ITL percentiles, energy per token) also over the steady state: "
    "the longest interval whose requests in flight stay at or above this fraction of their peak, beside the full "
    f"run's (default: {DEFAULT_FRACTION}; off: none)"
)


def steady_fraction(text: str) -> float | None:
    """``--steady-state``'s value: a fraction in (0, 1], or None for ``off``; a usage error otherwise."""
    if text.strip().lower() in ("off", "none", "no"):
        return None
    try:
        return check_fraction(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--steady-state takes a fraction of the peak concurrency in (0, 1], e.g. 0.9, or `off` (got {text!r})"
        ) from None


def add_steady_state(parser) -> None:
    """Add ``--steady-state`` to a command's parser (``args.steady_state``: float or None)."""
    parser.add_argument(
        "--steady-state", type=steady_fraction, default=DEFAULT_FRACTION, metavar="FRACTION|off", help=HELP
    )
