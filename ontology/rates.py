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


def peak_rate(gen: Generation, sig, highest: bool = False) -> tuple[float, str] | None:
    """(rate in the counter's unit per second, the constant's name) for a counter of an amount (bytes, FLOPs;
    not a dimensionless count, which a frequency would match) whose own ``max_rate`` the
    catalog does not give and whose clock does not bound it: the lowest peak among its block's spec constants in
    its unit per second (``spec.noc.link_peak_bandwidth`` for ``noc.tx_bytes`` in bytes), per instance — a
    ``scope: instance`` constant as it is, a chip-scope one divided by the block's instances (its total over
    them). The lowest, so that a catalog lint reading it flags only what even the smallest peak wraps; with
    ``highest``, the highest, for a read interval that must hold at the fastest rate the counter can reach
    (``mxu.flops_fp8`` at the FP8 peak, not the BF16 one: a cap twice too long); None when the block has no
    such constant. An architect's 24-bit byte counter on a 512 GB/s link (it wraps
    every 33 µs) passed check without a word and read 0.84 % for links 48.8 % busy."""
    from .resolved import Scope

    reg = gen.registry
    if reg.Quantity(1, sig.unit).dimensionless:  # a count of events: a frequency (a refclk) is no peak of it
        return None
    want = reg.Quantity(1, sig.unit / reg.second).dimensionality
    n = max(1, sig.instances)
    best: tuple[float, str] | None = None
    for name, c in gen.spec.items():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] != sig.block or c.scope is Scope.system or not c.value > 0:
            continue
        q = reg.Quantity(c.value, c.unit)
        if q.dimensionality != want:
            continue
        rate = float(q.to(sig.unit / reg.second).magnitude) / (1 if c.scope is Scope.instance else n)
        if best is None or (rate > best[0] if highest else rate < best[0]):
            best = (rate, name)
    return best


__all__ = ["CLOCK_HEADROOM", "max_rate", "peak_rate"]
