"""perfonto.interop: other tools' catalogs in and out, side by side — importers of Linux perf pmu-events
JSON, Intel perfmon metrics, Arm telemetry specifications and AMD rocprofiler-sdk counter definitions,
and the exporter to perf's metric JSON (``perf_export``).

``import_file(fmt, path, out)`` reads a file (one module per format turns it into a source-neutral
``SourceCatalog``), writes one generation YAML and one ``.metrics`` file per generation into ``out``,
compiles them with perfonto's compiler and returns an ``ImportReport``. Each format module's
docstring lists the source semantics and how they are translated.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from . import arm, intel, perf, rocprof
from perfonto.ontology.files import describe_os_error

from .build import ImportFailure, build
from .names import ident
from .report import PASS_RATIO, ImportReport

FORMATS = ("perf", "intel", "arm", "rocprof")


def default_generation(fmt: str, path: str | Path) -> str:
    """A generation name from the file name
    (``perf_arm64_neoverse-n2-v2_metrics.json`` → ``perf_arm64_neoverse_n2_v2_metrics``)."""
    stem = ident(re.sub(r"\.(json|ya?ml)$", "", Path(path).name))
    return stem if stem.startswith(fmt) else f"{fmt}_{stem}"


def import_file(
    fmt: str,
    path: str | Path,
    out: str | Path,
    generation: str | None = None,
    *,
    extends: str | None = None,
    constants: dict[str, float] | None = None,
    archs: list[str] | None = None,
    arch_std: list[str] | None = None,
) -> ImportReport:
    """Import ``path`` (format ``fmt``) into folder ``out``. Never raises on bad input: a file that
    cannot be read gives a report with ``error`` set (``ok`` False).

    Options: ``generation`` names the generated generation; ``extends`` (perf only) resolves event
    names against an existing generation (``--generation sohu`` for perfonto's own export);
    ``constants`` overrides machine constants (``{"slots": 8}``); ``archs`` restricts rocprofiler
    architectures; ``arch_std`` adds perf architecture-standard files.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    name = ident(generation) if generation else default_generation(fmt, path)
    report = ImportReport(fmt, str(path))
    out = Path(out)
    try:
        if fmt == "perf":
            cats = [perf.read(path, name, extends=extends, constants=constants, arch_std=arch_std)]
        elif fmt == "intel":
            cats = [intel.read(path, name, constants=constants)]
        elif fmt == "arm":
            cats = [arm.read(path, name, constants=constants)]
        else:
            cats = rocprof.read(path, name, archs=archs, constants=constants)
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError) as exc:
        report.error = f"cannot read {path}: {exc}"
        return report
    except RecursionError:  # pragma: no cover - the readers bound nesting; kept so nothing can crash the command
        report.error = f"cannot read {path}: a formula or structure is nested too deeply"
        return report
    except (KeyError, TypeError, AttributeError) as exc:  # a structure the format does not allow
        report.error = f"cannot read {path}: malformed {fmt} file ({type(exc).__name__}: {exc})"
        return report
    report.catalogs = cats
    used = {c.name for cat in cats for c in cat.constants.values()}
    report.unused_constants = sorted(set(constants or {}) - used)
    if not any(c.metrics for c in cats):  # nothing to import: another tool's file, or events only
        events = sum(len(c.events) for c in cats)
        held = f"holds {events} event definition(s) but no metric" if events else "holds no metric"
        report.error = (
            f"{path}: {held} that `perfonto import {fmt}` reads; is it a {FORMAT_NAMES.get(fmt, fmt)} file? "
            "(nothing was written)"
        )
        return report
    try:
        for cat in cats:
            where = out / cat.generation if len(cats) > 1 else out
            report.generations.append(build(cat, where))
    except ImportFailure as exc:
        detail = "; ".join(d.message for d in exc.diagnostics[:5])
        report.error = f"{exc}" + (f": {detail}" if detail else "")
    except OSError as exc:  # --out (or a --name that makes the file names) the system refuses
        report.error = f"cannot write the import: {describe_os_error(exc)}"
    return report


#: What each format's file is, for a file that holds nothing the importer reads.
FORMAT_NAMES = {
    "perf": "Linux perf pmu-events metrics JSON",
    "intel": "Intel perfmon metrics JSON",
    "arm": "Arm telemetry specification JSON",
    "rocprof": "rocprofiler-sdk counter definitions YAML",
}

__all__ = ["FORMATS", "PASS_RATIO", "ImportReport", "import_file", "default_generation"]
