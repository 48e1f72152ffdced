"""The CSV of ``perf stat -x SEP`` read line by line (``capture.perf_stat``'s module docstring says what
each field is): the separator found, each line split and checked, its fields read into a ``PerfLine``.

Two misreadings are named for what they are rather than for the field they displace:

- **A decimal comma** (perf run in a locale other than C, de_DE: ``0,100206995,200,72,msec,task-clock,…``
  with ``-x,``, or ``0,100206995;200,72;msec;…`` with ``-x';'``) splits or shifts the fields; where a line
  does not parse and holds such a number, the error says to rerun perf as ``LC_ALL=C perf stat``.
- **A value that is not a number** on a line of a ``-I`` file: the first line fixes the layout, so a later
  line of the same width whose time stamp is not perf's nine-decimal form (an edited ``0.3,abc,,page-faults,…``)
  is still read with a time stamp first, and the error names the value ``abc`` and its column, not the
  field it pushed out of place.
"""

from __future__ import annotations

import re

from .dump_io import DumpError
from .perf_lines import _AGG, LOCALE_HINT, PerfLine, PerfStat, _count, _enabled, _not_enabled, _number
from .perf_table import UNITS

_TIME = re.compile(r"\d+\.\d{9}")  # perf prints -I time stamps with nine decimals (%3d.%09d)
_PLAIN_NUMBER = re.compile(r"\d+(\.\d+)?")
# evidence of a decimal comma in a `-x,` line: a time stamp `%3d,%09d` first, or a time value before its unit
_COMMA_TIME = re.compile(r"^\s*(\d+,\d{9}),")
_COMMA_VALUE = re.compile(r"(?:^|,)\s*(\d+,\d+),(?:msec|usec|nsec|sec),")


def read_csv(out: PerfStat, body: list[tuple[int, str]]) -> PerfStat:
    """``out`` with the counter lines of ``body`` ((line number, text) of perf's ``-x SEP`` CSV) appended;
    every line must have the first line's number of fields.

    Raises:
        DumpError: a line that is not perf stat's CSV (file:line, and what to do).
    """
    p = out.path
    sep = _separator(body[0][1], p, body[0][0])
    width = None
    timed = False
    for n, ln in body:
        f = [x.strip() for x in ln.split(sep)]
        if width is None:
            width = len(f)
        elif len(f) != width:
            _refuse_locale(p, n, ln, sep)
            _refuse_locale(p, body[0][0], body[0][1], sep)
            raise DumpError(
                f"{p}:{n}: {len(f)} field(s) where line {body[0][0]} has {width}: a line cut short or two outputs "
                "in one file? Give one `perf stat -x,` run's output"
            )
        line = _csv_line(f, p, n, ln, sep, timed)
        if n == body[0][0]:
            timed = line.time is not None
        out.lines.append(line)
    return out


def _separator(line: str, p: str, n: int) -> str:
    """The ``-x`` separator of the first counter line: the candidate that splits it into the most fields
    (ties in the order below). perf 6.1 in de_DE with ``-x';'`` writes ``0.200241885;107,20;msec;task-clock;…``:
    its commas are decimal commas, so taking the first separator found (',') split the line inside its
    numbers and the error named a field, not the locale."""
    found = [sep for sep in (",", ";", "\t", "|", ":") if sep in line]
    if found:
        return max(found, key=line.count)  # max keeps the first of equal counts
    raise DumpError(f"{p}:{n}: no field separator; write the file with `perf stat -x, -o FILE`")


def decimal_comma(ln: str, sep: str) -> str | None:
    """The number written with a decimal comma that ``ln`` (a line of perf's CSV split at ``sep``) holds —
    a field ``107,20`` of a ``-x';'`` line; with ``-x,`` a time stamp ``0,100206995`` first or a time
    ``200,72`` before its unit — or None. perf's C-locale CSV has neither: its numbers use '.'."""
    if sep != ",":
        return next((x.strip() for x in ln.split(sep) if re.fullmatch(r"\s*\d+,\d+\s*", x)), None)
    m = _COMMA_TIME.match(ln) or _COMMA_VALUE.search(ln)
    return m.group(1) if m else None


def _refuse_locale(p: str, n: int, ln: str, sep: str) -> None:
    """Refuse line ``n`` (one that does not parse) as written in a locale with a decimal comma, where it holds
    such a number (``decimal_comma``); else nothing."""
    number = decimal_comma(ln, sep)
    if number is not None:
        raise DumpError(
            f"{p}:{n}: `{number}` (column {ln.find(number) + 1}) is a number with a decimal comma, which moves "
            f"perf's CSV fields: {LOCALE_HINT}"
        )


def _column(ln: str, sep: str, k: int) -> int:
    """The 1-based column of field ``k`` of ``ln`` split at ``sep`` (its first character past blanks)."""
    raw = ln.split(sep)
    return sum(len(x) + len(sep) for x in raw[:k]) + len(raw[k]) - len(raw[k].lstrip()) + 1


def _csv_line(f: list[str], p: str, n: int, ln: str, sep: str, timed: bool) -> PerfLine:
    """One CSV line's fields ``f`` (``ln`` split at ``sep``) as a ``PerfLine``; ``timed``: the file's first
    line has a time stamp (``-I``), so a plain number first is one here too (module docstring)."""
    i = 0
    t = None
    if f and re.fullmatch(r"-\d+\.\d{9}", f[0]):
        raise DumpError(
            f"{p}:{n}: the time stamp {f[0]} is negative; perf's -I time stamps count seconds from the start"
        )
    if f and (_TIME.fullmatch(f[0]) or (timed and _PLAIN_NUMBER.fullmatch(f[0]))):
        t = _number(f[0], p, n, "time stamp")
        i = 1
    where = ""
    if i < len(f) and _AGG.match(f[i]):
        where = f[i]
        i += 1
        if not where.startswith("CPU") and i < len(f) and f[i].isdigit() and len(f) - i >= 6:
            i += 1  # the number of CPUs aggregated (--per-core, --per-die, --per-socket, --per-node)
    if len(f) - i < 3:
        _refuse_locale(p, n, ln, sep)
        raise DumpError(
            f"{p}:{n}: {len(f)} field(s); perf stat's CSV lines hold a value, a unit and an event "
            "(and with -I a time stamp first): was the file written with `perf stat -x,`?"
        )
    raw, unit, event = f[i], f[i + 1], f[i + 2]
    if re.fullmatch(r"[\d.,]+", unit) or re.fullmatch(r"[\d.,]+", event):
        _refuse_locale(p, n, ln, sep)
        raise DumpError(
            f"{p}:{n}: field {i + 2} or {i + 3} is a number where perf stat's CSV has the unit and the event "
            "(a line cut short, or not `perf stat -x,` output?)"
        )
    if raw not in ("<not counted>", "<not supported>"):
        _number(raw, p, n, "count", col=(i + 1, _column(ln, sep, i)))  # a value that is not a number, named first
    if not event:
        raise DumpError(f"{p}:{n}: field {i + 3} (the event name) is empty")
    value, state = _count(raw, event, p, n)
    if unit not in UNITS and not re.fullmatch(r"[A-Za-z%/]+", unit):
        raise DumpError(
            f"{p}:{n}: field {i + 2} `{unit[:20]}` is not a unit perf prints (msec, usec, nsec, sec or empty)"
        )
    enabled = _enabled(f[i + 4], p, n) if len(f) > i + 4 and f[i + 4] else 100.0
    run = _number(f[i + 3], p, n, "run time") if len(f) > i + 4 and f[i + 3] and f[i + 4] else None
    value, state = _not_enabled(value, state, run, enabled)
    return PerfLine(t, where, value, unit, event, state, enabled, n, run)


__all__ = ["decimal_comma", "read_csv"]
