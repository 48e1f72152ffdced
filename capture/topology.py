"""Where the chips of a fleet are: a topology file mapping (``host``, ``chip``) to ``rack`` and ``pod``.

Columns: ``host`` (required), ``chip`` (optional: a row without a chip places every chip of the host),
``rack`` (required), ``pod`` (optional). Files: CSV (a header row), Parquet, or YAML — a list of rows
(``- {host: h0, rack: r0, pod: p0}``) or a mapping from host to its place (``h0: {rack: r0, pod: p0}``).
Every failure is a ``TopologyError`` naming the file, the row and the column, and what to do.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, field
from pathlib import Path

from .dump_io import DumpError

COLUMNS = ("host", "chip", "rack", "pod")


class TopologyError(DumpError):
    """A topology file that cannot be read, or that does not place a chip of the dump."""


@dataclass
class Topology:
    """``place[(host, chip)]`` and ``place[(host, None)]`` (every chip of the host) → (rack, pod)."""

    path: str
    place: dict[tuple[str, int | None], tuple[str, str | None]] = field(default_factory=dict)

    def of(self, host: str | None, chip: int) -> tuple[str, str | None]:
        """(rack, pod) of a chip. Raises ``TopologyError`` when the file does not place it."""
        key = (str(host) if host is not None else "", int(chip))
        if key in self.place:
            return self.place[key]
        if (key[0], None) in self.place:
            return self.place[(key[0], None)]
        hosts = sorted({h for h, _ in self.place})
        from perfonto.ontology.diagnostics import did_you_mean

        chips = sorted(c for h, c in self.place if h == key[0] and c is not None)
        if chips:  # the host is there, only not this chip: a did-you-mean would name the host itself
            hint = f"the file places chips {', '.join(map(str, chips[:16]))}{' …' if len(chips) > 16 else ''} of it"
        else:
            hint = did_you_mean(key[0], hosts)
        raise TopologyError(
            f"{self.path}: column `host`: no row places host `{key[0]}` chip {key[1]} of the dump"
            + (f" ({hint})" if hint else "")
            + "; add a row for it (a row without `chip` places every chip of a host)"
        )


def _rows(path: Path) -> list[dict]:
    name = path.name.lower()
    try:
        if name.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_unique_keys_loader(path))
            if isinstance(data, dict):
                rows = []
                for h, v in data.items():
                    if not isinstance(v, dict):
                        raise TopologyError(
                            f"{path}: host `{h}`: expected a mapping with `rack` (and `pod`), got {type(v).__name__}"
                        )
                    if "host" in v and str(v["host"]) != str(h):
                        raise TopologyError(
                            f"{path}: host `{h}`: its mapping names another host `{v['host']}`; the key is the host"
                        )
                    rows.append({**v, "host": h})
                return rows
            if isinstance(data, list) and all(isinstance(r, dict) for r in data):
                return data
            raise TopologyError(f"{path}: a YAML topology is a list of rows or a mapping host → {{rack, pod}}")
        if name.endswith((".parquet", ".pq")):
            import pyarrow.parquet as pq

            return pq.read_table(str(path)).to_pylist()
        if name.endswith(".csv"):
            import pyarrow as pa
            import pyarrow.csv as pcsv

            # a name is what the cell says (a pod `NA` or `null` is named so; only an empty cell is none)
            opts = pcsv.ConvertOptions(
                column_types={"host": pa.string(), "rack": pa.string(), "pod": pa.string()},
                strings_can_be_null=True,
                null_values=[""],
            )
            table = pcsv.read_csv(str(path), convert_options=opts)
            twice = sorted({c for c in table.column_names if table.column_names.count(c) > 1})
            if twice:
                raise TopologyError(f"{path}: column `{twice[0]}` appears twice in the header; keep one")
            return table.to_pylist()
    except TopologyError:
        raise
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read the topology ({exc.strerror or exc})") from None
    except Exception as exc:  # a parser's own error: say which file and what it said (printable text only)
        said = "".join(ch if " " <= ch <= "~" else "?" for ch in " ".join(str(exc).split()))[:160]
        raise TopologyError(
            f"{path}: not a readable topology file ({said}); write a header `host,rack,pod` (and `chip` to "
            "place single chips) and one row per host"
        ) from None
    raise TopologyError(f"{path}: unknown file type; a topology is .csv, .parquet or .yaml")


def _name(p: Path, i: int, col: str, v):
    """A host, rack or pod cell as the name it stands for: a string as it is, a whole number without
    ``.0`` (a Parquet float column of 1.0, 2.0 names rack ``1``), a NaN or null as empty (None); a list,
    mapping or true/false is refused: a name is one value."""
    import math

    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TopologyError(
            f"{p}: row {i}: column `{col}` is {v!r}; a {col} is one name (text or a number), not a list or a flag"
        )
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if v.is_integer():
            return str(int(v))
    return str(v)


#: The labels reports give the chips a topology places in no rack or no pod (their node in the fleet
#: tables); a topology that names a rack or pod so is refused, or its chips would merge with those.
UNPLACED = {"rack": "(no rack)", "pod": "(no pod)"}


def _unique_keys_loader(path: Path):
    """A safe YAML loader that refuses a mapping key given twice (PyYAML keeps the last one silently: a host
    listed twice would be placed by its last row alone)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                line = key_node.start_mark.line + 1
                raise TopologyError(f"{path}:{line}: `{key}` is given twice in one mapping; give each host once")
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def read_topology(path: str | Path) -> Topology:
    """Read a topology file (module docstring).

    Raises:
        TopologyError: unreadable file, an unknown or missing column, an empty host or rack, a chip
            that is not a non-negative integer, a chip placed twice, a rack or pod named as ``UNPLACED``.
    """
    from perfonto.ontology.files import exists, is_dir, is_file

    p = Path(path)
    if not is_file(p):
        if is_dir(p):
            raise TopologyError(f"{p}: is a folder; a topology is a file (.csv, .parquet or .yaml)")
        if exists(p) or not os.path.lexists(p):
            raise TopologyError(f"{p}: no such topology file")
        raise TopologyError(f"{p}: a link that leads to no file (dangling or a loop); point it at the topology file")
    rows = _rows(p)
    if not rows:
        raise TopologyError(f"{p}: the topology has no rows; give one row per host (host, rack, pod)")
    topo = Topology(str(p))
    for i, row in enumerate(rows, start=1):
        unknown = sorted(str(k) for k in set(row) - set(COLUMNS))
        if unknown:
            raise TopologyError(f"{p}: row {i}: column `{unknown[0]}` is not a topology column ({', '.join(COLUMNS)})")
        for col in ("host", "rack", "pod"):
            row[col] = _name(p, i, col, row.get(col))
        for col in ("host", "rack"):
            if row.get(col) in (None, ""):
                raise TopologyError(f"{p}: row {i}: column `{col}` is empty; every row names its host and rack")
        for col, label in UNPLACED.items():
            if isinstance(row.get(col), str) and " ".join(row[col].split()).lower() == label:
                raise TopologyError(
                    f"{p}: row {i}: column `{col}` is {row[col]!r}, which reads as {label!r}, the name the reports "
                    f"give chips placed in no {col}; name the {col} otherwise"
                )
        chip = row.get("chip")
        if chip in ("", None):
            chip = None
        else:
            try:
                chip = int(chip)
                if chip < 0 or str(row["chip"]).strip().lstrip("+") not in (str(chip), f"{chip}.0"):
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise TopologyError(
                    f"{p}: row {i}: column `chip` is {row['chip']!r}; a chip is a non-negative integer "
                    "(leave it empty to place every chip of the host)"
                ) from None
        key = (str(row["host"]), chip)
        if key in topo.place:
            raise TopologyError(
                f"{p}: row {i}: column `host`: host `{key[0]}`"
                + (f" chip {chip}" if chip is not None else "")
                + " is placed twice"
            )
        pod = row.get("pod")
        topo.place[key] = (str(row["rack"]), None if pod in (None, "") else str(pod))
    return topo
