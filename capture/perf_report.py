"""``perf stat``'s human-readable report (no ``-x``), with and without ``-I``: its counter lines, its elapsed
time, and what it may not hold — a locale's numbers, a second run's report (``--append``) or ``-r`` means —
as ``capture.perf_stat``'s module docstring describes."""

from __future__ import annotations

import re

from .dump_io import DumpError
from .perf_lines import IDLE, LOCALE_HINT, MARKERS, PerfLine, PerfStat, _count, _enabled, _number

#: the units sysfs gives events (``…/events/<name>.unit``) that perf prints between a value and its event: a
#: word outside this list there is no unit — ``perf stat -G web`` prints ``1,234,567  cycles  web`` (the event,
#: then its cgroup), and ``cycles`` was read as a unit of an event `web`
SCALE_UNITS = ("Joules", "MiB", "KiB", "GiB", "MB", "kB", "GB", "ns", "us", "ms", "Watts", "mJ", "uJ", "MHz", "%")

_HUMAN = re.compile(
    # -A prints the CPU first (CPU0), --per-socket/--per-die/--per-core/--per-node the identifier (S0-D0-C1,
    # N0) and the number of CPUs it aggregates, then the count as without them
    r"^\s*(?:(?P<where>CPU\d{1,9}|S\d{1,9}(?:-D\d{1,9})?(?:-C\d{1,9})?|N\d{1,9})\s+(?:\d{1,9}\s+)?)?"
    r"(?P<value>[\d.,]+|<not counted>|<not supported>)\s+"
    # the unit: a time's, or another word followed by the event (`51,856,284 ns duration_time`, `1.23 Joules
    # power/energy-pkg/`); a word followed by nothing, `(50.00%)` or `#` is the event
    r"(?:(?P<unit>msec|usec|nsec|sec)\s+|(?P<other>" + "|".join(map(re.escape, SCALE_UNITS)) + r")\s+(?=[^\s(#]))?"
    r"(?P<event>\S+)"
    r"(?:\s+\((?P<after>msec|usec|nsec|sec)\))?"  # perf before 5.x: `0.643545      task-clock (msec)`
)
#: a value as perf's report writes it in the C locale: digits, in groups of three separated by ',' where
#: printf's `'` flag groups them (en_US; the C locale does not), and '.' before a fraction
_C_FORM = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
#: what `perf stat -r N` adds: each value's spread over the runs, `( +-  1.23% )`, and `0.0513 +- 0.0001 seconds`
_REPEAT = re.compile(r"\(\s*\+-\s*[\d.,]+\s*%\s*\)|\d\s+\+-\s+\d")


#: ``perf stat -I`` without ``-x``: each counter line starts with its time stamp (nine decimals), then the
#: human report's columns (``_HUMAN``)
_HUMAN_I = re.compile(r"^ *(?P<time>\d{1,12}\.\d{9}) +(?=\S)")  # spaces: a tab or comma is a CSV separator
#: the run percentage perf's report prints at a line's end when the counter ran part of its enabled time
_PERCENT = re.compile(r"\((?P<pct>\d{1,3}(?:\.\d+)?)%\)\s*$")


def _report_line(m, time: float | None, ln: str, path: str, n: int) -> PerfLine:
    """One counter line of perf's human-readable output (``m``: its ``_HUMAN`` match): the count checked
    as in CSV (``_count``), the run percentage perf prints at the end when the counter ran part of its
    enabled time (``print_running_std``: only where run ≠ enabled), and ``<not counted>`` without one read
    as never enabled in the interval (run = enabled = 0), a count of 0 as ``_not_enabled`` reads CSV."""
    unit = m.group("unit") or m.group("other") or m.group("after") or ""
    value, state = _count(_c_form(m.group("value"), unit, m.group("event"), path, n), m.group("event"), path, n)
    pm = _PERCENT.search(ln)
    enabled = _enabled(pm.group("pct"), path, n) if pm else 100.0
    if state == "not counted" and pm is None:
        value, state = 0.0, IDLE
    return PerfLine(time, m.group("where") or "", value, unit, m.group("event"), state, enabled, n)


def _c_form(raw: str, unit: str, event: str, path: str, n: int) -> str:
    """A report's value (``raw``, or a marker) checked to be as perf writes it in the C locale, without its
    digit groups: ``1,234,567`` → ``1234567``, ``195.57`` (with a unit) as it is. A ',' group that is not three
    digits (de_DE's ``195,57``) or a fraction on a count without a unit (de_DE's ``86.743``, 86743 grouped
    with '.'; perf writes such a count whole, ``%.0f``) is a locale other than C: read, it was 100 or 1000
    times off."""
    if raw in MARKERS:
        return raw
    if not _C_FORM.fullmatch(raw):
        raise DumpError(
            f"{path}:{n}: the value `{raw[:40]}` of `{event}` is not a number as perf writes it in the C locale "
            f"(',' between groups of three digits, `1,234,567`; '.' before a fraction, `195.57 msec`): {LOCALE_HINT}"
        )
    if not unit and "." in raw:
        raise DumpError(
            f"{path}:{n}: the count `{raw[:40]}` of `{event}` has a fraction, but perf writes a count without a "
            f"unit as a whole number (`86743`, or `86,743` grouped; '.' grouping its digits is another locale's): "
            f"{LOCALE_HINT}"
        )
    return raw.replace(",", "")


def _refuse_repeat(path: str, n: int, ln: str) -> None:
    """Refuse a line of ``perf stat -r N`` output (``_REPEAT``): its values are means over the runs."""
    runs = re.search(r"\((\d+) runs\):\s*$", ln)
    if runs or _REPEAT.search(ln):
        what = f"{runs.group(1)} runs" if runs else "`+-`: the spread over the runs"
        raise DumpError(
            f"{path}:{n}: `perf stat -r`/`--repeat` output ({what}): perf printed each value's mean over the runs, "
            "not one run's counts, and perfonto reads one run; rerun without -r, writing each run to its own "
            "file (`perf stat -o run1.txt …`)"
        )


def _human_interval(out: PerfStat, body: list[tuple[int, str]]) -> PerfStat:
    """The lines of ``perf stat -I`` written without ``-x`` (time stamp, then the report's columns); perf's
    counts are already scaled, as in its report. A line holding only a derived figure (``# 0.41 stalled
    cycles per insn``, perf's TopdownL1 lines) has nothing to read."""
    for n, ln in body:
        _refuse_repeat(out.path, n, ln)
        t = _HUMAN_I.match(ln)
        if t is not None and ln[t.end() :].lstrip().startswith("#"):
            continue
        m = _HUMAN.match(ln[t.end() :].split("#")[0]) if t else None
        if m is None:
            raise DumpError(f"{out.path}:{n}: not a counter line of perf stat -I's output: `{ln.strip()[:60]}`")
        out.lines.append(_report_line(m, _number(t.group("time"), out.path, n, "time stamp"), ln, out.path, n))
    return out


def _human(out: PerfStat, body: list[tuple[int, str]]) -> PerfStat:
    # the header ("Performance counter stats for 'CMD':") quotes the command, which may span lines: the
    # counter lines start after the line that closes it (ending in ':'), and stop at the elapsed time
    start = next((k for k, (_, ln) in enumerate(body) if "Performance counter stats" in ln), None)
    first = None  # the line of the first run's header
    if start is not None:
        first = body[start][0]
        start = next((k for k in range(start, len(body)) if body[k][1].rstrip().endswith(":")), start)
        _refuse_repeat(out.path, body[start][0], body[start][1])
    started = start is None
    for k, (n, ln) in enumerate(body):
        if start is not None and k <= start:
            continue
        _refuse_second_run(out, n, ln, first)
        _refuse_repeat(out.path, n, ln)
        if out.elapsed_s is not None:
            continue  # after the elapsed time: perf's user and sys times, nothing more to read
        if ln.strip().endswith("seconds time elapsed"):
            out.elapsed_s = _number(ln.split()[0], out.path, n, "elapsed time")
            continue
        if "seconds user" in ln or "seconds sys" in ln:
            continue
        m = _HUMAN.match(ln.split("#")[0])
        if m and ("#" in ln or start is not None or m.group("value") in MARKERS):
            started = True
        elif not started:
            continue
        if not m:
            raise DumpError(f"{out.path}:{n}: not a counter line of perf stat's report: `{ln.strip()[:60]}`")
        out.lines.append(_report_line(m, None, ln, out.path, n))
    if out.elapsed_s is None:
        raise DumpError(
            f"{out.path}: no 'seconds time elapsed' line: the report is cut short; give perf stat's whole report"
        )
    return out


def _refuse_second_run(out: PerfStat, n: int, ln: str, first: int | None) -> None:
    """Refuse the start of a second run's report (``perf stat --append -o FILE`` writes each run after the
    last, each with its header and elapsed time): its counts would be read with the first run's, under the
    last run's elapsed time."""
    again = "Performance counter stats" in ln
    if again or (out.elapsed_s is not None and ln.strip().endswith("seconds time elapsed")):
        since = f" (the first starts on line {first})" if first is not None else ""
        raise DumpError(
            f"{out.path}:{n}: a second run's {'report starts' if again else 'elapsed time'} here{since}: two runs' "
            "output in one file (`perf stat --append`)? perfonto reads one run per file: write each run to its own "
            "file (`perf stat -o run2.txt …`)"
        )
