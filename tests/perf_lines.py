"""`perf stat -I … -x,` CSV lines for the tests that read perf captures: one line per interval and event."""

from __future__ import annotations

from pathlib import Path


def write_perf_csv(path: Path, period_s: float, events: list[tuple[str, str, str]], intervals: int = 3) -> Path:
    """Write ``intervals`` intervals of ``events`` — (value, unit, event) with ``{k}`` in the value for the
    interval's number from 1 — as perf's interval CSV (time, value, unit, event, run time, percentage)."""
    lines = [
        f"{period_s * k:.9f},{value.format(k=k)},{unit},{event},100000000,100.00,,"
        for k in range(1, intervals + 1)
        for value, unit, event in events
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
