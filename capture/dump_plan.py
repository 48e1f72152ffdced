"""The plan of a counter dump read in pieces (``capture.dump_scan.plan_dump`` makes it): ``DumpPlan``,
its parts (``Part``: one file's rows of one host), each host's planned placement on the dump's grid
(``host_grid``), and ``_read``, which reads columns of a part as the plan found it (all its row groups or
some, a CSV or Arrow IPC part read once, its Hive partition columns added).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from perfonto.ontology.resolved import Generation

from .dump import csv_types
from .dump_host_grid import HostGrid
from .dump_io import damaged, partition_array, read_one


@dataclass
class Part:
    """One file's rows of one host: ``rows`` (file row numbers) when the file holds several hosts."""

    path: Path
    partition: dict[str, str]
    host: str | None
    rows: np.ndarray | None = None
    row_group_ends: np.ndarray | None = None  # Parquet: cumulative row counts of its row groups
    table: pa.Table | None = (
        None  # a CSV or Arrow IPC part (read once: CSV parsed, Arrow memory-mapped) or a table given
    )


@dataclass
class DumpPlan:
    """What ``plan_dump`` found: ``groups`` (host → parts, hosts in sorted order; one group keyed None
    for a dump without hosts), ``n_grid`` grid points, ``columns`` (signal → its column names, wide
    layout; the signal itself for a long one), ``chips`` per group, ``absent`` signals and ``notes``."""

    label: str
    gen: Generation
    meta: dict
    period: int
    stamp: str
    unit: str | None
    long: bool
    groups: dict[str | None, list[Part]]
    n_grid: int
    sample_base: int | None
    columns: dict[str, list[str]]
    absent: tuple[str, ...]
    chips: dict[str | None, int] = field(default_factory=dict)
    chip_numbers: dict[str | None, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    grids: dict = field(default_factory=dict)  # host -> HostGrid (the planned placement of its rows)
    string_columns: set = field(
        default_factory=set
    )  # columns of a string type (Hive partitions, labels: ignored silently)
    multiplex: object | None = None  # capture.multiplex.Multiplex: times enabled and running, groups (when given)

    @property
    def rows(self) -> int:
        """Sample rows of the whole dump on the grid (chips × grid points), the slots a reader sizes for."""
        return sum(self.chips.values()) * self.n_grid

    @property
    def rows_present(self) -> int:
        """Sample rows the dump holds (``rows`` less the grid points its chips have no sample at)."""
        return sum(int(np.sum(g.grid.counts)) for g in self.grids.values())


def _read(part: Part, gen: Generation, columns: list[str], row_groups: list[int] | None = None) -> pa.Table:
    """Columns of a part (all its row groups, or the ones given), with its Hive partition columns."""
    if part.table is not None:
        t = part.table.select([c for c in columns if c in part.table.column_names])
    elif part.row_group_ends is not None:
        from .pieces import open_parquet

        pf = open_parquet(part.path)
        have = set(pf.schema_arrow.names)
        cols = [c for c in columns if c in have]
        try:
            t = pf.read_row_groups(
                row_groups if row_groups is not None else list(range(len(part.row_group_ends))),
                columns=cols,
                use_threads=False,
            )
        except (OSError, pa.ArrowException) as exc:  # a page that does not decode: name the part
            raise damaged(part.path, exc) from None
    else:
        t = read_one(part.path, "counter dump", csv_types(gen))
        t = t.select([c for c in columns if c in t.column_names])
    for k, v in part.partition.items():
        if k in columns and k not in t.column_names:
            t = t.append_column(k, partition_array(k, v, t.num_rows))
    return t


def host_grid(plan: DumpPlan, host) -> HostGrid:
    """The planned placement of ``host``'s rows (``plan_dump`` computed it from the key columns)."""
    return plan.grids[host]
