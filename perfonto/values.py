"""One set of rules for the values a user gives — on the command line, through the Python API, in a
sweep's ``--vary`` or a projection — so the same value is accepted or refused, with the same words,
wherever it enters: probabilities, counts, rates and durations.

Each rule takes the value (a number, or text as typed) and what it is called, and returns the value
in its type, or raises ``ValueRuleError`` (a ``ValueError``) saying what the value must be.
``WORKLOAD`` maps the emulator's workload knobs to their rule; ``check_workload`` applies it.
"""

from __future__ import annotations

import math
from perfonto.ontology.errors import PerfontoError

__all__ = ["ValueRuleError", "probability", "count", "rate", "duration_s", "WORKLOAD", "check_workload"]

MAX_DURATION_S = 86_400.0  # a day: longer emulations and sample periods are mistakes, not studies


class ValueRuleError(PerfontoError, ValueError):
    """A value outside its rule; the message names it and says what it must be."""


def _number(v, what: str) -> float:
    if isinstance(v, bool):
        raise ValueRuleError(f"{what}: {v!r} is not a number")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueRuleError(f"{what}: {v!r} is not a number") from None
    if not math.isfinite(x):
        raise ValueRuleError(f"{what}: {v!r} is not a finite number")
    return x


def probability(v, what: str = "probability") -> float:
    """A probability: a finite number in [0, 1]."""
    x = _number(v, what)
    if not 0.0 <= x <= 1.0:
        raise ValueRuleError(f"{what}: a probability is between 0 and 1, not {v!r}")
    return x


def count(v, what: str = "count", minimum: int = 1) -> int:
    """A whole count of at least ``minimum`` (an integral float such as 8.0 is taken; 8.5 is not)."""
    try:
        x = _number(v, what)
    except ValueRuleError:
        raise ValueRuleError(f"{what}: {v!r} is not an integer") from None
    if x != int(x):
        raise ValueRuleError(f"{what}: {v!r} is not a whole number")
    if x < minimum:
        raise ValueRuleError(f"{what}: must be at least {minimum}, not {v!r}")
    return int(x)


def draft_tokens(v, what: str = "draft tokens") -> int:
    """Speculative decoding's draft tokens a request verifies per step: a whole number 0 …
    ``emulator.scheduler.MAX_DRAFT_TOKENS`` (16)."""
    from perfonto.emulator.scheduler import MAX_DRAFT_TOKENS

    k = count(v, what, 0)
    if k > MAX_DRAFT_TOKENS:
        raise ValueRuleError(f"{what}: at most {MAX_DRAFT_TOKENS} draft tokens a step, not {v!r}")
    return k


def rate(v, what: str = "rate") -> float:
    """A rate (requests/s): a finite number above 0."""
    x = _number(v, what)
    if x <= 0:
        raise ValueRuleError(f"{what}: a rate is above 0, not {v!r}")
    return x


def duration_s(v, what: str = "duration") -> float:
    """A duration in seconds: a number (seconds) or text with a unit (``100us``, ``1.5 s``, ``2min``,
    read with perfonto's pint registry); finite, at least 1 ns and at most a day."""
    if isinstance(v, str):
        from perfonto.ontology.units import UnitError, parse_quantity, registry_for

        reg = registry_for(())
        try:
            x = parse_quantity(reg, v, reg.second)
        except UnitError:
            raise ValueRuleError(
                f"{what}: not a duration: {v!r} (write e.g. 1s, 500ms, 100us, or a number of seconds)"
            ) from None
    else:
        x = _number(v, what)
    if not math.isfinite(x) or x <= 0:
        raise ValueRuleError(f"{what}: a duration is positive and finite, not {v!r}")
    if x < 1e-9:  # timestamps are whole ns: 0.1ns rounded to a period of 0 and turned the sampling grid off
        raise ValueRuleError(f"{what}: {v!r} is shorter than 1 ns, the resolution of perfonto's time stamps")
    if x > MAX_DURATION_S:
        raise ValueRuleError(f"{what}: {v!r} is longer than a day")
    return float(x)


#: The emulator's numeric workload knobs and their rules (``perfonto project``'s options, ``--vary``).
WORKLOAD = {
    "chips": lambda v, w: count(v, w, 1),
    "isl": lambda v, w: count(v, w, 1),
    "osl": lambda v, w: count(v, w, 1),
    "batch": lambda v, w: count(v, w, 1),
    "concurrency": lambda v, w: count(v, w, 1),
    "draft_tokens": lambda v, w: draft_tokens(v, w),
    "rate": rate,
    "acceptance": probability,
}


def check_workload(name: str, v, what: str | None = None):
    """``v`` checked by the rule of workload knob ``name`` (unchanged for a knob without one)."""
    rule = WORKLOAD.get(name)
    return v if rule is None else rule(v, what or name)
