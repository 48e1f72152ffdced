"""Read the tables of a capture from wherever a collector left them: one file, a folder or a glob of
Parquet, Arrow IPC (``.arrow``, ``.ipc``, ``.feather``) or CSV files, or an Arrow table in memory.

A folder is read recursively; a path component ``key=value`` (Hive partitioning, as Spark, DuckDB
and pyarrow write it) becomes a string column ``key`` of that file's rows unless the file has that
column itself. The parts are concatenated in sorted path order. Every failure is a ``DumpError``
naming the file and, where the format says, the row and column, and what to do.
"""

from __future__ import annotations

import glob as globmod
import json
import re
import sys
from urllib.parse import unquote
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.ipc as pipc
import pyarrow.parquet as pq
from perfonto.ontology.errors import PerfontoError

PARQUET = (".parquet", ".pq")
ARROW = (".arrow", ".ipc", ".feather")
CSV = (".csv",)
SUFFIXES = PARQUET + ARROW + CSV
MAX_FILES = 200_000


class DumpError(PerfontoError, ValueError):
    """A capture that cannot be read as the generation's signals (the message says what and how to fix)."""


@dataclass
class Loaded:
    """A capture table: ``table`` (all parts), ``label`` (file, folder or glob, for messages),
    ``files`` (the parts read), ``meta`` (the ``perfonto`` key of the first part's schema metadata),
    ``rows`` (each part's number of rows, in ``files`` order)."""

    table: pa.Table
    label: str
    files: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    rows: list[int] = field(default_factory=list)


#: What a refusal of an unrecognised file adds: the other tools' captures perfonto reads, found by their
#: content (an empty file, or a folder of empty scrapes, has none to recognise).
OTHER_TOOLS = (
    "; perf stat output and Prometheus/OpenMetrics scrapes (a file, or a folder of .prom files) are recognised "
    "by their content (--format perf-stat or openmetrics names them; an empty file has nothing to recognise)"
)


def damaged(path, exc: BaseException) -> DumpError:
    """The ``DumpError`` for a part whose data cannot be decoded although its footer could (a damaged page,
    a truncated copy): the file, what the reader said, what to do."""
    said = " ".join(str(exc).split())[:200] or type(exc).__name__
    return DumpError(f"{path}: cannot be read ({said}); the file is damaged: copy or write it again, or leave it out")


def is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def parts_of(source: str | Path, what: str) -> tuple[str, list[Path]]:
    """The files behind ``source`` (a file, a folder read recursively, or a glob), sorted.

    Raises:
        DumpError: nothing there, a folder without capture files, a device or other non-regular file.
    """
    text = str(source)
    if is_glob(text) and not Path(text).exists():
        files = sorted(Path(p) for p in globmod.glob(text, recursive=True) if Path(p).is_file())
        if not files:
            raise DumpError(f"{text}: no file matches this pattern; check the path of the {what}")
        return text, files
    p = Path(text)
    try:
        if p.is_dir():
            files = []
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.name.lower().endswith(SUFFIXES) and not f.name.startswith((".", "_")):
                    files.append(f)
                    if len(files) > MAX_FILES:
                        raise DumpError(f"{p}: more than {MAX_FILES} files; point at a narrower folder")
            if not files:
                raise DumpError(f"{p}: the folder holds no {', '.join(SUFFIXES)} files; is it the {what}?{OTHER_TOOLS}")
            return text, files
        if not p.exists():
            raise DumpError(f"{p}: no such file or folder; check the path of the {what}")
        if not p.is_file():
            raise DumpError(f"{p}: not a regular file (a device or a pipe?); give the {what} as a file or folder")
    except OSError as exc:
        raise DumpError(f"{text}: cannot read ({exc.strerror or exc}); check the path of the {what}") from None
    return text, [p]


def _partition_columns(path: Path, root: Path | None) -> dict[str, str]:
    rel = path.parent.relative_to(root).parts if root is not None and path.is_relative_to(root) else path.parent.parts
    out = {}
    for part in rel:
        if "=" in part:
            k, _, v = part.partition("=")
            if k:
                out[k] = unquote(
                    v
                )  # Hive's escaping (``host=a%2Fb`` is host ``a/b``), as Spark, DuckDB and pyarrow read it
    return out


#: The folder keys that name rows (a chip is (host, chip)): a file's own column must agree with them.
KEY_PARTITIONS = ("host", "chip")


def partition_array(key: str, value: str, n: int) -> pa.Array:
    """A Hive partition's value as a column of ``n`` rows: ``chip=3`` an integer (chips are integers, as
    Spark and DuckDB infer it), any other key a string (``host=101`` names a host)."""
    if key == "chip" and re.fullmatch(r"-?\d{1,18}", value):
        return pa.array([int(value)] * n, pa.int64())
    return pa.array([value] * n, pa.string())


def check_partition(path: Path, key: str, value: str, column) -> None:
    """Refuse a file whose own ``key`` column disagrees with its folder's ``key=value``: which one a reader
    takes differs (perfonto reads the column, DuckDB's hive_partitioning the folder), so the two would name
    the rows differently without a word (a data engineer's host=outer folder holding host `inner`)."""
    import pyarrow.compute as pc

    seen = {str(x) for x in pc.unique(column).to_pylist() if x is not None}
    if seen and seen != {value}:
        other = ", ".join(sorted(seen)[:3]) + (" …" if len(seen) > 3 else "")
        raise DumpError(
            f"{path}: its folder says {key}={value} but its `{key}` column holds {other}; make them agree, or "
            f"drop the column or the {key}=… folder"
        )


def read_one(path: Path, what: str, csv_types: dict[str, pa.DataType] | None = None) -> pa.Table:
    """One file by its suffix (CSV with ``csv_types`` for the columns it names).

    Raises:
        DumpError: unreadable, not of its suffix's format, a CSV value that does not convert.
    """
    name = path.name.lower()
    try:
        if name.endswith(PARQUET):
            return pq.ParquetFile(str(path)).read()  # as written: the dataset reader would read dots as nesting
        if name.endswith(ARROW):
            with pa.memory_map(str(path)) as src:
                try:
                    return pipc.open_file(src).read_all()
                except pa.ArrowInvalid:
                    src.seek(0)
                    return pipc.open_stream(src).read_all()
        if name.endswith(CSV):
            # an empty cell is the one null (a register not read); "n/a", "NULL", "nan" and the other markers
            # pyarrow would take for null are values, refused where they do not convert (issue 28)
            opts = pcsv.ConvertOptions(column_types=csv_types or {}, strings_can_be_null=True, null_values=[""])
            try:
                table = pcsv.read_csv(str(path), convert_options=opts)
            except pa.ArrowInvalid as exc:
                located = _csv_value_error(path, exc, csv_types or {}) or _csv_row_error(path, exc, opts)
                if located is None:
                    raise
                raise DumpError(located) from None
            try:
                table.schema.names  # pyarrow checks UTF-8 in values, not in the header
            except UnicodeDecodeError as exc:
                raise DumpError(
                    f"{path}: the CSV header is not UTF-8 (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8"
                ) from None
            return table
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        msg = " ".join(str(exc).split())[:400]
        raise DumpError(
            f"{path}: not a readable {_kind(name)} {what} ({msg}); check the file, or write it again"
        ) from None
    raise DumpError(f"{path}: unknown file type; a {what} is {', '.join(SUFFIXES)}{OTHER_TOOLS}")


_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to (\w+): invalid value")
_WHAT = {
    "uint64": "is not an unsigned integer (raw registers are unsigned integer counts)",
    "int64": "is not an integer",
    "double": "is not a number",
}


def _csv_value_error(path: Path, exc: pa.ArrowInvalid, types: dict[str, pa.DataType]) -> str | None:
    """The message for a CSV value pyarrow could not convert, located: "FILE: row N, column `name`:
    value 'x' is not …" (N counts the rows below the header from 1). pyarrow names only the column's
    index, so that one column is read again as strings and the first value that does not cast is
    found by bisection (pyarrow's own conversion, no parser of ours). None when ``exc`` is another
    error, or the value cannot be found again."""
    m = _CONVERSION.search(str(exc))
    if m is None:
        return None
    try:
        names = pcsv.open_csv(str(path)).schema.names
        col = names[int(m.group(1))]
        typ = types[col]
        text = (
            pcsv.read_csv(
                str(path),
                convert_options=pcsv.ConvertOptions(
                    include_columns=[col], column_types={col: pa.string()}, strings_can_be_null=True, null_values=[""]
                ),
            )
            .column(col)
            .combine_chunks()
        )
    except (pa.ArrowInvalid, OSError, IndexError, KeyError, UnicodeDecodeError):  # a header that is not UTF-8
        return None
    trimmed = pc.utf8_trim_whitespace(text)  # the CSV reader trims, a cast does not

    def casts(n: int) -> bool:
        try:
            pc.cast(trimmed.slice(0, n), typ)
            return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False

    if casts(len(text)):
        return None
    lo, hi = 0, len(text)  # casts(lo) and not casts(hi): the first bad value is at hi - 1 when hi = lo + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if casts(mid) else (lo, mid)
    try:
        value = str(text[lo].as_py())
    except UnicodeDecodeError:
        return None
    shown = value if len(value) <= 40 else value[:40] + "…"
    what = _WHAT.get(str(typ), f"does not convert to {typ}")
    return f"{path}: row {lo + 1}, column `{col}`: value {shown!r} {what}"


def _csv_row_error(path: Path, exc: pa.ArrowInvalid, opts) -> str | None:
    """The message for a CSV row with too few or too many fields, located: "FILE: row N: K fields where
    the header has M columns" (N counts the rows below the header from 1, as ``_csv_value_error``).
    pyarrow names the row only when it reads on one thread, so the file is read again that way, with
    an invalid-row handler that keeps the first bad row. None when ``exc`` is another error."""
    if "Expected" not in str(exc) or "columns, got" not in str(exc):
        return None
    bad, undecodable = [], []

    def keep(row):
        bad.append(row)
        return "error"

    def hook(unraisable):  # pyarrow decodes the row as UTF-8 before the handler sees it; a failure
        undecodable.append(unraisable.exc_value)  # is "unraisable" and would print a traceback

    saved, sys.unraisablehook = sys.unraisablehook, hook
    try:
        pcsv.read_csv(
            str(path),
            read_options=pcsv.ReadOptions(use_threads=False),
            convert_options=opts,
            parse_options=pcsv.ParseOptions(invalid_row_handler=keep),
        )
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError):
        pass
    finally:
        sys.unraisablehook = saved
    if not bad and any(isinstance(e, UnicodeDecodeError) for e in undecodable):
        msg = " ".join(str(exc).split())[:200]
        return (
            f"{path}: a row has another number of fields than the header has columns, and bytes that are not UTF-8 "
            f"({msg}); save the file as UTF-8, and give every row every column (leave a value empty for a null)"
        )
    if not bad or bad[0].number is None:
        return None
    row = bad[0]
    text = row.text if len(row.text) <= 60 else row.text[:60] + "…"
    return (
        f"{path}: row {row.number - 1}: {row.actual_columns} field(s) where the header has {row.expected_columns} "
        f"column(s) ({text!r}); every row gives every column (leave a value empty for a null)"
    )


def _kind(name: str) -> str:
    return "Parquet" if name.endswith(PARQUET) else "Arrow IPC" if name.endswith(ARROW) else "CSV"


def _meta(table: pa.Table, label: str) -> dict:
    md = table.schema.metadata or {}
    if b"perfonto" not in md:
        return {}
    try:
        meta = json.loads(md[b"perfonto"])
    except ValueError:
        raise DumpError(f"{label}: the `perfonto` schema metadata is not JSON; rewrite it or drop it") from None
    if not isinstance(meta, dict):
        raise DumpError(
            f"{label}: the `perfonto` schema metadata is JSON {type(meta).__name__}, not an object; it is an object "
            "of the collector format's keys (collector_format, generation, sample_period_ns, …): rewrite it or drop it"
        )
    _check_meta(label, meta)
    return meta


def check_unique_columns(label, names: list[str]) -> None:
    """Every column of a dump part named once (pyarrow cannot select a column given twice).

    Raises:
        DumpError: naming the file and the first column given twice."""
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise DumpError(
            f"{label}: column `{twice[0]}` appears {names.count(twice[0])} times"
            + (f" (and {len(twice) - 1} more column(s) twice)" if len(twice) > 1 else "")
            + ", a duplicate column; a dump names each column once: keep one of them"
        )


def first_repeat(names: list[str]) -> tuple[str, int, int] | None:
    """(name, its first position, its second) of the first name ``names`` holds twice, in the order the
    second one comes; None when each is there once (a tool's header naming a column twice)."""
    first: dict[str, int] = {}
    for j, n in enumerate(names):
        if n in first:
            return n, first[n], j
        first[n] = j
    return None


def two_layouts(label, signal: str, other: str) -> DumpError:
    """The error for a signal given both whole (column ``signal``) and per instance (``other``, a
    ``name[i]`` column)."""
    return DumpError(
        f"{label}: signal `{signal}` is given both as column `{signal}` and as `{other}`; a dump gives a "
        "signal one way: one column (a list of its instances, or a scalar) or one `name[i]` column per "
        "instance: drop the other"
    )


def _check_meta(label: str, meta: dict) -> None:
    """The collector-format version (this reader: 1; a newer one is refused) and ``duration_ns`` (a
    non-negative count of ns) of a dump's ``perfonto`` metadata; ``sample_period_ns`` is checked where it
    is read (``capture.dump._period``), the generation against the one asked for.

    Raises:
        DumpError: naming the file, the key and what to do."""
    version = meta.get("collector_format", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DumpError(f"{label}: metadata collector_format is {version!r}; it is the format's version number (1)")
    if version > 1:
        raise DumpError(
            f"{label}: written in collector format {version}; this perfonto reads format 1 — upgrade perfonto"
        )
    dur = meta.get("duration_ns")
    if dur is not None and (
        isinstance(dur, bool) or not isinstance(dur, (int, float)) or not dur >= 0 or dur == float("inf")
    ):
        raise DumpError(
            f"{label}: metadata duration_ns is {json.dumps(dur)[:40]}; it is the capture's duration in ns "
            "(a number ≥ 0): fix it or drop the key"
        )


def load(source, what: str = "counter dump", csv_types: dict[str, pa.DataType] | None = None) -> Loaded:
    """Read ``source`` (a path, folder, glob or ``pa.Table``) into one table.

    Raises:
        DumpError: see ``parts_of`` and ``read_one``; parts whose columns have conflicting types.
    """
    if isinstance(source, pa.Table):
        return Loaded(source, "<table>", [], _meta(source, "<table>"), [source.num_rows])
    label, files = parts_of(source, what)
    root = Path(label) if Path(label).is_dir() else None
    tables = []
    meta: dict = {}
    for f in files:
        t = read_one(f, what, csv_types)
        part_meta = _meta(t, str(f))  # every part's metadata checked, the first that has some kept
        if not meta:
            meta = part_meta
        for k, v in _partition_columns(f, root).items():
            if k not in t.column_names:
                t = t.append_column(k, partition_array(k, v, t.num_rows))
            elif k in KEY_PARTITIONS:  # a folder key no column of the dump is read for is not checked
                check_partition(f, k, v, t.column(k))
        tables.append(t.replace_schema_metadata(None))
    if len(tables) == 1:
        table = tables[0]
    else:
        try:
            table = pa.concat_tables(tables, promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DumpError(
                f"{label}: the parts have conflicting columns ({' '.join(str(exc).split())[:300]}); "
                "write every part with the same schema"
            ) from None
    return Loaded(table, label, [str(f) for f in files], meta, [t.num_rows for t in tables])


def rows_counted(p) -> str:
    """How a message about ``p`` numbers its rows: after a text file's header line, or from the first row."""
    text = str(p).lower().endswith((".csv", ".tsv", ".txt", ".csv.gz"))
    return "rows counted from 1 after the header" if text else "rows counted from 1"
