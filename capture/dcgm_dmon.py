"""``dcgmi dmon`` text output read as a capture: what ``dcgmi dmon -e 1001,1002,1005,155,156 -d 100 >
dmon.txt`` prints, as NVIDIA's DCGM User Guide shows it (https://docs.nvidia.com/datacenter/dcgm/latest/
user-guide/feature-overview.html, ``dcgmi dmon``; the field ids and their short names are ``dcgmi dmon -l``'s
and the DCGM API reference's "Field Identifiers", https://docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/
dcgm-api-field-ids.html).

Layout: a header line ``#Entity   GRACT   SMACT   DRAMA   POWER   TOTEC`` (the fields' short names), a units
line (``ID`` under the entity, then a unit under each field that has one: ``W``, ``mJ``, ``MHz``, ``C``;
blank for a ratio), then one line per entity per interval: ``GPU 0   0.123   0.101   0.250   241.3
123456789``. ``N/A`` is a value DCGM does not have (the first sample of a profiling field): null. A repeated
header or units line (the same as the first) is skipped.

How it is read:

- **Time.** dmon prints no time stamps. Its lines come in blocks, one line per GPU per interval, the lines
  of one interval taken in any order (they need not keep one order from one interval to the next): a block
  runs until a GPU comes again. A file that also lacks a GPU's line in some interval may read two ways (the line
  after the gap ends that interval or starts the next): read in the first block's GPU order when that and
  the reading above agree, refused naming the line where they part when not.
  Sample *k* is at *k* × the period given with ``--sample-period`` (dmon's ``-d``, in ms); without it, dmon's
  default of 1000 ms, and a note says so either way.
- **Mapping.** A signal declares the DCGM field it is read from as ``sources: {dcgm: NAME}``, where NAME is the
  field's ``DCGM_FI_…`` name, its numeric id or dmon's short name (``FIELDS`` knows the ids and short names of
  the fields the shipped ``dcgm`` catalog reads); an unknown field name is matched as dmon prints it.
- **Values.** A gauge's sample is its level, a counter's (``TOTEC``, energy since the driver loaded) its running
  total, both as integer raw counts of the signal's scale (a ratio into ``scale: 1.0e-6`` counts millionths),
  from the unit of the units line where it has one (``W``, ``mJ``) converted to the signal's.
- **Chips.** ``GPU N`` is chip N; other entities (``GPU-I``, ``GPU-CI``, NVSwitch ``Switch`` …) are left out,
  with a note.

Every problem is a ``DumpError`` naming the file, the line and the column (the field): a line of another width
than the header, a header naming a field twice, a value that is not a number or ``N/A``, a unit the signal
cannot read, a header that changes, lines whose interval is ambiguous, or no field a signal maps.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from .dump_io import DumpError, first_repeat
from .formats import export_text, file_head

DEFAULT_PERIOD_NS = 1_000_000_000  # dcgmi dmon's default -d (1000 ms)
# id -> (DCGM_FI name, dmon short name): DCGM API reference, "Field Identifiers";
# the short names as `dcgmi dmon -l` lists them
FIELDS = {
    100: ("DCGM_FI_DEV_SM_CLOCK", "SMCLK"),
    101: ("DCGM_FI_DEV_MEM_CLOCK", "MMCLK"),
    150: ("DCGM_FI_DEV_GPU_TEMP", "TMPTR"),
    155: ("DCGM_FI_DEV_POWER_USAGE", "POWER"),
    156: ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "TOTEC"),
    203: ("DCGM_FI_DEV_GPU_UTIL", "GPUTL"),
    204: ("DCGM_FI_DEV_MEM_COPY_UTIL", "MCUTL"),
    252: ("DCGM_FI_DEV_FB_USED", "FBUSD"),
    1001: ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "GRACT"),
    1002: ("DCGM_FI_PROF_SM_ACTIVE", "SMACT"),
    1003: ("DCGM_FI_PROF_SM_OCCUPANCY", "SMOCC"),
    1004: ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "TENSO"),
    1005: ("DCGM_FI_PROF_DRAM_ACTIVE", "DRAMA"),
    1006: ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "FP64A"),
    1007: ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "FP32A"),
    1008: ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "FP16A"),
    1009: ("DCGM_FI_PROF_PCIE_TX_BYTES", "PCITX"),
    1010: ("DCGM_FI_PROF_PCIE_RX_BYTES", "PCIRX"),
    1011: ("DCGM_FI_PROF_NVLINK_TX_BYTES", "NVLTX"),
    1012: ("DCGM_FI_PROF_NVLINK_RX_BYTES", "NVLRX"),
}
_UNIT_ALIASES = {"C": "degC", "%": "percent"}
_ROW = re.compile(r"^(?P<kind>[A-Za-z][\w-]*)\s+(?P<id>\d{1,6})(?:\s+|$)")  # an entity: its kind and id


def short_name(source: str) -> str:
    """dmon's short name for a signal's ``sources.dcgm`` (a ``DCGM_FI_…`` name, an id or a short name)."""
    s = source.strip()
    for fid, (name, short) in FIELDS.items():
        if s in (name, str(fid), short):
            return short
    return s


def read_dmon(path: str | Path) -> tuple[list[str], dict[str, str], int, list[tuple[int, str, int, list[str]]]]:
    """(the fields' short names, field → the unit its units line gives (``""`` for none), the units line's
    number (0: none), the rows as (line, entity kind, entity id, value texts)) of a ``dcgmi dmon`` file.

    Raises:
        DumpError: no header, a header that changes, or a row of another width (file:line).
    """
    p = Path(path)
    fields: list[str] | None = None
    starts: list[int] = []
    header_line = units_line = None
    units_n = 0
    units: dict[str, str] = {}
    rows = []
    text = export_text(p, "write dmon's output to a file first", "`dcgmi dmon` output")
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        if ln.lstrip().startswith("#"):
            names = ln.lstrip().lstrip("#").split()
            if not names or names[0].lower() != "entity":
                continue
            if fields is None:
                _unique_fields(names[1:], p, n)
                fields, header_line = names[1:], ln
                starts = [m.start() for m in re.finditer(r"\S+", ln)][1:]
            elif names[1:] != fields:
                raise DumpError(
                    f"{p}:{n}: a header with other fields ({' '.join(names[1:])}) than the one before it: two runs "
                    "in one file?"
                )
            continue
        if fields is None:
            raise DumpError(
                f"{p}:{n}: a line before dmon's `#Entity …` header; give the file `dcgmi dmon -e … > FILE` wrote"
            )
        if re.match(r"^\s*ID\b", ln, re.I):
            if units_line is None:
                units_line, units_n = ln, n
                bounds = starts + [max(len(ln), len(header_line or ""))]
                units = {f: ln[a:b].strip().strip("()") for f, a, b in zip(fields, bounds, bounds[1:])}
            continue
        m = _ROW.match(ln.strip())
        if not m:
            raise DumpError(f"{p}:{n}: not a dmon line (`ENTITY ID value …`): `{ln.strip()[:60]}`")
        vals = ln.strip()[m.end() :].split()
        if len(vals) != len(fields):
            raise DumpError(
                f"{p}:{n}: {len(vals)} value(s) where the header names {len(fields)} field(s) ({' '.join(fields)}): a "
                "line cut short?"
            )
        rows.append((n, m.group("kind"), int(m.group("id")), vals))
    if fields is None:
        raise DumpError(f"{p}: no `#Entity …` header line; give the output of `dcgmi dmon -e FIELDS -d MS`")
    return fields, units, units_n, rows


def _blocks(rows: list[tuple[int, str, int, list[str]]], p: str) -> list[int]:
    """The interval (block) number of each row (module docstring: a GPU's line again starts the next
    interval; the lines of one interval may come in any order).

    Raises:
        DumpError: the file reads two ways — its lines are not in one order in every interval and an
        interval lacks a GPU's line, so which interval a line is of is a guess (naming the line).
    """
    gids = [r[2] for r in rows]
    grouped = _until_repeat(gids)
    ordered = _in_first_order(gids)
    if grouped == ordered or len(gids) == (grouped[-1] + 1) * len(set(gids)):
        return grouped  # one reading, or every interval whole: the only one that is
    i = next(i for i, (a, b) in enumerate(zip(grouped, ordered)) if a != b)
    first = ", ".join(f"GPU {g}" for g in dict.fromkeys(gids))
    raise DumpError(
        f"{p}:{rows[i][0]}: which interval this `GPU {gids[i]}` line is of is ambiguous: the GPUs' lines are not "
        f"in the first interval's order ({first}) in every interval, and some interval lacks a GPU's line "
        f"({len(gids)} GPU lines for {len(set(gids))} GPUs), so the line may start an interval or end the one "
        "before it; give dmon's output whole (a line per GPU in every interval), or cut it to whole intervals"
    )


def _until_repeat(gids: list[int]) -> list[int]:
    """Each row's interval when an interval runs until a GPU comes again (its lines in any order)."""
    out, k, seen = [], -1, set()
    for gid in gids:
        if k < 0 or gid in seen:
            k, seen = k + 1, set()
        seen.add(gid)
        out.append(k)
    return out


def _in_first_order(gids: list[int]) -> list[int]:
    """Each row's interval when every interval lists the GPUs in the first interval's order: a GPU that
    comes again, or earlier in that order, starts the next (an interval may then lack a GPU's line)."""
    order: dict[int, int] = {}
    out, k, last = [], -1, None
    for gid in gids:
        pos = order.setdefault(gid, len(order))
        if last is None or pos <= last:
            k += 1
        out.append(k)
        last = pos
    return out


def _unique_fields(fields: list[str], p: Path, n: int) -> None:
    """Refuse a header naming a field twice: the second column's units and values would be read as the
    first's (``#Entity GRACT SMACT DRAMA POWER SMACT`` was blamed on column 3's unit)."""
    twice = first_repeat(fields)
    if twice is not None:
        f, i, j = twice
        raise DumpError(
            f"{p}:{n}: column {j + 2} ({f}) names the field of column {i + 2} again; dmon prints each "
            "field once (`-e` lists each id once): give the file as dmon wrote it"
        )


def sniff(path) -> bool:
    """Whether ``path`` looks like ``dcgmi dmon`` output: an ``#Entity`` header line in its first 4 kB."""
    head = file_head(path)
    if head is None:
        return False
    return bool(re.search(r"^\s*#\s*Entity\s+[A-Z0-9_]+", head, re.M))


def dmon_capture(
    path: str | Path, gen, notes: list[str] | None = None, sample_period_ns: int | None = None
) -> pa.Table:
    """``path`` (``dcgmi dmon`` output) as a capture of ``gen`` in the collector format (one row per GPU and
    interval; ``sample``, ``timestamp_ns`` = sample × period; one uint64 column per mapped signal), its
    metadata naming the generation and the sample period.

    Raises:
        DumpError: a bad file (module docstring), or no field a signal of ``gen`` maps.
    """
    notes = notes if notes is not None else []
    p = str(path)
    fields, units, units_n, rows = read_dmon(path)
    mapping = {short_name(src): name for name, sig in gen.signals.items() if (src := dict(sig.sources).get("dcgm"))}
    if not mapping:
        raise DumpError(f"{p}: generation `{gen.name}` names no DCGM field (`sources: {{dcgm: …}}` on its signals)")
    used = [f for f in fields if f in mapping]
    if not used:
        raise DumpError(
            f"{p}: none of its fields ({' '.join(fields)}) is a signal's `sources: {{dcgm: …}}` in `{gen.name}`"
        )
    missing = sorted(set(mapping) - set(fields))
    if missing:
        notes.append(
            f"{p}: no field for {', '.join(mapping[f] for f in missing)} (the metrics that read them are unavailable)"
        )
    other = sorted({k for _, k, _, _ in rows if k != "GPU"})
    if other:
        notes.append(f"{p}: entities other than GPUs left out: {', '.join(other)}")
    rows = [r for r in rows if r[1] == "GPU"]
    if not rows:
        raise DumpError(f"{p}: no `GPU N` rows; give dmon's output for GPUs")
    period = sample_period_ns if sample_period_ns is not None else DEFAULT_PERIOD_NS
    notes.append(
        f"{p}: dmon prints no time stamps: sample k placed at k x {period / 1e6:g} ms "
        + (
            "(--sample-period, dmon's -d)"
            if sample_period_ns is not None
            else "(dmon's default -d 1000; give --sample-period MS if you ran dmon with another -d)"
        )
    )
    block = _blocks(rows, p)
    S = block[-1] + 1
    gpus = sorted({r[2] for r in rows})
    ci = {g: i for i, g in enumerate(gpus)}
    C = len(gpus)
    cols: dict[str, pa.Array] = {
        "chip": pa.array(np.tile(np.array(gpus, np.int64), S)),
        "sample": pa.array(np.repeat(np.arange(S, dtype=np.int64), C)),
        "timestamp_ns": pa.array(np.repeat(np.arange(S, dtype=np.int64) * int(period), C)),
    }
    reg = gen.registry
    for f in used:
        sig = gen.signals[mapping[f]]
        j = fields.index(f)
        per = _per(reg, sig, units.get(f, ""), f"{p}:{units_n}", f, j)
        vals = np.full((S, C), np.nan)
        line = np.zeros((S, C), np.int64)
        for (n, _, gid, v), k in zip(rows, block):
            vals[k, ci[gid]] = _value(v[j], p, n, f, j)
            line[k, ci[gid]] = n
        null = ~np.isfinite(vals)
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused just below
            raw = np.rint(np.where(null, 0.0, vals) * per)
        bad = (raw < 0) | (raw >= 2.0**64)
        if bad.any():
            k, c = np.argwhere(bad)[0]
            what = "a negative value" if raw[k, c] < 0 else "a value too large"
            raise DumpError(
                f"{p}:{line[k, c]}: column {j + 2} ({f}) holds {vals[k, c]:g}, {what} for an unsigned 64-bit register "
                f"at `{mapping[f]}`'s scale; dmon prints no such value: give the file as dmon wrote it"
            )
        cols[mapping[f]] = pa.array(raw.reshape(-1).astype(np.uint64), mask=null.reshape(-1))
    meta = {"generation": gen.name, "source": "dcgmi dmon", "sample_period_ns": int(period)}
    return pa.table(cols).replace_schema_metadata({"perfonto": json.dumps(meta)})


def _per(reg, sig, unit: str, p: str, field: str, j: int) -> float:
    """Raw counts of ``sig`` per one of dmon's values in ``unit`` (the signal's own unit when dmon prints none)."""
    if not unit:
        return 1.0 / sig.scale
    expr = _UNIT_ALIASES.get(unit, unit)
    try:
        q = reg.Quantity(1, expr)
        if q.dimensionality != reg.Quantity(1, sig.unit).dimensionality:
            raise ValueError
        return float(q.to(sig.unit).magnitude) / sig.scale
    except Exception:  # noqa: BLE001 - pint raises several kinds of error for a unit it does not know or cannot convert
        raise DumpError(
            f"{p} (the units line): column {j + 2} ({field}) is in `{unit}`, which signal `{sig.name}` "
            f"(in {sig.unit:~}) does not read; map the field to a signal in that unit"
        ) from None


def _value(text: str, p: str, n: int, field: str, j: int) -> float:
    if text.upper() == "N/A":
        return float("nan")
    try:
        v = float(text)
    except ValueError:
        raise DumpError(f"{p}:{n}: column {j + 2} ({field}): `{text[:30]}` is not a number or N/A") from None
    if not np.isfinite(v):
        raise DumpError(f"{p}:{n}: column {j + 2} ({field}): `{text[:30]}` is not a finite number")
    return v


__all__ = ["DEFAULT_PERIOD_NS", "FIELDS", "dmon_capture", "read_dmon", "short_name", "sniff"]
