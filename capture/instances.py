"""Instance axes whose size comes from the data (``instances: {cpu: from_data}``, issue 27): which of a
generation's ``from_data`` axes the signals a reader fills lie on, the instances a capture holds, and
the table columns that place them.

A reader finds the instances present in its capture (the CPUs of ``perf stat -A``, the values of
node_exporter's ``cpu`` label, the width of a collector dump's per-instance columns) and names them by
their labels, in instance order; ``ontology.derive.with_instances`` then sizes the axis to that count,
the catalog is compiled against it (``analysis.capture.capture_instances``, ``perfonto.job``) and the
reader places each instance at its position among the labels. Rollups (``sum``, ``avg`` over the
axis) are then over the instances present.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from .dump_io import ARROW, CSV, PARQUET, DumpError, parts_of


def axis_of(gen, signals, where: str) -> tuple[str, tuple[str, ...] | None] | None:
    """The ``from_data`` axis the ``signals`` (full names) of ``gen`` lie on, as ``(axis, labels)``:
    labels None while no capture has fixed it (the axis still has the placeholder size 1), else the
    labels ``with_instances`` fixed. None when no signal's block has a ``from_data`` axis.

    Raises:
        DumpError: (``where`` names the capture) the signals lie on several ``from_data`` axes, or on one
            beside another axis, or some do and some do not: a reader places one axis of instances.
    """
    found: dict[str, list[str]] = {}
    plain: list[str] = []
    for s in signals:
        info = gen.blocks.get(gen.signals[s].block, {})
        data_axes = tuple(info.get("from_data", ())) + tuple(info.get("labels", {}))
        if not data_axes:
            plain.append(s)
            continue
        if len(data_axes) != 1 or len(gen.signals[s].axes) != 1:
            raise DumpError(
                f"{where}: signal `{s}` lies on the axes {', '.join(a for a, _ in gen.signals[s].axes)}; a capture "
                "read from another tool places one instance axis, sized by the data (`from_data`)"
            )
        found.setdefault(data_axes[0], []).append(s)
    if not found:
        return None
    if len(found) > 1 or plain:
        first = sorted(found)[0]
        other = f"signal `{plain[0]}` on none" if plain else f"signal `{found[sorted(found)[1]][0]}` on another"
        raise DumpError(
            f"{where}: signal `{found[first][0]}` lies on the instance axis `{first}` (sized by the data), {other}; "
            "a capture read from another tool places one axis of instances for all of the signals it fills"
        )
    axis = next(iter(found))
    labels = next((info["labels"][axis] for info in gen.blocks.values() if axis in info.get("labels", {})), None)
    return axis, labels


def ordered_labels(labels) -> tuple[str, ...]:
    """Labels in instance order: numerically when every label is an integer (CPUs 0, 1, …, 10), else as
    they came (their order of first appearance)."""
    labels = list(dict.fromkeys(str(x) for x in labels))
    if labels and all(x.isascii() and x.isdigit() for x in labels):
        # numeric order without int(): a label of thousands of digits is still a label, not a crash
        return tuple(sorted(labels, key=lambda x: (len(x.lstrip("0")), x.lstrip("0"), x)))
    return tuple(labels)


def check_labels(where: str, axis: str, have: tuple[str, ...], fixed: tuple[str, ...] | None) -> tuple[str, ...]:
    """The labels to place: ``have`` (what the capture holds), checked against the labels the catalog was
    compiled for (``fixed``), when it was.

    Raises:
        DumpError: the capture holds no instance, or other instances than the catalog was sized for.
    """
    if not have:
        raise DumpError(
            f"{where}: no instance of the axis `{axis}`, whose size comes from the data (`from_data`): the "
            "capture holds no line or series for it"
        )
    if fixed is not None and tuple(fixed) != tuple(have):
        raise DumpError(
            f"{where}: the catalog was sized for {len(fixed)} `{axis}` instance(s) ({', '.join(fixed[:8])}) but the "
            f"capture holds {len(have)} ({', '.join(have[:8])}); compile the catalog for this capture's instances"
        )
    return have


def flat_columns(cols: dict[str, pa.Array], sig: str, total: np.ndarray, null: np.ndarray) -> None:
    """Add signal ``sig``'s per-instance columns ``sig[i]`` (the collector format's flat layout) to
    ``cols``: ``total`` and ``null`` are (rows, instances) arrays of raw values and nulls."""
    for i in range(total.shape[1]):
        cols[f"{sig}[{i}]"] = pa.array(total[:, i].astype(np.uint64), mask=null[:, i])


_FLAT = re.compile(r"^(?P<base>.+)\[(?P<i>\d{1,9})\]$")  # an index, not a 5000-digit number


def _schema_of(path: Path) -> pa.Schema | list[str]:
    """The column names (CSV: the header) or Arrow schema of one dump file."""
    name = path.name.lower()
    try:
        if name.endswith(PARQUET):
            import pyarrow.parquet as pq

            return pq.read_schema(str(path))
        if name.endswith(ARROW):
            with pa.memory_map(str(path)) as src:
                try:
                    return pa.ipc.open_file(src).schema
                except pa.ArrowInvalid:
                    src.seek(0)
                    return pa.ipc.open_stream(src).schema
        if name.endswith(CSV):
            with open(path, encoding="utf-8-sig", errors="replace") as fh:
                return [c.strip().strip('"') for c in fh.readline().rstrip("\r\n").split(",")]
    except (OSError, pa.ArrowInvalid) as exc:
        raise DumpError(f"{path}: cannot read its columns ({' '.join(str(exc).split())[:200]})") from None
    raise DumpError(f"{path}: not a Parquet, Arrow or CSV counter dump")


def collector_instances(source, gen) -> dict[str, tuple[str, ...]]:
    """The ``from_data`` axes of ``gen`` sized by a collector-format dump (its first file's columns): per
    axis, the labels ``0`` … ``n-1`` of the ``n`` instances its signals' columns hold — a scalar column one,
    a fixed-size list its size, ``name[0]`` … ``name[n-1]`` columns ``n``. Another table (``pa.Table``)
    is read the same way. Long-layout dumps (one row per instance) are not sized: see the error.

    Raises:
        DumpError: a ``from_data`` axis none of whose signals has a column, signals of one axis with
            different widths, or a long-layout dump (naming the file).
    """
    from perfonto.ontology.derive import from_data_axes

    todo = from_data_axes(gen)
    if not todo:
        return {}
    if isinstance(source, pa.Table):
        label, names, schema = "<table>", source.column_names, source.schema
    else:
        _, files = parts_of(source, "counter dump")
        label = str(files[0])
        got = _schema_of(files[0])
        schema = got if isinstance(got, pa.Schema) else None
        names = list(got.names) if isinstance(got, pa.Schema) else got
    if "signal" in names and "instance" in names:
        raise DumpError(
            f"{label}: a long-layout dump (one row per instance) for a generation whose instance axes are sized by "
            "the data (`from_data`): write the wide layout (a list or `name[i]` columns per signal) so that the "
            "number of instances can be read"
        )
    width: dict[str, dict[str, int]] = {}
    flat: dict[str, set[int]] = {}
    for n in names:
        m = _FLAT.match(n)
        if m:
            flat.setdefault(m.group("base"), set()).add(int(m.group("i")))
    for b, axes in todo.items():
        for s in (k for k, v in gen.signals.items() if v.block == b):
            if s in flat:
                width.setdefault(axes[0], {})[s] = max(flat[s]) + 1
            elif s in names:
                t = schema.field(s).type if schema is not None else None
                width.setdefault(axes[0], {})[s] = (
                    t.list_size if t is not None and pa.types.is_fixed_size_list(t) else 1
                )
    out = {}
    for axes in todo.values():
        for a in axes:
            w = width.get(a, {})
            if not w:
                raise DumpError(
                    f"{label}: no column of a signal on the instance axis `{a}`, whose size comes from the data "
                    "(`from_data`): the dump holds no instance of it"
                )
            if len(set(w.values())) > 1:
                raise DumpError(
                    f"{label}: the signals on the instance axis `{a}` hold different numbers of instances ("
                    + ", ".join(f"`{s}` {n}" for s, n in sorted(w.items())[:6])
                    + "); every signal of the axis holds the same instances"
                )
            out[a] = tuple(str(i) for i in range(next(iter(w.values()))))
    return out


__all__ = ["axis_of", "check_labels", "collector_instances", "flat_columns", "ordered_labels"]
