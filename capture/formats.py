"""Other tools' captures, one row per format: how to recognise the tool's output, how to read it into
the collector format against a generation, and the shipped catalog read by default
(``perfonto/catalogs/<catalog>``). ``perfonto analyze --format NAME`` picks a row; ``auto`` tries each
row's ``sniff`` in order, and a file none recognises is read as the collector format."""

from __future__ import annotations

import io
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from .dump_io import DumpError


@dataclass(frozen=True)
class Format:
    """One tool's output: ``module`` (in ``perfonto.capture``) with ``sniff(path) -> bool`` and
    ``<reader>(path, generation, notes) -> pyarrow.Table``; ``catalog``: the shipped catalog folder."""

    name: str
    module: str
    reader: str
    catalog: str
    meaning: str

    def sniff(self, path) -> bool:
        return import_module(f"perfonto.capture.{self.module}").sniff(path)

    def read(self, path, gen, notes: list[str], **options):
        """The reader's table; ``options`` (``sample_period_ns``) go to a reader that takes them by name."""
        from inspect import signature

        fn = getattr(import_module(f"perfonto.capture.{self.module}"), self.reader)
        takes = signature(fn).parameters
        return fn(path, gen, notes, **{k: v for k, v in options.items() if k in takes})


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "perf-stat",
            "perf_stat",
            "perf_capture",
            "linux",
            "`perf stat -x,` CSV or `perf stat -j` JSON (with or without -I, -A) or perf stat's report",
        ),
        Format(
            "openmetrics",
            "openmetrics",
            "openmetrics_capture",
            "node",
            "Prometheus/OpenMetrics text: a file of time-stamped samples, or a folder of scrapes named by their time",
        ),
        Format(
            "dcgm",
            "dcgm_dmon",
            "dmon_capture",
            "dcgm",
            "`dcgmi dmon -e FIELDS -d MS` text output (one block of rows per interval; give -d as --sample-period)",
        ),
        Format(
            "ncu",
            "ncu",
            "ncu_capture",
            "ncu",
            "Nsight Compute's `ncu --csv --page raw` (one window per kernel launch, laid back to back)",
        ),
        Format(
            "rocprof",
            "rocprof",
            "rocprof_capture",
            "rocprof",
            "rocprofv3's counter-collection CSV (`--pmc … --output-format csv`; one window per dispatch)",
        ),
    )
}


def raw_per_value(gen, sig) -> tuple[bool, float]:
    """(whether ``sig`` is a time, the raw counts one unit of a tool's value makes): a time is taken to be
    in seconds (perf's msec are converted to seconds first; Prometheus's base unit is the second), then
    converted to the signal's unit; anything else is in the signal's unit; both divided by its ``scale``."""
    reg = gen.registry
    if reg.Quantity(1, sig.unit).dimensionality == reg.Quantity(1, reg.second).dimensionality:
        return True, float(reg.Quantity(1, reg.second).to(sig.unit).magnitude) / sig.scale
    return False, 1.0 / sig.scale


def file_head(path, size: int = 4096) -> str | None:
    """The first ``size`` bytes of ``path`` as text (bytes that are not UTF-8 replaced), for a reader's
    ``sniff``; None when ``path`` is not a regular file (a pipe is read once, by its reader, never by a
    sniff) or cannot be read."""
    try:
        if not Path(path).is_file():
            return None
        with open(path, "rb") as fh:
            return fh.read(size).decode("utf-8", "replace").removeprefix("\ufeff")  # a byte-order mark dropped
    except (OSError, TypeError, ValueError):
        return None


def export_text(path, give: str, what: str) -> str:
    """The whole text of a tool's export at ``path`` (UTF-8, a byte-order mark dropped); messages name
    the file as ``path`` is written.

    Raises:
        DumpError: a pipe or a folder (``give``: what to give instead), UTF-16 or UTF-32 text (convert it:
            ``wide_encoding``), a byte that is not UTF-8 (``what``: the tool's output it should be), or a file
            that cannot be read.
    """
    p = str(path)
    if Path(path).exists() and not Path(path).is_file():
        raise DumpError(f"{p}: not a regular file (a pipe or a folder?); {give}")
    try:
        data = Path(path).read_bytes()
        wide = wide_encoding(data[:64])  # UTF-16 of ASCII without a byte-order mark is valid UTF-8, with NULs
        if wide is not None:
            raise DumpError(_wide_message(p, wide))
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", errors="strict").read()  # as read_text
    except UnicodeDecodeError as exc:
        raise DumpError(f"{p}: byte 0x{exc.object[exc.start]:02x} is not UTF-8; is this {what}?") from None
    except OSError as exc:
        raise DumpError(f"{p}: cannot read ({exc.strerror or exc})") from None


def wide_encoding(head: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` (with ``LE``/``BE`` when there is no byte-order mark to say) when ``head``,
    a file's first bytes, is text in one (what PowerShell's ``>`` and Windows editors write): a byte-order
    mark, or ASCII text with a NUL byte beside every character; else None. Parquet and Arrow files start
    with their magic bytes, never so."""
    for bom, name in (
        (b"\xff\xfe\x00\x00", "UTF-32"),
        (b"\x00\x00\xfe\xff", "UTF-32"),
        (b"\xff\xfe", "UTF-16"),
        (b"\xfe\xff", "UTF-16"),
    ):
        if head.startswith(bom):
            return name
    n = len(head) - len(head) % 2
    if n < 4:
        return None
    ascii_ = all(0x09 <= b <= 0x7E for b in head[:n] if b)
    if ascii_ and all(b == 0 for b in head[1:n:2]) and all(head[0:n:2]):
        return "UTF-16LE"
    if ascii_ and all(b == 0 for b in head[0:n:2]) and all(head[1:n:2]):
        return "UTF-16BE"
    return None


def _wide_message(p: str, wide: str) -> str:
    return (
        f"{p}: the file is {wide} text, not UTF-8 (PowerShell's `>` and some editors write it); convert it to UTF-8, "
        f"e.g. `iconv -f {wide} -t UTF-8 {p} > {p}.utf8` (or PowerShell's `Out-File -Encoding utf8`), and give that"
    )


#: perf stat's first line in a file it writes (``-o FILE``): ``# started on Mon Dec  1 10:00:00 2025``
_PERF_STARTED = "# started on "


def _refuse_unreadable(path) -> None:
    """For ``detect``, after no tool's ``sniff`` recognised ``path``: refuse a regular file no reader can
    read, saying what it is, before it is taken for a collector-format dump (whose messages would talk of
    CSV columns and generations): an empty file, UTF-16/UTF-32 text, or perf stat's header without a
    counter line.

    Raises:
        DumpError: naming the file, what it is and what to do.
    """
    p = str(path)
    try:
        if not Path(path).is_file():
            return
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except (OSError, TypeError, ValueError):
        return  # the reader names what the system refused
    wide = wide_encoding(head[:64])
    if wide is not None:
        raise DumpError(_wide_message(p, wide))
    text = head.decode("utf-8", "replace").removeprefix("\ufeff")
    if not text.strip():
        said = "an empty file (0 bytes)" if not head else "only blank lines"
        raise DumpError(
            f"{p}: {said}: neither a tool's capture nor a collector-format dump; was the capture cut short or "
            "written elsewhere? Give the file the tool wrote (`perf stat -x, -o FILE`, `dcgmi dmon … > FILE`, "
            "`ncu --csv --page raw … > FILE`, rocprofv3's counter_collection.csv, scrapes), with --format NAME "
            "to name its tool"
        )
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines[0].startswith(_PERF_STARTED) and len(head) < 4096 and all(ln.lstrip().startswith("#") for ln in lines):
        raise DumpError(
            f"{p}: perf stat's header (`{lines[0].strip()[:60]}`) and no counter line: perf stat wrote nothing "
            "it counted (the command failed or was stopped before the first interval, or the events were not "
            "opened?); give the file of a perf stat run that counted, e.g. `perf stat -x, -o FILE -- CMD`"
        )


def detect(path) -> str:
    """The format of ``path``: the first ``FORMATS`` row whose ``sniff`` recognises it; ``perf-stat`` for a
    file that starts with perf stat's ``# started on`` line (its reader names the line it cannot read);
    else ``collector``.

    Raises:
        DumpError: a regular file that no reader can read: empty, UTF-16/UTF-32 text, or perf stat's header
            alone (``_refuse_unreadable``).
    """
    for f in FORMATS.values():
        if f.sniff(path):
            return f.name
    _refuse_unreadable(path)
    head = file_head(path)
    if head is not None and head.lstrip().startswith(_PERF_STARTED):
        return "perf-stat"
    return "collector"


def default_catalog(name: str, path=None) -> str:
    """The folder of the shipped catalog a format is read against by default (the format's module may
    choose by the capture's content: ``catalog_of(path)``)."""
    from importlib import resources

    mod = import_module(f"perfonto.capture.{FORMATS[name].module}")
    folder = mod.catalog_of(path) if path is not None and hasattr(mod, "catalog_of") else FORMATS[name].catalog
    return str(resources.files("perfonto").joinpath("catalogs", folder))


__all__ = [
    "FORMATS",
    "Format",
    "default_catalog",
    "detect",
    "export_text",
    "file_head",
    "raw_per_value",
    "wide_encoding",
]
