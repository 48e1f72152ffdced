"""A counter dump of any size, read in pieces: one chip group (a host) at a time, and within it one
time range at a time, each piece a ``CounterDump`` whose windows are exactly those of the whole dump.

``plan_dump`` looks at the files (schemas, Hive partitions, row groups, the key columns) without
reading the registers: which hosts there are (a ``host=…`` folder, or the files' ``host`` column),
the generation every part was written for (two generations in one dump is an error naming both
files), and the sampling grid of the whole dump (its length, the first sample number), so that every
piece is placed on the grid as ``capture.dump.read_counters`` would place the whole dump.
The key columns are read here, once, and every host's placement kept (``HostGrid``);
``capture.pieces.iter_chunks`` then reads the register columns in pieces of about ``chunk_rows`` rows.

The plan itself is ``capture.dump_plan.DumpPlan``; ``plan_dump`` finds the parts (``dump_scan_parts``),
the signal columns (``dump_scan_columns``) and the grid (``dump_scan_grid``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from perfonto.ontology.resolved import Generation

from .dump_host_grid import missing_chip_notes
from .dump_io import DumpError, parts_of
from .dump_plan import DumpPlan
from .dump_scan_columns import _signal_columns
from .dump_scan_grid import _scan_grid
from .dump_scan_parts import _add_file, _check_parts, _check_same_columns, _Found, _new_plan, _schema

CHUNK_ROWS = 32_768


def plan_dump(
    source, gen: Generation, *, timestamp_unit: str | None = None, sample_period_ns: int | None = None
) -> DumpPlan:
    """Plan the reading of ``source`` (a file, a folder tree — Hive-partitioned or not —, a glob or a
    ``pa.Table``) in pieces; see the module docstring.

    Raises:
        DumpError: as ``read_counters`` — and parts written for different generations, parts that
            name hosts beside parts that do not.
    """
    given = source if isinstance(source, pa.Table) else None
    label, files = ("<table>", [Path("<table>")]) if given is not None else parts_of(source, "counter dump")
    root = Path(label) if given is None and Path(label).is_dir() else None
    found = _Found()
    for f in files:
        schema, ends, table = (given.schema, None, given) if given is not None else _schema(f, gen)
        _add_file(found, f, schema, ends, table, root, gen)
    _check_parts(label, gen, found)
    plan = _new_plan(label, gen, found, timestamp_unit, sample_period_ns)
    plan.columns = _signal_columns(plan, found.names)
    if not plan.columns:
        names = found.names
        topo = set(names) <= {"host", "chip", "rack", "pod"}
        raise DumpError(
            f"{label}: no column is a signal of generation `{gen.name}` (columns: {', '.join(names[:10])}"
            f"{' …' if len(names) > 10 else ''}); "
            + (
                "these are a topology's columns: give that file with --topology and point at the counter dump"
                if topo
                else "was the dump written for another generation?"
            )
        )
    plan.absent = tuple(n for n in gen.signals if n not in plan.columns)
    if not plan.long:
        _check_same_columns(plan, found)
    _scan_grid(plan)
    plan.notes += missing_chip_notes(plan)
    return plan
