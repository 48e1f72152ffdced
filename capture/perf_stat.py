"""Linux ``perf stat`` output read as a capture: the CSV of ``perf stat -x SEP`` or the JSON of ``perf stat
-j`` (with or without ``-I``, aggregated or per CPU, core, die or socket) and the default human-readable report.

What perf prints, and how it is read (the CSV fields as perf's manual page, "CSV FORMAT", lists
them: an optional time stamp in seconds since the start (``-I``), an optional CPU, core or socket
identifier and an optional count of the CPUs aggregated, the counter value, its unit, the event, the
counter's run time in ns, the percentage of the measurement it ran, an optional variance (``-r``), an
optional metric value and its unit):

- **Increments.** With ``-I`` each line is the event's increase over the interval that ends at its
  time stamp; without it, the increase over the whole run. perfonto's counters are running totals, so
  each row's value is summed into one (from 0 at the start: the first sample is at time 0), and a
  window's increase is then exactly perf's interval count.
- **Floating-point values** (``task-clock`` in msec, CPU seconds) become integer raw counts of the
  signal's ``scale`` (``scale: 1.0e-6`` on a signal in ms counts ns), rounded; the unit perf prints
  must be the one the catalog's mapping names (a ``msec`` column read into a signal in ns is an error
  naming the file and line).
- **Markers.** ``<not counted>`` (the event did not run in the interval) and ``<not supported>`` (the
  machine cannot count it) are nulls: the windows they touch are null, reason ``missing sample``; an
  event not supported in any line is left out of the capture, so the metrics that read it are
  unavailable ("not in the dump: …"). One exception: ``<not counted>`` with a run time of 0 at
  100.00 % means the counter was never *enabled* in the interval (perf prints 100 % when the run time
  equals the enabled time, here both 0: ``print_running_csv`` in ``tools/perf/util/stat-display.c``)
  — a per-task counter whose task did not run (``perf stat -I 100 -- CMD`` while CMD sleeps) — and
  its count is 0, not unknown: it is read as 0 (so the run's ``task-clock`` sums to perf's own), with
  a note. A counter enabled but never scheduled on the PMU (multiplexed out, ``0,0.00``) stays null.
- **Multiplexing.** The run time (ns) and run-time percentage are kept per row (``run_ns``, ``enabled``,
  0–100); perf has already scaled the count by them (count × enabled / running), so the value is read as
  printed. Where a counter ran less than all of an interval, the capture carries each register's times
  (``C@enabled_ns`` = run time × 100 / percentage, ``C@running_ns``, as running totals) and its group:
  the lines of one interval and CPU that ran less than 100 % with the same run time were scheduled
  together (a perf group shares one run time); the metadata says ``multiplex_scaled`` (``capture.
  multiplex``: a metric whose inputs ran in different groups is "mismeasured").
- **Per CPU** (``-A``: ``CPU3``), per core (``S0-D0-C1``), per die or socket (``S0``): one chip
  column per identifier, in their order of first appearance; the aggregate is chip 0.
- **The human-readable report** gives one window, from 0 to "seconds time elapsed". Its numbers are read in
  the C locale's form (perf prints them in its locale): digits, in groups of three separated by ',' where
  printf groups them (en_US: ``1,234,567``), '.' before a fraction (``195.57 msec``), and a count without a
  unit whole (``%.0f``). Another form (de_DE: ``195,57 msec``, ``86.743`` page faults, ``0,607874754 seconds
  time elapsed``) is refused, saying to rerun perf with ``LC_ALL=C``: read, it was 100 or 1000 times off. A
  unit other than a time's (``51,856,284 ns duration_time``, ``1.23 Joules power/energy-pkg/``) is the
  word between the value and the event; perf before 5.x printed a time's after it (``task-clock (msec)``).
  A report holds one run: a second run's (``perf stat --append``: a second "Performance counter stats"
  header or elapsed time) and ``perf stat -r N`` (means over the runs, ``( +- 1.23% )``) are refused.
- **JSON** (``perf stat -j``): one object per line, each read as the CSV line it stands for — ``interval``
  the time stamp, ``counter-value`` the value (a number in a string, or a marker), ``unit``, ``event``,
  ``pcnt-running`` the run percentage, and ``cpu`` (a number: ``CPU<n>``) or ``core``/``die``/``socket``/
  ``node`` the identifier (``tools/perf/util/stat-display.c``, ``print_counter_value_json`` and
  ``aggr_printout``; the keys as ``tools/perf/tests/shell/lib/perf_json_output_lint.py`` checks them).
  ``metric-value``/``metric-unit`` are perf's derived figures, not read; a line without ``event`` (a
  further metric of the event above) holds no count. Like the CSV, JSON without ``-I`` has no elapsed time.

- **Modifiers.** An event printed with perf's modifier (``task-clock:u``, what perf prints when not run
  as root) is read as the event, with a note.
- **A missing line.** An interval without a line for an event another interval has is null there
  (reason ``missing sample``), never a zero increment.

Every line is checked: a line with another number of fields than the first, a value that is not a
number or a known marker, a negative or too large count, a run percentage outside 0–100, a unit the
signal does not read, the same event twice for one interval and CPU (two runs' output in one file), or
aggregated lines mixed with per-CPU ones (they would be counted twice) is reported as a ``DumpError``
naming the file, line and field; an event no signal maps is a note, not an error. A pipe is refused
(write perf's output to a file).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from .dump_io import DumpError
from .formats import export_text, file_head
from .instances import axis_of, check_labels
from .perf_csv import read_csv
from .perf_lines import _AGG, IDLE, MARKERS, PerfLine, PerfStat, _count, _enabled, _not_enabled, _number
from .perf_report import _HUMAN, _HUMAN_I, _human, _human_interval
from .perf_table import UNITS, _base, collector_table, perf_instances


def read_perf_stat(path: str | Path) -> PerfStat:
    """Parse a ``perf stat`` file: CSV (``-x SEP``, the separator found from the first counter line)
    or the human-readable report (module docstring).

    Raises:
        DumpError: unreadable, or a line that is not perf stat's (file:line and what to do).
    """
    p = str(path)
    text = export_text(path, "write perf's output to a file with `perf stat -o FILE`", "`perf stat` output")
    out = PerfStat(p)
    body = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        raise DumpError(f"{p}: no counter lines; give the file `perf stat -x, -o FILE` (or perf stat's report) wrote")
    if any("Performance counter stats" in ln for _, ln in body) or any(
        ln.strip().endswith("seconds time elapsed") for _, ln in body
    ):
        return _human(out, body)
    if body[0][1].lstrip().startswith("{"):
        return _one_mode(_json(out, body))
    if _HUMAN_I.match(body[0][1]):
        return _one_mode(_human_interval(out, body))
    return _one_mode(read_csv(out, body))


def _one_mode(out: PerfStat) -> PerfStat:
    """``out`` with ``interval`` set from its first line, every line checked to be of the same kind (with a
    time stamp, ``-I``, or without)."""
    out.interval = out.lines[0].time is not None
    if any((x.time is None) == out.interval for x in out.lines):
        bad = next(x for x in out.lines if (x.time is None) == out.interval)
        raise DumpError(
            f"{out.path}:{bad.line}: a line {'without' if out.interval else 'with'} a time stamp among lines "
            f"{'with' if out.interval else 'without'}: two perf runs in one file? Give one run's output"
        )
    if out.interval:  # perf prints the intervals in time order; one out of order would be re-sorted into a wrong window
        prev = out.lines[0]
        for x in out.lines[1:]:
            if x.time < prev.time:
                raise DumpError(
                    f"{out.path}:{x.line}: time stamp {x.time:.9f} s comes after {prev.time:.9f} s (line {prev.line}); "
                    "perf stat -I writes its intervals in time order: was the file edited, or two runs joined? "
                    "Give one run's output as perf wrote it"
                )
            prev = x
    return out


_JSON_WHERE = ("cpu", "core", "die", "socket", "node", "cache", "cluster", "thread")


def _json(out: PerfStat, body: list[tuple[int, str]]) -> PerfStat:
    """perf's JSON output (``perf stat -j``): one object per line, read as the CSV's lines (module
    docstring); a line without ``event`` (a further metric of the event above) holds no count."""
    import json

    for n, ln in body:
        try:
            obj = json.loads(ln)
        except json.JSONDecodeError as exc:
            raise DumpError(
                f"{out.path}:{n}:{exc.colno}: not a JSON object ({exc.msg}); give one `perf stat -j` run's output"
            ) from None
        except (ValueError, RecursionError):
            raise DumpError(f"{out.path}:{n}: not a JSON object perf stat -j writes") from None
        if not isinstance(obj, dict):
            raise DumpError(
                f"{out.path}:{n}: a JSON {type(obj).__name__} where `perf stat -j` writes one object per line"
            )
        if "event" in obj or "counter-value" in obj:
            out.lines.append(_json_line(obj, out.path, n))
    if not out.lines:
        raise DumpError(f"{out.path}: no counter lines (objects with `event` and `counter-value`)")
    return out


def _json_text(obj: dict, key: str, p: str, n: int, default: str | None = None) -> str:
    """A key's value as text (perf writes strings and numbers), or ``default`` where it is absent."""
    v = obj.get(key, default)
    if v is None:
        what = f"key `{key}` is null" if key in obj else f"no key `{key}`"
        raise DumpError(f"{p}:{n}: {what}; perf stat -j writes it on every counter line, a string or a number")
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise DumpError(f"{p}:{n}: key `{key}` holds a JSON {type(v).__name__}; perf writes a string or a number")
    return str(v)


def _json_line(obj: dict, p: str, n: int) -> PerfLine:
    """One JSON counter line as a ``PerfLine`` (``cpu`` 3 is ``CPU3``, as -A prints it in CSV)."""
    t = _number(_json_text(obj, "interval", p, n), p, n, "time stamp") if "interval" in obj else None
    keys = [k for k in _JSON_WHERE if k in obj]
    if len(keys) > 1:
        raise DumpError(f"{p}:{n}: keys {', '.join(f'`{k}`' for k in keys)} in one line; perf writes one of them")
    where = _json_text(obj, keys[0], p, n) if keys else ""
    if keys and keys[0] == "cpu":
        if not where.isdigit():
            raise DumpError(f"{p}:{n}: key `cpu` is `{where[:20]}`, not a CPU number")
        where = f"CPU{where}"
    elif keys and keys[0] in ("socket", "die", "core", "node") and not _AGG.match(where):
        raise DumpError(f"{p}:{n}: key `{keys[0]}` is `{where[:20]}`, not an identifier perf writes (S0, S0-D0, …)")
    event = _json_text(obj, "event", p, n)
    if not event:
        raise DumpError(f"{p}:{n}: key `event` (the event name) is empty")
    value, state = _count(_json_text(obj, "counter-value", p, n), event, p, n)
    unit = _json_text(obj, "unit", p, n, "")
    if unit not in UNITS and not re.fullmatch(r"[A-Za-z%/]+", unit):
        raise DumpError(f"{p}:{n}: key `unit` `{unit[:20]}` is not a unit perf prints (msec, usec, nsec, sec or empty)")
    enabled = _enabled(_json_text(obj, "pcnt-running", p, n), p, n) if "pcnt-running" in obj else 100.0
    run = _number(_json_text(obj, "event-runtime", p, n), p, n, "run time") if "event-runtime" in obj else None
    value, state = _not_enabled(value, state, run, enabled)
    return PerfLine(t, where, value, unit, event, state, enabled, n, run)


def sniff(path) -> bool:
    """Whether ``path`` looks like ``perf stat`` output (its report, or CSV lines of a time stamp with nine
    decimals, or of value, unit, event and run time, separated by ',' or ';' — a locale's decimal commas
    included, so that its reader names the locale), from its first 4 kB."""
    head = file_head(path)
    if head is None:
        return False
    if "Performance counter stats" in head:
        return True
    whole = head if head.endswith("\n") else head.rpartition("\n")[0]  # a line cut off (by the 4 kB, or a file
    # cut short) is not judged: the reader names it
    lines = [ln for ln in whole.splitlines() if ln.strip() and not ln.lstrip().startswith("#")][:8]
    if lines and lines[0].lstrip().startswith("{"):  # perf stat -j: a JSON object with an event and its count
        import json

        try:
            first = json.loads(lines[0])
        except (ValueError, RecursionError):
            return False
        return isinstance(first, dict) and "event" in first and "counter-value" in first
    pat = re.compile(
        r"^\s*(\d+\.\d{9}[,;]\S|[\d.]+,(msec|usec|nsec|sec)?,[A-Za-z][\w:/=-]*,\d+,"
        r"|[\d.,]+;(msec|usec|nsec|sec)?;[A-Za-z][\w:/=,-]*;\d+;|<not (counted|supported)>[,;]"
        # -I in a decimal-comma locale: the time stamp `0,100206995`, then (-x,) a value split at its comma
        r"|\d+,\d{9};\S|\d+,\d{9},(\d+,\d+,(msec|usec|nsec|sec)|\d+,|<not (counted|supported)>,),[A-Za-z])"
    )

    def human_interval(ln: str) -> bool:  # perf stat -I without -x: a time stamp, then a report line
        t = _HUMAN_I.match(ln)
        rest = ln[t.end() :] if t is not None else ""
        return t is not None and (rest.lstrip().startswith("#") or _HUMAN.match(rest.split("#")[0]) is not None)

    return bool(lines) and (all(pat.match(ln) for ln in lines) or all(human_interval(ln) for ln in lines))


def mapping_of(gen) -> dict[str, tuple[str, str, float]]:
    """perf event → (signal, the kind of unit perf prints for it: ``time`` or ``""`` for a count, raw
    counts per perf unit: per second for a time) for the signals of ``gen`` whose ``sources`` name a
    perf event (``sources: {perf: task-clock}``): a time is converted to the signal's unit, then divided
    by its scale; a count is divided by the scale."""
    from .formats import raw_per_value

    out = {}
    for name, sig in gen.signals.items():
        events = dict(sig.sources).get("perf")
        if events:
            is_time, per = raw_per_value(gen, sig)
            for event in events.split("|"):  # alternatives, in order of preference: `task-clock|cpu-clock`
                out[event.strip()] = (name, "time" if is_time else "", per)
    return out


def match_case(ps, mapping: dict, notes: list[str] | None = None) -> None:
    """Rename, in place, each event of ``ps`` that no signal names as perf printed it but one names in
    another case (``OP_RETIRED`` for ``sources: {perf: op_retired}``): perf's event names are
    case-insensitive, and an imported Arm catalog writes them as its formulas did (a migrator's capture
    read nothing). A name two signals' events share in different cases is left as printed."""
    lower: dict[str, list[str]] = {}
    for event in mapping:
        lower.setdefault(event.lower(), []).append(event)
    renamed = {}
    for x in ps.lines:
        base = _base(x.event)
        if x.event in mapping or base in mapping:
            continue
        found = lower.get(base.lower(), [])
        if len(found) == 1:
            renamed[x.event] = found[0] + x.event[len(base) :]
            x.event = renamed[x.event]
    if renamed and notes is not None:
        pairs = sorted(renamed.items())
        notes.append(
            f"{ps.path}: events matched to their signals' `sources: {{perf: …}}` without regard to case (perf's "
            f"names are case-insensitive): "
            + ", ".join(f"{a} as {b}" for a, b in pairs[:8])
            + (" …" if len(pairs) > 8 else "")
        )


def _supported_events(ps) -> set[str]:
    """The events (and their bases) of a capture with a line perf counted or could not count this once
    (``<not counted>``); one ``<not supported>`` on every line is no alternative to read."""
    return {e for x in ps.lines if x.state != "not supported" for e in (x.event, _base(x.event))}


def first_present(mapping: dict, events: set[str]) -> dict:
    """``mapping`` (``mapping_of``) with one event per signal: of a signal's alternatives, the first the
    capture holds (``events``, with their bases), so that a file holding two never fills a signal twice."""
    taken: set[str] = set()
    out = {}
    for event, target in mapping.items():  # in the order the alternatives were written
        if event in events and target[0] not in taken:
            out[event] = target
            taken.add(target[0])
    return {**{e: t for e, t in mapping.items() if t[0] not in taken}, **out}


def perf_capture(path: str | Path, gen, notes: list[str] | None = None) -> pa.Table:
    """``path`` (a ``perf stat`` file) as a capture of ``gen`` in the collector format (``collector_table``
    with the events ``gen``'s signals name in ``sources``), its metadata naming the generation.

    Raises:
        DumpError: a file that is not perf stat's output, or that holds no event a signal names.
    """
    import json

    ps = read_perf_stat(path)
    mapping = mapping_of(gen)
    match_case(ps, mapping, notes)
    mapping = first_present(mapping, _supported_events(ps))
    if not mapping:
        raise DumpError(
            f"{path}: generation `{gen.name}` names no perf event (`sources: {{perf: …}}` on its signals); "
            "analyse perf stat output with a catalog that does (the shipped `linux` catalog is the default)"
        )
    if not any(x.event in mapping or _base(x.event) in mapping for x in ps.lines):
        events = sorted({x.event for x in ps.lines})
        raise DumpError(
            f"{path}: none of its events ({', '.join(events[:6])}) is a signal's `sources: {{perf: …}}` in `{gen.name}`"
        )
    axis = axis_of(gen, _signals_read(ps, mapping), str(path))
    labels = None
    if axis is not None:  # an instance axis sized by the data: the CPUs (cores, sockets) are its instances
        labels = check_labels(str(path), axis[0], perf_instances(ps, mapping), axis[1])
    t = collector_table(ps, mapping, notes=notes, instances=labels)
    idle = sum(x.state == IDLE and (x.event in mapping or _base(x.event) in mapping) for x in ps.lines)
    if idle and notes is not None:
        notes.append(
            f"{path}: {idle} line(s) `<not counted>` with a run time of 0 at 100 % (in perf's report: without a run "
            "percentage): the counter was not enabled in the interval (a per-task counter while its task did not "
            "run), read as a count of 0"
        )
    meta = {"generation": gen.name, "source": "perf stat", "increments": True}  # summed (metrics.bridge)
    if any("@" in c for c in t.column_names):
        meta["multiplex_scaled"] = True  # perf printed counts scaled by enabled / running (capture.multiplex)
    return t.replace_schema_metadata({"perfonto": json.dumps(meta)})


def _signals_read(ps: PerfStat, mapping: dict) -> list[str]:
    """The signals the file's lines fill: a catalog's other signals (an imported catalog's per-core events
    beside its per-package ones, `PerPkg`) may lie on other axes."""
    return sorted({mapping[e][0] for x in ps.lines for e in (x.event, _base(x.event)) if e in mapping})


def perf_instances_of(path: str | Path, gen) -> dict[str, tuple[str, ...]]:
    """The instance axis of ``gen`` sized by the data (``from_data``) that the perf events its signals
    read lie on, with the labels of the CPUs (``-A``: ``0``, ``1``, …), cores or sockets the file's lines
    name (``all`` for aggregated lines); an axis no line of the file fills has one placeholder instance,
    ``absent`` (its signals are not in the capture).

    Raises:
        DumpError: see ``perf_capture``.
    """
    ps = read_perf_stat(path)
    match_case(ps, mapping_of(gen))
    mapping = first_present(mapping_of(gen), _supported_events(ps))
    from perfonto.ontology.derive import from_data_axes

    axis = axis_of(gen, _signals_read(ps, mapping), str(path))
    out = {} if axis is None else {axis[0]: check_labels(str(path), axis[0], perf_instances(ps, mapping), None)}
    # an axis no line fills (an imported catalog's per-package block, the file holding per-core events only):
    # one placeholder instance, its signals absent from the capture, the metrics that read them unavailable
    for axes in from_data_axes(gen).values():
        for a in axes:
            out.setdefault(a, ("absent",))
    return out


__all__ = [
    "MARKERS",
    "PerfLine",
    "PerfStat",
    "collector_table",
    "mapping_of",
    "perf_capture",
    "perf_instances_of",
    "read_perf_stat",
    "sniff",
]
