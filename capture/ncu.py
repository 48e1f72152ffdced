"""Nsight Compute's raw page as a capture: the CSV ``ncu --csv --page raw`` prints (or ``ncu --import
REPORT.ncu-rep --csv --page raw``; the default details page of ``ncu --csv``, one row per metric of a
launch, is laid out as the raw page first: ``_details_as_raw``), as NVIDIA's Nsight Compute CLI
documentation describes it (https://docs.nvidia.com/nsight-compute/NsightComputeCli/index.html: "Output
Pages" — ``raw`` prints all collected metrics of every profiled kernel launch; ``--csv``; "Metrics and
Units" and ``--print-units``).

Layout: a header row of column names — the launch's identifiers (``"ID","Process ID","Process Name","Host
Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC"``, …) then one column per
metric (``gpu__time_duration.sum``, ``dram__bytes_read.sum``, …); a second row of units (empty under the
identifiers; ``nsecond``, ``byte``, ``Kbyte``, ``%``, ``byte/second``, …, auto-scaled per column unless
``--print-units base``); then one row per kernel launch. Lines before the header (``==PROF==`` messages,
the application's own output) are skipped. Values are C-locale numbers and may carry thousands separators
(``"27,595,520"``, ``"2,000.00"``); one in a locale's format (``"2.000,00"``) is refused, not read as 2;
``n/a`` is an unknown value (null).

How it is read (``capture.kernel_windows``): one window per kernel launch. The raw page holds no time
stamps, so the kernels are laid **back to back** in the order of their ``ID``, each lasting its
``gpu__time_duration.sum`` (Nsight Compute serializes the kernels it profiles, so they never overlapped
while measured; a note says so); a file without that column is refused. ``Device`` is the chip. A metric
column is read into the signal whose ``sources: {ncu: METRIC}`` names it: a value in a unit of the signal's
dimension is converted (``Kbyte`` → bytes, SI prefixes as ncu prints them); a percentage or a rate (``%``,
``byte/second``) read into a signal whose unit is that times a time is integrated over the kernel's
duration (``sm__throughput.avg.pct_of_peak_sustained_elapsed`` into a signal in seconds is the time the SMs
would have needed at their peak; over the kernel's time it gives back the percentage, over a run the
duration-weighted mean). Only counters take ncu metrics (``kernel_windows.counter_signals``).

Every problem is a ``DumpError`` naming the file, the row (the file's line) and the column: a missing
column, a unit ncu does not print or that the signal cannot read, a value that is not a number, a kernel
row without a duration, two rows of one ``ID``, or a row of another width.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from .dump_io import DumpError, first_repeat
from .formats import export_text, file_head
from .kernel_windows import Kernel, check_totals, counter_signals, kernel_capture, kernel_trace, unread_note

TIME = "gpu__time_duration.sum"  # the kernel's duration: the only time the raw page holds
REQUIRED = ("ID", "Kernel Name", TIME)
_SCALED = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# ncu 2023 prints `nsecond`, `byte/second`; ncu 2025 (CUDA 13) `ns`, `byte/s` (a real H200 capture)
_TIMES = {
    "nsecond": "ns",
    "usecond": "us",
    "msecond": "ms",
    "second": "s",
    "ns": "ns",
    "us": "us",
    "ms": "ms",
    "s": "s",
}
_COUNTS = {"": "1", "inst": "instruction", "warp": "1", "sector": "1", "request": "1", "thread": "1", "block": "1"}


def unit_expr(unit: str) -> str | None:
    """ncu's unit text as a unit of perfonto's registry (``Kbyte`` → ``1000 * B``, ``byte/second`` →
    ``B / s``, ``%`` → ``percent``), or None for one ncu does not print here (``cycle`` is the signal's)."""
    if unit == "%":
        return "percent"
    num, _, den = unit.partition("/")
    m = re.fullmatch(r"([KMGT]?)byte", num)
    if m:
        top = f"{_SCALED[m.group(1)]:g} * B"
    elif num in _TIMES:
        top = _TIMES[num]
    elif num in _COUNTS:
        top = _COUNTS[num]
    else:
        return None
    if not den:
        return top
    return f"{top} / {_TIMES[den]}" if den in _TIMES else None


def _rows(path: Path) -> tuple[list[tuple[int, list[str]]], str]:
    """The file's rows (line number, fields) from its header on, as the raw page. The text is read each
    call; its parsing is cached by the text itself, so ``generation_of`` and ``read_ncu`` parse a capture
    once (a copy of the rows each call)."""
    p = str(path)
    rows = _parsed(export_text(path, "write ncu's output to a file first", "`ncu --csv` output"), p)
    return [(n, list(r)) for n, r in rows], p


@functools.lru_cache(maxsize=4)
def _parsed(text: str, p: str) -> list[tuple[int, list[str]]]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        raise DumpError(f'{p}: no header row starting "ID", …; give the output of `ncu --csv --page raw`')
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        raise DumpError(f"{p}: not CSV ({exc}); give the output of `ncu --csv --page raw`") from None
    out = [(start + 1 + i, r) for i, r in enumerate(rows) if r and not (len(r) == 1 and r[0].startswith("=="))]
    return _details_as_raw(out, p) if DETAILS <= set(out[0][1]) else out


#: The columns of ncu's default ``--csv`` page (details): one row per metric of a launch.
DETAILS = {"Section Name", "Metric Name", "Metric Unit", "Metric Value"}


def _details_as_raw(rows: list[tuple[int, list[str]]], p: str) -> list[tuple[int, list[str]]]:
    """ncu's details page (``ncu --csv`` without ``--page raw``: a row per metric of each launch, under the
    launch's identifier columns) laid out as the raw page: the identifiers, one column per metric, a
    units row, a row per launch (numbered by the line of its first metric). A metric given twice for one
    launch, or in two units, is refused naming the line."""
    (hn, header), body = rows[0], rows[1:]
    at = {name: i for i, name in enumerate(header)}
    ids = [c for c in header if c not in DETAILS]
    metrics: dict[str, str] = {}  # metric → its unit, in first-seen order
    launches: dict[str, tuple[int, list[str], dict[str, str]]] = {}
    for n, r in body:
        if len(r) != len(header):
            raise DumpError(f"{p}:{n}: {len(r)} field(s) where the header (row {hn}) has {len(header)}")
        name, unit, value = r[at["Metric Name"]], r[at["Metric Unit"]], r[at["Metric Value"]]
        if metrics.setdefault(name, unit) != unit:
            raise DumpError(f"{p}:{n}: metric {name} in `{unit}` here, `{metrics[name]}` before; one unit a metric")
        line, ident, values = launches.setdefault(r[at["ID"]], (n, [r[at[c]] for c in ids], {}))
        if name in values:
            raise DumpError(f"{p}:{n}: metric {name} of launch {r[at['ID']]} again (first on row {line})")
        values[name] = value
    head = ids + list(metrics)
    units = [""] * len(ids) + list(metrics.values())
    return [(hn, head), (hn, units)] + [
        (n, ident + [v.get(m, "n/a") for m in metrics]) for n, ident, v in launches.values()
    ]


def read_ncu(path: str | Path, gen, notes: list[str]) -> list[Kernel]:
    """The kernel launches of an ``ncu --csv --page raw`` file, laid back to back (module docstring), with
    the counts of ``gen``'s signals that name an ncu metric, in raw counts.

    Raises:
        DumpError: naming the file, row and column (module docstring).
    """
    rows, p = _rows(Path(path))
    (hn, header), body = rows[0], rows[1:]
    where = _header_columns(header, p, hn)
    (un, units), body = _units_row(body, header, where, p, hn)
    signals = counter_signals(gen, "ncu")
    mapped = {sig: m for sig, m in signals.items() if m in where}
    absent = sorted(set(signals) - set(mapped))
    if absent:
        notes.append(unread_note(p, "column", signals, absent))
    if not mapped:
        raise DumpError(f"{p}: none of its metric columns is a signal's `sources: {{ncu: …}}` in `{gen.name}`")
    conv = {sig: _converter(gen, sig, units[where[m]], p, un, m, where[m]) for sig, m in mapped.items()}
    page = _Page(p, hn, header, where, mapped, conv, _ns_per_time_unit(gen, units, where, p, un))
    kernels = _launches(page, body)
    check_totals(kernels, gen, lambda k, sig: f"{k.where}: column {where[mapped[sig]] + 1} ({mapped[sig]})", "device")
    if not kernels:
        raise DumpError(f"{p}: a header and units but no kernel rows; did ncu profile any kernel?")
    notes.append(
        f"{p}: {len(kernels)} kernel launch(es) laid back to back in ID order, each lasting its {TIME} (ncu's raw "
        "page has no time stamps; ncu serializes the kernels it profiles): one window per kernel"
    )
    return kernels


def _header_columns(header: list[str], p: str, hn: int) -> dict[str, int]:
    """Column name → position, with every column of ``REQUIRED`` present and none twice (the later one won:
    a file with a metric's column twice read the second's value)."""
    twice = first_repeat(header)
    if twice is not None:
        name, i, j = twice
        raise DumpError(
            f'{p}:{hn}: column "{name}" is in the header twice (columns {i + 1} and {j + 1}); ncu writes '
            "each metric once: give the file as ncu wrote it"
        )
    where = {name: i for i, name in enumerate(header)}
    for name in REQUIRED:
        if name not in where:
            raise DumpError(
                f'{p}:{hn}: no column "{name}"; ncu\'s raw page names each launch by "ID" and "Kernel Name" and '
                f"times it by {TIME} (profile with `ncu --metrics {TIME},…` or a section set that holds it)"
            )
    return where


def _units_row(body: list, header: list[str], where: dict[str, int], p: str, hn: int):
    """(the units row as (row number, units), the kernel rows after it); the units row is the header's
    width and blank under the launch's identifiers."""
    if body and len(body[0][1]) != len(header):
        raise DumpError(f"{p}:{body[0][0]}: {len(body[0][1])} field(s) where the header (row {hn}) has {len(header)}")
    if not body or any(body[0][1][where[n]] for n in ("ID", "Kernel Name")):
        raise DumpError(f"{p}:{hn + 1}: no units row after the header; give the output of `ncu --csv --page raw`")
    return body[0], body[1:]


def _ns_per_time_unit(gen, units: list[str], where: dict[str, int], p: str, un: int) -> float:
    """Nanoseconds per unit of the duration column (its unit must be a time)."""
    t_unit = unit_expr(units[where[TIME]])
    if t_unit is None or t_unit not in _TIMES.values():
        raise DumpError(f"{p}:{un}: column {where[TIME] + 1} ({TIME}) is in `{units[where[TIME]]}`, not a time")
    return gen.registry.Quantity(1, t_unit).to("ns").magnitude


@dataclass
class _Page:
    """What the header and units rows say: the file, the header's row and columns, signal → its metric
    column, signal → (value, kernel seconds) → raw counts, nanoseconds per unit of the duration."""

    p: str
    hn: int
    header: list[str]
    where: dict[str, int]
    mapped: dict[str, str]
    conv: dict
    t_ns: float


def _launches(page: _Page, body: list) -> list[Kernel]:
    """The kernel rows as kernels laid back to back from 0 ns, each lasting its duration, in file order;
    each row the header's width, each ``ID`` once."""
    p, where = page.p, page.where
    kernels: list[Kernel] = []
    seen: dict[str, int] = {}
    t = 0.0
    for n, r in body:
        if len(r) != len(page.header):
            raise DumpError(f"{p}:{n}: {len(r)} field(s) where the header (row {page.hn}) has {len(page.header)}")
        kid = r[where["ID"]]
        if kid in seen:
            raise DumpError(
                f'{p}:{n}: column 1 ("ID"): launch {kid} again (first on row {seen[kid]}): two reports in one file?'
            )
        seen[kid] = n
        dur_ns = _duration_ns(page, r, n, t)
        counts = _counts(page, r, n, dur_ns)
        chip = _chip(r[where["Device"]], p, n, where["Device"]) if "Device" in where else 0
        start = int(round(t))
        t += dur_ns
        kernels.append(Kernel(chip, start, max(int(round(t)), start + 1), r[where["Kernel Name"]], counts, f"{p}:{n}"))
    return kernels


def _duration_ns(page: _Page, r: list[str], n: int, t: float) -> float:
    """A kernel row's duration in ns: positive, and ending within 2^62 ns of the first kernel's start
    (``t``: where this one starts)."""
    p, c = page.p, page.where[TIME]
    dur = _value(r[c], p, n, c, TIME)
    if dur is None or dur <= 0:
        raise DumpError(
            f"{p}:{n}: column {c + 1} ({TIME}): the kernel has no duration (`{r[c]}`), so it "
            "cannot be placed in time; profile with the metric collected for every kernel"
        )
    dur_ns = dur * page.t_ns
    if t + dur_ns >= 2.0**62:
        raise DumpError(
            f"{p}:{n}: column {c + 1} ({TIME}): `{r[c]}` puts the kernels past 146 years; is the unit row right?"
        )
    return dur_ns


def _counts(page: _Page, r: list[str], n: int, dur_ns: float) -> dict[str, float | None]:
    """A kernel row's raw counts per signal (None where ncu gave no value); none negative."""
    counts: dict[str, float | None] = {}
    for sig, m in page.mapped.items():
        c = page.where[m]
        v = _value(r[c], page.p, n, c, m)
        amount = None if v is None else page.conv[sig](v, dur_ns * 1e-9)
        counts[sig] = amount
        if amount is not None and amount < 0:
            raise DumpError(f"{page.p}:{n}: column {c + 1} ({m}): {v:g} is negative; a kernel's amount is not")
    return counts


# a number as ncu writes it in the C locale: `2000`, `2,000.00` (',' between groups of three digits, the first
# not 0: `0,123` is a decimal comma), `1.5e+03`
_C_NUMBER = re.compile(r"[+-]?(?:(?:[1-9]\d{0,2}(?:,\d{3})+|\d*)(?:\.\d*)?(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)
_LOCALE_LIKE = re.compile(r"[+-]?\d[\d.,'\s\u00a0\u202f]*")  # digits with a locale's separators: `2.000,00`


def _value(text: str, p: str, n: int, c: int, name: str) -> float | None:
    t = text.strip()
    if t in ("", "n/a", "N/A"):
        return None
    v = None
    if _C_NUMBER.fullmatch(t):
        try:
            v = float(t.replace(",", ""))
        except ValueError:  # `.` or `+` alone
            pass
    if v is None and _LOCALE_LIKE.fullmatch(t):
        raise DumpError(
            f"{p}:{n}: column {c + 1} ({name}): `{t[:30]}` is not a number in the C locale ncu writes (`2,000.00`: "
            "',' between groups of three digits, '.' before the decimals): a locale's format? Export again with "
            "`LC_ALL=C ncu …`"
        )
    if v is None:
        raise DumpError(f"{p}:{n}: column {c + 1} ({name}): `{t[:30]}` is not a number")
    if v != v or v in (float("inf"), float("-inf")):
        raise DumpError(f"{p}:{n}: column {c + 1} ({name}): `{t[:30]}` is not a finite number")
    return v


def _chip(text: str, p: str, n: int, c: int) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 6:
        raise DumpError(f'{p}:{n}: column {c + 1} ("Device"): `{text[:20]}` is not a device number')
    return int(text)


#: an ncu metric whose name says it is a percentage (``….pct_of_peak_sustained_elapsed``, ``….pct``), as
#: NVIDIA's Profiling Guide names them ("Metrics Structure": the ``pct`` rollup and submetrics)
_PCT_NAME = re.compile(r"(?:^|[._])pct(?:$|_)")


def _converter(gen, sig: str, unit: str, p: str, n: int, metric: str, c: int):
    """(value, kernel seconds) → raw counts of ``sig`` for a column in ncu's ``unit`` (module docstring)."""
    reg, s = gen.registry, gen.signals[sig]
    target = reg.Quantity(1, s.unit)
    if _PCT_NAME.search(metric) and unit != "%":  # an empty cell reads as a count: 85.32 % became 8532 %
        shown = f"`{unit}`" if unit else "empty"
        raise DumpError(
            f"{p}:{n}: column {c + 1} ({metric}): the unit is {shown}, but the metric's name says it is a percentage, "
            "which ncu prints in `%`; the units row was lost or edited: export again with `ncu --csv --page raw`, "
            "or write `%` in this column of the units row (the line after the header)"
        )
    expr = unit_expr(unit)
    if expr is None and unit == "cycle" and str(s.unit).endswith("cycle"):
        expr = str(s.unit)
    if expr is None:
        raise DumpError(
            f"{p}:{n}: column {c + 1} ({metric}): the unit `{unit}` is not one ncu prints that perfonto knows "
            "(nsecond…second, byte…Tbyte, %, inst, cycle, X/second); export with `--print-units base`"
        )
    q = reg.parse_expression(expr) * 1.0  # a Quantity: ncu's prefixes are factors (Kbyte = 1000 * B)
    if q.dimensionality == target.dimensionality:
        per = q.to(s.unit).magnitude / s.scale
        return lambda v, secs: v * per
    if (q * reg.Quantity(1, "s")).dimensionality == target.dimensionality:
        per = (q * reg.Quantity(1, "s")).to(s.unit).magnitude / s.scale
        return lambda v, secs: v * per * secs
    raise DumpError(
        f"{p}:{n}: column {c + 1} ({metric}): the unit `{unit}` is not one signal `{sig}` (in {s.unit:~}) reads, "
        "as it is or integrated over the kernel's duration; map the metric to a signal of that kind"
    )


#: the GPU a launch ran on, as ncu's raw page names it (``NVIDIA H200``)
DEVICE_NAME = "device__attribute_display_name"


@dataclass(frozen=True)
class GpuNamed:
    """What a capture says of its GPU: ``generation`` (the shipped ncu generation of the one model it
    names, else None), ``names`` (the distinct model names, sorted) and ``launches`` (0: the file cannot
    be read or holds no launch, so nothing is said of it: the reader reports why)."""

    generation: str | None
    names: tuple[str, ...]
    launches: int


def generation_of(path) -> GpuNamed:
    """The GPU of an ncu capture, from the ``device__attribute_display_name`` column, which ncu's raw page
    prints for every launch; the details page has it only when it was asked for. The generation is the
    one of ``capture.gpu_models.part_of`` the only name (``NVIDIA H200`` → ``ncu_h200``)."""
    from .gpu_models import part_of

    try:
        rows, _ = _rows(Path(path))
    except DumpError:
        return GpuNamed(None, (), 0)
    header, body = rows[0][1], rows[2:]
    if DEVICE_NAME not in header:
        return GpuNamed(None, (), len(body))
    c = header.index(DEVICE_NAME)
    names = sorted({r[c].strip() for _, r in body if len(r) > c and r[c].strip().casefold() not in ("", "n/a")})
    part = part_of(names[0]) if len(names) == 1 else None
    return GpuNamed(f"ncu_{part}" if part else None, tuple(names), len(body))


def sniff(path) -> bool:
    """Whether ``path`` looks like ``ncu --csv`` output: a row starting ``"ID","Process ID"`` in its first
    16 kB whose columns include ``Kernel Name`` and either a metric name (``a__b.sum``: the raw page) or
    ``Metric Name`` and ``Metric Value`` (the details page, ``ncu --csv``'s default)."""
    head = file_head(path, 16384)
    if head is None:
        return False
    line = next((ln for ln in head.splitlines() if ln.startswith('"ID","Process ID"')), "")
    details = '"Metric Name"' in line and '"Metric Value"' in line
    return '"Kernel Name"' in line and (details or bool(re.search(r'"[a-z0-9_]+__[\w.]+"', line)))


def ncu_capture(path: str | Path, gen, notes: list[str] | None = None, sample_period_ns: int | None = None) -> pa.Table:
    """``path`` (``ncu --csv --page raw``) as a capture of ``gen`` in the collector format, one window per
    kernel (``kernel_windows.kernel_table``), its metadata naming the generation.

    Raises:
        DumpError: a bad file (module docstring), or a sample period given (the windows are the kernels).
    """
    return kernel_capture(
        path, gen, read_ncu, notes, sample_period_ns, source="ncu", export="ncu's raw page: its windows are the kernels"
    )


def ncu_trace(path: str | Path, gen) -> pa.Table:
    """The kernels of ``path`` as op spans in the trace format, on the capture's time axis."""
    return kernel_trace(read_ncu(path, gen, []))


__all__ = [
    "DEVICE_NAME",
    "GpuNamed",
    "REQUIRED",
    "TIME",
    "generation_of",
    "ncu_capture",
    "ncu_trace",
    "read_ncu",
    "sniff",
    "unit_expr",
]
