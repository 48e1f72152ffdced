"""Shared pieces of the command modules: stderr console, argument types."""
from __future__ import annotations

import argparse

from rich.console import Console


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:  # files and pipes: wide enough for the tables, no wrapping
        console = Console(highlight=False, width=120)
    return console


def duration(text: str) -> float:
    """Parse ``1s``, ``500ms``, ``2.5 s``, ``1min`` into seconds (pint, the project's registry)."""
    from ontology.units import registry_for

    reg = registry_for(())
    try:
        q = reg.Quantity(text)
        value = float(q.magnitude) if q.dimensionless else float(q.to(reg.second).magnitude)
    except Exception:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (write e.g. 1s, 500ms, 2min)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"duration must be positive: {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return v
