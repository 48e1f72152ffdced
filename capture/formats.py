"""Other tools' captures, one row per format: how to recognise the tool's output, how to read it into
the collector format against a generation, and the shipped catalog read by default
(``perfonto/catalogs/<catalog>``). ``perfonto analyze --format NAME`` picks a row; ``auto`` tries each
row's ``sniff`` in order, and a file none recognises is read as the collector format."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module


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


__all__ = ["FORMATS", "Format", "default_catalog", "detect", "raw_per_value"]
