"""rocprofv3's counter-collection CSV as a capture: the ``*_counter_collection.csv`` that ``rocprofv3 --pmc
SQ_WAVES GRBM_COUNT … --output-format csv -- APP`` writes, as AMD's rocprofv3 documentation describes it
(https://rocm.docs.amd.com/projects/rocprofiler-sdk/en/latest/how-to/using-rocprofv3.html, "Kernel counter
collection" and "Output file fields").

Layout: long format, one row per dispatch per counter, with the columns ``Correlation_Id, Dispatch_Id,
Agent_Id, Queue_Id, Process_Id, Thread_Id, Grid_Size, Kernel_Id, Kernel_Name, Workgroup_Size,
LDS_Block_Size, Scratch_Size, VGPR_Count, Accum_VGPR_Count, SGPR_Count, Counter_Name, Counter_Value,
Start_Timestamp, End_Timestamp`` (the time stamps in ns). This reader needs ``Dispatch_Id``, ``Agent_Id``,
``Kernel_Name``, ``Counter_Name``, ``Counter_Value``, ``Start_Timestamp`` and ``End_Timestamp``; the others
are not read.

How it is read (``capture.kernel_windows``): one window per dispatch, from its own time stamps; the rows of
one dispatch (``Process_Id`` and ``Dispatch_Id``) must agree on agent, kernel and times. ``Agent_Id``
(``4`` or ``Agent 4``) is the chip, the agents numbered 0, 1, … in their order (a note lists them). Dispatch
counting runs one kernel at a time on an agent (rocprofiler-sdk, "Counter collection services": "dispatch
counting allows only a single kernel to execute in hardware at a time"), so two dispatches that overlap on
one agent are refused. A counter is read into the signal whose ``sources: {rocprof: COUNTER}`` names it: its
value is in the signal's unit (rocprof prints no units: ``FETCH_SIZE`` is in KiB, so its signal's unit is
KiB); read into a signal in a time unit, it is a percentage of the dispatch's time (rocprof's ``VALUBusy``,
``MemUnitBusy``…) and becomes the time it stands for. ``sources: {rocprof: "End_Timestamp - Start_Timestamp"}``
reads the dispatch's duration. Only counters take rocprof values (``kernel_windows.counter_signals``).

Every problem is a ``DumpError`` naming the file, the row (the file's line) and the column: a missing column,
an empty or non-numeric value or time stamp, a dispatch that ends before it starts, rows of one dispatch that
disagree, a counter twice for one dispatch, or overlapping dispatches on one agent.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pyarrow as pa

from .dump_io import DumpError
from .formats import export_text, file_head
from .kernel_windows import Kernel, check_totals, counter_signals, kernel_capture, kernel_trace, unread_note

REQUIRED = (
    "Dispatch_Id",
    "Agent_Id",
    "Kernel_Name",
    "Counter_Name",
    "Counter_Value",
    "Start_Timestamp",
    "End_Timestamp",
)
DURATION = "End_Timestamp - Start_Timestamp"  # a source naming the dispatch's own duration


def _rows(path: Path) -> tuple[list[str], list[list[str]], str]:
    p = str(path)
    text = export_text(path, "give rocprofv3's counter_collection.csv", "rocprofv3's CSV")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise DumpError(f"{p}: not CSV ({exc}); give rocprofv3's counter_collection.csv") from None
    if not rows:
        raise DumpError(f"{p}: empty; give rocprofv3's counter_collection.csv")
    return rows[0], rows[1:], p


def _int(text: str, p: str, n: int, c: int, name: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"\d{1,19}", t) or int(t) >= 2**62:
        why = "empty" if not t else f"`{t[:30]}` is not a whole number of ns since the epoch"
        raise DumpError(f"{p}:{n}: column {c + 1} ({name}): {why}; a dispatch needs its time stamps in ns")
    return int(t)


def _number(text: str, p: str, n: int, c: int, name: str) -> float:
    try:
        v = float(text.strip())
    except ValueError:
        raise DumpError(f"{p}:{n}: column {c + 1} ({name}): `{text.strip()[:30]}` is not a number") from None
    if v != v or abs(v) == float("inf"):
        raise DumpError(f"{p}:{n}: column {c + 1} ({name}): `{text.strip()[:30]}` is not a finite number")
    return v


def _agent(text: str, p: str, n: int, c: int) -> int:
    m = re.fullmatch(r"(?:Agent\s*)?(\d{1,6})", text.strip())
    if not m:
        raise DumpError(f"{p}:{n}: column {c + 1} (Agent_Id): `{text[:20]}` is not an agent (`4` or `Agent 4`)")
    return int(m.group(1))


def read_rocprof(path: str | Path, gen, notes: list[str]) -> list[Kernel]:
    """The dispatches of a rocprofv3 counter-collection CSV, with the counts of ``gen``'s signals that name a
    rocprof counter, in raw counts (module docstring).

    Raises:
        DumpError: naming the file, row and column (module docstring).
    """
    header, body, p = _rows(Path(path))
    at = {name.strip(): i for i, name in enumerate(header)}
    for name in REQUIRED:
        if name not in at:
            raise DumpError(
                f"{p}:1: no column {name}; rocprofv3's counter_collection.csv has "
                + ", ".join(REQUIRED)
                + " (an older rocprof's CSV without time stamps cannot be placed in time)"
            )
    signals = counter_signals(gen, "rocprof")
    if not signals:
        raise DumpError(f"{p}: generation `{gen.name}` names no rocprof counter (`sources: {{rocprof: …}}`)")
    rd = _Reading(p, header, at, gen, signals)
    for n, r in enumerate(body, 2):
        if r and r != [""]:
            rd.row(n, r)
    kernels = sorted(rd.disp.values(), key=lambda k: (k.chip, k.start_ns))
    if not kernels:
        raise DumpError(f"{p}: a header but no dispatch rows; did rocprofv3 profile any kernel?")
    _check_overlaps(kernels, at)
    check_totals(kernels, gen, rd.value_place, "agent")
    used = {sig for k in kernels for sig in k.counts}
    unread = sorted(set(signals) - used)
    if unread:
        notes.append(unread_note(p, "counter", signals, unread))
    if not used:
        raise DumpError(
            f"{p}: none of its counters ({', '.join(sorted(rd.names)[:6])}) is a signal's `sources: {{rocprof: …}}`"
        )
    agents = _number_agents(kernels, used)
    notes.append(
        f"{p}: {len(kernels)} dispatch(es), one window each, on their own time stamps; chips: "
        + ", ".join(f"{i} = agent {a}" for i, a in enumerate(agents))
    )
    return kernels


class _Reading:
    """The dispatches read so far, row by row (``row``): ``disp`` ((process, dispatch) → its kernel),
    the row that first named each, each (dispatch, counter)'s row, and every counter name seen."""

    def __init__(self, p: str, header: list[str], at: dict[str, int], gen, signals: dict[str, str]):
        self.p, self.header, self.at, self.gen, self.signals = p, header, at, gen, signals
        self.by_counter = {src: sig for sig, src in signals.items()}
        reg = gen.registry
        self.is_time = {
            sig: reg.Quantity(1, gen.signals[sig].unit).dimensionality == reg.Quantity(1, "s").dimensionality
            for sig in signals
        }
        self.to_unit = {  # a time signal's raw counts per second
            sig: reg.Quantity(1, "s").to(gen.signals[sig].unit).magnitude / gen.signals[sig].scale
            for sig in signals
            if self.is_time[sig]
        }
        self.disp: dict[tuple[str, str], Kernel] = {}
        self.first: dict[tuple[str, str], int] = {}
        self.seen_counter: dict[tuple, int] = {}
        self.value_row: dict[tuple[str, str], int] = {}  # (a dispatch's first row, signal) → its value's row
        self.names: set[str] = set()
        self.pid = at.get("Process_Id")

    def row(self, n: int, r: list[str]) -> None:
        """One row (file line ``n``): its dispatch (new, or the same as on its first row) and its counter's
        value, read into the counter's signal."""
        p, at = self.p, self.at
        if len(r) != len(self.header):
            raise DumpError(f"{p}:{n}: {len(r)} field(s) where the header has {len(self.header)}")
        key = (r[self.pid] if self.pid is not None else "", r[at["Dispatch_Id"]].strip())
        k, start, end = self._dispatch(n, r, key)
        cname = r[at["Counter_Name"]].strip()
        self.names.add(cname)
        if (key, cname) in self.seen_counter:
            raise DumpError(
                f"{p}:{n}: column {at['Counter_Name'] + 1} (Counter_Name): {cname} again for dispatch {key[1]} "
                f"(first on row {self.seen_counter[(key, cname)]}): two passes' files joined?"
            )
        self.seen_counter[(key, cname)] = n
        sig = self.by_counter.get(cname)
        if sig is None:
            return
        v = _number(r[at["Counter_Value"]], p, n, at["Counter_Value"], "Counter_Value")
        if v < 0:
            raise DumpError(f"{p}:{n}: column {at['Counter_Value'] + 1} (Counter_Value): {v:g} is negative")
        s = self.gen.signals[sig]
        self.value_row[(k.where, sig)] = n
        k.counts[sig] = v / 100.0 * (end - start) * 1e-9 * self.to_unit[sig] if self.is_time[sig] else v / s.scale

    def value_place(self, k: Kernel, sig: str) -> str:
        """``file:line: column`` of the value ``sig`` of dispatch ``k`` (the kernel's place when unknown)."""
        n = self.value_row.get((k.where, sig))
        return f"{self.p}:{n}: column {self.at['Counter_Value'] + 1} (Counter_Value)" if n is not None else k.where

    def _dispatch(self, n: int, r: list[str], key: tuple[str, str]) -> tuple[Kernel, int, int]:
        """(the row's dispatch, its start and end in ns): a new one (with its duration for the signals that
        read it), or the one of an earlier row, which must name the same agent, kernel and times."""
        p, at = self.p, self.at
        start = _int(r[at["Start_Timestamp"]], p, n, at["Start_Timestamp"], "Start_Timestamp")
        end = _int(r[at["End_Timestamp"]], p, n, at["End_Timestamp"], "End_Timestamp")
        if end <= start:
            raise DumpError(
                f"{p}:{n}: column {at['End_Timestamp'] + 1} (End_Timestamp): {end} is not after Start_Timestamp {start}"
            )
        agent = _agent(r[at["Agent_Id"]], p, n, at["Agent_Id"])
        kname = r[at["Kernel_Name"]]
        k = self.disp.get(key)
        if k is None:
            k = self.disp[key] = Kernel(agent, start, end, kname, {}, f"{p}:{n}")
            self.first[key] = n
            for sig, src in self.signals.items():
                if src == DURATION:
                    k.counts[sig] = (end - start) * 1e-9 * self.to_unit[sig]
        elif (k.chip, k.start_ns, k.end_ns, k.name) != (agent, start, end, kname):
            raise DumpError(
                f"{p}:{n}: dispatch {key[1]} again with another agent, kernel or time stamps than on row "
                f"{self.first[key]}: two runs' files joined?"
            )
        return k, start, end


def _check_overlaps(kernels: list[Kernel], at: dict[str, int]) -> None:
    """No two dispatches (sorted by agent, then start) overlap on one agent."""
    for a, b in zip(kernels, kernels[1:]):
        if a.chip == b.chip and b.start_ns < a.end_ns:
            raise DumpError(
                f"{b.where}: column {at['Start_Timestamp'] + 1} (Start_Timestamp): the dispatch starts before "
                f"the one of row {a.where.rsplit(':', 1)[1]} on the same agent ends; dispatch counting runs one "
                "kernel at a time"
            )


def _number_agents(kernels: list[Kernel], used: set[str]) -> list[int]:
    """The agents in order; each kernel's chip becomes its agent's position, and its counts cover exactly
    the signals ``used`` (None where it had none). Returns the agents."""
    agents = sorted({k.chip for k in kernels})
    for k in kernels:
        k.chip = agents.index(k.chip)
        for sig in used:
            k.counts.setdefault(sig, None)
        for sig in set(k.counts) - used:
            del k.counts[sig]
    return agents


def sniff(path) -> bool:
    """Whether ``path`` is a rocprofv3 counter-collection CSV: its first line names ``Dispatch_Id``,
    ``Counter_Name`` and ``Counter_Value``."""
    head = file_head(path)
    if head is None:
        return False
    line = head.splitlines()[0] if head else ""
    return all(f'"{c}"' in line or f"{c}," in line for c in ("Dispatch_Id", "Counter_Name", "Counter_Value"))


def rocprof_capture(
    path: str | Path, gen, notes: list[str] | None = None, sample_period_ns: int | None = None
) -> pa.Table:
    """``path`` (rocprofv3's counter-collection CSV) as a capture of ``gen`` in the collector format, one
    window per dispatch (``kernel_windows.kernel_table``), its metadata naming the generation.

    Raises:
        DumpError: a bad file (module docstring), or a sample period given (the windows are the dispatches).
    """
    export = "rocprof's CSV: its windows are the dispatches"
    return kernel_capture(path, gen, read_rocprof, notes, sample_period_ns, source="rocprofv3", export=export)


def rocprof_trace(path: str | Path, gen) -> pa.Table:
    """The dispatches of ``path`` as op spans in the trace format, on the capture's time axis."""
    return kernel_trace(read_rocprof(path, gen, []))


__all__ = ["DURATION", "REQUIRED", "read_rocprof", "rocprof_capture", "rocprof_trace", "sniff"]
