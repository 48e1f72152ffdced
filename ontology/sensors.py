"""Energy-sensor declarations of a signal (issue 29): a gauge's ``averaging_window`` (the sensor's own
trailing-average window, a time) and an energy counter's ``cross_check`` (the power gauge of the same rail
and a relative tolerance). ``ontology.generation`` calls ``averaging_window`` while it resolves a signal and
``check_cross_check`` once every signal is resolved (the gauge may come later in the file).

Each broken rule is one located error (code ``sensor``): an averaging window on a signal that is not a
gauge or that is not a positive time; a cross-check on a signal that is not a counter, naming a signal
that is not a gauge of this generation, or whose units do not make energy = power × time.
"""

from __future__ import annotations

import pint

from . import kinds
from .diagnostics import Diagnostic, did_you_mean
from .units import UnitError, parse_quantity
from .yaml_source import YamlSource


def averaging_window(
    reg: pint.UnitRegistry, full: str, sig, sloc: tuple, src: YamlSource, diags: list[Diagnostic]
) -> float | None:
    """The gauge's ``averaging_window`` in seconds (None when absent, or after an error appended to ``diags``).

    ``sig``: the written ``ontology.model.Signal``; ``sloc``: its key path in the YAML (for the location).
    """
    if sig.averaging_window is None:
        return None
    span = src.span(sloc + ("averaging_window",))
    if kinds.of(sig.kind).name != "gauge":
        diags.append(
            Diagnostic(
                "error",
                "sensor",
                f"signal `{full}`: `averaging_window` is for gauges (a {sig.kind} is not averaged by its sensor)",
                span,
                hint="remove `averaging_window`, or declare the signal as a gauge",
            )
        )
        return None
    try:
        seconds = parse_quantity(reg, sig.averaging_window, reg.second)
        if seconds <= 0:
            raise UnitError("not positive")
        return seconds
    except UnitError:
        diags.append(
            Diagnostic(
                "error",
                "sensor",
                f"signal `{full}`: averaging_window `{sig.averaging_window}` is not a positive time",
                span,
                hint="write e.g. `averaging_window: 1 s` or `averaging_window: 100 ms`",
            )
        )
        return None


def cross_check_of(sig) -> tuple[str, float] | None:
    """``(power gauge, tolerance)`` as written (checked later by ``check_cross_check``), or None."""
    return (sig.cross_check.power, float(sig.cross_check.tolerance)) if sig.cross_check is not None else None


def _dims(reg: pint.UnitRegistry, unit):
    """The dimensionality of ``unit`` (an offset unit such as degC included, which pint will not multiply)."""
    return reg.get_dimensionality(unit)


def check_cross_check(reg: pint.UnitRegistry, signals: dict, src: YamlSource, diags: list[Diagnostic]) -> None:
    """Every resolved signal's ``cross_check``: declared on a counter, naming a gauge of ``signals`` whose
    unit times a second converts to the counter's (W × s = J). Errors are appended to ``diags``."""
    for full, s_ in signals.items():
        if s_.cross_check is None:
            continue
        loc = ("blocks", s_.block, "signals", full.split(".", 1)[1], "cross_check")
        gauge = s_.cross_check[0]
        g = signals.get(gauge)
        why, hint = None, ""
        if kinds.of(s_.kind).name != "counter":
            why, hint = f"`cross_check` is for energy counters, not a {s_.kind}", "remove `cross_check`"
        elif g is None:
            why = f"cross_check names `{gauge}`, which is not a signal"
            hint = did_you_mean(gauge, signals) or "name the power gauge of the same rail (e.g. `power.power`)"
        elif kinds.of(g.kind).name != "gauge":
            why, hint = f"cross_check names `{gauge}`, a {g.kind}, not a gauge", "name the rail's power gauge"
        elif _dims(reg, g.unit) * _dims(reg, reg.second) != _dims(reg, s_.unit):
            why = f"`{gauge}` [{g.unit_text}] x time is not in this counter's unit [{s_.unit_text}]"
            hint = "pair an energy counter (J) with a power gauge (W) of the same rail"
        if why is not None:
            diags.append(Diagnostic("error", "sensor", f"signal `{full}`: {why}", src.span(loc), hint=hint))
