"""What a ``perf stat`` file holds once read (``capture.perf_stat``): its counter lines (``PerfLine``) and the
run (``PerfStat``), and how a number, a count and a run percentage are read from perf's text — shared by the
CSV, JSON and report readers."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .dump_io import DumpError

MARKERS = {"<not counted>": "not counted", "<not supported>": "not supported"}
#: the state of a ``<not counted>`` line whose counter was never enabled in its interval: a count of 0
IDLE = "not enabled"
_AGG = re.compile(r"^(CPU\d+|S\d+(-D\d+)?(-C\d+)?|N\d+)$")


@dataclass
class PerfLine:
    """One counter line: ``time`` (s since the start; None without ``-I``), ``where`` (CPU, core or socket
    identifier; "" aggregated), ``value`` (None for a marker), ``unit``, ``event``, ``state`` ("counted",
    "not counted", "not supported"), ``enabled`` (percent of the interval the counter ran), ``line``
    (1-based line number in the file), ``run_ns`` (the counter's run time in the interval, ns; None where
    perf did not print it)."""

    time: float | None
    where: str
    value: float | None
    unit: str
    event: str
    state: str
    enabled: float
    line: int
    run_ns: float | None = None


@dataclass
class PerfStat:
    """What a ``perf stat`` file holds: its counter lines, and for the human-readable report the
    elapsed wall time (``elapsed_s``)."""

    path: str
    lines: list[PerfLine] = field(default_factory=list)
    elapsed_s: float | None = None
    interval: bool = False


#: what to do about a value written in a locale other than C (de_DE prints ``195,57 msec`` with a decimal comma
#: and ``86.743`` for 86743 page faults, which read as 19557 and 86.743)
LOCALE_HINT = "perf ran in a locale other than C? Rerun it as `LC_ALL=C perf stat …`"


def _number(text: str, path: str, line: int, what: str, col: tuple[int, int] | None = None) -> float:
    """``text`` as a float: perf's CSV and JSON write numbers without digit groups (``%.2f``), so a ',' in one
    is a decimal comma, refused with ``LOCALE_HINT``; the report's grouped counts go through ``_c_form``.
    ``col``: (field, column) where the CSV reader has them, named in the error."""
    try:
        v = float(text)
    except ValueError:
        if "," in text:
            raise DumpError(f"{path}:{line}: the {what} `{text[:40]}` has a decimal comma: {LOCALE_HINT}") from None
        if col is None:
            raise DumpError(
                f"{path}:{line}: the {what} `{text[:40]}` is not a number; is this `perf stat` output?"
            ) from None
        marker = " or a marker (`<not counted>`, `<not supported>`)" if what == "count" else ""
        raise DumpError(
            f"{path}:{line}: the {what} `{text[:40]}` is not a number (field {col[0]}, column {col[1]}): perf stat "
            f"writes a number{marker} there. Was the line edited, or another program's output mixed in? Give "
            "the file as `perf stat -x, -o FILE` wrote it"
        ) from None
    if not math.isfinite(v):
        raise DumpError(f"{path}:{line}: the {what} `{text[:40]}` is not a finite number")
    return v


def _not_enabled(value: float | None, state: str, run: float | None, enabled: float) -> tuple[float | None, str]:
    """``<not counted>`` with run time 0 at 100 %: never enabled in the interval (its task did not run),
    so the count is 0 (module docstring, "Markers"); any other line as it is."""
    if state == "not counted" and run == 0 and enabled == 100.0:
        return 0.0, IDLE
    return value, state


def _count(raw: str, event: str, p: str, n: int) -> tuple[float | None, str]:
    """A counter value as perf prints it: (the count, ``counted``), or (None, the marker's state)."""
    state = MARKERS.get(raw, "counted")
    value = None if raw in MARKERS else _number(raw, p, n, "count")
    if value is not None and value < 0:
        raise DumpError(f"{p}:{n}: the count {raw} of `{event}` is negative; perf prints counts, never below 0")
    return value, state


def _enabled(text: str, p: str, n: int) -> float:
    """The percentage of the interval the counter ran (perf's run percentage), checked to be 0–100."""
    enabled = _number(text.rstrip("%"), p, n, "run percentage")
    if not 0.0 <= enabled <= 100.0:
        raise DumpError(f"{p}:{n}: the run percentage {text} is outside 0–100")
    return enabled


# the keys of a JSON line that say which CPU, core, die, socket, … it counts (perf's aggr_printout; `cpu` is a number)


__all__ = ["IDLE", "LOCALE_HINT", "MARKERS", "PerfLine", "PerfStat"]
