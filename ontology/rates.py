"""How fast a counter can grow (window rule 4, ``metrics.windows``): what the window rules, the
collection planner and the catalog lint all read, so it lives below them."""

from __future__ import annotations

from .resolved import Generation

#: A cycle counter's default maximum rate over its clock (rule 4): a clock that runs fast against the
#: host's timestamps is no reset, a reset's jump is far beyond 1 %.
CLOCK_HEADROOM = 0.01


def max_rate(gen: Generation, sig) -> float | None:
    """The fastest a counter can grow, in its unit per second: its declared ``max_rate``, or for a
    cycle counter its clock (one count per cycle per register) × (1 + ``CLOCK_HEADROOM``); None when
    unknown."""
    if sig.max_rate is not None:
        return sig.max_rate
    clock = gen.clock_domains.get(sig.clock)
    if clock is None:
        return None
    reg = gen.registry
    if reg.Quantity(1, sig.unit).dimensionality != reg.Quantity(1, clock.unit * reg.second).dimensionality:
        return None
    return float(reg.Quantity(clock.value, clock.unit).to(sig.unit / reg.second).magnitude) * (1 + CLOCK_HEADROOM)


__all__ = ["CLOCK_HEADROOM", "max_rate"]
