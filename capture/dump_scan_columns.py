"""A planned dump's signal columns, for ``capture.dump_scan.plan_dump``: signal → its columns, in the
generation's order. A long dump's signals are read from its ``signal`` column (with the instances its
rows give, checked against the signal's); a wide dump's are its ``name`` and ``name[i]`` columns, a
column that is no signal noted once in the plan (with a "did you mean"), and a signal given both whole
and by instance refused.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from perfonto.ontology.diagnostics import did_you_mean

from .dump import KEYS, check_instances_seen
from .dump_io import two_layouts
from .dump_plan import DumpPlan, _read


def _signal_columns(plan: DumpPlan, names: list[str]) -> dict[str, list[str]]:
    """Signal → its columns, in the generation's order: a long dump's signals (each its own column
    name), a wide dump's ``name`` and ``name[i]`` columns (a column that is no signal is noted)."""
    if plan.long:
        return _long_signal_columns(plan)
    return _wide_signal_columns(plan, names)


def _long_signal_columns(plan: DumpPlan) -> dict[str, list[str]]:
    """The signals and, per signal, the instances the rows of the whole dump give (checked against the
    signal's instances when every part's ``instance`` column is an integer one)."""
    gen = plan.gen
    seen: dict[str, set[int]] = {}
    typed = True  # an `instance` column of another type is refused when the part is read
    for parts in plan.groups.values():
        for part in parts:
            t = _read(part, gen, ["signal", "instance"])
            if "instance" in t.column_names and not pa.types.is_null(t.column("instance").type):
                typed &= pa.types.is_integer(t.column("instance").type)
            else:
                t = pa.table({"signal": t.column("signal"), "instance": pa.nulls(t.num_rows, pa.int64())})
            for name, inst in _signal_instances(t):
                seen.setdefault(name, set()).update([int(inst)] if inst else [])
    for name in sorted(seen.keys() & gen.signals.keys()) if typed else ():
        check_instances_seen(plan.label, gen, name, seen[name])
    return {s: [s] for s in gen.signals if s in seen}


def _signal_instances(t: pa.Table) -> list[tuple[str, str]]:
    """The distinct (signal, instance) pairs of a long table's rows, the instance as text ("" for a
    null one); rows without a signal left out."""
    pairs = pc.unique(
        pc.binary_join_element_wise(
            pc.cast(t.column("signal"), pa.string()),
            pc.cast(t.column("instance"), pa.string()).fill_null(""),
            "\x00",
        )
    )
    out = []
    for pair in pairs.to_pylist():
        if pair is not None:
            name, _, inst = pair.partition("\x00")
            out.append((name, inst))
    return out


def _wide_signal_columns(plan: DumpPlan, names: list[str]) -> dict[str, list[str]]:
    """A wide dump's columns by signal (``name``, ``name[i]``); a column that is neither a key, a string
    column nor a signal's is noted once in ``plan.notes`` (with a "did you mean")."""
    gen = plan.gen
    out: dict[str, list[str]] = {}
    for col in names:
        base, _, idx = col[:-1].rpartition("[") if col.endswith("]") and "[" in col else (col, "", "")
        if idx and not (idx.isdecimal() and len(idx) <= 9):  # an index, not a 5000-digit number
            base = col
        if base in gen.signals and col not in KEYS:
            out.setdefault(base, []).append(col)
        elif (
            col not in KEYS and col not in plan.string_columns
        ):  # as read_counters says it (capture.dump._wide_columns)
            hint = did_you_mean(col, gen.signals)
            note = f"column `{col}` is not a signal of `{gen.name}`; ignored" + (f" ({hint})" if hint else "")
            if note not in plan.notes:
                plan.notes.append(note)
    for s, cols in out.items():
        if s in cols and len(cols) > 1:  # the whole signal and one of its instances: which to read?
            other = next(c for c in cols if c != s)
            raise two_layouts(plan.label, s, other)
    return {s: out[s] for s in gen.signals if s in out}
