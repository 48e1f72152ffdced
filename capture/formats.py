"""Other tools' captures, one row per format: how to recognise the tool's output, how to read it into
the collector format against a generation, and the shipped catalog read by default
(``perfonto/catalogs/<catalog>``). ``perfonto analyze --format NAME`` picks a row; ``auto`` tries each
row's ``sniff`` in order, and a file none recognises is read as the collector format."""

from __future__ import annotations

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
        DumpError: a pipe or a folder (``give``: what to give instead), a byte that is not UTF-8
            (``what``: the tool's output it should be), or a file that cannot be read.
    """
    p = str(path)
    if Path(path).exists() and not Path(path).is_file():
        raise DumpError(f"{p}: not a regular file (a pipe or a folder?); {give}")
    try:
        return Path(path).read_text(encoding="utf-8-sig", errors="strict")
    except UnicodeDecodeError as exc:
        raise DumpError(f"{p}: byte 0x{exc.object[exc.start]:02x} is not UTF-8; is this {what}?") from None
    except OSError as exc:
        raise DumpError(f"{p}: cannot read ({exc.strerror or exc})") from None


def detect(path) -> str:
    """The format of ``path``: the first ``FORMATS`` row whose ``sniff`` recognises it, else ``collector``."""
    for f in FORMATS.values():
        if f.sniff(path):
            return f.name
    return "collector"


def default_catalog(name: str, path=None) -> str:
    """The folder of the shipped catalog a format is read against by default (the format's module may
    choose by the capture's content: ``catalog_of(path)``)."""
    from importlib import resources

    mod = import_module(f"perfonto.capture.{FORMATS[name].module}")
    folder = mod.catalog_of(path) if path is not None and hasattr(mod, "catalog_of") else FORMATS[name].catalog
    return str(resources.files("perfonto").joinpath("catalogs", folder))


__all__ = ["FORMATS", "Format", "default_catalog", "detect", "export_text", "file_head", "raw_per_value"]
